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

    /// Serve the Controller service.
    #[arg(long = "provide-controller-service", num_args = 0..=1,
          default_missing_value = "true", default_value_t = true, action = ArgAction::Set)]
    pub provide_controller_service: bool,

    /// Serve the Node service.
    #[arg(long = "provide-node-service", num_args = 0..=1,
          default_missing_value = "true", default_value_t = true, action = ArgAction::Set)]
    pub provide_node_service: bool,

    /// Read the claim's annotations (`manila.csi.openstack.org/affinity`, `anti-affinity`)
    /// from the Kubernetes API and pass them to Manila as scheduler hints (see [`crate::pvc`]).
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

    /// Upstream's compatibility settings (accepted and ignored, as upstream ignores them).
    #[arg(long = "compatibility-settings")]
    pub compatibility_settings: Option<String>,

    /// Kubernetes API server address for `--pvc-annotations` (overrides the kubeconfig's).
    #[arg(long)]
    pub master: Option<String>,

    /// Kubeconfig file for `--pvc-annotations` (else `--master`, else in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

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

/// The klog flags upstream's binary registers. `-v` sets the log level when `RUST_LOG` is
/// not set (see [`LogFlags::default_filter`]); the others are accepted and have no effect:
/// logs always go to stderr (klog's default `--logtostderr=true`).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct LogFlags {
    /// klog verbosity: 0-3 `info`, 4-5 `debug`, 6 and more `trace`.
    #[arg(short = 'v', long = "v", default_value_t = 0)]
    pub verbosity: u16,
    /// Per-file verbosity (`pattern=N,...`; accepted, no effect).
    #[arg(long)]
    pub vmodule: Option<String>,
    /// Log to stderr (accepted; logs always go to stderr).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    pub logtostderr: Option<bool>,
    /// Log to stderr as well as files (accepted; logs always go to stderr).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    pub alsologtostderr: Option<bool>,
    /// Log file (accepted, no effect).
    #[arg(long = "log_file")]
    pub log_file: Option<PathBuf>,
    /// Log directory (accepted, no effect).
    #[arg(long = "log_dir")]
    pub log_dir: Option<PathBuf>,
    /// Maximum log file size in MB (accepted, no effect).
    #[arg(long = "log_file_max_size")]
    pub log_file_max_size: Option<u64>,
    /// Logs at or above this severity go to stderr (accepted, no effect).
    #[arg(long)]
    pub stderrthreshold: Option<String>,
    /// Emit a stack trace at `file:line` (accepted, no effect).
    #[arg(long = "log_backtrace_at")]
    pub log_backtrace_at: Option<String>,
    /// Add the file directory to log headers (accepted, no effect).
    #[arg(long = "add_dir_header", num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    pub add_dir_header: Option<bool>,
    /// No header prefixes in log lines (accepted, no effect).
    #[arg(long = "skip_headers", num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    pub skip_headers: Option<bool>,
    /// No headers in log files (accepted, no effect).
    #[arg(long = "skip_log_headers", num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    pub skip_log_headers: Option<bool>,
    /// Log each severity only to its own file (accepted, no effect).
    #[arg(long = "one_output", num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)]
    pub one_output: Option<bool>,
    /// Maximum seconds between log flushes (accepted, no effect).
    #[arg(long = "log-flush-frequency", value_parser = parse_duration)]
    pub log_flush_frequency: Option<Duration>,
}

impl LogFlags {
    /// The tracing filter `-v` stands for, used when `RUST_LOG` is not set.
    pub fn default_filter(&self) -> &'static str {
        match self.verbosity {
            0..=3 => "info",
            4..=5 => "debug",
            _ => "trace",
        }
    }
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
        if self.drivername.is_empty() {
            return Err(Error::InvalidArgument(
                "--drivername must not be empty".into(),
            ));
        }
        Ok(())
    }
}

/// Parses a Go duration (`250ms`, `15s`, `2m`, `1h30m`, `12h0m0s`; units `ns`, `us`, `µs`,
/// `ms`, `s`, `m`, `h`) or a plain number of seconds.
pub fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    let text = text.trim();
    let mut rest = text;
    let mut seconds = 0.0_f64;
    if rest.is_empty() {
        return Err("invalid duration \"\": expected e.g. 500ms, 15s, 2m".into());
    }
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(split);
        let value: f64 = number
            .parse()
            .map_err(|_| format!("invalid duration {text:?}: expected e.g. 500ms, 15s, 2m"))?;
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "" if number.len() == text.len() => 1.0,
            _ => {
                return Err(format!(
                    "invalid duration unit {unit:?} in {text:?}: use ns, us, ms, s, m or h"
                ));
            }
        };
        seconds += value * scale;
        rest = next;
    }
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
        assert_eq!(
            parse_duration("12h0m0s").unwrap(),
            Duration::from_secs(12 * 3600)
        );
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("5us").unwrap(), Duration::from_micros(5));
        assert!(parse_duration("3 parsecs").is_err());
        assert!(parse_duration("1m30").is_err());
        assert!(parse_duration("").is_err());
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
        assert!(config.pvc_annotations);
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
