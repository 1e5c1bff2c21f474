//! Kubernetes resource quantities as byte counts: parsing requests (`1Gi`, `500M`, `1.5Gi`,
//! `1e9`) and formatting capacities the way `resource.NewQuantity(bytes, BinarySI)` does.

/// A storage quantity (`1Gi`, `500M`) could not be read as bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid storage quantity {text:?}: {reason}")]
pub struct QuantityError {
    /// The quantity as given.
    pub text: String,
    /// Why.
    pub reason: String,
}

const BINARY: [(&str, u32); 6] = [
    ("Ki", 10),
    ("Mi", 20),
    ("Gi", 30),
    ("Ti", 40),
    ("Pi", 50),
    ("Ei", 60),
];
const DECIMAL: [(&str, i32); 7] = [
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
    ("m", -3),
];

/// Bytes in `text`, rounded up to a whole byte.
pub fn parse_bytes(text: &str) -> Result<i64, QuantityError> {
    let bad = |why: &str| QuantityError {
        text: text.to_owned(),
        reason: why.to_owned(),
    };
    let text = text.trim();
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(number_end);
    let (mantissa, exponent) = if let Some(exp) = suffix.strip_prefix(['e', 'E']) {
        (number, exp.parse::<i32>().map_err(|_| bad("bad exponent"))?)
    } else if let Some((_, shift)) = BINARY.iter().find(|(s, _)| *s == suffix) {
        let value: f64 = number.parse().map_err(|_| bad("not a number"))?;
        return to_bytes(value * 2f64.powi(*shift as i32)).ok_or_else(|| bad("out of range"));
    } else if let Some((_, exp)) = DECIMAL.iter().find(|(s, _)| *s == suffix) {
        (number, *exp)
    } else if suffix.is_empty() {
        (number, 0)
    } else {
        return Err(bad(&format!("unknown suffix {suffix:?}")));
    };
    let value: f64 = mantissa.parse().map_err(|_| bad("not a number"))?;
    to_bytes(value * 10f64.powi(exponent)).ok_or_else(|| bad("out of range"))
}

fn to_bytes(value: f64) -> Option<i64> {
    if !(0.0..9.2e18).contains(&value) {
        return None;
    }
    // Round up, tolerating floating-point noise just above an integer.
    let rounded = (value - 1e-6).ceil().max(0.0);
    Some(rounded as i64)
}

/// `bytes` with the largest binary suffix that divides it exactly (`1073741824` → `1Gi`).
pub fn format_bytes(bytes: i64) -> String {
    for (suffix, shift) in BINARY.iter().rev() {
        let unit = 1i64 << shift;
        if bytes != 0 && bytes % unit == 0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("1Gi", 1 << 30)]
    #[case("1.5Gi", 3 << 29)]
    #[case("500M", 500_000_000)]
    #[case("1e9", 1_000_000_000)]
    #[case("1024", 1024)]
    #[case("1500m", 2)]
    #[case("2Ti", 2 << 40)]
    fn quantities_parse(#[case] text: &str, #[case] bytes: i64) {
        assert_eq!(parse_bytes(text).unwrap(), bytes);
    }

    #[rstest]
    #[case("1Gb", "unknown suffix \"Gb\"")]
    #[case("1.2.3Gi", "not a number")]
    #[case("lots", "unknown suffix")]
    #[case("-1Gi", "out of range")]
    fn bad_quantities_are_named(#[case] text: &str, #[case] expected: &str) {
        let error = parse_bytes(text).unwrap_err().to_string();
        assert!(error.contains(expected) && error.contains(text), "{error}");
    }

    #[rstest]
    #[case(1 << 30, "1Gi")]
    #[case(5 << 30, "5Gi")]
    #[case(3 << 29, "1536Mi")]
    #[case(1000, "1000")]
    fn capacities_format_as_binary_si(#[case] bytes: i64, #[case] text: &str) {
        assert_eq!(format_bytes(bytes), text);
    }
}
