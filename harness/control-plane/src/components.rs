//! The command lines of the four components, configured as a kubeadm-style cluster would
//! be, on loopback ports of their own.

use std::ffi::OsString;
use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};

use super::error::{Error, Result};
use super::pki::CertFiles;

/// The service range; its first address is the `kubernetes` Service's cluster IP.
pub const SERVICE_CIDR: &str = "10.0.0.0/24";
/// The cluster IP of the `kubernetes` Service (first address of [`SERVICE_CIDR`]).
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The service-account token issuer.
pub const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The loopback ports of one control plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    /// etcd's client port.
    pub etcd_client: u16,
    /// etcd's peer port (unused by a single member, but it must not collide).
    pub etcd_peer: u16,
    /// kube-apiserver's secure port.
    pub apiserver: u16,
    /// kube-controller-manager's secure (health) port.
    pub controller_manager: u16,
    /// kube-scheduler's secure (health) port.
    pub scheduler: u16,
}

impl Ports {
    /// Five distinct ports the kernel reports free now. Another process may still take one
    /// before the component binds it; the caller retries with new ports when that happens.
    pub fn pick() -> Result<Self> {
        // All listeners are held until the five are known, so they are distinct.
        let listeners = (0..5)
            .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(Error::NoFreePort)?;
        let ports = listeners
            .iter()
            .map(|l| l.local_addr().map(|a| a.port()))
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(Error::NoFreePort)?;
        Ok(Self {
            etcd_client: ports[0],
            etcd_peer: ports[1],
            apiserver: ports[2],
            controller_manager: ports[3],
            scheduler: ports[4],
        })
    }
}

/// Where the files of one control plane are.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    pub(crate) ports: Ports,
    /// The apiserver's listening and advertised address.
    pub(crate) advertise: IpAddr,
    pub(crate) etcd_data: PathBuf,
    pub(crate) ca_cert: PathBuf,
    pub(crate) ca_key: PathBuf,
    pub(crate) apiserver_serving: CertFiles,
    pub(crate) apiserver_kubelet_client: CertFiles,
    pub(crate) front_proxy_ca_cert: PathBuf,
    pub(crate) front_proxy_client: CertFiles,
    pub(crate) controller_manager_serving: CertFiles,
    pub(crate) scheduler_serving: CertFiles,
    pub(crate) service_account_key: PathBuf,
    pub(crate) service_account_pub: PathBuf,
    pub(crate) controller_manager_kubeconfig: PathBuf,
    pub(crate) scheduler_kubeconfig: PathBuf,
    pub(crate) cert_dir: PathBuf,
    /// Up to 1.21 the controller-manager and scheduler also serve plain HTTP on fixed ports
    /// unless told `--port=0` (1.22 ignores the flag, 1.23+ rejects it).
    pub(crate) disable_insecure_port: bool,
}

fn flag(name: &str, value: impl AsRef<std::ffi::OsStr>) -> OsString {
    let mut arg = OsString::from(format!("--{name}="));
    arg.push(value.as_ref());
    arg
}

fn path(p: &Path) -> &std::ffi::OsStr {
    p.as_os_str()
}

pub(crate) fn etcd_args(l: &Layout) -> Vec<OsString> {
    let client = format!("http://127.0.0.1:{}", l.ports.etcd_client);
    let peer = format!("http://127.0.0.1:{}", l.ports.etcd_peer);
    vec![
        flag("name", "default"),
        flag("data-dir", path(&l.etcd_data)),
        flag("listen-client-urls", &client),
        flag("advertise-client-urls", &client),
        flag("listen-peer-urls", &peer),
        flag("initial-advertise-peer-urls", &peer),
        flag("initial-cluster", format!("default={peer}")),
        flag("initial-cluster-state", "new"),
        // A single member elects itself after one election timeout (randomised up to twice
        // that); the default 1 s would be most of etcd's start. No peers, so no risk.
        flag("heartbeat-interval", "10"),
        flag("election-timeout", "100"),
        flag("logger", "zap"),
        flag("log-outputs", "stderr"),
    ]
}

