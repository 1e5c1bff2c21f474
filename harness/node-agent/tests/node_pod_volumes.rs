//! Which of a pod's volumes the node agent mounts, and a pod's `fsGroup`, as kubelet does
//! them; on a real control plane with an in-test CSI driver (registered through the real
//! `node-driver-registrar`) that stages by bind-mounting a backing directory per volume at the
//! staging path and publishes by bind-mounting the staging path at the target:
//!
//! - a claim in `spec.volumes` that no container uses is neither staged, published nor in
//!   `volumesInUse` (nor is a configMap volume no container uses read), while the claim the
//!   container uses is; an init container's claim counts as used (upstream volumeMode
//!   "should not mount / map unused volumes in a pod");
//! - `fsGroup` on CSI volumes as the CSIDriver's `fsGroupPolicy` says
//!   (`ReadWriteOnceWithFSType` by default: the RWO volume with an fsType gets it, the RWX one
//!   without does not; `File`: any; `None`: none), `fsGroupChangePolicy: OnRootMismatch`
//!   (a volume whose root is already right is not walked) against the default `Always`, on
//!   an emptyDir, and as supplementary group of the containers' processes (with
//!   `supplementalGroups`, with and without `runAsUser`), which lets a non-root user write to
//!   the volume.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod csi_node;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use csi_node::{bind, unmount};
use csi_proto::v1::node_server::{Node as CsiNode, NodeServer};
use csi_proto::v1::node_service_capability::rpc::Type as CapabilityType;
use csi_proto::v1::*;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::storage::v1::CSIDriver;
use kube::Client;
use kube::api::{Api, PostParams};
use node_agent::NodeAgentConfig;
use node_agent::csi::{PluginPaths, unique_volume_name};
use serde_json::{Value, json};
use testkit::drivers::{TestIdentity, TestProcess, serve_on_socket, start_registrar};
use testkit::node::{NodeBed, RunningAgent, wait_csi_drivers, wait_volumes_in_use};
use testkit::objects::{delete_and_wait_gone, wait_pod_phase, wait_service_account};
use testkit::volumes::StaticVolume;
use testkit::wait_for;
use tonic::{Request, Response, Status};

const NS: &str = "default";
const WAIT: Duration = Duration::from_secs(90);

/// A node driver staging and publishing by bind mounts of `backing/<volume id>`; it records
/// the volume ids of its Stage and Publish calls.
#[derive(Clone)]
struct BindDriver {
    paths: PluginPaths,
    backing: PathBuf,
    calls: Arc<Mutex<Vec<(&'static str, String)>>>,
}

impl BindDriver {
    fn record(&self, method: &'static str, volume: &str) {
        self.calls
            .lock()
            .unwrap()
            .push((method, volume.to_string()));
    }

    /// The volume ids `method` was called for, in order.
    fn volumes(&self, method: &str) -> Vec<String> {
        let calls = self.calls.lock().unwrap();
        calls
            .iter()
            .filter(|(m, _)| *m == method)
            .map(|(_, v)| v.clone())
            .collect()
    }

    fn host(&self, kubelet_path: &str) -> PathBuf {
        csi_node::host(&self.paths, kubelet_path)
    }
}

#[tonic::async_trait]
impl CsiNode for BindDriver {
    async fn node_get_info(
        &self,
        _: Request<NodeGetInfoRequest>,
    ) -> Result<Response<NodeGetInfoResponse>, Status> {
        csi_node::node_info("in-test")
    }

    async fn node_get_capabilities(
        &self,
        _: Request<NodeGetCapabilitiesRequest>,
    ) -> Result<Response<NodeGetCapabilitiesResponse>, Status> {
        csi_node::capabilities(&[CapabilityType::StageUnstageVolume])
    }

    async fn node_stage_volume(
        &self,
        request: Request<NodeStageVolumeRequest>,
    ) -> Result<Response<NodeStageVolumeResponse>, Status> {
        let r = request.into_inner();
        let backing = self.backing.join(&r.volume_id);
        std::fs::create_dir_all(&backing).map_err(|e| Status::internal(e.to_string()))?;
        bind(&backing, &self.host(&r.staging_target_path))?;
        self.record("NodeStageVolume", &r.volume_id);
        Ok(Response::new(NodeStageVolumeResponse {}))
    }

    async fn node_unstage_volume(
        &self,
        request: Request<NodeUnstageVolumeRequest>,
    ) -> Result<Response<NodeUnstageVolumeResponse>, Status> {
        let r = request.into_inner();
        unmount(&self.host(&r.staging_target_path))?;
        self.record("NodeUnstageVolume", &r.volume_id);
        Ok(Response::new(NodeUnstageVolumeResponse {}))
    }

