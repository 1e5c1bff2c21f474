//! CSI drivers for tests: the workspace's real plugins and registrar as processes (with
//! their sockets and logs), and a configurable Identity service for in-test drivers.
//!
//! Binaries come from [`workspace_binaries`] (built when missing or stale). Every process is
//! killed when its handle is dropped.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use csi_proto::v1::controller_client::ControllerClient;
use csi_proto::v1::identity_server::{Identity, IdentityServer};
use csi_proto::v1::plugin_capability::{self, service};
use csi_proto::v1::volume_capability::{AccessMode, AccessType, MountVolume, access_mode};
use csi_proto::v1::{
    CapacityRange, CreateVolumeRequest, GetPluginCapabilitiesRequest,
    GetPluginCapabilitiesResponse, GetPluginInfoRequest, GetPluginInfoResponse, PluginCapability,
    ProbeRequest, ProbeResponse, VolumeCapability,
};
use csi_proto::{Endpoint, Listener};
use tokio::process::{Child, Command};
use tonic::transport::Channel;
use tonic::{Request, Response, Status};

/// The Manila driver's CSI name.
pub const MANILA_DRIVER: &str = "manila.csi.openstack.org";

/// The path of the workspace binary `name` of package `package`, built if missing or stale.
pub fn binary(package: &str, name: &str) -> PathBuf {
    workspace_binaries::binary(package, name)
        .unwrap_or_else(|e| panic!("building {package}'s binary {name}: {e}"))
}

/// The directory holding the binaries of `packages` (one binary each, named after the
/// package), all built with one cargo call if missing or stale.
pub fn binary_dir(packages: &[&str]) -> PathBuf {
    let wanted: Vec<(&str, &str)> = packages.iter().map(|p| (*p, *p)).collect();
    let paths = workspace_binaries::binaries(&wanted)
        .unwrap_or_else(|e| panic!("building {packages:?}: {e}"));
    paths[0]
        .parent()
        .expect("a binary has a parent directory")
        .to_path_buf()
}

/// A process started by a test, with its stderr in a log file; killed on drop.
#[derive(Debug)]
pub struct TestProcess {
    child: Child,
    log: PathBuf,
}

impl TestProcess {
    /// Starts `command` with stdin and stdout closed and stderr written to `log`.
    pub fn spawn(mut command: Command, log: &Path) -> TestProcess {
        let file = std::fs::File::create(log)
            .unwrap_or_else(|e| panic!("creating log file {}: {e}", log.display()));
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {command:?}: {e}"));
        TestProcess {
            child,
            log: log.to_path_buf(),
        }
    }

    /// What the process wrote to stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The process id (`None` once it was reaped).
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// The child process, e.g. to signal or wait for it.
    pub fn child(&mut self) -> &mut Child {
        &mut self.child
    }

    /// How many gRPC calls of `method` (e.g. `/csi.v1.Node/NodePublishVolume`) the process
    /// logged as successful (the workspace's drivers log `gRPC call OK` per call).
    pub fn successful_calls(&self, method: &str) -> usize {
        self.log()
            .lines()
            .filter(|l| l.contains("gRPC call OK") && l.contains(method))
            .count()
    }
}

impl Drop for TestProcess {
    /// Kills the process and waits (briefly) until it is gone, so that the directory it
    /// wrote in can be removed after it without it writing there again.
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
    }
}

/// The real `manila-csi-plugin` as a controller (no node service, NFS only) on a unix socket.
#[derive(Debug)]
pub struct ManilaController {
    process: TestProcess,
    /// The driver's socket.
    pub socket: PathBuf,
}

impl ManilaController {
    /// Starts the driver named `driver_name` with its socket and log in `dir`, with `extra`
    /// flags (e.g. `--with-topology`).
    pub fn start(dir: &Path, driver_name: &str, extra: &[&str]) -> ManilaController {
        let socket = dir.join(format!("{driver_name}.sock"));
        let mut command = Command::new(binary("manila-csi-plugin", "manila-csi-plugin"));
        command
            .arg(format!("--endpoint=unix://{}", socket.display()))
            .arg(format!("--drivername={driver_name}"))
            .args([
                "--share-protocol-selector=NFS",
                "--provide-node-service=false",
            ])
            .args(extra)
            .env("RUST_LOG", "info");
        let process = TestProcess::spawn(command, &dir.join(format!("{driver_name}.log")));
        ManilaController { process, socket }
    }

    /// What the driver logged so far.
    pub fn log(&self) -> String {
        self.process.log()
    }

    /// A controller client (connects on first use).
    pub fn controller(&self) -> ControllerClient<Channel> {
        ControllerClient::new(lazy_channel(&self.socket))
    }

    /// Kills the driver and waits until it has exited.
    pub async fn kill(&mut self) {
        self.process
            .child()
            .kill()
            .await
            .unwrap_or_else(|e| panic!("killing the Manila driver: {e}"));
    }
}

