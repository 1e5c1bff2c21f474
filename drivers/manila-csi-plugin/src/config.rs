//! Command-line configuration: upstream's flags and defaults, plus the wait deadlines.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser, ValueEnum};

use crate::error::{Error, Result};

/// The share protocol one instance of the driver serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ShareProtocol {
    /// NFS shares; the partner is an NFS node plugin.
    #[value(name = "NFS", alias = "nfs")]
    Nfs,
    /// CephFS shares; the partner is a CephFS node plugin.
    #[value(name = "CEPHFS", alias = "cephfs")]
    Cephfs,
}

impl ShareProtocol {
    /// The protocol name as Manila spells it (`share_proto`).
    pub fn manila_name(self) -> &'static str {
        match self {
            ShareProtocol::Nfs => "NFS",
            ShareProtocol::Cephfs => "CEPHFS",
        }
    }
}

/// The driver's command line. Flag names and defaults follow the upstream driver.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "manila-csi-plugin",
    version,
    about = "CSI driver for OpenStack Manila"
)]
pub struct Config {
    /// CSI endpoint to serve: `unix:///path`, `tcp://host:port` or a bare socket path.
    #[arg(long, env = "CSI_ENDPOINT", default_value = "unix:///tmp/csi.sock")]
    pub endpoint: String,

    /// Name of this driver.
    #[arg(long, default_value = "manila.csi.openstack.org")]
    pub drivername: String,

    /// ID of this node (NodeGetInfo). Defaults to the host name.
    #[arg(long, env = "NODE_ID")]
    pub nodeid: Option<String>,

    /// Availability zone of this node (NodeGetInfo topology with --with-topology).
    #[arg(long)]
    pub nodeaz: Option<String>,

    /// Manila share protocol this instance serves.
    #[arg(long = "share-protocol-selector", value_enum)]
    pub share_protocol_selector: ShareProtocol,

    /// CSI endpoint of the partner node plugin all Node RPCs are forwarded to. Required when
    /// the node service is provided.
    #[arg(long)]
    pub fwdendpoint: Option<String>,

    /// Runtime configuration file (JSON), re-read on every call that uses it.
    #[arg(long = "runtime-config-file")]
    pub runtime_config_file: Option<PathBuf>,

    /// Topology-aware provisioning (`availability`/`autoTopology`, node zone key).
    #[arg(long = "with-topology", num_args = 0..=1, default_missing_value = "true",
          default_value_t = false, action = ArgAction::Set)]
    pub with_topology: bool,

    /// Identifier of the cluster; added to share metadata as `manila.csi.openstack.org/cluster`.
    #[arg(long = "cluster-id")]
    pub cluster_id: Option<String>,

    /// Serve the Controller service.
    #[arg(long = "provide-controller-service", num_args = 0..=1,
          default_missing_value = "true", default_value_t = true, action = ArgAction::Set)]
    pub provide_controller_service: bool,

    /// Serve the Node service.
    #[arg(long = "provide-node-service", num_args = 0..=1,
          default_missing_value = "true", default_value_t = true, action = ArgAction::Set)]
    pub provide_node_service: bool,

    /// Look PVC annotations up for share options (accepted for compatibility; needs API access
    /// to the cluster, which this driver does not use, so it only logs a warning).
    #[arg(long = "pvc-annotations", num_args = 0..=1, default_missing_value = "true",
          default_value_t = false, action = ArgAction::Set)]
    pub pvc_annotations: bool,

    /// Extra User-Agent component(s) for OpenStack requests (repeatable).
    #[arg(long = "user-agent")]
    pub user_agent: Vec<String>,

    /// Deadline for a share, snapshot or access rule to reach its target state.
    #[arg(long = "share-wait-timeout", default_value = "80s", value_parser = parse_duration)]
    pub share_wait_timeout: Duration,

    /// How long one Keystone authentication may take. Calls with the same credentials share
    /// one authentication in flight, so a hanging Keystone costs each of them this once.
    #[arg(long = "auth-timeout", default_value = "30s", value_parser = parse_duration)]
    pub auth_timeout: Duration,

    /// How long to wait at start-up for the partner node plugin to answer.
    #[arg(long = "partner-probe-timeout", default_value = "15s", value_parser = parse_duration)]
    pub partner_probe_timeout: Duration,
}

impl Config {
    /// Checks the combinations the flag parser cannot express.
    pub fn validate(&self) -> Result<()> {
        if !self.provide_controller_service && !self.provide_node_service {
            return Err(Error::InvalidArgument(
                "at least one of --provide-controller-service and --provide-node-service must be true"
                    .into(),
            ));
        }
        if self.provide_node_service && self.fwdendpoint.as_deref().is_none_or(str::is_empty) {
            return Err(Error::InvalidArgument(
                "--fwdendpoint is required when the node service is provided".into(),
            ));
        }
        if self.provide_node_service
            && self.with_topology
            && self.nodeaz.as_deref().is_none_or(str::is_empty)
        {
            return Err(Error::InvalidArgument(
                "--nodeaz is required with --with-topology when the node service is provided"
                    .into(),
            ));
        }
        if self.drivername.is_empty() {
            return Err(Error::InvalidArgument(
                "--drivername must not be empty".into(),
            ));
        }
        Ok(())
    }

    /// The node id to report: `--nodeid`, else the host name.
    pub fn node_id(&self) -> String {
        self.nodeid.clone().unwrap_or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "localhost".into())
        })
    }
}

/// Parses `250ms`, `15s`, `2m`, `1h` or a plain number of seconds.
pub fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("invalid duration {text:?}: expected e.g. 500ms, 15s, 2m"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => {
            return Err(format!(
                "invalid duration unit {unit:?} in {text:?}: use ms, s, m or h"
            ));
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("invalid duration {text:?}: {e}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn parse(args: &[&str]) -> std::result::Result<Config, clap::Error> {
        Config::try_parse_from(std::iter::once("manila-csi-plugin").chain(args.iter().copied()))
    }

    #[test]
    fn defaults_match_upstream() {
        let config = parse(&["--share-protocol-selector=NFS", "--fwdendpoint=unix:///x"]).unwrap();
        assert_eq!(config.endpoint, "unix:///tmp/csi.sock");
        assert_eq!(config.drivername, "manila.csi.openstack.org");
        assert!(config.provide_controller_service && config.provide_node_service);
        assert!(!config.with_topology);
        assert_eq!(config.share_wait_timeout, Duration::from_secs(80));
        config.validate().unwrap();
    }

    #[test]
    fn protocol_selector_is_required() {
        let error = parse(&["--fwdendpoint=unix:///x"]).unwrap_err();
        assert!(
            error.to_string().contains("--share-protocol-selector"),
            "{error}"
        );
    }

    #[test]
    fn fwdendpoint_is_required_with_the_node_service() {
        let config = parse(&["--share-protocol-selector=CEPHFS"]).unwrap();
        let error = config.validate().unwrap_err();
        assert!(error.to_string().contains("--fwdendpoint"), "{error}");
        let controller_only = parse(&[
            "--share-protocol-selector=NFS",
            "--provide-node-service=false",
        ])
        .unwrap();
        controller_only.validate().unwrap();
    }

    #[test]
    fn bool_flags_accept_go_style_values() {
        let config = parse(&[
            "--share-protocol-selector=NFS",
            "--with-topology",
            "--nodeaz=nova",
            "--provide-controller-service=false",
            "--fwdendpoint=/tmp/nfs.sock",
        ])
        .unwrap();
        assert!(config.with_topology);
        assert!(!config.provide_controller_service);
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("3 parsecs").is_err());
    }
}