pub(crate) fn apiserver_args(l: &Layout, extra: &[String]) -> Vec<OsString> {
    let args = vec![
        flag(
            "etcd-servers",
            format!("http://127.0.0.1:{}", l.ports.etcd_client),
        ),
        flag("bind-address", l.advertise.to_string()),
        flag("advertise-address", l.advertise.to_string()),
        flag("secure-port", l.ports.apiserver.to_string()),
        flag("cert-dir", path(&l.cert_dir)),
        flag("tls-cert-file", path(&l.apiserver_serving.cert)),
        flag("tls-private-key-file", path(&l.apiserver_serving.key)),
        flag("client-ca-file", path(&l.ca_cert)),
        flag(
            "kubelet-client-certificate",
            path(&l.apiserver_kubelet_client.cert),
        ),
        flag("kubelet-client-key", path(&l.apiserver_kubelet_client.key)),
        // Node agents serve the kubelet API with certificates from the cluster CA.
        flag("kubelet-certificate-authority", path(&l.ca_cert)),
        flag("kubelet-preferred-address-types", "InternalIP,Hostname"),
        // The aggregation layer, as kubeadm sets it up (its own CA for the front proxy).
        flag("requestheader-client-ca-file", path(&l.front_proxy_ca_cert)),
        flag("requestheader-allowed-names", "front-proxy-client"),
        flag("requestheader-username-headers", "X-Remote-User"),
        flag("requestheader-group-headers", "X-Remote-Group"),
        flag("requestheader-extra-headers-prefix", "X-Remote-Extra-"),
        flag("proxy-client-cert-file", path(&l.front_proxy_client.cert)),
        flag("proxy-client-key-file", path(&l.front_proxy_client.key)),
        // The `kubernetes` Endpoints cannot hold a loopback address (validation refuses
        // 127.0.0.0/8), so the apiserver does not maintain them; in-cluster clients are given
        // the apiserver's address directly.
        flag("endpoint-reconciler-type", "none"),
        flag("authorization-mode", "Node,RBAC"),
        // The default plugins of this version stay on; NodeRestriction is what kubeadm adds.
        flag("enable-admission-plugins", "NodeRestriction"),
        flag("allow-privileged", "true"),
        flag("service-cluster-ip-range", SERVICE_CIDR),
        flag("service-account-issuer", SERVICE_ACCOUNT_ISSUER),
        flag("service-account-key-file", path(&l.service_account_pub)),
        flag(
            "service-account-signing-key-file",
            path(&l.service_account_key),
        ),
        flag("api-audiences", SERVICE_ACCOUNT_ISSUER),
        flag("profiling", "false"),
    ];
    with_extra(args, extra)
}

/// `args` with `extra` appended; a default flag that `extra` also sets is dropped, since
/// list-valued flags (`--kubelet-preferred-address-types`, …) append rather than replace.
fn with_extra(args: Vec<OsString>, extra: &[String]) -> Vec<OsString> {
    let name = |arg: &str| -> String {
        arg.trim_start_matches('-')
            .split_once('=')
            .map_or(arg.trim_start_matches('-'), |(name, _)| name)
            .to_string()
    };
    let overridden: Vec<String> = extra.iter().map(|a| name(a)).collect();
    let mut args: Vec<OsString> = args
        .into_iter()
        .filter(|a| !overridden.contains(&name(&a.to_string_lossy())))
        .collect();
    args.extend(extra.iter().map(OsString::from));
    args
}

pub(crate) fn controller_manager_args(
    l: &Layout,
    cluster_name: &str,
    extra: &[String],
) -> Vec<OsString> {
    let own = vec![
        flag("controllers", "*"),
        flag("root-ca-file", path(&l.ca_cert)),
        flag(
            "service-account-private-key-file",
            path(&l.service_account_key),
        ),
        flag("use-service-account-credentials", "true"),
        flag("cluster-signing-cert-file", path(&l.ca_cert)),
        flag("cluster-signing-key-file", path(&l.ca_key)),
        flag("service-cluster-ip-range", SERVICE_CIDR),
        flag("cluster-name", cluster_name),
    ];
    apiserver_client_args(
        l,
        &l.controller_manager_kubeconfig,
        l.ports.controller_manager,
        &l.controller_manager_serving,
        own,
        extra,
    )
}

pub(crate) fn scheduler_args(l: &Layout, extra: &[String]) -> Vec<OsString> {
    apiserver_client_args(
        l,
        &l.scheduler_kubeconfig,
        l.ports.scheduler,
        &l.scheduler_serving,
        Vec::new(),
        extra,
    )
}

