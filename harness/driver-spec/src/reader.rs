//! Reading typed values out of the [`Node`] tree, strictly: a wrong type, an unknown or
//! repeated key, a value upstream's Go decoder would refuse is an [`Issue`] that names the key
//! path and whether the key or its value is at fault; [`super`] turns it into a
//! [`SpecError`](super::SpecError) with the line and column.

use std::collections::{BTreeMap, BTreeSet};

use super::locate::{KeyPath, Target};
use super::node::Node;
use super::suggest;

/// A mistake found in the spec file, before it is located.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Issue {
    /// The key path the message is about, as shown (may be a key that is missing).
    pub(super) shown: String,
    /// Where to point: the node at this path.
    pub(super) at: KeyPath,
    /// Whether to point at the key or at its value.
    pub(super) target: Target,
    /// What is wrong.
    pub(super) message: String,
}

/// The result of reading one part of the spec.
pub(super) type Check<T> = Result<T, Issue>;

/// A node and where it is.
#[derive(Debug, Clone)]
pub(super) struct Field<'a> {
    /// The node.
    pub(super) node: &'a Node,
    /// Its path from the document's root.
    pub(super) path: KeyPath,
}

impl<'a> Field<'a> {
    /// The document itself.
    pub(super) fn root(node: &'a Node) -> Self {
        Field {
            node,
            path: KeyPath::default(),
        }
    }

    /// An issue with this field's value (pointed at its key when the value is null, which
    /// has no place of its own in the text).
    pub(super) fn issue(&self, message: impl Into<String>) -> Issue {
        Issue {
            shown: self.path.to_string(),
            at: self.path.clone(),
            target: match self.node {
                Node::Null => Target::Key,
                _ => Target::Value,
            },
            message: message.into(),
        }
    }

    /// An issue with this field's key.
    pub(super) fn key_issue(&self, message: impl Into<String>) -> Issue {
        Issue {
            target: Target::Key,
            ..self.issue(message)
        }
    }

    /// An issue about `name`, a key missing from this field's mapping: shown as
    /// `<path>.<name>`, pointed at this field's key.
    pub(super) fn missing(&self, name: &str, message: impl Into<String>) -> Issue {
        Issue {
            shown: self.path.key(name, 0).to_string(),
            target: Target::Key,
            ..self.issue(message)
        }
    }

    /// "expected `what`, found …".
    pub(super) fn expected(&self, what: &str) -> Issue {
        self.issue(format!("expected {what}, found {}", self.node.kind()))
    }

    /// A string.
    pub(super) fn str(&self) -> Check<&'a str> {
        match self.node {
            Node::Str(text) => Ok(text),
            Node::Int(_) | Node::Float(_) | Node::Bool(_) => Err(self.issue(format!(
                "expected a string, found {}; quote it",
                self.node.kind()
            ))),
            _ => Err(self.expected("a string")),
        }
    }

    /// A string that is not empty.
    pub(super) fn non_empty_str(&self) -> Check<&'a str> {
        match self.str()? {
            "" => Err(self.issue("must not be empty")),
            text => Ok(text),
        }
    }

    /// `true` or `false`.
    pub(super) fn bool(&self) -> Check<bool> {
        match self.node {
            Node::Bool(value) => Ok(*value),
            Node::Str(word) if is_yaml_1_1_bool(word) => Err(self.issue(format!(
                "expected true or false, found the string {word:?} \
                 (a boolean only in YAML 1.1); write true or false"
            ))),
            _ => Err(self.expected("true or false")),
        }
    }

    /// An integer that fits `i64` (Go's `int` and `int64`).
    pub(super) fn int(&self) -> Check<i64> {
        match self.node {
            Node::Int(value) => {
                i64::try_from(*value).map_err(|_| self.issue(format!("{value} is out of range")))
            }
            _ => Err(self.expected("an integer")),
        }
    }

    /// A non-negative integer that fits `u32`: counts of pods, snapshots, topologies.
    pub(super) fn count(&self) -> Check<u32> {
        let value = self.int()?;
        if value < 0 {
            return Err(self.issue(format!("must not be negative, found {value}")));
        }
        u32::try_from(value).map_err(|_| self.issue(format!("{value} is out of range")))
    }

    /// A number, integer or not.
    pub(super) fn float(&self) -> Check<f64> {
        match self.node {
            Node::Float(value) => Ok(*value),
            Node::Int(value) => Ok(*value as f64),
            _ => Err(self.expected("a number")),
        }
    }

    /// The items of a list; none for `null`.
    pub(super) fn items(&self) -> Check<Vec<Field<'a>>> {
        match self.node {
            Node::Null => Ok(Vec::new()),
            Node::Seq(items) => Ok(items
                .iter()
                .enumerate()
                .map(|(index, node)| Field {
                    node,
                    path: self.path.item(index),
                })
                .collect()),
            _ => Err(self.expected("a list")),
        }
    }

    /// A list of strings; empty for `null`.
    pub(super) fn strings(&self) -> Check<Vec<String>> {
        self.items()?
            .iter()
            .map(|item| item.str().map(str::to_owned))
            .collect()
    }

    /// The entries of a mapping with string keys, each key once; none for `null`.
    pub(super) fn entries(&self) -> Check<Vec<(&'a str, Field<'a>)>> {
        let entries = match self.node {
            Node::Null => return Ok(Vec::new()),
            Node::Map(entries) => entries,
            _ => return Err(self.expected("a mapping")),
        };
        let mut seen = BTreeSet::new();
        let mut out = Vec::with_capacity(entries.len());
        for (index, (key, node)) in entries.iter().enumerate() {
            let name = match key {
                Node::Str(name) => name.as_str(),
                other => {
                    let field = Field {
                        node,
                        path: self.path.key(&key_text(other), index),
                    };
                    return Err(field.key_issue(format!(
                        "keys must be strings, found {}; quote it",
                        other.kind()
                    )));
                }
            };
            let field = Field {
                node,
                path: self.path.key(name, index),
            };
            if !seen.insert(name) {
                return Err(field.key_issue("duplicate key: it is already given above"));
            }
            out.push((name, field));
        }
        Ok(out)
    }

    /// The entries of a mapping whose keys must be among `known` (the fields of a Go struct).
    pub(super) fn fields(&self, known: &[&str]) -> Check<Fields<'a>> {
        let entries = self.entries()?;
        for (name, field) in &entries {
            if !known.contains(name) {
                return Err(field.key_issue(unknown("key", name, known)));
            }
        }
        Ok(Fields { entries })
    }

    /// A mapping of strings to strings (`map[string]string`).
    pub(super) fn string_map(&self) -> Check<BTreeMap<String, String>> {
        self.entries()?
            .into_iter()
            .map(|(name, field)| Ok((name.to_owned(), field.str()?.to_owned())))
            .collect()
    }

    /// A set: upstream's `sets.String`, a mapping whose values are empty (`ext4: {}`,
    /// `ext4: null` or `ext4:`).
    pub(super) fn set(&self) -> Check<BTreeSet<String>> {
        if let Node::Seq(_) = self.node {
            return Err(self.issue(
                "expected a set written as a mapping with empty values (e.g. `ext4: {}`), \
                 found a list",
            ));
        }
        let mut set = BTreeSet::new();
        for (name, field) in self.entries()? {
            match field.node {
                Node::Null => {}
                Node::Map(entries) if entries.is_empty() => {}
                _ => return Err(field.expected("an empty value ({} or nothing)")),
            }
            set.insert(name.to_owned());
        }
        Ok(set)
    }
}

