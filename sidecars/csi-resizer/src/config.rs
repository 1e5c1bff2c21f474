//! The resizer's command line: the shared sidecar flags plus upstream's resizer flags.

use std::time::Duration;

use clap::Parser;
use sidecar_common::flags::{CommonFlags, parse_duration};

/// `csi-resizer` flags (names and defaults as upstream's external-resizer).
#[derive(Clone, Debug, Parser)]
#[command(name = "csi-resizer", version, about = "CSI external resizer")]
pub struct Config {
    /// Flags every sidecar shares.
    #[command(flatten)]
    pub common: CommonFlags,

    /// How many claims are worked on at once.
    #[arg(long = "workers", default_value_t = 10)]
    pub workers: u16,

    /// First retry delay of a failed resize; doubles per failure.
    #[arg(long = "retry-interval-start", default_value = "1s", value_parser = parse_duration)]
    pub retry_interval_start: Duration,

    /// Longest retry delay.
    #[arg(long = "retry-interval-max", default_value = "5m", value_parser = parse_duration)]
    pub retry_interval_max: Duration,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn defaults_match_upstream() {
        let config = Config::try_parse_from(["csi-resizer"]).unwrap();
        assert_eq!(config.workers, 10);
        assert_eq!(config.retry_interval_start, Duration::from_secs(1));
        assert_eq!(config.retry_interval_max, Duration::from_secs(300));
    }
}
