//! kubeadm's configuration for a kind cluster, written as kind writes it: one
//! `InitConfiguration` + `ClusterConfiguration` + `KubeletConfiguration` +
//! `KubeProxyConfiguration` for the control-plane node, one `JoinConfiguration` per worker.
//! kubeadm v1.20 reads the `kubeadm.k8s.io/v1beta2` API.

use std::net::IpAddr;

/// kind's well-known bootstrap token (the cluster lives as long as a test run, on a private
/// network, and the token expires after an hour).
pub const BOOTSTRAP_TOKEN: &str = "abcdef.0123456789abcdef";

/// The API server's port on the control-plane node.
pub const API_SERVER_PORT: u16 = 6443;

/// Where containerd listens in every node.
pub const CRI_SOCKET: &str = "/run/containerd/containerd.sock";

/// The pod network of the cluster (each node gets a /24 of it from the controller manager).
pub const POD_SUBNET: &str = "10.244.0.0/16";

/// The service network (the `kubernetes` Service is its first address).
pub const SERVICE_SUBNET: &str = "10.96.0.0/16";

/// What the node image provides, read from its `/kind/images.env` (the images the node
/// imports into containerd at start); defaults for an image without that file (kind's own
/// `kindest/node`, which carries kubeadm's default images).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeImageInfo {
    /// `KUBERNETES_VERSION`.
    pub kubernetes_version: Option<String>,
    /// `IMAGE_REPOSITORY`: where kubeadm finds kube-apiserver, … and kube-proxy.
    pub image_repository: Option<String>,
    /// `ETCD_IMAGE_TAG`.
    pub etcd_image_tag: Option<String>,
    /// `BUSYBOX_IMAGE`: a small image with a shell, for tests.
    pub busybox_image: Option<String>,
}

impl NodeImageInfo {
    /// Parses `KEY=value` lines (unknown keys are ignored).
    pub fn parse(text: &str) -> Self {
        let mut info = NodeImageInfo::default();
        for line in text.lines() {
            let Some((key, value)) = line.trim().split_once('=') else {
                continue;
            };
            let value = Some(value.trim().to_string()).filter(|v| !v.is_empty());
            match key.trim() {
                "KUBERNETES_VERSION" => info.kubernetes_version = value,
                "IMAGE_REPOSITORY" => info.image_repository = value,
                "ETCD_IMAGE_TAG" => info.etcd_image_tag = value,
                "BUSYBOX_IMAGE" => info.busybox_image = value,
                _ => {}
            }
        }
        info
    }
}

/// The control-plane node, as kubeadm's configuration names it.
#[derive(Debug, Clone)]
pub struct ControlPlaneNode<'a> {
    /// The cluster's name.
    pub cluster_name: &'a str,
    /// The Node's name.
    pub node_name: &'a str,
    /// Its container's name (resolvable by every node: the control-plane endpoint).
    pub host: &'a str,
    /// Its container's address on the cluster's network.
    pub address: IpAddr,
}