/// The checked entries of a mapping with known keys.
#[derive(Debug)]
pub(super) struct Fields<'a> {
    entries: Vec<(&'a str, Field<'a>)>,
}

impl<'a> Fields<'a> {
    /// The field `name`, when given.
    pub(super) fn get(&self, name: &str) -> Option<&Field<'a>> {
        self.entries
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, field)| field)
    }

    /// The given fields in document order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&'a str, &Field<'a>)> {
        self.entries.iter().map(|(name, field)| (*name, field))
    }
}

/// "unknown `noun`", with the closest known name or, for short lists, all of them.
pub(super) fn unknown(noun: &str, name: &str, known: &[&str]) -> String {
    if let Some(close) = suggest::closest(name, known) {
        format!("unknown {noun}; did you mean {close:?}?")
    } else if known.len() <= 6 {
        format!("unknown {noun}; expected one of {}", known.join(", "))
    } else {
        format!("unknown {noun}")
    }
}

/// Plain words YAML 1.1 (and so upstream's reader) takes for booleans and YAML 1.2 (ours)
/// takes for strings.
fn is_yaml_1_1_bool(word: &str) -> bool {
    ["y", "yes", "n", "no", "on", "off"]
        .iter()
        .any(|b| b.eq_ignore_ascii_case(word))
}

/// A non-string key as it would be written.
fn key_text(key: &Node) -> String {
    match key {
        Node::Null => "null".into(),
        Node::Bool(value) => value.to_string(),
        Node::Int(value) => value.to_string(),
        Node::Float(value) => value.to_string(),
        Node::Str(text) => text.clone(),
        Node::Seq(_) | Node::Map(_) | Node::Tagged(..) => "?".into(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn message(text: &str, read: impl Fn(&Field) -> Check<()>) -> String {
        let node = Node::parse(text).unwrap();
        let issue = read(&Field::root(&node)).unwrap_err();
        format!("{}: {}", issue.shown, issue.message)
    }

    #[test]
    fn unknown_keys_name_the_closest_known_one() {
        let read = |f: &Field| f.fields(&["Name", "Capabilities"]).map(|_| ());
        assert_eq!(
            message("Capabilites: {}", read),
            r#"Capabilites: unknown key; did you mean "Capabilities"?"#
        );
        assert_eq!(
            message("Other: 1", read),
            "Other: unknown key; expected one of Name, Capabilities"
        );
    }

    #[test]
    fn duplicate_and_non_string_keys_are_refused() {
        let read = |f: &Field| f.entries().map(|_| ());
        assert_eq!(
            message("a: 1\nb: 2\na: 3\n", read),
            "a: duplicate key: it is already given above"
        );
        assert_eq!(
            message("1: x\n", read),
            "1: keys must be strings, found the integer 1; quote it"
        );
    }

    #[test]
    fn yaml_1_1_booleans_get_a_hint() {
        let read = |f: &Field| f.entries()?[0].1.bool().map(|_| ());
        assert_eq!(
            message("a: yes", read),
            r#"a: expected true or false, found the string "yes" (a boolean only in YAML 1.1); write true or false"#
        );
    }

    #[test]
    fn sets_are_mappings_with_empty_values() {
        let node = Node::parse(r#"{"": {}, ext4: null, xfs: }"#).unwrap();
        let set = Field::root(&node).set().unwrap();
        assert_eq!(
            set,
            BTreeSet::from(["".into(), "ext4".into(), "xfs".into()])
        );
        let read = |f: &Field| f.set().map(|_| ());
        assert_eq!(
            message("ext4: true", read),
            "ext4: expected an empty value ({} or nothing), found the boolean true"
        );
        assert!(message("[ext4]", read).contains("found a list"));
    }
}
