//! The node agent's CSI volume manager with an in-test driver that stages and expands (the
//! NFS plugin does neither), registered through the real `node-driver-registrar`: one
//! NodeStageVolume for two pods, what NodeStage/NodePublish are asked (kubelet paths,
//! capability, secrets, pod info), NodeUnstageVolume after the last pod, and
//! NodeExpandVolume for a claim with `FileSystemResizePending` (claim status updated).
//!
//! The driver runs in the test process (the host's mount namespace) and maps kubelet's
//! `/var/lib/kubelet` paths into the agent's run directory itself: it stages by
//! bind-mounting a backing directory at the staging path and publishes by bind-mounting the
//! staging path at the target.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod csi_node;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use csi_node::{bind, unmount};
use csi_proto::v1::node_server::{Node as CsiNode, NodeServer};
use csi_proto::v1::node_service_capability::rpc::Type as CapabilityType;
use csi_proto::v1::volume_capability::AccessType;
use csi_proto::v1::volume_capability::access_mode::Mode;
use csi_proto::v1::*;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use node_agent::csi::PluginPaths;
use pod_runtime::host_mounts::is_mount_point;
use serde_json::json;
use testkit::drivers::{TestIdentity, serve_on_socket, start_registrar};
use testkit::node::{NodeBed, RunningAgent, wait_csi_drivers, wait_volumes_in_use};
use testkit::objects::{
    bound, csi_driver_without_attach, delete_and_wait_gone, pod_using_claim, wait_pod_phase,
    wait_service_account,
};
use testkit::wait_for;
use tonic::{Request, Response, Status};

const NS: &str = "default";
const NODE: &str = "csi-stage-node";
const DRIVER: &str = "stage.csi.test";
const WAIT: Duration = Duration::from_secs(90);

/// One call the driver received (secrets by key only).
#[derive(Debug, Clone)]
struct Call {
    method: &'static str,
    target: String,
    staging: String,
    context: HashMap<String, String>,
    secret_keys: Vec<String>,
    capability: Option<VolumeCapability>,
    required_bytes: i64,
}

#[derive(Clone)]
struct StagingDriver {
    paths: PluginPaths,
    backing: PathBuf,
    calls: Arc<Mutex<Vec<Call>>>,
}

impl StagingDriver {
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

fn call(method: &'static str) -> Call {
    Call {
        method,
        target: String::new(),
        staging: String::new(),
        context: HashMap::new(),
        secret_keys: Vec::new(),
        capability: None,
        required_bytes: 0,
    }
}

#[tonic::async_trait]
impl CsiNode for StagingDriver {
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
        csi_node::capabilities(&[
            CapabilityType::StageUnstageVolume,
            CapabilityType::ExpandVolume,
        ])
    }

    async fn node_stage_volume(
        &self,
        request: Request<NodeStageVolumeRequest>,
    ) -> Result<Response<NodeStageVolumeResponse>, Status> {
        let r = request.into_inner();
        let staging = self.host(&r.staging_target_path);
        if !staging.is_dir() {
            return Err(Status::failed_precondition(format!(
                "staging path {staging:?} does not exist"
            )));
        }
        bind(&self.backing, &staging)?;
        self.record(Call {
            staging: r.staging_target_path,
            context: r.volume_context,
            secret_keys: r.secrets.into_keys().collect(),
            capability: r.volume_capability,
            ..call("NodeStageVolume")
        });
        Ok(Response::new(NodeStageVolumeResponse {}))
    }

    async fn node_unstage_volume(
        &self,
        request: Request<NodeUnstageVolumeRequest>,
    ) -> Result<Response<NodeUnstageVolumeResponse>, Status> {
        let r = request.into_inner();
        unmount(&self.host(&r.staging_target_path))?;
        self.record(Call {
            staging: r.staging_target_path,
            ..call("NodeUnstageVolume")
        });
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
        self.record(Call {
            target: r.target_path,
            staging: r.staging_target_path,
            context: r.volume_context,
            secret_keys: r.secrets.into_keys().collect(),
            capability: r.volume_capability,
            ..call("NodePublishVolume")
        });
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
        self.record(Call {
            target: r.target_path,
            ..call("NodeUnpublishVolume")
        });
        Ok(Response::new(NodeUnpublishVolumeResponse {}))
    }

