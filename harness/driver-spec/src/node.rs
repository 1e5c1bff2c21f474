//! The spec file as a plain tree of nodes in document order.
//!
//! serde_yaml's own `Value` would reject a duplicate key with the position of the enclosing
//! mapping and drop tags silently; this tree keeps both, so that [`reader`](super::reader)
//! reports them like any other mistake: with the key path, and the position found by
//! [`locate`](super::locate). Mapping entries keep their order, which is what `locate` counts
//! on.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess};

/// One YAML (or JSON) node, as serde_yaml resolves it (YAML 1.2 scalars).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node {
    /// `null`, `~` or nothing at all.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An integer.
    Int(i128),
    /// A number with a fraction or exponent.
    Float(f64),
    /// A string, quoted or plain.
    Str(String),
    /// A list.
    Seq(Vec<Node>),
    /// A mapping, entries in document order, duplicates kept.
    Map(Vec<(Node, Node)>),
    /// A node with a local tag (`!Tag value`).
    Tagged(String, Box<Node>),
}

impl Node {
    /// Reads one YAML or JSON document; [`Node::Null`] when there is none (an empty file, or
    /// only comments).
    pub(super) fn parse(text: &str) -> Result<Self, serde_yaml::Error> {
        match Node::deserialize(serde_yaml::Deserializer::from_str(text)) {
            // serde_yaml's "no document at all" (its `EndOfStream`), which has no location.
            Err(error)
                if error.location().is_none()
                    && error.to_string() == "EOF while parsing a value" =>
            {
                Ok(Node::Null)
            }
            parsed => parsed,
        }
    }

    /// What kind of node this is, for "expected …, found …" messages.
    pub(super) fn kind(&self) -> String {
        match self {
            Node::Null => "nothing (null)".into(),
            Node::Bool(value) => format!("the boolean {value}"),
            Node::Int(value) => format!("the integer {value}"),
            Node::Float(value) => format!("the number {value}"),
            Node::Str(value) => format!("the string {value:?}"),
            Node::Seq(_) => "a list".into(),
            Node::Map(_) => "a mapping".into(),
            Node::Tagged(tag, _) => format!("a value tagged !{tag}"),
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> de::Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Node, E> {
        Ok(Node::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Node, E> {
        Ok(Node::Int(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Node, E> {
        Ok(Node::Int(value.into()))
    }

    fn visit_i128<E>(self, value: i128) -> Result<Node, E> {
        Ok(Node::Int(value))
    }

    fn visit_u128<E>(self, value: u128) -> Result<Node, E> {
        // Only beyond i128: far out of any range the spec accepts, so a float will do.
        Ok(i128::try_from(value).map_or(Node::Float(value as f64), Node::Int))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Node, E> {
        Ok(Node::Float(value))
    }

    fn visit_str<E>(self, value: &str) -> Result<Node, E> {
        Ok(Node::Str(value.to_owned()))
    }

    fn visit_string<E>(self, value: String) -> Result<Node, E> {
        Ok(Node::Str(value))
    }

    fn visit_none<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_unit<E>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
        Node::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(entry) = map.next_entry()? {
            entries.push(entry);
        }
        Ok(Node::Map(entries))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Node, A::Error> {
        let (tag, variant): (String, _) = data.variant()?;
        let value = variant.newtype_variant()?;
        Ok(Node::Tagged(tag, Box::new(value)))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn text(s: &str) -> Node {
        Node::Str(s.into())
    }

    #[test]
    fn yaml_and_json_give_the_same_tree() {
        let yaml = "a: 1\nb: [x, 2.5]\nc: {d: null, e: true}\n";
        let json = r#"{"a": 1, "b": ["x", 2.5], "c": {"d": null, "e": true}}"#;
        let expected = Node::Map(vec![
            (text("a"), Node::Int(1)),
            (text("b"), Node::Seq(vec![text("x"), Node::Float(2.5)])),
            (
                text("c"),
                Node::Map(vec![(text("d"), Node::Null), (text("e"), Node::Bool(true))]),
            ),
        ]);
        assert_eq!(Node::parse(yaml).unwrap(), expected);
        assert_eq!(Node::parse(json).unwrap(), expected);
    }

    #[test]
    fn duplicate_keys_and_tags_are_kept() {
        let node = Node::parse("a: 1\na: !Thing 2\n").unwrap();
        assert_eq!(
            node,
            Node::Map(vec![
                (text("a"), Node::Int(1)),
                (
                    text("a"),
                    Node::Tagged("Thing".into(), Box::new(Node::Int(2)))
                ),
            ])
        );
    }

    #[test]
    fn an_empty_document_is_null() {
        assert_eq!(Node::parse("").unwrap(), Node::Null);
        assert_eq!(Node::parse("# only a comment\n").unwrap(), Node::Null);
    }
}
