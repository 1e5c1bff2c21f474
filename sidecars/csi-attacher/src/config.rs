//! The attacher's command line: the shared sidecar flags plus upstream's attacher flags.

use clap::Parser;
use sidecar_common::context::SidecarConfig;
use sidecar_common::flags::{CommonFlags, RetryFlags};

/// `csi-attacher` flags (names and defaults as upstream's external-attacher).
#[derive(Clone, Debug, Parser)]
#[command(name = "csi-attacher", version, about = "CSI external attacher")]
pub struct Config {
    /// Flags every sidecar shares.
    #[command(flatten)]
    pub common: CommonFlags,

    /// How many attachments are worked on at once.
    #[arg(long = "worker-threads", default_value_t = 10)]
    pub worker_threads: u16,

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
        let config =
            Config::try_parse_from(["csi-attacher", "--csi-address=/csi/csi.sock"]).unwrap();
        assert_eq!(config.worker_threads, 10);
        assert_eq!(config.retry.retry_interval_start, Duration::from_secs(1));
        assert_eq!(config.retry.retry_interval_max, Duration::from_secs(300));
    }
}