/// The command line shared by the controller-manager and the scheduler: the apiserver
/// reached (and requests authenticated and authorised) through `kubeconfig`, a secure
/// health port served with `serving`, one instance, then the component's `own` flags and
/// the caller's `extra` ones.
fn apiserver_client_args(
    l: &Layout,
    kubeconfig: &Path,
    port: u16,
    serving: &CertFiles,
    own: Vec<OsString>,
    extra: &[String],
) -> Vec<OsString> {
    let kubeconfig = path(kubeconfig);
    let mut args = vec![
        flag("kubeconfig", kubeconfig),
        flag("authentication-kubeconfig", kubeconfig),
        flag("authorization-kubeconfig", kubeconfig),
        flag("bind-address", "127.0.0.1"),
        flag("secure-port", port.to_string()),
        flag("cert-dir", path(&l.cert_dir)),
        flag("tls-cert-file", path(&serving.cert)),
        flag("tls-private-key-file", path(&serving.key)),
        flag("client-ca-file", path(&l.ca_cert)),
    ];
    args.extend(own);
    // One instance: no need to wait for a lease.
    args.extend([flag("leader-elect", "false"), flag("profiling", "false")]);
    if l.disable_insecure_port {
        args.push(flag("port", "0"));
    }
    with_extra(args, extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(disable_insecure_port: bool) -> Layout {
        let files = |name: &str| CertFiles {
            cert: PathBuf::from(format!("/p/{name}.crt")),
            key: PathBuf::from(format!("/p/{name}.key")),
        };
        Layout {
            ports: Ports {
                etcd_client: 1,
                etcd_peer: 2,
                apiserver: 3,
                controller_manager: 4,
                scheduler: 5,
            },
            advertise: IpAddr::V4(Ipv4Addr::LOCALHOST),
            etcd_data: "/p/etcd".into(),
            ca_cert: "/p/ca.crt".into(),
            ca_key: "/p/ca.key".into(),
            apiserver_serving: files("apiserver"),
            apiserver_kubelet_client: files("kubelet-client"),
            front_proxy_ca_cert: "/p/front-proxy-ca.crt".into(),
            front_proxy_client: files("front-proxy-client"),
            controller_manager_serving: files("cm"),
            scheduler_serving: files("scheduler"),
            service_account_key: "/p/sa.key".into(),
            service_account_pub: "/p/sa.pub".into(),
            controller_manager_kubeconfig: "/p/cm.conf".into(),
            scheduler_kubeconfig: "/p/scheduler.conf".into(),
            cert_dir: "/p".into(),
            disable_insecure_port,
        }
    }

    fn text(args: Vec<OsString>) -> Vec<String> {
        args.into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn an_extra_flag_replaces_the_default_of_the_same_name() {
        let args = text(apiserver_args(
            &layout(true),
            &["--kubelet-preferred-address-types=Hostname,InternalIP".into()],
        ));
        let set: Vec<&String> = args
            .iter()
            .filter(|a| a.starts_with("--kubelet-preferred-address-types"))
            .collect();
        assert_eq!(
            set,
            ["--kubelet-preferred-address-types=Hostname,InternalIP"]
        );
    }

    #[test]
    fn scheduler_gets_its_own_kubeconfig_port_and_certificate() {
        let args = text(scheduler_args(&layout(false), &["--v=2".into()]));
        assert_eq!(
            args,
            [
                "--kubeconfig=/p/scheduler.conf",
                "--authentication-kubeconfig=/p/scheduler.conf",
                "--authorization-kubeconfig=/p/scheduler.conf",
                "--bind-address=127.0.0.1",
                "--secure-port=5",
                "--cert-dir=/p",
                "--tls-cert-file=/p/scheduler.crt",
                "--tls-private-key-file=/p/scheduler.key",
                "--client-ca-file=/p/ca.crt",
                "--leader-elect=false",
                "--profiling=false",
                "--v=2",
            ]
        );
    }

    #[test]
    fn controller_manager_flags_sit_between_the_shared_ones() {
        let args = text(controller_manager_args(&layout(true), "c", &[]));
        assert_eq!(args[0], "--kubeconfig=/p/cm.conf");
        assert_eq!(args[4], "--secure-port=4");
        assert_eq!(args[6], "--tls-cert-file=/p/cm.crt");
        assert_eq!(args[9], "--controllers=*");
        assert_eq!(args[16], "--cluster-name=c");
        assert_eq!(
            args[17..],
            ["--leader-elect=false", "--profiling=false", "--port=0"]
        );
    }
}
