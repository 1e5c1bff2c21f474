//! The provisioner's command line: the shared sidecar flags plus upstream's provisioner flags.

use clap::{ArgAction, Parser};
use sidecar_common::context::SidecarConfig;
use sidecar_common::flags::{CommonFlags, RetryFlags, name_from_uid};

/// `csi-provisioner` flags (names and defaults as upstream's external-provisioner).
#[derive(Clone, Debug, Parser)]
#[command(name = "csi-provisioner", version, about = "CSI external provisioner")]
pub struct Config {
    /// Flags every sidecar shares.
    #[command(flatten)]
    pub common: CommonFlags,

    /// Prefix of volume names: `<prefix>-<pvc uid>`.
    #[arg(long = "volume-name-prefix", default_value = "pvc")]
    pub volume_name_prefix: String,

    /// Truncate the uid in volume names to this many characters (-1: whole uid).
    #[arg(long = "volume-name-uuid-length", default_value_t = -1, allow_negative_numbers = true)]
    pub volume_name_uuid_length: i32,

    /// Pass `csi.storage.k8s.io/pvc/name`, `/pvc/namespace` and `/pv/name` to CreateVolume.
    #[arg(long = "extra-create-metadata", num_args = 0..=1, default_missing_value = "true",
          default_value_t = false, action = ArgAction::Set)]
    pub extra_create_metadata: bool,

    /// fsType when the StorageClass gives none (empty: none).
    #[arg(long = "default-fstype", default_value = "")]
    pub default_fstype: String,

    /// With WaitForFirstConsumer, require only the selected node's topology.
    #[arg(long = "strict-topology", num_args = 0..=1, default_missing_value = "true",
          default_value_t = false, action = ArgAction::Set)]
    pub strict_topology: bool,

    /// Compute accessibility requirements for Immediate binding too.
    #[arg(long = "immediate-topology", num_args = 0..=1, default_missing_value = "true",
          default_value_t = true, action = ArgAction::Set)]
    pub immediate_topology: bool,

    /// How many claims (and volumes) are worked on at once.
    #[arg(long = "worker-threads", default_value_t = 100)]
    pub worker_threads: u16,

    /// `--retry-interval-start` (1s) and `--retry-interval-max` (5m).
    #[command(flatten)]
    pub retry: RetryFlags,
}

impl Config {
    /// The volume (and PV) name for a claim uid.
    pub fn volume_name(&self, uid: &str) -> String {
        name_from_uid(&self.volume_name_prefix, self.volume_name_uuid_length, uid)
    }
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

    fn parse(args: &[&str]) -> Config {
        Config::try_parse_from(std::iter::once("csi-provisioner").chain(args.iter().copied()))
            .unwrap()
    }

    #[test]
    fn volume_names_follow_upstream() {
        let uid = "0b0e7a4c-9d5e-4f7a-8a53-3b2f8f1b7f10";
        assert_eq!(parse(&[]).volume_name(uid), format!("pvc-{uid}"));
        let config = parse(&["--volume-name-prefix=manila", "--volume-name-uuid-length=8"]);
        assert_eq!(config.volume_name(uid), "manila-0b0e7a4c");
    }

    #[test]
    fn defaults_match_upstream() {
        let config = parse(&["--csi-address=/csi/csi.sock", "--extra-create-metadata"]);
        assert!(config.extra_create_metadata);
        assert!(!config.strict_topology);
        assert_eq!(config.worker_threads, 100);
        assert_eq!(config.retry.retry_interval_start, Duration::from_secs(1));
        assert_eq!(config.retry.retry_interval_max, Duration::from_secs(300));
    }
}
