//! Raw block volumes (`volumeMode: Block`, pods with `volumeDevices`) through the node
//! agent's CSI volume manager, with an in-test driver backed by a real loop device and
//! registered through the real `node-driver-registrar`: attachment (the VolumeAttachment's
//! metadata reaches NodeStageVolume), kubelet 1.20's block paths and capability, one stage
//! for two pods, each pod's container writing and reading the device at its `devicePath`,
//! an agent restart in the middle (reconstruction), then NodeUnpublishVolume per pod and
//! NodeUnstageVolume after the last, with nothing left mounted or on disk. A pod naming the
//! block claim in `volumeMounts` gets kubelet's volumeMode mismatch.
//!
//! The driver runs in the test process (the host's mount namespace) and maps kubelet's
//! `/var/lib/kubelet` paths into the agent's run directory itself; it publishes by
//! bind-mounting the loop device's node on the target file it creates.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod csi_node;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use csi_proto::v1::node_server::{Node as CsiNode, NodeServer};
use csi_proto::v1::node_service_capability::rpc::Type as CapabilityType;
use csi_proto::v1::volume_capability::access_mode::Mode;
use csi_proto::v1::volume_capability::{AccessType, BlockVolume};
use csi_proto::v1::*;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use nix::mount::{MntFlags, MsFlags};
use node_agent::csi::{PluginPaths, attachment_name, unique_volume_name};
use pod_runtime::host_mounts::{is_mount_point, mount_points_under};
use serde_json::json;
use testkit::drivers::{TestIdentity, serve_on_socket, start_registrar};
use testkit::node::{NodeBed, RunningAgent, wait_csi_drivers, wait_volumes_in_use};
use testkit::objects::{
    bound, delete_and_wait_gone, pod_using_claim, wait_event, wait_pod_phase, wait_service_account,
};
use testkit::wait_for;
use tonic::{Request, Response, Status};

const NS: &str = "default";
const NODE: &str = "csi-block-node";
const DRIVER: &str = "block.csi.test";
const HANDLE: &str = "vol-block";
const PV: &str = "pv-block";
const WAIT: Duration = Duration::from_secs(90);
/// What the first pod writes at the start of the device.
const PATTERN: &[u8] = b"raw-block-pattern-0123456789";
/// Where the second pod copies what it read.
const COPY_OFFSET: usize = 4096;
const VOLUME_DEVICES: &str = "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices";

/// A loop device over a sparse file, detached when dropped (also when the test fails).
struct LoopDevice(PathBuf);

impl LoopDevice {
    fn attach(file: &Path) -> LoopDevice {
        let out = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(file)
            .output()
            .expect("running losetup");
        assert!(
            out.status.success(),
            "losetup --find --show {file:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        LoopDevice(PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()))
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let status = Command::new("losetup").arg("-d").arg(&self.0).status();
        if !status.as_ref().is_ok_and(|s| s.success()) {
            eprintln!("detaching {:?} failed: {status:?}", self.0);
        }
    }
}

/// One call the driver received.
#[derive(Debug, Clone, Default)]
struct Call {
    method: &'static str,
    target: String,
    staging: String,
    context: HashMap<String, String>,
    publish_context: HashMap<String, String>,
    capability: Option<VolumeCapability>,
    readonly: bool,
    /// NodeStage: the staging directory existed. NodePublish: the target's directory
    /// existed and the target itself did not.
    paths_as_expected: bool,
}

#[derive(Clone)]
struct BlockDriver {
    paths: PluginPaths,
    device: PathBuf,
    calls: Arc<Mutex<Vec<Call>>>,
}

impl BlockDriver {
    fn record(&self, call: Call) {
        self.calls.lock().unwrap().push(call);
    }

    fn calls(&self, method: &str) -> Vec<Call> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    fn host(&self, kubelet_path: &str) -> PathBuf {
        csi_node::host(&self.paths, kubelet_path)
    }
}

fn internal(e: impl std::fmt::Display) -> Status {
    Status::internal(e.to_string())
}

#[tonic::async_trait]
impl CsiNode for BlockDriver {
    async fn node_get_info(
        &self,
        _: Request<NodeGetInfoRequest>,
    ) -> Result<Response<NodeGetInfoResponse>, Status> {
        csi_node::node_info(NODE)
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
        // A real driver would attach the volume here; the loop device already is.
        self.record(Call {
            method: "NodeStageVolume",
            paths_as_expected: self.host(&r.staging_target_path).is_dir(),
            staging: r.staging_target_path,
            context: r.volume_context,
            publish_context: r.publish_context,
            capability: r.volume_capability,
            ..Call::default()
        });
        Ok(Response::new(NodeStageVolumeResponse {}))
    }

