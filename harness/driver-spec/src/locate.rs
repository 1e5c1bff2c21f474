//! Where a key or value sits in the spec file.
//!
//! serde_yaml keeps positions to itself except in one place: an error raised while a node is
//! deserialized carries the position of that node. So to find a key path we walk the document
//! once more with a seed that follows the path, counting mapping entries and list items, and
//! fails on purpose at the wanted key or value; the error's location is the answer. This is
//! only done for the one error a parse reports, so the second walk costs nothing otherwise.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess};

/// One step of a [`KeyPath`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    /// The entry of a mapping: its key, and its place among the mapping's entries.
    Key {
        /// The key as written.
        name: String,
        /// The entry's index in document order.
        index: usize,
    },
    /// An item of a list.
    Item(usize),
}

/// A path from the document's root to a node: `DriverInfo.Capabilities.block`,
/// `InlineVolumes[0].Attributes`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct KeyPath(Vec<Step>);

impl KeyPath {
    /// The path of the entry `name`, the `index`th of the mapping at `self`.
    pub(super) fn key(&self, name: &str, index: usize) -> KeyPath {
        self.with(Step::Key {
            name: name.to_owned(),
            index,
        })
    }

    /// The path of the `index`th item of the list at `self`.
    pub(super) fn item(&self, index: usize) -> KeyPath {
        self.with(Step::Item(index))
    }

    fn with(&self, step: Step) -> KeyPath {
        let mut steps = self.0.clone();
        steps.push(step);
        KeyPath(steps)
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        for (n, step) in self.0.iter().enumerate() {
            match step {
                Step::Key { name, .. } => {
                    if n > 0 {
                        f.write_str(".")?;
                    }
                    let plain = !name.is_empty()
                        && name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                    if plain {
                        f.write_str(name)?;
                    } else {
                        write!(f, "{name:?}")?;
                    }
                }
                Step::Item(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// Which part of a mapping entry a message is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    /// The key itself (unknown or duplicate keys).
    Key,
    /// The value under the key (or the list item, or the document itself).
    Value,
}

/// A 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Position {
    /// The line, from 1.
    pub(super) line: usize,
    /// The column, from 1.
    pub(super) column: usize,
}

impl Position {
    /// The start of the file: where errors about the file as a whole point.
    pub(super) const START: Position = Position { line: 1, column: 1 };
}

/// The position of the key or value at `path` in `text`; when the path is not in the text,
/// that of its nearest ancestor, and the start of the file at worst.
pub(super) fn locate(text: &str, path: &KeyPath, target: Target) -> Position {
    let mut steps = path.0.as_slice();
    let mut target = target;
    loop {
        if let Some(position) = probe(text, steps, target) {
            return position;
        }
        match steps.split_last() {
            Some((_, parent)) => {
                steps = parent;
                target = Target::Value;
            }
            None => return Position::START,
        }
    }
}

/// Marks the deliberate failure, so that it is told apart from a real one.
const FOUND: &str = "\u{0}the probed node";

fn probe(text: &str, steps: &[Step], target: Target) -> Option<Position> {
    let walk = Probe { steps, target }.deserialize(serde_yaml::Deserializer::from_str(text));
    match walk {
        Err(error) if error.to_string().contains(FOUND) => {
            let location = error.location()?;
            Some(Position {
                line: location.line(),
                column: location.column(),
            })
        }
        _ => None,
    }
}

/// Follows `steps` and fails at the node they lead to.
struct Probe<'a> {
    steps: &'a [Step],
    target: Target,
}

impl<'de> DeserializeSeed<'de> for Probe<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        if self.steps.is_empty() {
            deserializer.deserialize_any(Found)
        } else {
            deserializer.deserialize_any(self)
        }
    }
}

