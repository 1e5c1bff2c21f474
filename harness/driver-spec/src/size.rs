//! `SupportedSizeRange`: the volume sizes a driver supports, Kubernetes quantities read as
//! bytes with the workspace's one quantity parser.
//!
//! Upstream's external driver starts from `Min: 5Gi` and lets the file override each of
//! `Min`, `Max` and `Step`; the same happens here. Upstream reads the quantities as Go
//! strings, so `Min: 1024` (a YAML integer) fails there and is refused here.

use kube_support::quantity::{format_bytes, parse_bytes};

use super::node::Node;
use super::reader::{Check, Field};

/// The `Min` a spec gets when it gives none: upstream's external driver's default.
pub const DEFAULT_MIN_SIZE: i64 = 5 << 30;

/// A range of volume sizes, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeRange {
    /// The smallest volume the tests create; 5Gi when the spec gives none.
    pub min: i64,
    /// The largest, when limited.
    pub max: Option<i64>,
    /// The increment volumes grow by on expansion, when the driver has one.
    pub step: Option<i64>,
}

impl Default for SizeRange {
    fn default() -> Self {
        SizeRange {
            min: DEFAULT_MIN_SIZE,
            max: None,
            step: None,
        }
    }
}

impl SizeRange {
    /// Reads a `SupportedSizeRange` mapping.
    pub(super) fn read(field: &Field) -> Check<Self> {
        let fields = field.fields(&["Min", "Max", "Step"])?;
        let min = fields.get("Min").map(quantity).transpose()?;
        let max = fields.get("Max").map(quantity).transpose()?;
        let step = fields.get("Step").map(quantity).transpose()?;
        if let (Some(step), Some(at)) = (step, fields.get("Step"))
            && step == 0
        {
            return Err(at.issue("must be larger than 0"));
        }
        let range = SizeRange {
            min: min.unwrap_or(DEFAULT_MIN_SIZE),
            max,
            step,
        };
        if let Some(max) = range.max
            && range.min > max
        {
            let issue = match (fields.get("Min"), fields.get("Max")) {
                (Some(at), _) => at.issue(format!(
                    "{} is larger than Max ({})",
                    format_bytes(range.min),
                    format_bytes(max)
                )),
                (None, Some(at)) => at.issue(format!(
                    "{} is smaller than the default Min of {}; give Min too",
                    format_bytes(max),
                    format_bytes(range.min)
                )),
                (None, None) => field.issue("Min is larger than Max"),
            };
            return Err(issue);
        }
        Ok(range)
    }
}

/// A Kubernetes quantity string, in bytes.
pub(super) fn quantity(field: &Field) -> Check<i64> {
    let text = match field.node {
        Node::Int(_) | Node::Float(_) => {
            return Err(field.issue(format!(
                "expected a quantity string such as \"1Gi\", found {}; \
                 upstream reads sizes as strings, quote it",
                field.node.kind()
            )));
        }
        _ => field.str()?,
    };
    if text.is_empty() {
        return Err(field.issue("must not be empty; remove the key instead"));
    }
    parse_bytes(text).map_err(|error| field.issue(format!("not a Kubernetes quantity: {error}")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn read(text: &str) -> Result<SizeRange, String> {
        let node = Node::parse(text).unwrap();
        SizeRange::read(&Field::root(&node))
            .map_err(|issue| format!("{}: {}", issue.shown, issue.message))
    }

    #[test]
    fn quantities_become_bytes_and_min_defaults_to_5gi() {
        assert_eq!(
            read("{Min: 1Gi, Max: 16Ti, Step: 500M}").unwrap(),
            SizeRange {
                min: 1 << 30,
                max: Some(16 << 40),
                step: Some(500_000_000)
            }
        );
        assert_eq!(read("{Max: 1Ti}").unwrap().min, 5 << 30);
        assert_eq!(read("{}").unwrap(), SizeRange::default());
    }

    #[test]
    fn bad_ranges_are_refused() {
        assert_eq!(
            read("{Min: 2Gi, Max: 1Gi}").unwrap_err(),
            "Min: 2Gi is larger than Max (1Gi)"
        );
        assert_eq!(
            read("{Max: 1Gi}").unwrap_err(),
            "Max: 1Gi is smaller than the default Min of 5Gi; give Min too"
        );
        assert_eq!(
            read("{Step: 0}").unwrap_err().split(':').next(),
            Some("Step")
        );
        assert_eq!(
            read("{Step: \"0\"}").unwrap_err(),
            "Step: must be larger than 0"
        );
        assert!(
            read("{Min: 1Gb}")
                .unwrap_err()
                .contains("not a Kubernetes quantity")
        );
        assert!(
            read("{Min: \"\"}")
                .unwrap_err()
                .contains("must not be empty")
        );
        assert!(read("{Min: 5}").unwrap_err().contains("quote it"));
    }
}