    async fn node_unstage_volume(
        &self,
        request: Request<NodeUnstageVolumeRequest>,
    ) -> Result<Response<NodeUnstageVolumeResponse>, Status> {
        let r = request.into_inner();
        self.record(Call {
            method: "NodeUnstageVolume",
            staging: r.staging_target_path,
            ..Call::default()
        });
        Ok(Response::new(NodeUnstageVolumeResponse {}))
    }

    async fn node_publish_volume(
        &self,
        request: Request<NodePublishVolumeRequest>,
    ) -> Result<Response<NodePublishVolumeResponse>, Status> {
        let r = request.into_inner();
        let target = self.host(&r.target_path);
        let as_expected = target.parent().is_some_and(Path::is_dir)
            && std::fs::symlink_metadata(&target).is_err();
        // The target is a file the driver creates, the device bind-mounted on it.
        std::fs::File::create(&target).map_err(internal)?;
        nix::mount::mount(
            Some(&self.device),
            &target,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|e| internal(format!("bind {:?} at {target:?}: {e}", self.device)))?;
        self.record(Call {
            method: "NodePublishVolume",
            target: r.target_path,
            staging: r.staging_target_path,
            context: r.volume_context,
            publish_context: r.publish_context,
            capability: r.volume_capability,
            readonly: r.readonly,
            paths_as_expected: as_expected,
        });
        Ok(Response::new(NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        request: Request<NodeUnpublishVolumeRequest>,
    ) -> Result<Response<NodeUnpublishVolumeResponse>, Status> {
        let r = request.into_inner();
        let target = self.host(&r.target_path);
        match nix::mount::umount2(&target, MntFlags::empty()) {
            Ok(()) | Err(nix::errno::Errno::EINVAL | nix::errno::Errno::ENOENT) => {}
            Err(e) => return Err(internal(format!("umount {target:?}: {e}"))),
        }
        match std::fs::remove_file(&target) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(internal(e)),
            _ => {}
        }
        self.record(Call {
            method: "NodeUnpublishVolume",
            target: r.target_path,
            ..Call::default()
        });
        Ok(Response::new(NodeUnpublishVolumeResponse {}))
    }
}

/// A pod on the node running `script` with the claim `raw` as a device at `device_path`.
fn pod(name: &str, device_path: &str, script: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "nodeName": NODE,
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 2,
            "containers": [{
                "name": "main", "image": "busybox",
                "command": ["sh", "-c", script],
                "volumeDevices": [{"name": "data", "devicePath": device_path}]
            }],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "raw"}}]
        }
    }))
    .unwrap()
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap()
}

/// `len` bytes of `file` at `offset`.
fn read_at(file: &Path, offset: usize, len: usize) -> Vec<u8> {
    let bytes = std::fs::read(file).unwrap();
    bytes[offset..offset + len].to_vec()
}

