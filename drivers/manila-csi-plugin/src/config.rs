//! Command-line configuration: upstream's flags and defaults, plus the wait deadlines.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Parser, ValueEnum};

use csi_proto::plugin_server::ServiceFlags;
use kube_support::claims::ClaimFlags;

use crate::error::{Error, Result};

/// klog's flags and Go's duration syntax, shared with the other drivers.
pub use kube_support::go_duration::parse_duration;
pub use kube_support::klog::LogFlags;

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

    /// ID of this node (NodeGetInfo). Deprecated upstream: without it, the node service
    /// takes the instance `uuid` from the metadata service (`--metadata-url`).
    #[arg(long, env = "NODE_ID")]
    pub nodeid: Option<String>,

    /// Availability zone of this node (NodeGetInfo topology with --with-topology).
    /// Deprecated upstream: without it, the zone is the metadata service's
    /// `availability_zone`.
    #[arg(long)]
    pub nodeaz: Option<String>,

    /// The OpenStack metadata document (`meta_data.json`) the node service reads its node id
    /// and zone from when `--nodeid`/`--nodeaz` are not given.
    #[arg(long = "metadata-url", env = "OS_METADATA_URL", default_value = crate::metadata::DEFAULT_URL)]
    pub metadata_url: String,

    /// How long reading the metadata document may take at start-up.
    #[arg(long = "metadata-timeout", default_value = "10s", value_parser = parse_duration)]
    pub metadata_timeout: Duration,

    /// Manila share protocol this instance serves (case-insensitive, as upstream upper-cases it).
    #[arg(long = "share-protocol-selector", value_enum, ignore_case = true)]
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

    /// `--provide-controller-service`, `--provide-node-service`.
    #[command(flatten)]
    pub services: ServiceFlags,

    /// `--pvc-annotations`, `--master`, `--kubeconfig`.
    #[command(flatten)]
    pub claims: ClaimFlags,

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

    /// Upstream's compatibility settings (accepted and ignored, as upstream ignores them).
    #[arg(long = "compatibility-settings")]
    pub compatibility_settings: Option<String>,

    /// QPS of the Kubernetes client (accepted, unused: one claim read per CreateVolume).
    #[arg(long = "kube-api-qps", default_value_t = 5.0)]
    pub kube_api_qps: f32,

    /// Burst of the Kubernetes client (accepted, unused).
    #[arg(long = "kube-api-burst", default_value_t = 10)]
    pub kube_api_burst: u32,

    /// Resync period of upstream's claim informer (accepted, unused: claims are read, not
    /// watched).
    #[arg(long = "min-resync-period", default_value = "12h0m0s", value_parser = parse_duration)]
    pub min_resync_period: Duration,

    /// klog's flags, accepted as upstream's binary accepts them.
    #[command(flatten)]
    pub logging: LogFlags,
}

impl Config {
    /// Checks the combinations the flag parser cannot express.
    pub fn validate(&self) -> Result<()> {
        self.services.validate().map_err(Error::InvalidArgument)?;
        if self.services.provide_node_service
            && self.fwdendpoint.as_deref().is_none_or(str::is_empty)
        {
            return Err(Error::InvalidArgument(
                "--fwdendpoint is required when the node service is provided".into(),
            ));
        }
        if self.drivername.is_empty() {
            return Err(Error::InvalidArgument(
                "--drivername must not be empty".into(),
            ));
        }
        Ok(())
    }
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
        assert!(config.services.provide_controller_service && config.services.provide_node_service);
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
        assert!(!config.services.provide_controller_service);
    }

    #[test]
    fn protocol_selector_is_case_insensitive() {
        for value in ["nfs", "NFS", "Nfs", "nFs"] {
            let config = parse(&[&format!("--share-protocol-selector={value}")]).unwrap();
            assert_eq!(
                config.share_protocol_selector,
                ShareProtocol::Nfs,
                "{value}"
            );
        }
        let config = parse(&["--share-protocol-selector", "CephFS"]).unwrap();
        assert_eq!(config.share_protocol_selector, ShareProtocol::Cephfs);
        assert!(parse(&["--share-protocol-selector=smb"]).is_err());
    }

    /// Every flag upstream's binary registers (its own, the PVC-annotation client's and
    /// klog's), in the spellings upstream's manifests and chart use.
    #[test]
    fn upstream_flags_are_accepted() {
        let config = parse(&[
            "-v=5",
            "--share-protocol-selector=NFS",
            "--fwdendpoint=unix:///x",
            "--compatibility-settings=",
            "--pvc-annotations",
            "--master=https://10.0.0.1:6443",
            "--kubeconfig=/etc/kubernetes/admin.conf",
            "--kube-api-qps=20",
            "--kube-api-burst=40",
            "--min-resync-period=1h0m0s",
            "--logtostderr",
            "--alsologtostderr=false",
            "--log_file=/var/log/manila.log",
            "--log_dir=/var/log",
            "--log_file_max_size=1800",
            "--vmodule=controller*=4",
            "--stderrthreshold=2",
            "--add_dir_header",
            "--skip_headers=false",
            "--skip_log_headers",
            "--one_output=true",
            "--log_backtrace_at=:0",
            "--log-flush-frequency=5s",
        ])
        .unwrap();
        assert_eq!(config.logging.verbosity, 5);
        assert_eq!(config.logging.default_filter(), "debug");
        assert!(config.claims.pvc_annotations);
        assert_eq!(config.kube_api_burst, 40);
        assert_eq!(config.min_resync_period, Duration::from_secs(3600));
        assert_eq!(config.logging.logtostderr, Some(true));
        assert_eq!(config.logging.alsologtostderr, Some(false));
        config.validate().unwrap();
        for args in [
            &["-v=2"][..],
            &["--v=2"][..],
            &["-v", "2"][..],
            &["--v", "2"][..],
        ] {
            let mut all = vec!["--share-protocol-selector=NFS"];
            all.extend_from_slice(args);
            assert_eq!(parse(&all).unwrap().logging.verbosity, 2, "{args:?}");
        }
        let quiet = parse(&["--share-protocol-selector=NFS"]).unwrap();
        assert_eq!(quiet.logging.default_filter(), "info");
        let chatty = parse(&["--share-protocol-selector=NFS", "--v=6"]).unwrap();
        assert_eq!(chatty.logging.default_filter(), "trace");
    }
}
