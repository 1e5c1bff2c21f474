//! Stateful fakes of the OpenStack APIs the Manila CSI driver and operator talk to:
//! **Keystone v3** (password and application-credential tokens, catalog) and **Manila v2**
//! (microversions, shares backed by real directories, export locations, access rules,
//! share types, snapshots, zones, share networks, quotas, user messages), and — when the
//! seed asks for block storage — **Cinder v3** (volumes backed by sparse files, types,
//! snapshots) and **Nova v2.1** (servers, volume attachments as real loop devices), served over real
//! HTTP by [`wiremock`], with fault injection, a request journal, a leftover report and a
//! control API under `/_fake/` for processes that cannot hold the in-process handle.
//!
//! ```no_run
//! use fakes::{CloudConfig, FakeCloud, FaultAction, FaultRule, Operation};
//!
//! # async fn demo() -> fakes::Result<()> {
//! let cloud = FakeCloud::start(CloudConfig::default()).await?;
//! println!("auth URL {}", cloud.auth_url());
//! std::fs::write("/tmp/clouds.yaml", cloud.clouds_yaml("fake")).ok();
//! cloud.add_fault(FaultRule::new(
//!     Operation::ShareCreate,
//!     FaultAction::Error { detail_id: "009".into(), message: None },
//! ))?;
//! // ... run the driver against cloud.auth_url() ...
//! assert!(cloud.leftovers().is_empty());
//! # Ok(()) }
//! ```

mod backend;
mod catalog;
pub mod cinder;
pub mod config;
mod control;
mod credentials;
mod error;
pub mod faults;
mod journal;
mod keystone;
mod lifecycle;
mod manila;
pub mod metadata;
mod microversion;
mod nova;
mod outage;
mod release;
mod reply;
mod request;
mod router;
mod state;
pub mod tls;

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use backend::CopyPause;
pub use cinder::{BlockLeftover, BlockLeftovers, LoopLeftover, VolumeView};
pub use config::{
    CinderConfig, CinderDelays, CloudConfig, Delays, NovaConfig, Secret, ServerSeed, ShareTypeSeed,
    VolumeTypeSeed,
};
pub use credentials::SecretKind;
pub use error::{Error, Result};
pub use faults::{ActiveFault, FaultAction, FaultRule, Operation, Times};
pub use journal::{JournalEntry, Leftover, Leftovers, Service};
pub use metadata::NodeMetadata;
pub use microversion::Microversion;
pub use release::{MaxMicroversion, OpenStackRelease, UnknownRelease};

use backend::{Backend, TemporaryRoot};
use router::lock;
use state::CloudState;

/// Path prefixes of the three APIs on the fake's single port.
pub mod paths {
    pub use crate::catalog::CINDER_PREFIX as CINDER;
    pub use crate::catalog::KEYSTONE_PREFIX as KEYSTONE;
    pub use crate::catalog::MANILA_PREFIX as MANILA;
    pub use crate::catalog::NOVA_PREFIX as NOVA;
    pub use crate::control::PREFIX as CONTROL;
}

/// How to start a [`FakeCloud`]: where to listen and where the share directories live.
#[derive(Debug)]
pub struct FakeCloudBuilder {
    config: CloudConfig,
    listen: SocketAddr,
    listener: Option<TcpListener>,
    backend_root: Option<PathBuf>,
    tls: bool,
}

impl FakeCloudBuilder {
    /// Serves HTTPS with a CA generated for this cloud (default false): every URL it hands
    /// out is `https://`, [`FakeCloud::ca_pem`] and [`FakeCloud::ca_file`] give the CA, and
    /// the clouds.yaml and flat secret it makes carry it. Needs a Tokio runtime that
    /// outlives the cloud (the TLS front runs on it).
    pub fn tls(mut self, tls: bool) -> Self {
        self.tls = tls;
        self
    }