#[tokio::test]
async fn block_volumes_reach_containers_at_their_device_path_and_are_unmapped() {
    let bed = NodeBed::start().await;
    let client = bed.client();
    let dir = bed.dir();
    let config = bed.agent_config(NODE, testkit::node::pod_sandbox());
    let run_dir = config.run_dir.clone();
    let mut agent = RunningAgent::start(config.clone());

    // The backing file and its loop device.
    let backing = dir.join("backing.img");
    std::fs::File::create(&backing)
        .unwrap()
        .set_len(8 * 1024 * 1024)
        .unwrap();
    let device = LoopDevice::attach(&backing);

    // The driver and its registrar.
    let driver = BlockDriver {
        paths: PluginPaths::new(&run_dir),
        device: device.0.clone(),
        calls: Arc::default(),
    };
    let socket = run_dir.join("plugins").join(DRIVER).join("csi.sock");
    let router = tonic::transport::Server::builder()
        .add_service(TestIdentity::node_only(DRIVER).service())
        .add_service(NodeServer::new(driver.clone()));
    serve_on_socket(router, &socket).await;
    std::fs::create_dir_all(run_dir.join("plugins_registry")).unwrap();
    let _registrar = start_registrar(&socket, &run_dir, DRIVER, &dir.join("registrar.log"));
    wait_csi_drivers(&client, NODE, &[DRIVER], WAIT).await;
    wait_service_account(&client, NS, "default", WAIT).await;

    // No CSIDriver object: attachment required, as for filesystem volumes.
    let post = PostParams::default();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    pvs.create(
        &post,
        &serde_json::from_value(json!({
            "metadata": {"name": PV},
            "spec": {
                "capacity": {"storage": "8Mi"},
                "accessModes": ["ReadWriteOnce"],
                "volumeMode": "Block",
                "storageClassName": "",
                "claimRef": {"namespace": NS, "name": "raw"},
                "csi": {
                    "driver": DRIVER,
                    "volumeHandle": HANDLE,
                    "volumeAttributes": {"color": "green"}
                }
            }
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    claims
        .create(
            &post,
            &serde_json::from_value(json!({
                "metadata": {"name": "raw"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "volumeMode": "Block",
                    "storageClassName": "",
                    "volumeName": PV,
                    "resources": {"requests": {"storage": "8Mi"}}
                }
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    bound(&client, NS, "raw", WAIT).await;

    // A pod mounting the block claim as a file system: kubelet's mismatch, nothing mounted.
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.create(
        &post,
        &pod_using_claim("mismatch", NODE, "raw", "sleep 3600"),
    )
    .await
    .unwrap();
    wait_event(
        &client,
        NS,
        "mismatch",
        "FailedMount",
        "volume data has volumeMode Block, but is specified in volumeMounts",
        WAIT,
    )
    .await;
    delete_and_wait_gone(&pods, "mismatch", WAIT).await;
    assert!(driver.calls.lock().unwrap().is_empty());

    // The writer waits for the attachment; the attacher's part is done by hand.
    let script = format!(
        "test -b /dev/xvda && printf '%s' '{}' | dd of=/dev/xvda conv=fsync && sleep 3600",
        std::str::from_utf8(PATTERN).unwrap()
    );
    pods.create(&post, &pod("writer", "/dev/xvda", &script))
        .await
        .unwrap();
    let unique = unique_volume_name(DRIVER, HANDLE);
    wait_volumes_in_use(&client, NODE, std::slice::from_ref(&unique), WAIT).await;
    let attachments: Api<VolumeAttachment> = Api::all(client.clone());
    let va_name = attachment_name(HANDLE, DRIVER, NODE);
    wait_for("the VolumeAttachment", WAIT, || async {
        attachments
            .get_opt(&va_name)
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    let device_name = device.0.display().to_string();
    attachments
        .patch_status(
            &va_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "attached": true,
                "attachmentMetadata": {"devicePath": device_name}
            }})),
        )
        .await
        .unwrap();
    let writer = wait_pod_phase(&pods, "writer", "Running", WAIT).await;
    wait_for("the writer's pattern in the backing file", WAIT, || async {
        let start = read_at(&backing, 0, PATTERN.len());
        if start == PATTERN {
            Ok(Some(()))
        } else {
            Err(format!("starts with {:?}", String::from_utf8_lossy(&start)))
        }
    })
    .await;

    // The reader, at another path, copies what it reads further on the device.
    let script = format!(
        "dd if=/dev/xvdb bs={len} count=1 | dd of=/dev/xvdb bs={COPY_OFFSET} seek=1 conv=fsync \
         && sleep 3600",
        len = PATTERN.len()
    );
    pods.create(&post, &pod("reader", "/dev/xvdb", &script))
        .await
        .unwrap();
    let reader = wait_pod_phase(&pods, "reader", "Running", WAIT).await;
    wait_for("the reader's copy in the backing file", WAIT, || async {
        let copy = read_at(&backing, COPY_OFFSET, PATTERN.len());
        if copy == PATTERN {
            Ok(Some(()))
        } else {
            Err(format!("copy is {:?}", String::from_utf8_lossy(&copy)))
        }
    })
    .await;
    // The devices were made in the containers' own /dev, not the host's.
    assert!(!Path::new("/dev/xvda").exists() && !Path::new("/dev/xvdb").exists());

    // What the driver was asked: kubelet's block paths and capability.
    let staging = format!("{VOLUME_DEVICES}/staging/{PV}");
    let stages = driver.calls("NodeStageVolume");
    assert_eq!(stages.len(), 1, "{stages:?}");
    let stage = &stages[0];
    assert_eq!(stage.staging, staging);
    assert!(stage.paths_as_expected, "no staging directory: {stage:?}");
    assert_eq!(stage.context["color"], "green");
    assert_eq!(stage.publish_context["devicePath"], device_name);
    let capability = stage.capability.clone().unwrap();
    assert_eq!(
        capability.access_mode.unwrap().mode,
        i32::from(Mode::SingleNodeWriter)
    );
    assert_eq!(
        capability.access_type,
        Some(AccessType::Block(BlockVolume {}))
    );
    let publishes = driver.calls("NodePublishVolume");
    assert_eq!(publishes.len(), 2, "{publishes:?}");
    for (publish, pod) in publishes.iter().zip([&writer, &reader]) {
        assert_eq!(
            publish.target,
            format!("{VOLUME_DEVICES}/publish/{PV}/{}", uid(pod))
        );
        assert!(publish.paths_as_expected, "{publish:?}");
        assert_eq!(publish.staging, staging);
        assert_eq!(publish.capability, Some(capability.clone()));
        assert!(!publish.readonly);
        assert_eq!(publish.publish_context["devicePath"], device_name);
        // Only the PV's attributes for block volumes (no pod info).
        assert_eq!(
            publish.context,
            HashMap::from([("color".to_string(), "green".to_string())])
        );
        let link = run_dir.join(format!(
            "pods/{}/volumeDevices/kubernetes.io~csi/{PV}",
            uid(pod)
        ));
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            driver.host(&publish.target)
        );
    }
    let host_volume_devices = driver.host(VOLUME_DEVICES);
    let vol_data: serde_json::Value = serde_json::from_slice(
        &std::fs::read(host_volume_devices.join(format!("{PV}/data/vol_data.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(vol_data["driverName"], DRIVER);
    assert_eq!(vol_data["volumeHandle"], HANDLE);
    assert_eq!(vol_data["specVolID"], PV);
    assert_eq!(vol_data["nodeName"], NODE);
    assert_eq!(vol_data["attachmentID"], va_name.as_str());

    // An agent restart with both pods running: what is mapped is reconstructed from disk.
    agent.stop().await;
    agent = RunningAgent::start(config.clone());

    // The writer goes: unpublished, the volume stays staged for the reader.
    delete_and_wait_gone(&pods, "writer", WAIT).await;
    let unpublishes = driver.calls("NodeUnpublishVolume");
    assert_eq!(unpublishes.len(), 1, "{unpublishes:?}");
    assert_eq!(unpublishes[0].target, publishes[0].target);
    assert!(driver.calls("NodeUnstageVolume").is_empty());
    assert_eq!(driver.calls("NodePublishVolume").len(), 2);
    assert_eq!(driver.calls("NodeStageVolume").len(), 1);
    assert!(host_volume_devices.join(format!("staging/{PV}")).is_dir());
    assert!(!driver.host(&publishes[0].target).exists());
    assert!(is_mount_point(&driver.host(&publishes[1].target)).unwrap());
    wait_volumes_in_use(&client, NODE, std::slice::from_ref(&unique), WAIT).await;

    // The reader goes: unpublished and unstaged, kubelet's directories gone.
    delete_and_wait_gone(&pods, "reader", WAIT).await;
    let unpublishes = driver.calls("NodeUnpublishVolume");
    assert_eq!(unpublishes.len(), 2, "{unpublishes:?}");
    assert_eq!(unpublishes[1].target, publishes[1].target);
    let unstages = driver.calls("NodeUnstageVolume");
    assert_eq!(unstages.len(), 1, "{unstages:?}");
    assert_eq!(unstages[0].staging, staging);
    for gone in [
        format!("staging/{PV}"),
        format!("publish/{PV}"),
        PV.to_string(),
    ] {
        assert!(
            !host_volume_devices.join(&gone).exists(),
            "{gone} is still there"
        );
    }
    for pod in [&writer, &reader] {
        assert!(!run_dir.join(format!("pods/{}", uid(pod))).exists());
    }
    let left: Vec<PathBuf> = mount_points_under(&run_dir)
        .unwrap()
        .into_iter()
        .filter(|m| {
            let in_pods = m.starts_with(run_dir.join("pods")) && *m != run_dir.join("pods");
            in_pods || m.starts_with(&host_volume_devices)
        })
        .collect();
    assert!(left.is_empty(), "still mounted: {left:?}");
    wait_volumes_in_use(&client, NODE, &[], WAIT).await;
    assert_eq!(read_at(&backing, 0, PATTERN.len()), PATTERN);

    agent.stop().await;
    drop(device);
}
