//! Command-line configuration: upstream's flags and defaults.

use std::path::PathBuf;

use clap::{ArgAction, Parser};

use csi_proto::plugin_server::ServiceFlags;
use kube_support::claims::ClaimFlags;

use crate::error::{Error, Result};

/// klog's flags, shared with the other drivers.
pub use kube_support::klog::LogFlags;

/// The driver's name as Kubernetes knows it.
pub const DRIVER_NAME: &str = "cinder.csi.openstack.org";

/// The driver's command line. Flag names and defaults follow upstream's `cinder-csi-plugin`.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "cinder-csi-plugin",
    version,
    about = "CSI driver for OpenStack Cinder"
)]
pub struct Config {
    /// CSI endpoint to serve: `unix:///path`, `tcp://host:port` or a bare socket path.
    #[arg(long, env = "CSI_ENDPOINT", default_value = "unix:///tmp/csi.sock")]
    pub endpoint: String,

    /// ID of this node (NodeGetInfo; deprecated upstream). Without it the node service
    /// takes the instance `uuid` from the metadata service.
    #[arg(long, env = "NODE_ID")]
    pub nodeid: Option<String>,

    /// Cloud configuration file(s) (INI: `[Global]`, `[BlockStorage]`, `[Metadata]`);
    /// repeatable, later files override earlier ones key by key.
    #[arg(long = "cloud-config")]
    pub cloud_config: Vec<PathBuf>,

    /// Cloud names of upstream's multi-cloud mode (accepted; only the default `""` is
    /// supported).
    #[arg(long = "cloud-name")]
    pub cloud_name: Vec<String>,

    /// Additional topology keys (`key=value,...`) the node reports besides the zone.
    #[arg(long = "additional-topology", value_delimiter = ',')]
    pub additional_topology: Vec<String>,

    /// The cluster id, added to volume metadata as `cinder.csi.openstack.org/cluster`.
    #[arg(long, default_value = "")]
    pub cluster: String,

    /// Address of upstream's metrics endpoint (accepted, no metrics are served).
    #[arg(long = "http-endpoint", default_value = "")]
    pub http_endpoint: String,

    /// Topology-aware provisioning (`topology.cinder.csi.openstack.org/zone`).
    #[arg(long = "with-topology", num_args = 0..=1, default_missing_value = "true",
          default_value_t = true, action = ArgAction::Set)]
    pub with_topology: bool,

    /// `--provide-controller-service`, `--provide-node-service`.
    #[command(flatten)]
    pub services: ServiceFlags,

    /// `--pvc-annotations`, `--master`, `--kubeconfig`.
    #[command(flatten)]
    pub claims: ClaimFlags,

    /// QPS of the Kubernetes client (accepted, unused: one claim read per CreateVolume).
    #[arg(long = "kube-api-qps", default_value_t = 5.0)]
    pub kube_api_qps: f32,

    /// Burst of the Kubernetes client (accepted, unused).
    #[arg(long = "kube-api-burst", default_value_t = 10)]
    pub kube_api_burst: u32,

    /// Resync period of upstream's claim informer (accepted, unused: claims are read, not
    /// watched).
    #[arg(long = "min-resync-period", default_value = "12h0m0s",
          value_parser = kube_support::go_duration::parse_duration)]
    pub min_resync_period: std::time::Duration,

    /// The metadata document the node service reads its id and zone from (the harness points
    /// this at its own metadata stand-in).
    #[arg(long = "metadata-url", env = "OS_METADATA_URL",
          default_value = crate::metadata::DEFAULT_URL)]
    pub metadata_url: String,

    /// klog's flags, accepted as upstream's binary accepts them.
    #[command(flatten)]
    pub logging: LogFlags,
}

