//! A real Kubernetes control plane run as local processes: etcd, kube-apiserver,
//! kube-controller-manager and kube-scheduler, configured as a kubeadm cluster is (one CA,
//! TLS everywhere, client-certificate auth, `Node,RBAC` authorization, service-account
//! issuer and signing keys, the default admission plugins plus `NodeRestriction`, all
//! default controllers), on free loopback ports so several can run side by side.
//!
//! ```no_run
//! # async fn demo() -> control_plane::Result<()> {
//! use control_plane::ControlPlane;
//!
//! let cp = ControlPlane::builder().start().await?;
//! let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(cp.client());
//! println!("kubectl --kubeconfig {} get ns", cp.kubeconfig().display());
//! cp.shutdown().await?;
//! # Ok(()) }
//! ```
//!
//! Binaries come from `$KUBEBUILDER_ASSETS`, else the cache filled by
//! `ci/install-control-plane.sh`, which is run if needed (see [`Binaries::locate`]).
//!
//! Each control plane lives in a run directory (see [`run_dir`]) holding its etcd data,
//! certificates, kubeconfigs and one log per component (`logs/<component>.log`). Components
//! die with the harness (`PR_SET_PDEATHSIG`); a run directory left by a dead harness is
//! recognised and cleaned (its processes killed) by the next start in the same base
//! directory. [`ControlPlane::shutdown`] stops the components (SIGTERM, then SIGKILL after a
//! grace period) and removes the run directory unless asked to keep it; dropping a
//! [`ControlPlane`] without shutting it down kills the components and leaves the directory
//! (with the logs) to be cleaned by the next start.

mod binaries;
mod boot;
mod components;
mod error;
mod kubeconfig;
pub mod net;
pub mod pki;
pub mod process;
mod readiness;
pub mod run_dir;

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use binaries::{
    Binaries, DEFAULT_KUBERNETES_VERSION, KubernetesVersion, cache_bin_dir, install_script,
};
pub use components::{KUBERNETES_SERVICE_IP, Ports, SERVICE_ACCOUNT_ISSUER, SERVICE_CIDR};
pub use error::{Error, Result};
pub use pki::{CertFiles, CertifiedKeyPem, ClientIdentity, ClusterCa};
pub use run_dir::RunDir;

use boot::{boot_components, prepare, stop_all};
use process::ComponentProcess;

/// How many times a start is retried with new ports when a component finds its port taken
/// (another process bound it between the port pick and the component's start).
const PORT_ATTEMPTS: usize = 3;

/// Options of a [`ControlPlane`]; [`ControlPlaneBuilder::start`] starts it.
#[derive(Debug, Clone)]
pub struct ControlPlaneBuilder {
    base_dir: PathBuf,
    run_dir: Option<PathBuf>,
    binaries: Option<Binaries>,
    cluster_name: String,
    ready_timeout: Duration,
    stop_grace: Duration,
    keep_run_dir: bool,
    apiserver_args: Vec<String>,
    controller_manager_args: Vec<String>,
    scheduler_args: Vec<String>,
    advertise_address: IpAddr,
}

impl Default for ControlPlaneBuilder {
    fn default() -> Self {
        Self {
            base_dir: run_dir::default_base(),
            run_dir: None,
            binaries: None,
            cluster_name: "embedded".into(),
            ready_timeout: Duration::from_secs(90),
            stop_grace: Duration::from_secs(10),
            keep_run_dir: false,
            apiserver_args: Vec::new(),
            controller_manager_args: Vec::new(),
            scheduler_args: Vec::new(),
            advertise_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
        }
    }
}

