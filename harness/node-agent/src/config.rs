//! What a node agent is told: its name, topology, credentials, run directory, image map and
//! capacity, plus the timings of heartbeats and restart back-off.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use pod_runtime::{ImageMap, Lifeline};

use super::kubelet::KubeletApiConfig;

use super::error::{Error, Result};

/// kubelet's port, reported as the kubelet endpoint when the agent serves no kubelet API
/// (nothing listens there then); otherwise the API's own port is reported
/// ([`NodeAgentConfig::kubelet_port`]).
pub const KUBELET_PORT: u16 = 10250;

/// The configuration of one node agent (see [`NodeAgent::run`](super::NodeAgent::run)).
#[derive(Debug, Clone)]
pub struct NodeAgentConfig {
    /// The Node's name (a DNS subdomain); also `kubernetes.io/hostname`.
    pub node_name: String,
    /// `topology.kubernetes.io/zone` (and `failure-domain.beta.kubernetes.io/zone`).
    pub zone: Option<String>,
    /// `topology.kubernetes.io/region` (and `failure-domain.beta.kubernetes.io/region`).
    pub region: Option<String>,
    /// Extra Node labels (NodeRestriction refuses most `kubernetes.io` labels from a node).
    pub labels: BTreeMap<String, String>,
    /// The kubeconfig the agent talks to the API server with; normally a client certificate
    /// for `system:node:<node_name>` in `system:nodes`, so the Node authorizer and
    /// NodeRestriction apply as they do to a kubelet.
    pub kubeconfig: PathBuf,
    /// This node's directory: the runtime's sandboxes (`runtime/`) and the pods' volumes
    /// (`pods/<namespace>_<name>_<uid>/`) live under it.
    pub run_dir: PathBuf,
    /// Where images' binaries are.
    pub images: ImageMap,
    /// The node's address: its `InternalIP`, every pod's `hostIP` and, as pods share the host
    /// network, every pod's `podIP`.
    pub node_ip: IpAddr,
    /// The Node's `Hostname` address; `None`: the node's name. The apiserver reaches the
    /// kubelet API at it when told to prefer `Hostname` addresses (the containers backend:
    /// the node container's name, which the network's DNS resolves).
    pub hostname_address: Option<String>,
    /// `KUBERNETES_SERVICE_HOST` given to containers: the real API server's address (there is
    /// no service proxy).
    pub api_server_service_host: String,
    /// `KUBERNETES_SERVICE_PORT` given to containers.
    pub api_server_service_port: u16,
    /// The cluster CA certificate, written as `ca.crt` of a projected `kube-root-ca.crt`
    /// source while the controller-manager has not published that ConfigMap yet.
    pub cluster_ca: PathBuf,
    /// What the node reports as capacity (and allocatable).
    pub capacity: Capacity,
    /// Heartbeat and back-off timings.
    pub timings: Timings,
    /// The `pod-sandbox` helper; `None`: found as [`RuntimeConfig::new`](pod_runtime::RuntimeConfig::new) does.
    pub sandbox_helper: Option<PathBuf>,
    /// Ends the pods when its holder dies (see [`Lifeline`]); `None`: pods live until stopped.
    pub lifeline: Option<Lifeline>,
    /// The kubelet API (see [`kubelet`](super::kubelet)); `None`: not served (the Node
    /// advertises kubelet's port 10250, where nothing answers).
    pub kubelet_api: Option<KubeletApiConfig>,
    /// Environment variables every container of this node's pods gets before its own
    /// (`env`/`envFrom` of the container override them): the stand-in for what a real node
    /// provides per machine, such as the OpenStack metadata service's address
    /// (`OS_METADATA_URL`), which on a real cloud each VM reaches at its own link-local
    /// address while all simulated nodes share one host.
    pub pod_env: Vec<(String, String)>,
}

/// Node capacity, reported as both `capacity` and `allocatable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capacity {
    /// CPU quantity, e.g. `4`.
    pub cpu: String,
    /// Memory quantity, e.g. `8Gi`.
    pub memory: String,
    /// Maximum pod count.
    pub pods: u32,
    /// Ephemeral storage quantity.
    pub ephemeral_storage: String,
}

impl Default for Capacity {
    fn default() -> Self {
        Capacity {
            cpu: "4".into(),
            memory: "8Gi".into(),
            pods: 110,
            ephemeral_storage: "20Gi".into(),
        }
    }
}