/// A CreateVolume request for the volume `name` of `size` bytes: one multi-node
/// multi-writer mount capability, share type `default`, and `secrets` (e.g.
/// [`crate::cloud::csi_secrets`]).
pub fn create_volume_request(
    name: &str,
    size: i64,
    secrets: HashMap<String, String>,
) -> CreateVolumeRequest {
    CreateVolumeRequest {
        name: name.into(),
        capacity_range: Some(CapacityRange {
            required_bytes: size,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![VolumeCapability {
            access_type: Some(AccessType::Mount(MountVolume::default())),
            access_mode: Some(AccessMode {
                mode: access_mode::Mode::MultiNodeMultiWriter as i32,
            }),
        }],
        parameters: HashMap::from([("type".to_string(), "default".to_string())]),
        secrets,
        ..Default::default()
    }
}

/// A channel to the CSI endpoint at unix socket `socket`, connected on first use.
pub fn lazy_channel(socket: &Path) -> Channel {
    let endpoint = Endpoint::Unix(socket.to_path_buf());
    csi_proto::connect_lazy(&endpoint)
        .unwrap_or_else(|e| panic!("a channel to {}: {e}", socket.display()))
}

/// The real `nfs-csi-plugin` (local mounter: bind mounts of export directories below
/// `export_root`) for one simulated node, in a mount namespace of its own where the node's
/// `run_dir` is `/var/lib/kubelet` (the paths kubelet gives in requests). The run dir's
/// `pods` and `plugins` directories must be shared mount points so the plugin's mounts show
/// on the host, as a node plugin pod's Bidirectional mounts would.
#[derive(Debug)]
pub struct NfsNodePlugin {
    /// The plugin process; its log has one line per gRPC call.
    pub process: TestProcess,
    /// The plugin's socket, `<run_dir>/plugins/<driver>/csi.sock`.
    pub socket: PathBuf,
}

impl NfsNodePlugin {
    /// Starts the plugin as `driver` on `node`, logging to `log`.
    pub fn start(
        run_dir: &Path,
        node: &str,
        driver: &str,
        export_root: &Path,
        log: &Path,
    ) -> NfsNodePlugin {
        let socket = run_dir.join("plugins").join(driver).join("csi.sock");
        let socket_dir = socket.parent().expect("the socket has a directory");
        std::fs::create_dir_all(socket_dir)
            .unwrap_or_else(|e| panic!("creating {}: {e}", socket_dir.display()));
        // The namespace's root mount is made private first so that nothing mounted at
        // /var/lib/kubelet shows outside; the rbind copies of the shared pods/plugins mounts
        // stay peers of the host's.
        let script = r#"set -e
mkdir -p /var/lib/kubelet
mount --make-private "$(stat -c %m /var/lib/kubelet)"
mount --rbind "$RUN_DIR" /var/lib/kubelet
exec "$PLUGIN" --endpoint "unix://$SOCKET" --nodeid "$NODE_NAME" --drivername "$DRIVER" --mounter local --local-export-root "$EXPORTS"
"#;
        let mut command = Command::new("unshare");
        command
            .args(["--mount", "--propagation", "unchanged", "sh", "-c", script])
            .env("RUN_DIR", run_dir)
            .env("PLUGIN", binary("nfs-csi-plugin", "nfs-csi-plugin"))
            .env("SOCKET", &socket)
            .env("NODE_NAME", node)
            .env("DRIVER", driver)
            .env("EXPORTS", export_root)
            .env("RUST_LOG", "info");
        NfsNodePlugin {
            process: TestProcess::spawn(command, log),
            socket,
        }
    }
}

/// The real `node-driver-registrar` registering `driver` (whose socket is `driver_socket`)
/// with the node agent whose run directory is `run_dir`, logging to `log`.
pub fn start_registrar(
    driver_socket: &Path,
    run_dir: &Path,
    driver: &str,
    log: &Path,
) -> TestProcess {
    let mut command = Command::new(binary("node-driver-registrar", "node-driver-registrar"));
    command
        .arg(format!("--csi-address={}", driver_socket.display()))
        .arg(format!(
            "--kubelet-registration-path=/var/lib/kubelet/plugins/{driver}/csi.sock"
        ))
        .arg(format!(
            "--plugin-registration-path={}",
            run_dir.join("plugins_registry").display()
        ));
    TestProcess::spawn(command, log)
}

/// A CSI Identity service for in-test drivers: plugin name, vendor version `0.0.1`, the
/// CONTROLLER_SERVICE capability when `controller` is set, and Probe always ready.
#[derive(Debug, Clone)]
pub struct TestIdentity {
    /// The plugin name GetPluginInfo returns.
    pub name: String,
    /// Whether GetPluginCapabilities advertises the controller service.
    pub controller: bool,
}

impl TestIdentity {
    /// A node-only driver named `name`.
    pub fn node_only(name: &str) -> TestIdentity {
        TestIdentity {
            name: name.into(),
            controller: false,
        }
    }

    /// A driver named `name` with a controller service.
    pub fn with_controller(name: &str) -> TestIdentity {
        TestIdentity {
            name: name.into(),
            controller: true,
        }
    }

    /// This identity as a gRPC service.
    pub fn service(self) -> IdentityServer<TestIdentity> {
        IdentityServer::new(self)
    }
}

#[tonic::async_trait]
impl Identity for TestIdentity {
    async fn get_plugin_info(
        &self,
        _: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        Ok(Response::new(GetPluginInfoResponse {
            name: self.name.clone(),
            vendor_version: "0.0.1".into(),
            manifest: Default::default(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        let capabilities = self
            .controller
            .then(|| PluginCapability {
                r#type: Some(plugin_capability::Type::Service(
                    plugin_capability::Service {
                        r#type: service::Type::ControllerService as i32,
                    },
                )),
            })
            .into_iter()
            .collect();
        Ok(Response::new(GetPluginCapabilitiesResponse {
            capabilities,
        }))
    }

    async fn probe(&self, _: Request<ProbeRequest>) -> Result<Response<ProbeResponse>, Status> {
        Ok(Response::new(ProbeResponse { ready: Some(true) }))
    }
}

/// Serves `router` on the unix socket `socket` (its directory is created) until the test's
/// runtime ends.
pub async fn serve_on_socket(router: tonic::transport::server::Router, socket: &Path) {
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    }
    let listener = Listener::bind(&Endpoint::Unix(socket.to_path_buf()))
        .await
        .unwrap_or_else(|e| panic!("listening on {}: {e}", socket.display()));
    tokio::spawn(csi_proto::serve(router, listener, std::future::pending()));
}