    /// Listens on `addr` (default `127.0.0.1:0`, an ephemeral port).
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// Serves on `listener`, bound beforehand by the caller (instead of binding
    /// [`Self::listen`]'s address): an address handed out before the cloud starts, e.g. to
    /// the nodes of a cluster, stays this cloud's, with no window in which another process
    /// could take its port.
    pub fn listener(mut self, listener: TcpListener) -> Self {
        self.listener = Some(listener);
        self
    }

    /// Keeps share directories under `root` (default: a temporary directory removed when
    /// the cloud is dropped).
    pub fn backend_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.backend_root = Some(root.into());
        self
    }

    /// Validates the seed, binds, and serves.
    pub async fn start(self) -> Result<FakeCloud> {
        self.config.validate()?;
        let listener = match self.listener {
            Some(listener) => listener,
            None => TcpListener::bind(self.listen).map_err(|source| Error::Bind {
                addr: self.listen.to_string(),
                source,
            })?,
        };
        let addr = listener.local_addr().map_err(|source| Error::Bind {
            addr: self.listen.to_string(),
            source,
        })?;
        let (root, temporary_root) = match self.backend_root {
            Some(root) => (root, None),
            None => {
                let temporary = TemporaryRoot::new()?;
                (temporary.path().to_path_buf(), Some(temporary))
            }
        };
        let backend = Backend::new(&root)?;
        let host = if addr.ip().is_unspecified() {
            "127.0.0.1".to_owned()
        } else if addr.is_ipv6() {
            format!("[{}]", addr.ip())
        } else {
            addr.ip().to_string()
        };
        let scheme = if self.tls { "https" } else { "http" };
        let base_url = format!("{scheme}://{host}:{}", addr.port());
        let loops = cinder::disk::LoopRegistry::default();
        let state = Arc::new(Mutex::new(CloudState::new(
            self.config,
            base_url.clone(),
            backend,
            loops.clone(),
        )));
        // With TLS, wiremock serves plain HTTP on a private loopback port behind the front.
        let (server_listener, tls) = if self.tls {
            let private =
                TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).map_err(|source| {
                    Error::Bind {
                        addr: "127.0.0.1:0".into(),
                        source,
                    }
                })?;
            let backend_addr = private.local_addr().map_err(|source| Error::Bind {
                addr: "127.0.0.1:0".into(),
                source,
            })?;
            let certificates = tls::CloudCertificates::generate(addr.ip())?;
            let front = tls::TlsFront::spawn(listener, backend_addr, &certificates)?;
            let dir = tempfile::Builder::new()
                .prefix("fake-ca-")
                .tempdir()
                .map_err(|source| Error::Backend {
                    path: std::env::temp_dir(),
                    source,
                })?;
            let ca_file = dir.path().join("ca.pem");
            std::fs::write(&ca_file, &certificates.ca_pem).map_err(|source| Error::Backend {
                path: ca_file.clone(),
                source,
            })?;
            lock(&state).ca = Some((certificates.ca_pem.clone(), ca_file.clone()));
            let tls = Tls {
                ca_pem: certificates.ca_pem,
                ca_file,
                _dir: dir,
                _front: front,
            };
            (private, Some(tls))
        } else {
            (listener, None)
        };
        let server = outage::Server::start(server_listener, Arc::clone(&state)).await?;
        Ok(FakeCloud {
            _loops: cinder::disk::LoopGuard(loops),
            tls,
            server,
            _temporary_root: temporary_root,
            state,
            base_url,
            addr,
        })
    }
}

/// The TLS side of a cloud: its CA (inline and as a file) and the front serving HTTPS.
struct Tls {
    ca_pem: String,
    ca_file: PathBuf,
    // Dropped with the cloud: the front stops accepting, the CA file goes.
    _front: tls::TlsFront,
    _dir: tempfile::TempDir,
}