/// kubeadm init's configuration.
pub fn init_configuration(node: &ControlPlaneNode<'_>, image: &NodeImageInfo) -> String {
    let ControlPlaneNode {
        cluster_name,
        node_name,
        host,
        address,
    } = node;
    let version = image.kubernetes_version.as_deref().unwrap_or("v1.20.2");
    let mut cluster = format!(
        "apiVersion: kubeadm.k8s.io/v1beta2
kind: ClusterConfiguration
clusterName: {cluster_name}
kubernetesVersion: {version}
controlPlaneEndpoint: {host}:{API_SERVER_PORT}
"
    );
    if let Some(repository) = &image.image_repository {
        cluster.push_str(&format!("imageRepository: {repository}\n"));
    }
    cluster.push_str("etcd:\n  local:\n    dataDir: /var/lib/etcd\n");
    if let Some(tag) = &image.etcd_image_tag {
        cluster.push_str(&format!("    imageTag: {tag}\n"));
    }
    cluster.push_str(&format!(
        "apiServer:
  certSANs: [localhost, 127.0.0.1, {host}, \"{address}\"]
controllerManager:
  extraArgs:
    enable-hostpath-provisioner: \"true\"
networking:
  podSubnet: {POD_SUBNET}
  serviceSubnet: {SERVICE_SUBNET}
  dnsDomain: cluster.local
"
    ));
    format!(
        "apiVersion: kubeadm.k8s.io/v1beta2
kind: InitConfiguration
bootstrapTokens:
- token: {BOOTSTRAP_TOKEN}
  ttl: 1h0m0s
localAPIEndpoint:
  advertiseAddress: \"{address}\"
  bindPort: {API_SERVER_PORT}
nodeRegistration:
  name: {node_name}
  criSocket: {CRI_SOCKET}
  kubeletExtraArgs:
    node-ip: \"{address}\"
---
{cluster}---
{kubelet}---
{proxy}",
        kubelet = kubelet_configuration(),
        proxy = kube_proxy_configuration(),
    )
}

/// What kind sets in every kubelet: cgroupfs, no swap check, and no eviction on the disk
/// or image thresholds of a machine shared with other nodes.
fn kubelet_configuration() -> &'static str {
    "apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failSwapOn: false
imageGCHighThresholdPercent: 100
evictionHard:
  memory.available: 100Mi
  nodefs.available: 0%
  nodefs.inodesFree: 0%
  imagefs.available: 0%
"
}

/// kube-proxy as kind configures it for nodes that must not write the host's conntrack
/// sysctls (read-only here, and shared by every node).
fn kube_proxy_configuration() -> &'static str {
    "apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
"
}

/// A worker node, as kubeadm join's configuration names it.
#[derive(Debug, Clone)]
pub struct WorkerNode<'a> {
    /// The Node's name.
    pub node_name: &'a str,
    /// Its container's address on the cluster's network.
    pub address: IpAddr,
    /// Labels its kubelet registers it with (zone, region).
    pub labels: &'a [(String, String)],
}

/// kubeadm join's configuration for `node`, joining the control plane at `endpoint`
/// (`host:port`).
pub fn join_configuration(node: &WorkerNode<'_>, endpoint: &str) -> String {
    let labels = node
        .labels
        .iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(",");
    format!(
        "apiVersion: kubeadm.k8s.io/v1beta2
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: {endpoint}
    token: {BOOTSTRAP_TOKEN}
    unsafeSkipCAVerification: true
nodeRegistration:
  name: {name}
  criSocket: {CRI_SOCKET}
  kubeletExtraArgs:
    node-ip: \"{address}\"
    node-labels: \"{labels}\"
",
        name = node.node_name,
        address = node.address,
    )
}

/// The CNI configuration of a node whose pod CIDR is `pod_cidr`: what kind's CNI (kindnetd)
/// writes, a point-to-point veth per pod with addresses from the node's range; routes to the
/// other nodes' ranges and masquerading of traffic leaving the pod network are set apart
/// ([`route_commands`]).
pub fn cni_configuration(pod_cidr: &str) -> String {
    format!(
        r#"{{
  "cniVersion": "0.4.0",
  "name": "kindnet",
  "plugins": [
    {{
      "type": "ptp",
      "ipMasq": false,
      "ipam": {{
        "type": "host-local",
        "dataDir": "/run/cni-ipam-state",
        "routes": [{{"dst": "0.0.0.0/0"}}],
        "ranges": [[{{"subnet": "{pod_cidr}"}}]]
      }},
      "mtu": 1500
    }},
    {{"type": "portmap", "capabilities": {{"portMappings": true}}}}
  ]
}}
"#
    )
}