    async fn node_publish_volume(
        &self,
        request: Request<NodePublishVolumeRequest>,
    ) -> Result<Response<NodePublishVolumeResponse>, Status> {
        let r = request.into_inner();
        let target = self.host(&r.target_path);
        std::fs::create_dir_all(&target).map_err(|e| Status::internal(e.to_string()))?;
        bind(&self.host(&r.staging_target_path), &target)?;
        self.record("NodePublishVolume", &r.volume_id);
        Ok(Response::new(NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<NodeUnpublishVolumeRequest>,
    ) -> Result<Response<NodeUnpublishVolumeResponse>, Status> {
        let r = request.into_inner();
        let target = self.host(&r.target_path);
        unmount(&target)?;
        let _ = std::fs::remove_dir(&target);
        self.record("NodeUnpublishVolume", &r.volume_id);
        Ok(Response::new(NodeUnpublishVolumeResponse {}))
    }
}

/// A node agent with the in-test driver `driver` registered, on a control plane of its own.
struct Setup {
    bed: NodeBed,
    config: NodeAgentConfig,
    agent: RunningAgent,
    driver: BindDriver,
    _registrar: TestProcess,
}

impl Setup {
    async fn start(node: &str, driver_name: &str) -> Setup {
        let bed = NodeBed::start().await;
        let config = bed.agent_config(node, testkit::node::pod_sandbox());
        let run_dir = config.run_dir.clone();
        let agent = RunningAgent::start(config.clone());
        let backing = bed.dir().join("backing");
        std::fs::create_dir_all(&backing).unwrap();
        let driver = BindDriver {
            paths: PluginPaths::new(&run_dir),
            backing,
            calls: Arc::default(),
        };
        let socket = run_dir.join("plugins").join(driver_name).join("csi.sock");
        let router = tonic::transport::Server::builder()
            .add_service(TestIdentity::node_only(driver_name).service())
            .add_service(NodeServer::new(driver.clone()));
        serve_on_socket(router, &socket).await;
        std::fs::create_dir_all(run_dir.join("plugins_registry")).unwrap();
        let log = bed.dir().join("registrar.log");
        let registrar = start_registrar(&socket, &run_dir, driver_name, &log);
        let client = bed.client();
        wait_csi_drivers(&client, node, &[driver_name], WAIT).await;
        wait_service_account(&client, NS, "default", WAIT).await;
        Setup {
            bed,
            config,
            agent,
            driver,
            _registrar: registrar,
        }
    }

    fn client(&self) -> Client {
        self.bed.client()
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client(), NS)
    }

    /// A static PV `pv` of the driver (volume id `handle`) bound to the claim `claim`.
    async fn volume(&self, driver: &str, pv: &str, claim: &str, handle: &str, rwo_fs: bool) {
        let mut volume = StaticVolume::new(pv, NS, claim, driver, handle);
        if rwo_fs {
            volume.access_mode = "ReadWriteOnce".into();
            volume.csi.fs_type = Some("ext4".into());
        }
        volume.create_bound(&self.client(), WAIT).await;
    }

    /// Replaces the CSIDriver `name` (no attachment) with one of `fs_group_policy` (its spec
    /// cannot be changed in place) and returns what the API server stored.
    async fn csi_driver(&self, name: &str, fs_group_policy: Option<&str>) -> CSIDriver {
        let drivers: Api<CSIDriver> = Api::all(self.client());
        if drivers.get_opt(name).await.unwrap().is_some() {
            delete_and_wait_gone(&drivers, name, WAIT).await;
        }
        let mut spec = json!({"attachRequired": false});
        if let Some(policy) = fs_group_policy {
            spec["fsGroupPolicy"] = json!(policy);
        }
        let driver = serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec}));
        drivers
            .create(&PostParams::default(), &driver.unwrap())
            .await
            .unwrap()
    }

    fn backing(&self, handle: &str) -> PathBuf {
        self.driver.backing.join(handle)
    }

    /// Stops the agent, then the driver's registrar and the control plane.
    async fn stop(self) {
        let Setup {
            bed,
            agent,
            _registrar,
            ..
        } = self;
        agent.stop().await;
        drop(_registrar);
        bed.shutdown().await;
    }
}

/// A pod on `node` with `containers` (busybox, `sh -c <script>`, given as JSON with their
/// mounts), `volumes` and the pod security context `security`.
fn pod(node: &str, name: &str, containers: Value, volumes: Value, security: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 2,
            "securityContext": security,
            "containers": containers,
            "volumes": volumes
        }
    }))
    .unwrap()
}