impl<'de> de::Visitor<'de> for Probe<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a mapping or list on the probed path")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Some((Step::Key { index, .. }, rest)) = self.steps.split_first() else {
            return Ok(());
        };
        let at_key = rest.is_empty() && self.target == Target::Key;
        let mut n = 0;
        while map
            .next_key_seed(KeyProbe {
                fail: at_key && n == *index,
            })?
            .is_some()
        {
            if n == *index {
                return map.next_value_seed(Probe {
                    steps: rest,
                    target: self.target,
                });
            }
            map.next_value::<IgnoredAny>()?;
            n += 1;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Some((Step::Item(index), rest)) = self.steps.split_first() else {
            return Ok(());
        };
        for _ in 0..*index {
            if seq.next_element::<IgnoredAny>()?.is_none() {
                return Ok(());
            }
        }
        seq.next_element_seed(Probe {
            steps: rest,
            target: self.target,
        })
        .map(|_| ())
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        // A tagged node: the path goes on inside it.
        let (IgnoredAny, variant) = data.variant()?;
        de::VariantAccess::newtype_variant_seed(variant, self)
    }
}

/// Reads a key, failing when it is the wanted one.
struct KeyProbe {
    fail: bool,
}

impl<'de> DeserializeSeed<'de> for KeyProbe {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        if self.fail {
            deserializer.deserialize_any(Found)
        } else {
            deserializer.deserialize_ignored_any(IgnoredAny).map(|_| ())
        }
    }
}

/// Accepts nothing: every `visit_*` fails with [`FOUND`] as what was expected, and serde_yaml
/// marks that error with the position of the node being visited.
struct Found;

impl<'de> de::Visitor<'de> for Found {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(FOUND)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn at(line: usize, column: usize) -> Position {
        Position { line, column }
    }

    const YAML: &str = "\
StorageClass:
  FromName: true
DriverInfo:
  Name: x
  TopologyKeys: [a, b]
  Capabilities:
    block: true
";

    const JSON: &str = r#"{
  "StorageClass": {"FromName": true},
  "DriverInfo": {
    "Name": "x",
    "TopologyKeys": ["a", "b"],
    "Capabilities": {
      "block": true
    }
  }
}"#;

    fn path(steps: &[(&str, usize)]) -> KeyPath {
        steps
            .iter()
            .fold(KeyPath::default(), |path, (name, index)| {
                path.key(name, *index)
            })
    }

    #[rstest]
    #[case::key(&[("DriverInfo", 1), ("Capabilities", 2), ("block", 0)], Target::Key, at(7, 5), at(7, 7))]
    #[case::value(&[("DriverInfo", 1), ("Capabilities", 2), ("block", 0)], Target::Value, at(7, 12), at(7, 16))]
    #[case::mapping(&[("DriverInfo", 1)], Target::Value, at(4, 3), at(3, 17))]
    #[case::missing_key_falls_back_to_the_parent(&[("DriverInfo", 1), ("Nope", 7)], Target::Key, at(4, 3), at(3, 17))]
    #[case::root(&[], Target::Value, at(1, 1), at(1, 1))]
    fn keys_and_values_are_located_in_yaml_and_json(
        #[case] steps: &[(&str, usize)],
        #[case] target: Target,
        #[case] in_yaml: Position,
        #[case] in_json: Position,
    ) {
        assert_eq!(locate(YAML, &path(steps), target), in_yaml);
        assert_eq!(locate(JSON, &path(steps), target), in_json);
    }

    #[test]
    fn list_items_are_located() {
        let second = path(&[("DriverInfo", 1), ("TopologyKeys", 1)]).item(1);
        assert_eq!(locate(YAML, &second, Target::Value), at(5, 21));
        assert_eq!(locate(JSON, &second, Target::Value), at(5, 27));
    }

    #[test]
    fn paths_display_as_dotted_keys() {
        let path = path(&[("InlineVolumes", 0)])
            .item(2)
            .key("Attributes", 0)
            .key("topology.kubernetes.io/zone", 3);
        assert_eq!(
            path.to_string(),
            r#"InlineVolumes[2].Attributes."topology.kubernetes.io/zone""#
        );
        assert_eq!(KeyPath::default().key("", 0).to_string(), r#""""#);
    }
}