/// A running fake cloud. Dropping it stops the server and removes a temporary backend
/// directory (one the caller chose with [`FakeCloudBuilder::backend_root`] stays).
pub struct FakeCloud {
    // Dropped first: no more TLS connections, and the CA file goes.
    tls: Option<Tls>,
    // Then: asks the server to shut down.
    server: outage::Server,
    // Then: every loop device the cloud made is detached and its link removed, before the
    // volume files go with the backend.
    _loops: cinder::disk::LoopGuard,
    // Dropped next, here rather than with the state, which the server's thread may hold
    // until after this process has exited.
    _temporary_root: Option<TemporaryRoot>,
    state: Arc<Mutex<CloudState>>,
    base_url: String,
    addr: SocketAddr,
}

impl std::fmt::Debug for FakeCloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeCloud")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl FakeCloud {
    /// A builder with `config`, listening on an ephemeral loopback port.
    pub fn builder(config: CloudConfig) -> FakeCloudBuilder {
        FakeCloudBuilder {
            config,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            listener: None,
            backend_root: None,
            tls: false,
        }
    }

    /// Starts a cloud with `config` on an ephemeral loopback port and a temporary backend.
    pub async fn start(config: CloudConfig) -> Result<Self> {
        Self::builder(config).start().await
    }

    fn state(&self) -> std::sync::MutexGuard<'_, CloudState> {
        lock(&self.state)
    }

    /// The bound address.
    pub fn address(&self) -> SocketAddr {
        self.addr
    }
    /// The CA that signed the cloud's certificate (PEM), when it serves HTTPS.
    pub fn ca_pem(&self) -> Option<String> {
        self.tls.as_ref().map(|t| t.ca_pem.clone())
    }
    /// A file holding [`FakeCloud::ca_pem`], removed with the cloud.
    pub fn ca_file(&self) -> Option<PathBuf> {
        self.tls.as_ref().map(|t| t.ca_file.clone())
    }
    /// `http://host:port` (`https://` with TLS).
    pub fn base_url(&self) -> &str {
        &self.base_url
    }
    /// Keystone's URL as clients are given it (`…/identity/v3`).
    pub fn auth_url(&self) -> String {
        catalog::auth_url(&self.base_url)
    }
    /// Manila's catalog URL (`…/share/v2`).
    pub fn manila_url(&self) -> String {
        catalog::manila_url(&self.base_url)
    }
    /// The control API's root (`…/_fake`).
    pub fn control_url(&self) -> String {
        format!("{}{}", self.base_url, paths::CONTROL)
    }
    /// The URL of `node`'s metadata document (`meta_data.json`, as Nova's metadata service
    /// serves it at `http://169.254.169.254/openstack/latest/meta_data.json`); the node named
    /// [`metadata::DEFAULT_NODE`] is also served at that path itself.
    pub fn metadata_url(&self, node: &str) -> String {
        format!(
            "{}{}/{node}{}",
            self.base_url,
            metadata::NODES_PREFIX,
            metadata::DOCUMENT
        )
    }
    /// Sets `node`'s metadata document (replacing it); an empty id or zone is refused.
    pub fn set_node_metadata(&self, node: &str, metadata: NodeMetadata) -> Result<()> {
        metadata.validate().map_err(Error::Control)?;
        self.state()
            .node_metadata
            .insert(node.to_string(), metadata);
        Ok(())
    }
    /// Removes `node`'s metadata document (its URL then answers 404); whether it had one.
    pub fn remove_node_metadata(&self, node: &str) -> bool {
        self.state().node_metadata.remove(node).is_some()
    }
    /// The directory holding `shares/<id>` and `snapshots/<id>`.
    pub fn backend_root(&self) -> PathBuf {
        self.state().manila.backend.root().to_path_buf()
    }
    /// Pauses the backend's data copies (snapshot creation, share creation from a snapshot)
    /// until [`CopyPause::release`]; the copies run outside the state lock, so the API
    /// answers other requests meanwhile. Copies started after the release pass through.
    pub fn pause_backend_copies(&self) -> CopyPause {
        let pause = CopyPause::default();
        self.state().copy_pause = Some(pause.clone());
        pause
    }

    /// The directory backing share `id` (whether or not the share exists).
    pub fn share_dir(&self, id: &str) -> PathBuf {
        self.state().manila.backend.share_dir(id)
    }

    /// The OpenStack release the cloud emulates (the seed's `release`).
    pub fn release(&self) -> OpenStackRelease {
        self.state().config.release
    }

    /// The seed account (user, project, credentials).
    pub fn account(&self) -> config::Account {
        self.state().config.account.clone()
    }

    /// A `clouds.yaml` with one cloud named `cloud` (password auth).
    pub fn clouds_yaml(&self, cloud: &str) -> String {
        let s = self.state();
        let ca_file = self.tls.as_ref().map(|t| t.ca_file.as_path());
        credentials::clouds_yaml(
            &s.config.account,
            &s.config.region,
            &self.base_url,
            cloud,
            ca_file,
        )
    }
    /// The Cinder CSI driver's `cloud.conf` (INI, password auth, metadata service for the
    /// node's id and zone, the fake's CA file with TLS), with `block_storage` as the
    /// `[BlockStorage]` keys (e.g. `("node-volume-attach-limit", "2".into())`). Holds the
    /// password: never log it.
    pub fn cinder_cloud_conf(&self, block_storage: &[(&str, String)]) -> String {
        let s = self.state();
        let ca_file = self.tls.as_ref().map(|t| t.ca_file.as_path());
        credentials::cinder_cloud_conf(
            &s.config.account,
            &s.config.region,
            &self.base_url,
            ca_file,
            block_storage,
        )
    }

    /// The flat `os-*` secret of the Manila CSI driver.
    pub fn secret(&self, kind: SecretKind) -> BTreeMap<String, String> {
        let s = self.state();
        let mut secret =
            credentials::secret(&s.config.account, &s.config.region, &self.base_url, kind);
        if let Some(tls) = &self.tls {
            secret.insert("os-certAuthority".into(), tls.ca_pem.clone());
        }
        secret
    }

    /// The ids of the Keystone tokens issued so far (the newest 100 000; revoked, expired
    /// and reset ones too), oldest first: secrets that must never appear in a log.
    pub fn issued_tokens(&self) -> Vec<String> {
        self.state().keystone.issued.iter().cloned().collect()
    }

    /// The cloud requests so far, oldest first (control requests excluded; the newest
    /// 100 000 are kept).
    pub fn journal(&self) -> Vec<JournalEntry> {
        self.state().journal.entries().cloned().collect()
    }
    /// Forgets the journal.
    pub fn clear_journal(&self) {
        self.state().journal.clear();
    }
    /// Resources still present.
    pub fn leftovers(&self) -> Leftovers {
        self.state().leftovers()
    }

    /// Adds a fault rule; its id.
    pub fn add_fault(&self, rule: FaultRule) -> Result<u64> {
        rule.validate().map_err(Error::Control)?;
        Ok(self.state().faults.add(rule))
    }
    /// Removes a fault rule; false if there was none with this id.
    pub fn remove_fault(&self, id: u64) -> bool {
        self.state().faults.remove(id)
    }
    /// The fault rules still active.
    pub fn faults(&self) -> Vec<ActiveFault> {
        self.state().faults.list()
    }
    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        self.state().faults.clear();
    }

    /// Adds a share type; its id.
    pub fn add_share_type(&self, seed: &ShareTypeSeed) -> Result<String> {
        self.state().manila.add_share_type(seed)
    }
    /// Removes a share type by name or id.
    pub fn remove_share_type(&self, name_or_id: &str) -> Result<()> {
        self.state().manila.remove_share_type(name_or_id)
    }
    /// Sets or clears the default share type.
    pub fn set_default_share_type(&self, name: Option<&str>) -> Result<()> {
        self.state().manila.set_default_share_type(name)
    }
    /// Changes the transition delays (affects operations started afterwards). Unlike the
    /// control API this does not check [`config::MAX_DELAY_MS`]: a transition due beyond
    /// what the clock can represent never comes (as if stuck).
    pub fn set_delays(&self, delays: Delays) {
        self.state().config.manila.delays = delays;
    }
    /// Puts Manila in or out of the catalog (and makes its API answer or not).
    pub fn set_manila_present(&self, present: bool) {
        self.state().config.manila.present = present;
    }
    /// Makes `GET /types` answer 403, or not.
    pub fn set_types_forbidden(&self, forbidden: bool) {
        self.state().config.manila.types_forbidden = forbidden;
    }
    /// Lifetime of tokens issued from now on.
    pub fn set_token_lifetime(&self, seconds: u64) -> Result<()> {
        config::check_token_lifetime("token lifetime", seconds).map_err(Error::Control)?;
        self.state().config.token_lifetime_secs = seconds;
        Ok(())
    }
    /// Expires every token issued so far (clients must re-authenticate).
    pub fn expire_tokens(&self) {
        self.state().keystone.expire_all();
    }
    /// Takes the cloud off the network (`false`) or back (`true`): while it is off nothing
    /// listens on its address (clients get connection refused; with TLS, connections closed
    /// before an answer), as in a network outage; its state stays and it comes back on the
    /// same address. Returns once the switch is done. The control API is off with it.
    pub async fn set_reachable(&self, reachable: bool) -> Result<()> {
        if reachable {
            self.server.bring_online().await
        } else {
            self.server.take_offline().await
        }
    }
    /// Whether the cloud is listening (see [`FakeCloud::set_reachable`]).
    pub fn is_reachable(&self) -> bool {
        self.server.is_reachable()
    }
    /// Cinder's catalog URL (`…/volume/v3/<project_id>`).
    pub fn cinder_url(&self) -> String {
        catalog::cinder_url(&self.base_url, &self.state().config.account.project_id)
    }
    /// Nova's catalog URL (`…/compute/v2.1`).
    pub fn nova_url(&self) -> String {
        catalog::nova_url(&self.base_url)
    }
    /// Adds a Nova server (a node): its disk directory (default
    /// `<backend>/servers/<name>/by-id`) receives the `virtio-…` links of the volumes
    /// attached to it, and its node gets the metadata document naming it (`uuid` = the
    /// server id). Returns the server id.
    pub fn add_server(&self, seed: &ServerSeed) -> Result<String> {
        let mut state = self.state();
        let state = &mut *state;
        state.block.add_server(seed, &mut state.node_metadata)
    }
    /// The disk directory of a server (by id or name).
    pub fn server_disk_dir(&self, id_or_name: &str) -> Option<PathBuf> {
        self.state()
            .block
            .server(id_or_name)
            .map(|s| s.disk_dir.clone())
    }
    /// The sparse file backing volume `id` (whether or not the volume exists).
    pub fn volume_file(&self, id: &str) -> PathBuf {
        cinder::disk::volume_file(self.state().block.root(), id)
    }
    /// Changes Cinder's transition delays (operations started afterwards).
    pub fn set_cinder_delays(&self, delays: CinderDelays) {
        self.state().config.cinder.delays = delays;
    }
    /// Puts Cinder (and Nova) in or out of the catalog.
    pub fn set_cinder_present(&self, present: bool) {
        self.state().config.cinder.present = present;
    }
    /// Volume `id` as the cloud sees it (size, zone, status, servers it is attached to).
    pub fn block_volume(&self, id: &str) -> Option<VolumeView> {
        self.state().block.volume_view(id)
    }
    /// Block-storage resources still present: volumes, volume snapshots, attachments and
    /// the loop devices on the host.
    pub fn block_leftovers(&self) -> BlockLeftovers {
        self.state().block.leftovers()
    }
    /// Back to the seed: no resources, tokens, messages, faults or journal.
    pub fn reset(&self) -> Result<()> {
        self.state().reset()
    }
}

/// Reads a seed file (YAML) — a convenience over [`CloudConfig::from_yaml_file`].
pub fn load_seed(path: &Path) -> Result<CloudConfig> {
    CloudConfig::from_yaml_file(path)
}
