//! The snapshotter's command line: the shared sidecar flags plus upstream's snapshotter flags.

use clap::{ArgAction, Parser};
use sidecar_common::context::SidecarConfig;
use sidecar_common::flags::{CommonFlags, RetryFlags, name_from_uid};

/// `csi-snapshotter` flags (names and defaults as upstream's external-snapshotter sidecar).
#[derive(Clone, Debug, Parser)]
#[command(
    name = "csi-snapshotter",
    version,
    about = "CSI external snapshotter sidecar"
)]
pub struct Config {
    /// Flags every sidecar shares.
    #[command(flatten)]
    pub common: CommonFlags,

    /// Prefix of snapshot names: `<prefix>-<VolumeSnapshot uid>`.
    #[arg(long = "snapshot-name-prefix", default_value = "snapshot")]
    pub snapshot_name_prefix: String,

    /// Truncate the uid in snapshot names to this many characters (-1: whole uid).
    #[arg(long = "snapshot-name-uuid-length", default_value_t = -1, allow_negative_numbers = true)]
    pub snapshot_name_uuid_length: i32,

    /// Pass `csi.storage.k8s.io/volumesnapshot/name`, `/volumesnapshot/namespace` and
    /// `/volumesnapshotcontent/name` to CreateSnapshot as parameters.
    #[arg(long = "extra-create-metadata", num_args = 0..=1, default_missing_value = "true",
          default_value_t = false, action = ArgAction::Set)]
    pub extra_create_metadata: bool,

    /// How many contents are worked on at once.
    #[arg(long = "worker-threads", default_value_t = 10)]
    pub worker_threads: u16,

    /// `--retry-interval-start` (1s) and `--retry-interval-max` (5m).
    #[command(flatten)]
    pub retry: RetryFlags,
}

impl Config {
    /// The CSI snapshot name for a VolumeSnapshot uid.
    pub fn snapshot_name(&self, uid: &str) -> String {
        name_from_uid(
            &self.snapshot_name_prefix,
            self.snapshot_name_uuid_length,
            uid,
        )
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
        Config::try_parse_from(std::iter::once("csi-snapshotter").chain(args.iter().copied()))
            .unwrap()
    }

    #[test]
    fn snapshot_names_follow_upstream() {
        let uid = "0b0e7a4c-9d5e-4f7a-8a53-3b2f8f1b7f10";
        assert_eq!(parse(&[]).snapshot_name(uid), format!("snapshot-{uid}"));
        let config = parse(&[
            "--snapshot-name-prefix=manila",
            "--snapshot-name-uuid-length=8",
        ]);
        assert_eq!(config.snapshot_name(uid), "manila-0b0e7a4c");
    }

    #[test]
    fn defaults_match_upstream() {
        let config = parse(&["--csi-address=/csi/csi.sock", "--extra-create-metadata"]);
        assert!(config.extra_create_metadata);
        assert!(!config.common.leader_election);
        assert_eq!(config.worker_threads, 10);
        assert_eq!(config.retry.retry_interval_start, Duration::from_secs(1));
        assert_eq!(config.retry.retry_interval_max, Duration::from_secs(300));
        assert!(!parse(&["--extra-create-metadata=false"]).extra_create_metadata);
    }
}
