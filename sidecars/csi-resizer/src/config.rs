//! The resizer's command line: the shared sidecar flags plus upstream's resizer flags.

use clap::{ArgAction, Parser};
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

    /// `--handle-volume-inuse-error` (default true), accepted as upstream's: upstream then
    /// holds back an expansion the driver refused because the volume is in use until no
    /// pod uses the claim; here such a refusal is retried with the usual back-off either
    /// way (the drivers this harness runs expand online).
    #[arg(long = "handle-volume-inuse-error", num_args = 0..=1, default_missing_value = "true",
          default_value_t = true, action = ArgAction::Set)]
    pub handle_volume_inuse_error: bool,

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
        assert!(config.handle_volume_inuse_error);
        let off =
            Config::try_parse_from(["csi-resizer", "--handle-volume-inuse-error=false"]).unwrap();
        assert!(!off.handle_volume_inuse_error);
        assert_eq!(config.retry.retry_interval_start, Duration::from_secs(1));
        assert_eq!(config.retry.retry_interval_max, Duration::from_secs(300));
    }
}