impl ControlPlaneBuilder {
    /// The directory in which run directories are created (and stale ones cleaned).
    /// Default: `$TMPDIR/occ` ([`run_dir::default_base`]).
    pub fn base_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.base_dir = dir.into();
        self
    }

    /// Use exactly this run directory (cleaned first if a dead harness left it) instead of
    /// a new one under the base directory.
    pub fn run_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.run_dir = Some(dir.into());
        self
    }

    /// Use these binaries instead of locating them.
    pub fn binaries(mut self, binaries: Binaries) -> Self {
        self.binaries = Some(binaries);
        self
    }

    /// The cluster's name in kubeconfigs (default `embedded`).
    pub fn cluster_name(mut self, name: impl Into<String>) -> Self {
        self.cluster_name = name.into();
        self
    }

    /// How long each component may take to become ready (default 90 s).
    pub fn ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }

    /// How long a component may take to exit after SIGTERM before SIGKILL (default 10 s).
    pub fn stop_grace(mut self, grace: Duration) -> Self {
        self.stop_grace = grace;
        self
    }

    /// Keep the run directory (data, certificates, logs) after a clean shutdown.
    pub fn keep_run_dir(mut self, keep: bool) -> Self {
        self.keep_run_dir = keep;
        self
    }

    /// An extra kube-apiserver flag, e.g. `--feature-gates=...`.
    pub fn apiserver_arg(mut self, arg: impl Into<String>) -> Self {
        self.apiserver_args.push(arg.into());
        self
    }

    /// The address the apiserver listens on and advertises (default `127.0.0.1`): another
    /// address of this host makes it reachable from other machines, e.g. a container's
    /// address on its network (the containers backend). Its serving certificate is valid
    /// for it, and the kubeconfigs written name it.
    pub fn advertise_address(mut self, address: IpAddr) -> Self {
        self.advertise_address = address;
        self
    }

    /// An extra kube-controller-manager flag.
    pub fn controller_manager_arg(mut self, arg: impl Into<String>) -> Self {
        self.controller_manager_args.push(arg.into());
        self
    }

    /// An extra kube-scheduler flag.
    pub fn scheduler_arg(mut self, arg: impl Into<String>) -> Self {
        self.scheduler_args.push(arg.into());
        self
    }

    /// Starts the control plane and waits until every component is ready.
    pub async fn start(self) -> Result<ControlPlane> {
        let binaries = match &self.binaries {
            Some(binaries) => binaries.clone(),
            None => tokio::task::spawn_blocking(Binaries::locate)
                .await
                .map_err(|e| Error::Binaries(format!("locating the binaries panicked: {e}")))??,
        };
        let started = Instant::now();
        let version = {
            let binaries = binaries.clone();
            tokio::task::spawn_blocking(move || binaries.kubernetes_version())
                .await
                .map_err(|e| {
                    Error::Binaries(format!("reading the binaries' version panicked: {e}"))
                })??
        };
        let mut attempt = 1;
        loop {
            match self.start_once(&binaries, version, started).await {
                Err(Error::Exited {
                    component,
                    log_tail,
                    ..
                }) if attempt < PORT_ATTEMPTS && log_tail.contains("address already in use") => {
                    tracing::warn!(
                        component,
                        attempt,
                        "port taken meanwhile; retrying with new ports"
                    );
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    async fn start_once(
        &self,
        binaries: &Binaries,
        version: KubernetesVersion,
        started: Instant,
    ) -> Result<ControlPlane> {
        let run_dir = match &self.run_dir {
            Some(dir) => RunDir::open(dir)?,
            None => {
                for stale in run_dir::clean_stale(&self.base_dir)? {
                    tracing::info!(path = %stale.path.display(), killed = ?stale.killed, "cleaned a stale run directory");
                }
                RunDir::create_in(&self.base_dir, "control-plane-")?
            }
        };
        let prepared = prepare(
            run_dir.path(),
            &self.cluster_name,
            version,
            self.advertise_address,
        )?;
        let mut processes = Vec::new();
        let mut boot = BootTimings {
            prepare: started.elapsed(),
            ..BootTimings::default()
        };
        let booted = boot_components(
            self,
            binaries,
            &run_dir,
            &prepared,
            &mut processes,
            &mut boot,
        )
        .await;
        let client = match booted {
            Ok(()) => client_from_kubeconfig(&prepared.admin_kubeconfig).await,
            Err(e) => Err(e),
        };
        match client {
            Ok(client) => {
                boot.total = started.elapsed();
                tracing::info!(api = %prepared.api_url, run_dir = %run_dir.path().display(), timings = ?boot, "control plane ready");
                Ok(ControlPlane {
                    run_dir: Some(run_dir),
                    processes,
                    cluster_name: self.cluster_name.clone(),
                    api_url: prepared.api_url,
                    admin_kubeconfig: prepared.admin_kubeconfig,
                    ca_file: prepared.layout.ca_cert,
                    ca: prepared.ca,
                    ports: prepared.layout.ports,
                    client,
                    keep_run_dir: self.keep_run_dir,
                    stop_grace: self.stop_grace,
                    boot,
                })
            }
            Err(e) => {
                // Stop what was started; keep the directory only if asked (it holds the logs).
                let _ = stop_all(&mut processes, self.stop_grace).await;
                if !self.keep_run_dir {
                    let _ = run_dir.remove();
                }
                Err(e)
            }
        }
    }
}

/// How long each phase of a start took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BootTimings {
    /// Version check, run directory, keys, certificates and kubeconfigs (binaries already
    /// located).
    pub prepare: Duration,
    /// etcd start to healthy.
    pub etcd: Duration,
    /// kube-apiserver start to `/readyz` ok.
    pub apiserver: Duration,
    /// kube-controller-manager and kube-scheduler start to both `/healthz` ok (in parallel).
    pub controllers: Duration,
    /// The whole start.
    pub total: Duration,
}

/// A running control plane (see the module docs).
pub struct ControlPlane {
    run_dir: Option<RunDir>,
    processes: Vec<ComponentProcess>,
    cluster_name: String,
    api_url: String,
    admin_kubeconfig: PathBuf,
    ca_file: PathBuf,
    ca: ClusterCa,
    ports: Ports,
    client: kube::Client,
    keep_run_dir: bool,
    stop_grace: Duration,
    boot: BootTimings,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("api_url", &self.api_url)
            .field("run_dir", &self.run_dir())
            .field("pids", &self.pids())
            .finish_non_exhaustive()
    }
}

impl ControlPlane {
    /// A builder with default options.
    pub fn builder() -> ControlPlaneBuilder {
        ControlPlaneBuilder::default()
    }

    /// A client authenticated as the cluster admin (`system:masters`).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The admin kubeconfig: `kubectl --kubeconfig <this> get ns` works.
    pub fn kubeconfig(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// The apiserver's URL, `https://127.0.0.1:<port>`.
    pub fn api_url(&self) -> &str {
        &self.api_url
    }

    /// The cluster CA certificate file (trusted by the kubeconfigs, published in-cluster as
    /// `kube-root-ca.crt`).
    pub fn ca_file(&self) -> &Path {
        &self.ca_file
    }

    /// The cluster CA, to issue more certificates (e.g. node agents' client certificates).
    pub fn ca(&self) -> &ClusterCa {
        &self.ca
    }

    /// The ports the components listen on.
    pub fn ports(&self) -> Ports {
        self.ports
    }

    /// The run directory.
    pub fn run_dir(&self) -> &Path {
        self.run_dir
            .as_ref()
            .map(RunDir::path)
            .unwrap_or(Path::new(""))
    }

    /// The log file of a component (`etcd`, `kube-apiserver`, `kube-controller-manager`,
    /// `kube-scheduler`).
    pub fn log_file(&self, component: &str) -> PathBuf {
        self.run_dir().join("logs").join(format!("{component}.log"))
    }

    /// The components' (name, pid), in start order.
    pub fn pids(&self) -> Vec<(&'static str, u32)> {
        self.processes.iter().map(|p| (p.name(), p.pid())).collect()
    }

    /// How long the start took, by phase.
    pub fn boot_timings(&self) -> BootTimings {
        self.boot
    }

    /// Writes a kubeconfig at `path` for a client certificate the CA issues to `identity`.
    pub fn write_kubeconfig(&self, path: &Path, identity: &ClientIdentity) -> Result<()> {
        let dir = path.parent().unwrap_or(Path::new("."));
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("client");
        let files = pki::write_pair(
            dir,
            &format!("{stem}-client"),
            &self.ca.client_cert(identity)?,
        )?;
        kubeconfig::write(
            path,
            &self.cluster_name,
            &self.api_url,
            &self.ca_file,
            &identity.user,
            &files,
        )
    }

    /// Stops the components (in reverse start order: SIGTERM, then SIGKILL after the grace
    /// period) and removes the run directory unless it is to be kept.
    pub async fn shutdown(mut self) -> Result<()> {
        stop_all(&mut self.processes, self.stop_grace).await?;
        if let Some(dir) = self.run_dir.take() {
            if self.keep_run_dir {
                drop(dir);
            } else {
                dir.remove()?;
            }
        }
        Ok(())
    }
}

/// A control plane dropped without [`ControlPlane::shutdown`] (a test that ends early or
/// forgets it): its components are killed and its run directory removed here, rather than
/// left for the next start's stale-directory sweep, which may never come.
impl Drop for ControlPlane {
    fn drop(&mut self) {
        let Some(dir) = self.run_dir.take() else {
            return; // shut down already
        };
        let mut all_ended = true;
        for process in &mut self.processes {
            all_ended &= process.kill_and_reap(DROP_KILL_LIMIT);
        }
        if self.keep_run_dir || !all_ended {
            // A component still alive might write into it; the next start's sweep cleans it.
            return;
        }
        if let Err(error) = dir.remove() {
            tracing::warn!(%error, "removing a dropped control plane's run directory");
        }
    }
}

/// How long dropping a control plane waits for each SIGKILLed component to end.
const DROP_KILL_LIMIT: Duration = Duration::from_secs(2);

/// Writes a certificate and key as `<dir>/<name>.crt` and `<dir>/<name>.key`, private to
/// the owner (e.g. a node agent's kubelet serving certificate from [`ControlPlane::ca`]).
pub fn write_serving_pair(dir: &Path, name: &str, pair: &CertifiedKeyPem) -> Result<CertFiles> {
    pki::write_pair(dir, name, pair)
}

/// A kube client for the kubeconfig at `path` made for streams (exec, attach, port-forward):
/// each upgrade opens a connection of its own, and this client's connections send at once
/// (`TCP_NODELAY`; kube's default client lets Nagle's algorithm hold the request written
/// right after the TLS handshake until the server acknowledges, some 40 ms) and have no read
/// timeout (a stream may be quiet for long). Kubeconfigs whose users authenticate otherwise
/// than with a client certificate get kube's default client.
pub async fn streaming_client_from_kubeconfig(path: &Path) -> Result<kube::Client> {
    use kube::client::ConfigExt;
    use tower_layer::Layer;
    let err = client_error(path);
    let config = config_from_kubeconfig(path).await?;
    if config.auth_layer().map_err(|e| err(Box::new(e)))?.is_some() || config.proxy_url.is_some() {
        return kube::Client::try_from(config).map_err(|e| err(Box::new(e)));
    }
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let https = config
        .rustls_https_connector_with_connector(http)
        .map_err(|e| err(Box::new(e)))?;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build::<_, kube::client::Body>(https);
    let service = config.base_uri_layer().layer(client);
    Ok(kube::Client::new(service, config.default_namespace))
}

/// A kube client for the kubeconfig at `path`.
pub async fn client_from_kubeconfig(path: &Path) -> Result<kube::Client> {
    let config = config_from_kubeconfig(path).await?;
    kube::Client::try_from(config).map_err(|e| client_error(path)(Box::new(e)))
}

/// kube's configuration from the kubeconfig at `path` (its current context).
async fn config_from_kubeconfig(path: &Path) -> Result<kube::Config> {
    let err = client_error(path);
    let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|e| err(Box::new(e)))?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| err(Box::new(e)))
}

/// [`Error::Client`] for a client made from the kubeconfig at `path`.
fn client_error(
    path: &Path,
) -> impl Fn(Box<dyn std::error::Error + Send + Sync>) -> Error + use<'_> {
    move |source| Error::Client {
        target: path.display().to_string(),
        source,
    }
}