    async fn node_expand_volume(
        &self,
        request: Request<NodeExpandVolumeRequest>,
    ) -> Result<Response<NodeExpandVolumeResponse>, Status> {
        let r = request.into_inner();
        let required = r.capacity_range.map_or(0, |c| c.required_bytes);
        self.record(Call {
            target: r.volume_path,
            staging: r.staging_target_path,
            capability: r.volume_capability,
            required_bytes: required,
            ..call("NodeExpandVolume")
        });
        Ok(Response::new(NodeExpandVolumeResponse {
            capacity_bytes: required,
        }))
    }
}

/// A pod on the node running `script` with the claim `staged` at `/data`.
fn pod(name: &str, script: &str) -> Pod {
    pod_using_claim(name, NODE, "staged", script)
}

#[tokio::test]
async fn staged_volumes_are_shared_by_pods_unstaged_after_the_last_and_expanded() {
    let bed = NodeBed::start().await;
    let client = bed.client();
    let dir = bed.dir();
    let config = bed.agent_config(NODE, testkit::node::pod_sandbox());
    let run_dir = config.run_dir.clone();
    let agent = RunningAgent::start(config);

    // The driver and its registrar.
    let backing = dir.join("backing");
    std::fs::create_dir_all(&backing).unwrap();
    let driver = StagingDriver {
        paths: PluginPaths::new(&run_dir),
        backing: backing.clone(),
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

    let post = PostParams::default();
    wait_service_account(&client, NS, "default", WAIT).await;
    csi_driver_without_attach(&client, DRIVER).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    secrets
        .create(
            &post,
            &serde_json::from_value(json!({
                "metadata": {"name": "node-secret"},
                "stringData": {"password": "not-logged"}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    pvs.create(
        &post,
        &serde_json::from_value(json!({
            "metadata": {"name": "pv-staged"},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "mountOptions": ["noatime"],
                "claimRef": {"namespace": NS, "name": "staged"},
                "csi": {
                    "driver": DRIVER,
                    "volumeHandle": "vol-staged",
                    "fsType": "ext4",
                    "volumeAttributes": {"color": "blue"},
                    "nodeStageSecretRef": {"name": "node-secret", "namespace": NS},
                    "nodePublishSecretRef": {"name": "node-secret", "namespace": NS}
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
                "metadata": {"name": "staged"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "",
                    "volumeName": "pv-staged",
                    "resources": {"requests": {"storage": "1Gi"}}
                }
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    bound(&client, NS, "staged", WAIT).await;

    // Two pods: one stage, two publishes.
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.create(&post, &pod("first", "echo one > /data/one && sleep 3600"))
        .await
        .unwrap();
    let first = wait_pod_phase(&pods, "first", "Running", WAIT).await;
    pods.create(
        &post,
        &pod("second", "cat /data/one > /data/two && sleep 3600"),
    )
    .await
    .unwrap();
    let second = wait_pod_phase(&pods, "second", "Running", WAIT).await;
    wait_for(
        "the second pod's copy in the backing directory",
        WAIT,
        || async {
            Ok(std::fs::read_to_string(backing.join("two"))
                .ok()
                .filter(|t| t == "one\n"))
        },
    )
    .await;
    let staging = "/var/lib/kubelet/plugins/kubernetes.io/csi/pv/pv-staged/globalmount";
    let stages = driver.calls("NodeStageVolume");
    assert_eq!(stages.len(), 1, "{stages:?}");
    assert_eq!(stages[0].staging, staging);
    assert_eq!(stages[0].secret_keys, ["password"]);
    assert_eq!(
        stages[0].context.get("color").map(String::as_str),
        Some("blue")
    );
    let capability = stages[0].capability.clone().unwrap();
    assert_eq!(
        capability.access_mode.unwrap().mode,
        i32::from(Mode::SingleNodeWriter)
    );
    match capability.access_type {
        Some(AccessType::Mount(m)) => {
            assert_eq!(
                (m.fs_type.as_str(), m.mount_flags),
                ("ext4", vec!["noatime".to_string()])
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(
        std::fs::read_to_string(
            run_dir.join("plugins/kubernetes.io/csi/pv/pv-staged/vol_data.json")
        )
        .unwrap()
        .contains("vol-staged")
    );
    let publishes = driver.calls("NodePublishVolume");
    assert_eq!(publishes.len(), 2, "{publishes:?}");
    for (publish, pod) in publishes.iter().zip([&first, &second]) {
        let uid = pod.metadata.uid.clone().unwrap();
        assert_eq!(
            publish.target,
            format!("/var/lib/kubelet/pods/{uid}/volumes/kubernetes.io~csi/pv-staged/mount")
        );
        assert_eq!(publish.staging, staging);
        assert_eq!(publish.secret_keys, ["password"]);
        let context = &publish.context;
        assert_eq!(context["color"], "blue");
        assert_eq!(
            context["csi.storage.k8s.io/pod.name"],
            pod.metadata.name.clone().unwrap()
        );
        assert_eq!(context["csi.storage.k8s.io/pod.namespace"], NS);
        assert_eq!(context["csi.storage.k8s.io/pod.uid"], uid);
        assert_eq!(context["csi.storage.k8s.io/serviceAccount.name"], "default");
        assert_eq!(context["csi.storage.k8s.io/ephemeral"], "false");
    }

    // Expansion: the resizer's part (PV capacity, the claim's condition) done by hand.
    pvs.patch(
        "pv-staged",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"capacity": {"storage": "2Gi"}}})),
    )
    .await
    .unwrap();
    claims
        .patch_status(
            "staged",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [{
                "type": "FileSystemResizePending", "status": "True",
                "message": "Waiting for user to (re-)start a pod to finish file system resize of volume on node."
            }]}})),
        )
        .await
        .unwrap();
    let resized = wait_for(
        "the claim's capacity after node expansion",
        WAIT,
        || async {
            let pvc = claims.get("staged").await.map_err(|e| e.to_string())?;
            let status = pvc.status.clone().unwrap_or_default();
            let capacity = status
                .capacity
                .as_ref()
                .and_then(|c| c.get("storage"))
                .map(|q| q.0.clone());
            let pending = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "FileSystemResizePending");
            if capacity.as_deref() == Some("2Gi") && !pending {
                Ok(Some(pvc))
            } else {
                Err(format!(
                    "capacity {capacity:?}, conditions {:?}",
                    status.conditions
                ))
            }
        },
    )
    .await;
    assert!(resized.status.is_some());
    let expands = driver.calls("NodeExpandVolume");
    assert_eq!(expands.len(), 1, "{expands:?}");
    assert_eq!(expands[0].required_bytes, 2 * 1024 * 1024 * 1024);
    assert_eq!(expands[0].staging, staging);
    assert!(publishes.iter().any(|p| p.target == expands[0].target));

    // The first pod goes: unpublished, still staged; the second: unstaged too.
    let host_staging = run_dir.join("plugins/kubernetes.io/csi/pv/pv-staged/globalmount");
    delete_and_wait_gone(&pods, "first", WAIT).await;
    assert_eq!(driver.calls("NodeUnpublishVolume").len(), 1);
    assert!(driver.calls("NodeUnstageVolume").is_empty());
    assert!(is_mount_point(&host_staging).unwrap());
    delete_and_wait_gone(&pods, "second", WAIT).await;
    assert_eq!(driver.calls("NodeUnpublishVolume").len(), 2);
    let unstages = driver.calls("NodeUnstageVolume");
    assert_eq!(unstages.len(), 1);
    assert_eq!(unstages[0].staging, staging);
    assert!(!is_mount_point(&host_staging).unwrap());
    assert!(
        !run_dir
            .join("plugins/kubernetes.io/csi/pv/pv-staged")
            .exists()
    );
    assert_eq!(
        std::fs::read_to_string(backing.join("one")).unwrap(),
        "one\n"
    );
    wait_volumes_in_use(&client, NODE, &[], WAIT).await;

    agent.stop().await;
}