/// A busybox container `name` running `script` with `mounts` (name → path).
fn container(name: &str, script: &str, mounts: &[(&str, &str)]) -> Value {
    let mounts: Vec<Value> = mounts
        .iter()
        .map(|(volume, path)| json!({"name": volume, "mountPath": path}))
        .collect();
    json!({
        "name": name, "image": "busybox", "command": ["sh", "-c", script],
        "volumeMounts": mounts
    })
}

fn claim_volume(name: &str, claim: &str) -> Value {
    json!({"name": name, "persistentVolumeClaim": {"claimName": claim}})
}

/// The directory of pod `name`'s CSI volume `pv` on the node.
fn publish_dir(run_dir: &Path, pod: &Pod, pv: &str) -> PathBuf {
    let uid = pod.metadata.uid.clone().unwrap();
    run_dir.join(format!("pods/{uid}/volumes/kubernetes.io~csi/{pv}"))
}

#[tokio::test]
async fn claims_no_container_uses_are_neither_staged_nor_published_nor_in_use() {
    const NODE: &str = "unused-node";
    const DRIVER: &str = "unused.csi.test";
    let setup = Setup::start(NODE, DRIVER).await;
    let run_dir = setup.config.run_dir.clone();
    setup.csi_driver(DRIVER, None).await;
    // Bound side by side: each binding may wait for the PV controller's resync.
    tokio::join!(
        setup.volume(DRIVER, "pv-used", "used", "vol-used", false),
        setup.volume(DRIVER, "pv-unused", "unused", "vol-unused", false)
    );
    let pods = setup.pods();
    let post = PostParams::default();

    // The claim "unused" and a configMap that does not exist: neither is looked at.
    let volumes = json!([
        claim_volume("used", "used"),
        claim_volume("unused", "unused"),
        {"name": "no-such-config", "configMap": {"name": "no-such-config"}}
    ]);
    let main = container(
        "main",
        "echo hi > /data/file && sleep 3600",
        &[("used", "/data")],
    );
    let first = pod(
        NODE,
        "first",
        json!([main.clone()]),
        volumes.clone(),
        json!({}),
    );
    pods.create(&post, &first).await.unwrap();
    let first = wait_pod_phase(&pods, "first", "Running", WAIT).await;
    let used = unique_volume_name(DRIVER, "vol-used");
    let unused = unique_volume_name(DRIVER, "vol-unused");
    wait_volumes_in_use(&setup.client(), NODE, std::slice::from_ref(&used), WAIT).await;
    assert_eq!(setup.driver.volumes("NodeStageVolume"), ["vol-used"]);
    assert_eq!(setup.driver.volumes("NodePublishVolume"), ["vol-used"]);
    assert!(
        publish_dir(&run_dir, &first, "pv-used")
            .join("mount")
            .is_dir()
    );
    assert!(!publish_dir(&run_dir, &first, "pv-unused").exists());
    wait_for("the pod's file in the used volume", WAIT, || async {
        Ok(
            std::fs::read_to_string(setup.backing("vol-used").join("file"))
                .ok()
                .filter(|t| t == "hi\n"),
        )
    })
    .await;

    // An init container's volume is used.
    let init = container("init", "echo seeded > /seed/file", &[("unused", "/seed")]);
    let mut second = pod(NODE, "second", json!([main]), volumes, json!({}));
    second.spec.as_mut().unwrap().init_containers =
        Some(vec![serde_json::from_value(init).unwrap()]);
    pods.create(&post, &second).await.unwrap();
    wait_pod_phase(&pods, "second", "Running", WAIT).await;
    let mut both = vec![used.clone(), unused.clone()];
    both.sort();
    wait_volumes_in_use(&setup.client(), NODE, &both, WAIT).await;
    // In the order of the pod's volumes.
    assert_eq!(
        setup.driver.volumes("NodePublishVolume"),
        ["vol-used", "vol-used", "vol-unused"]
    );
    assert_eq!(
        std::fs::read_to_string(setup.backing("vol-unused").join("file")).unwrap(),
        "seeded\n"
    );

    for name in ["first", "second"] {
        delete_and_wait_gone(&pods, name, WAIT).await;
    }
    let mut unstaged = setup.driver.volumes("NodeUnstageVolume");
    unstaged.sort();
    assert_eq!(unstaged, ["vol-unused", "vol-used"]);
    wait_volumes_in_use(&setup.client(), NODE, &[], WAIT).await;
    setup.stop().await;
}