/// Heartbeat and back-off timings; the defaults are kubelet's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// How often the Lease is renewed (kubelet: 10 s).
    pub lease_renew_interval: Duration,
    /// The Lease's `leaseDurationSeconds` (kubelet: 40 s).
    pub lease_duration: Duration,
    /// How often the Node's status (conditions' heartbeat) is posted (kubelet: 10 s).
    pub node_status_interval: Duration,
    /// The first restart back-off of a crashing container (kubelet: 10 s), doubled at each
    /// restart up to [`Timings::backoff_max`].
    pub backoff_initial: Duration,
    /// The longest restart back-off (kubelet: 5 min).
    pub backoff_max: Duration,
    /// How long a pod whose volumes or containers cannot be set up waits before retrying.
    pub retry_interval: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            lease_renew_interval: Duration::from_secs(10),
            lease_duration: Duration::from_secs(40),
            node_status_interval: Duration::from_secs(10),
            backoff_initial: Duration::from_secs(10),
            backoff_max: Duration::from_secs(300),
            retry_interval: Duration::from_secs(2),
        }
    }
}

impl NodeAgentConfig {
    /// A configuration with kubelet's defaults: node IP 127.0.0.1, default capacity and
    /// timings, no zone, region, labels or lifeline, an empty image map.
    pub fn new(
        node_name: impl Into<String>,
        kubeconfig: impl Into<PathBuf>,
        run_dir: impl Into<PathBuf>,
        api_server_port: u16,
        cluster_ca: impl Into<PathBuf>,
    ) -> Self {
        NodeAgentConfig {
            node_name: node_name.into(),
            zone: None,
            region: None,
            labels: BTreeMap::new(),
            kubeconfig: kubeconfig.into(),
            run_dir: run_dir.into(),
            images: ImageMap::new(),
            node_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            hostname_address: None,
            api_server_service_host: Ipv4Addr::LOCALHOST.to_string(),
            api_server_service_port: api_server_port,
            cluster_ca: cluster_ca.into(),
            capacity: Capacity::default(),
            timings: Timings::default(),
            sandbox_helper: None,
            lifeline: None,
            kubelet_api: None,
            pod_env: Vec::new(),
        }
    }

    /// Checks what can be checked before anything starts.
    pub fn validate(&self) -> Result<()> {
        let name = &self.node_name;
        let valid_name = !name.is_empty()
            && name.len() <= 253
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
            && name.starts_with(|c: char| c.is_ascii_alphanumeric())
            && name.ends_with(|c: char| c.is_ascii_alphanumeric());
        if !valid_name {
            return Err(Error::config(
                format!("node name {name:?}"),
                "must be a DNS subdomain: lower-case letters, digits, '-' and '.', starting and ending alphanumeric",
            ));
        }
        if !self.kubeconfig.is_file() {
            return Err(Error::config(
                format!("kubeconfig {:?}", self.kubeconfig),
                "no such file",
            ));
        }
        if self.api_server_service_port == 0 {
            return Err(Error::config("API server port", "must not be 0"));
        }
        let t = &self.timings;
        if t.lease_renew_interval.is_zero()
            || t.node_status_interval.is_zero()
            || t.backoff_initial.is_zero()
            || t.retry_interval.is_zero()
        {
            return Err(Error::config("timings", "intervals must be positive"));
        }
        if t.backoff_max < t.backoff_initial {
            return Err(Error::config(
                "timings",
                "backoff_max must not be shorter than backoff_initial",
            ));
        }
        if t.lease_duration < t.lease_renew_interval {
            return Err(Error::config(
                "timings",
                "lease_duration must not be shorter than lease_renew_interval",
            ));
        }
        Ok(())
    }

    /// The port the Node advertises as its kubelet endpoint.
    pub fn kubelet_port(&self) -> u16 {
        match &self.kubelet_api {
            Some(api) => api.port,
            None => KUBELET_PORT,
        }
    }

    /// The runtime's run directory.
    pub fn runtime_dir(&self) -> PathBuf {
        self.run_dir.join("runtime")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn bad_node_name_is_named_in_the_error() {
        let config = NodeAgentConfig::new("Node_1", "/nonexistent", "/tmp/x", 6443, "/ca");
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains("Node_1"), "{err}");
    }

    #[test]
    fn missing_kubeconfig_is_named_in_the_error() {
        let config = NodeAgentConfig::new("node-1", "/nonexistent/kc", "/tmp/x", 6443, "/ca");
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains("/nonexistent/kc"), "{err}");
    }
}
