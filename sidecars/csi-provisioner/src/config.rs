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

    /// `--feature-gates=Topology=true,...`: upstream's gates. Topology (GA, still off by
    /// default upstream) passes accessibility requirements to CreateVolume and gives the PV
    /// node affinity, for a driver with VOLUME_ACCESSIBILITY_CONSTRAINTS; an unknown gate is
    /// refused as upstream refuses it.
    #[arg(long = "feature-gates", default_value = "", value_parser = parse_feature_gates)]
    pub feature_gates: FeatureGates,

    /// How many claims (and volumes) are worked on at once.
    #[arg(long = "worker-threads", default_value_t = 100)]
    pub worker_threads: u16,

    /// `--retry-interval-start` (1s) and `--retry-interval-max` (5m).
    #[command(flatten)]
    pub retry: RetryFlags,
}

/// The provisioner's feature gates (see [`Config::feature_gates`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeatureGates {
    /// `Topology`.
    pub topology: bool,
}

/// The gates upstream's provisioner knows; only `Topology` changes anything here (the
/// others name features this provisioner does not have, so turning one on is refused).
const KNOWN_GATES: [&str; 3] = [
    "Topology",
    "CrossNamespaceVolumeDataSource",
    "HonorPVReclaimPolicy",
];

/// Parses `Key=bool,Key=bool` as upstream's `--feature-gates` does.
fn parse_feature_gates(text: &str) -> Result<FeatureGates, String> {
    let mut gates = FeatureGates::default();
    for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((key, value)) = item.split_once('=') else {
            return Err(format!("missing bool value for {item}"));
        };
        let key = key.trim();
        let on: bool = value
            .trim()
            .to_ascii_lowercase()
            .parse()
            .map_err(|_| format!("invalid value of {key}={value}, err: not a boolean"))?;
        if !KNOWN_GATES.contains(&key) {
            return Err(format!(
                "unrecognized feature gate: {key} (known: {})",
                KNOWN_GATES.join(", ")
            ));
        }
        match key {
            "Topology" => gates.topology = on,
            _ if on => {
                return Err(format!(
                    "feature gate {key} is not supported by this provisioner"
                ));
            }
            _ => {}
        }
    }
    Ok(gates)
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
        assert!(
            !config.feature_gates.topology,
            "off by default, as upstream"
        );
        assert_eq!(config.worker_threads, 100);
        assert_eq!(config.retry.retry_interval_start, Duration::from_secs(1));
        assert_eq!(config.retry.retry_interval_max, Duration::from_secs(300));
    }

    #[test]
    fn feature_gates_parse_as_upstream() {
        let on = parse(&["--feature-gates=Topology=true"]);
        assert!(on.feature_gates.topology);
        let off = parse(&[
            "--feature-gates",
            "Topology=false,HonorPVReclaimPolicy=false",
        ]);
        assert!(!off.feature_gates.topology);
        let parse_err = |args: &[&str]| {
            Config::try_parse_from(std::iter::once("csi-provisioner").chain(args.iter().copied()))
                .unwrap_err()
                .to_string()
        };
        assert!(
            parse_err(&["--feature-gates=Bogus=true"]).contains("unrecognized feature gate: Bogus")
        );
        assert!(parse_err(&["--feature-gates=Topology=yes"]).contains("Topology=yes"));
        assert!(parse_err(&["--feature-gates=Topology"]).contains("missing bool value"));
        assert!(
            parse_err(&["--feature-gates=HonorPVReclaimPolicy=true"]).contains("not supported")
        );
    }
}