/// The group and the permission bits of `path`.
fn owner(path: &Path) -> (u32, u32) {
    let meta = std::fs::symlink_metadata(path).unwrap();
    (meta.gid(), meta.mode() & 0o7777)
}

fn set_owner(path: &Path, gid: u32, mode: u32) {
    nix::unistd::chown(path, None, Some(nix::unistd::Gid::from_raw(gid))).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A backing directory (0755, group 0) with a file `seed` (0600, group 0).
fn seeded(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("seed"), "x").unwrap();
    set_owner(dir, 0, 0o755);
    set_owner(&dir.join("seed"), 0, 0o600);
}

/// The log of container `main` of pod `pod` once it has a line `marker`.
async fn wait_log(run_dir: &Path, pod: &str, marker: &str) -> String {
    let what = format!("{marker:?} in the log of pod {pod}");
    wait_for(&what, WAIT, || async {
        let log = node_agent::logs(run_dir, NS, pod, "main", false).map_err(|e| e.to_string())?;
        if log.lines().any(|l| l == marker) {
            Ok(Some(log))
        } else {
            Err(format!("log {log:?}"))
        }
    })
    .await
}

/// The groups a process reported (`grep ^Groups: /proc/self/status`), sorted.
fn groups(text: &str) -> Vec<u32> {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .unwrap_or_else(|| panic!("no Groups line in {text:?}"));
    let mut groups: Vec<u32> = line
        .split_whitespace()
        .map(|g| g.parse().unwrap())
        .collect();
    groups.sort_unstable();
    groups
}