impl Config {
    /// Checks what the flag parser cannot express.
    pub fn validate(&self) -> Result<()> {
        self.services.validate().map_err(Error::InvalidArgument)?;
        if self.cloud_config.is_empty() {
            return Err(Error::InvalidArgument(
                "--cloud-config is required (the INI file with [Global] credentials)".into(),
            ));
        }
        if let Some(name) = self.cloud_name.iter().find(|n| !n.is_empty()) {
            return Err(Error::InvalidArgument(format!(
                "--cloud-name {name:?}: multiple clouds are not supported; leave it unset"
            )));
        }
        for pair in &self.additional_topology {
            if !pair.contains('=') {
                return Err(Error::InvalidArgument(format!(
                    "--additional-topology {pair:?}: expected key=value"
                )));
            }
        }
        Ok(())
    }

    /// `--additional-topology` as key/value pairs.
    pub fn additional_topology(&self) -> Vec<(String, String)> {
        self.additional_topology
            .iter()
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Config {
        let mut all = vec!["cinder-csi-plugin"];
        all.extend_from_slice(args);
        match Config::try_parse_from(all) {
            Ok(config) => config,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn upstream_controller_arguments_parse() {
        let config = parse(&[
            "--endpoint=unix://csi/csi.sock",
            "--cloud-config=/etc/config/cloud.conf",
            "--cloud-config",
            "/etc/config/extra.conf",
            "--cluster=kubernetes",
            "--provide-node-service=false",
            "--v=5",
            "--logtostderr",
        ]);
        assert_eq!(config.endpoint, "unix://csi/csi.sock");
        assert_eq!(config.cloud_config.len(), 2);
        assert_eq!(config.cluster, "kubernetes");
        assert!(config.services.provide_controller_service);
        assert!(!config.services.provide_node_service);
        assert!(config.with_topology);
        assert_eq!(config.logging.default_filter(), "debug");
        assert!(!config.claims.pvc_annotations);
        assert!(config.validate().is_ok());
    }

    #[test]
    fn upstream_claim_flags_parse() {
        let config = parse(&[
            "--cloud-config=/etc/config/cloud.conf",
            "--pvc-annotations",
            "--master=https://10.0.0.1:6443",
            "--kubeconfig=/etc/kubernetes/admin.conf",
            "--kube-api-qps=20",
            "--kube-api-burst=40",
            "--min-resync-period=1h0m0s",
        ]);
        assert!(config.claims.pvc_annotations);
        assert_eq!(
            config.claims.master.as_deref(),
            Some("https://10.0.0.1:6443")
        );
        assert_eq!(
            config.claims.kubeconfig.as_deref(),
            Some(std::path::Path::new("/etc/kubernetes/admin.conf"))
        );
        assert_eq!(config.kube_api_qps, 20.0);
        assert_eq!(config.kube_api_burst, 40);
        assert_eq!(
            config.min_resync_period,
            std::time::Duration::from_secs(3600)
        );
        assert!(config.validate().is_ok());
    }

    #[test]
    fn upstream_node_arguments_parse() {
        let config = parse(&[
            "--endpoint=unix:///csi/csi.sock",
            "--cloud-config=/etc/config/cloud.conf",
            "--provide-controller-service=false",
            "--with-topology=false",
            "--nodeid",
            "node-1",
            "-v",
            "2",
            "--additional-topology=topology.kubernetes.io/region=east",
        ]);
        assert_eq!(config.nodeid.as_deref(), Some("node-1"));
        assert!(!config.with_topology);
        assert_eq!(
            config.additional_topology(),
            vec![("topology.kubernetes.io/region".into(), "east".into())]
        );
        assert!(config.validate().is_ok());
    }

    #[test]
    fn neither_service_is_refused() {
        let config = parse(&[
            "--cloud-config=/c",
            "--provide-controller-service=false",
            "--provide-node-service=false",
        ]);
        let error = config
            .validate()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("--provide-controller-service"), "{error}");
    }

    #[test]
    fn cloud_config_is_required() {
        let error = parse(&[])
            .validate()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("--cloud-config"), "{error}");
    }

    #[test]
    fn unknown_flags_are_refused() {
        assert!(Config::try_parse_from(["cinder-csi-plugin", "--no-such-flag"]).is_err());
    }
}
