//! Go's duration syntax (`1m30s`, `500ms`), as upstream's flags and the Kubernetes e2e
//! framework's files write durations: the one Go duration parser of the workspace (the
//! drivers' and sidecars' flags, the operator's, the driver spec file's timeouts and
//! csi-sanity's flags use it).

use std::time::Duration;

/// Parses a duration flag as the drivers take them: a Go duration ([`parse_go_duration`])
/// or a plain number of seconds (`3`, `1.5`).
pub fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let trimmed = text.trim();
    if !trimmed.is_empty()
        && trimmed.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && let Ok(seconds) = trimmed.parse::<f64>()
    {
        return Duration::try_from_secs_f64(seconds)
            .map_err(|e| format!("invalid duration {text:?}: {e}"));
    }
    parse_go_duration(text)
}

/// Parses a Go duration as Go's `time.ParseDuration` (and so upstream's flags) takes it: a
/// sequence of `<number><unit>` with units `ns`, `us`, `µs`, `ms`, `s`, `m`, `h` (`1m30s`,
/// `1.5s`, `12h0m0s`), or `0`. The errors name what is wrong (empty, missing unit, invalid
/// unit).
pub fn parse_go_duration(text: &str) -> std::result::Result<Duration, String> {
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if text.is_empty() {
        return Err("empty duration: expected e.g. 10s, 1m30s, 500ms".into());
    }
    let mut rest = text;
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| {
                format!("invalid duration {text:?}: missing unit (ns, us, ms, s, m, h)")
            })?;
        let (number, after) = rest.split_at(number_end);
        let value: f64 = number
            .parse()
            .map_err(|_| format!("invalid duration {text:?}: expected e.g. 10s, 1m30s, 500ms"))?;
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_end);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => {
                return Err(format!(
                    "invalid unit {unit:?} in duration {text:?}: use ns, us, ms, s, m or h"
                ));
            }
        };
        total += value * scale;
        rest = next;
    }
    Duration::try_from_secs_f64(total).map_err(|e| format!("invalid duration {text:?}: {e}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case("10s", 10_000)]
    #[case("1m30s", 90_000)]
    #[case("500ms", 500)]
    #[case("1.5s", 1_500)]
    #[case("2h", 7_200_000)]
    #[case("0", 0)]
    fn go_durations_parse(#[case] text: &str, #[case] millis: u128) {
        assert_eq!(parse_go_duration(text).unwrap().as_millis(), millis);
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert_eq!(
            parse_duration("12h0m0s").unwrap(),
            Duration::from_secs(12 * 3600)
        );
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("5us").unwrap(), Duration::from_micros(5));
        assert!(parse_duration("3 parsecs").is_err());
        assert!(parse_duration("1m30").is_err());
        assert!(parse_duration("").is_err());
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
    }

    #[test]
    fn go_durations_need_a_unit_and_name_what_is_wrong() {
        assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(
            parse_go_duration("1.5s").unwrap(),
            Duration::from_millis(1500)
        );
        for (text, expected) in [
            ("10", "missing unit"),
            ("10x", "invalid unit \"x\""),
            ("", "empty"),
            ("s", "invalid duration"),
            ("-1s", "invalid duration"),
        ] {
            let error = parse_go_duration(text).unwrap_err();
            assert!(error.contains(expected), "{text:?}: {error}");
        }
    }
}
