//! The resizer's command line: the shared sidecar flags plus upstream's resizer flags.

use clap::Parser;
use sidecar_common::context::SidecarConfig;
use sidecar_common::flags::{CommonFlags, RetryFlags};

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

    /// `--retry-interval-start` (1s) and `--retry-interval-max` (5m).
    #[command(flatten)]
    pub retry: RetryFlags,
}

impl SidecarConfig for Config {
    fn common(&self) -> &CommonFlags {
        &self.common
    }

    fn retry(&self) -> &RetryFlags {
        &self.retry
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::time::Duration;

    use super::*;

    #[test]
    fn defaults_match_upstream() {
        let config = Config::try_parse_from(["csi-resizer"]).unwrap();
        assert_eq!(config.workers, 10);
        assert_eq!(config.retry.retry_interval_start, Duration::from_secs(1));
        assert_eq!(config.retry.retry_interval_max, Duration::from_secs(300));
    }
}