/// The shell commands that give a node routes to the other nodes' pod ranges (`peers`:
/// each one's pod CIDR and address) and masquerade its pods' traffic to anything outside the
/// pod network, as kindnetd does.
pub fn route_commands(own_cidr: &str, peers: &[(String, IpAddr)]) -> String {
    let mut script = String::from("set -e\n");
    for (cidr, address) in peers {
        script.push_str(&format!("ip route replace {cidr} via {address}\n"));
    }
    script.push_str(&format!(
        "iptables -t nat -C POSTROUTING -s {own_cidr} ! -d {POD_SUBNET} -j MASQUERADE 2>/dev/null \
|| iptables -t nat -A POSTROUTING -s {own_cidr} ! -d {POD_SUBNET} -j MASQUERADE\n"
    ));
    script
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_node_image_file_is_read_and_defaults_stay_unset() {
        let info = NodeImageInfo::parse(
            "KUBERNETES_VERSION=v1.20.2\nIMAGE_REPOSITORY=localhost/x\nETCD_IMAGE_TAG=3.4.23-debian\nOTHER=1\nBUSYBOX_IMAGE=\n",
        );
        assert_eq!(info.kubernetes_version.as_deref(), Some("v1.20.2"));
        assert_eq!(info.image_repository.as_deref(), Some("localhost/x"));
        assert_eq!(info.etcd_image_tag.as_deref(), Some("3.4.23-debian"));
        assert_eq!(info.busybox_image, None);
        assert_eq!(NodeImageInfo::parse(""), NodeImageInfo::default());
    }

    #[test]
    fn kubeadm_configurations() {
        let image = NodeImageInfo::parse(
            "KUBERNETES_VERSION=v1.20.2\nIMAGE_REPOSITORY=localhost/openstack-csi-conformance\nETCD_IMAGE_TAG=3.4.23-debian\n",
        );
        let init = init_configuration(
            &ControlPlaneNode {
                cluster_name: "ock-abc",
                node_name: "control-plane",
                host: "ock-abc-control-plane",
                address: "172.18.0.2".parse().unwrap(),
            },
            &image,
        );
        insta::assert_snapshot!("init_configuration", init);
        // kindest/node: kubeadm's own image names.
        let upstream = init_configuration(
            &ControlPlaneNode {
                cluster_name: "ock-abc",
                node_name: "control-plane",
                host: "ock-abc-control-plane",
                address: "172.18.0.2".parse().unwrap(),
            },
            &NodeImageInfo::default(),
        );
        assert!(!upstream.contains("imageRepository"), "{upstream}");
        assert!(
            upstream.contains("kubernetesVersion: v1.20.2"),
            "{upstream}"
        );
        let labels = vec![
            (
                "topology.kubernetes.io/zone".to_string(),
                "zone-a".to_string(),
            ),
            (
                "topology.kubernetes.io/region".to_string(),
                "RegionOne".to_string(),
            ),
        ];
        let join = join_configuration(
            &WorkerNode {
                node_name: "node-1",
                address: "172.18.0.3".parse().unwrap(),
                labels: &labels,
            },
            "ock-abc-control-plane:6443",
        );
        insta::assert_snapshot!("join_configuration", join);
        for document in init.split("---\n").chain([join.as_str()]) {
            let value: serde_yaml::Value = serde_yaml::from_str(document).unwrap();
            assert!(value.get("kind").is_some(), "{document}");
        }
    }

    #[test]
    fn cni_and_routes() {
        let cni: serde_json::Value =
            serde_json::from_str(&cni_configuration("10.244.1.0/24")).unwrap();
        assert_eq!(
            cni["plugins"][0]["ipam"]["ranges"][0][0]["subnet"],
            "10.244.1.0/24"
        );
        let script = route_commands(
            "10.244.1.0/24",
            &[("10.244.2.0/24".into(), "172.18.0.4".parse().unwrap())],
        );
        assert!(script.contains("ip route replace 10.244.2.0/24 via 172.18.0.4\n"));
        assert!(script.contains("-s 10.244.1.0/24 ! -d 10.244.0.0/16 -j MASQUERADE"));
    }
}