#[tokio::test]
async fn fs_group_follows_the_driver_policy_and_the_change_policy_and_joins_the_processes() {
    const NODE: &str = "fsgroup-node";
    const DRIVER: &str = "fsgroup.csi.test";
    let setup = Setup::start(NODE, DRIVER).await;
    let run_dir = setup.config.run_dir.clone();
    let stored = setup.csi_driver(DRIVER, None).await;
    assert_eq!(
        stored.spec.fs_group_policy.as_deref(),
        Some("ReadWriteOnceWithFSType"),
        "the API server's default"
    );
    // An RWO volume with an fsType and an RWX one without (as NFS shares are).
    tokio::join!(
        setup.volume(DRIVER, "pv-rwo", "rwo", "vol-rwo", true),
        setup.volume(DRIVER, "pv-rwx", "rwx", "vol-rwx", false)
    );
    let (rwo, rwx) = (setup.backing("vol-rwo"), setup.backing("vol-rwx"));
    seeded(&rwo);
    seeded(&rwx);
    let pods = setup.pods();
    let post = PostParams::default();
    let volumes = json!([
        claim_volume("rwo", "rwo"),
        claim_volume("rwx", "rwx"),
        {"name": "scratch", "emptyDir": {}}
    ]);
    let mounts = [("rwo", "/rwo"), ("rwx", "/rwx"), ("scratch", "/scratch")];
    let report = "grep ^Groups: /proc/self/status; \
                  touch /rwo/by-pod /rwx/by-pod /scratch/by-pod && echo touched; sleep 3600";

    // 1. The default policy: only the RWO volume with an fsType, and the emptyDir.
    let security = json!({"fsGroup": 1234, "supplementalGroups": [5678]});
    let main = container("main", report, &mounts);
    pods.create(
        &post,
        &pod(NODE, "defaults", json!([main]), volumes.clone(), security),
    )
    .await
    .unwrap();
    let defaults = wait_pod_phase(&pods, "defaults", "Running", WAIT).await;
    let log = wait_log(&run_dir, "defaults", "touched").await;
    assert_eq!(groups(&log), [0, 1234, 5678], "{log}");
    let exec = node_agent::exec(
        &run_dir,
        NS,
        "defaults",
        "main",
        &["grep".into(), "^Groups:".into(), "/proc/self/status".into()],
    )
    .await
    .unwrap();
    assert_eq!(
        groups(&String::from_utf8_lossy(&exec.stdout)),
        [0, 1234, 5678]
    );
    assert_eq!(owner(&rwo), (1234, 0o2775));
    assert_eq!(owner(&rwo.join("seed")), (1234, 0o660));
    assert_eq!(
        owner(&rwo.join("by-pod")).0,
        1234,
        "setgid: new files get the group"
    );
    assert_eq!(owner(&rwx), (0, 0o755), "no fsType, not RWO: left alone");
    assert_eq!(owner(&rwx.join("seed")), (0, 0o600));
    assert_eq!(owner(&rwx.join("by-pod")).0, 0);
    let uid = defaults.metadata.uid.clone().unwrap();
    let scratch = node_agent::pod_dir(&run_dir, NS, "defaults", &uid).join("volumes/scratch");
    assert_eq!(owner(&scratch), (1234, 0o2777));
    assert_eq!(owner(&scratch.join("by-pod")).0, 1234);
    delete_and_wait_gone(&pods, "defaults", WAIT).await;

    // 2. A user that is not root writes to the volume through the group.
    let as_user = container(
        "main",
        "id -u; id -g; grep ^Groups: /proc/self/status; echo hi > /rwo/by-user && echo wrote; \
         sleep 3600",
        &[("rwo", "/rwo")],
    );
    let security = json!({"fsGroup": 1234, "runAsUser": 1000, "runAsGroup": 3000});
    let volumes_rwo = json!([claim_volume("rwo", "rwo")]);
    pods.create(
        &post,
        &pod(
            NODE,
            "as-user",
            json!([as_user]),
            volumes_rwo.clone(),
            security,
        ),
    )
    .await
    .unwrap();
    wait_pod_phase(&pods, "as-user", "Running", WAIT).await;
    let log = wait_log(&run_dir, "as-user", "wrote").await;
    assert!(log.starts_with("1000\n3000\n"), "{log}");
    assert_eq!(groups(&log), [1234, 3000], "{log}");
    let written = std::fs::symlink_metadata(rwo.join("by-user")).unwrap();
    assert_eq!((written.uid(), written.gid()), (1000, 1234));
    delete_and_wait_gone(&pods, "as-user", WAIT).await;

    // 3. OnRootMismatch: the root is right, the rest is not walked; Always walks it.
    set_owner(&rwo.join("seed"), 0, 0o600);
    let idle = || json!([container("main", "sleep 3600", &[("rwo", "/rwo")])]);
    let on_mismatch = json!({"fsGroup": 1234, "fsGroupChangePolicy": "OnRootMismatch"});
    pods.create(
        &post,
        &pod(
            NODE,
            "on-mismatch",
            idle(),
            volumes_rwo.clone(),
            on_mismatch,
        ),
    )
    .await
    .unwrap();
    wait_pod_phase(&pods, "on-mismatch", "Running", WAIT).await;
    assert_eq!(owner(&rwo.join("seed")), (0, 0o600));
    delete_and_wait_gone(&pods, "on-mismatch", WAIT).await;
    let always = json!({"fsGroup": 1234, "fsGroupChangePolicy": "Always"});
    pods.create(
        &post,
        &pod(NODE, "always", idle(), volumes_rwo.clone(), always),
    )
    .await
    .unwrap();
    wait_pod_phase(&pods, "always", "Running", WAIT).await;
    assert_eq!(owner(&rwo.join("seed")), (1234, 0o660));
    delete_and_wait_gone(&pods, "always", WAIT).await;

    // 4. File: the RWX volume without fsType too; None: not even the RWO one.
    let stored = setup.csi_driver(DRIVER, Some("File")).await;
    assert_eq!(stored.spec.fs_group_policy.as_deref(), Some("File"));
    let idle_rwx = json!([container("main", "sleep 3600", &[("rwx", "/rwx")])]);
    let volumes_rwx = json!([claim_volume("rwx", "rwx")]);
    pods.create(
        &post,
        &pod(
            NODE,
            "file",
            idle_rwx,
            volumes_rwx,
            json!({"fsGroup": 2345}),
        ),
    )
    .await
    .unwrap();
    wait_pod_phase(&pods, "file", "Running", WAIT).await;
    assert_eq!(owner(&rwx), (2345, 0o2775));
    assert_eq!(owner(&rwx.join("seed")), (2345, 0o660));
    delete_and_wait_gone(&pods, "file", WAIT).await;
    setup.csi_driver(DRIVER, Some("None")).await;
    pods.create(
        &post,
        &pod(NODE, "none", idle(), volumes_rwo, json!({"fsGroup": 3456})),
    )
    .await
    .unwrap();
    let none = wait_pod_phase(&pods, "none", "Running", WAIT).await;
    assert!(
        publish_dir(&run_dir, &none, "pv-rwo")
            .join("mount")
            .is_dir()
    );
    assert_eq!(owner(&rwo), (1234, 0o2775));
    assert_eq!(owner(&rwo.join("seed")), (1234, 0o660));
    delete_and_wait_gone(&pods, "none", WAIT).await;

    wait_volumes_in_use(&setup.client(), NODE, &[], WAIT).await;
    setup.stop().await;
}
