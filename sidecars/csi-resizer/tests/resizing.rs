//! The resizer against a real control plane (kube-apiserver + controller-manager 1.20, whose
//! PV controller binds the static PV and claim), the fake cloud and the real
//! `manila-csi-plugin` (controller only, ONLINE expansion, no node expansion).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::time::Duration;

use csi_proto::v1::controller_client::ControllerClient;
use csi_proto::v1::controller_server::{Controller, ControllerServer};
use csi_proto::v1::identity_server::{Identity, IdentityServer};
use csi_proto::v1::plugin_capability::{self, service};
use csi_proto::v1::volume_capability::{AccessMode, AccessType, MountVolume, access_mode::Mode};
use csi_proto::v1::{CapacityRange, CreateVolumeRequest, DeleteVolumeRequest, VolumeCapability};
use csi_proto::v1::{
    ControllerExpandVolumeRequest, ControllerExpandVolumeResponse,
    ControllerGetCapabilitiesRequest, ControllerGetCapabilitiesResponse,
    ControllerServiceCapability, GetPluginCapabilitiesRequest, GetPluginCapabilitiesResponse,
    GetPluginInfoRequest, GetPluginInfoResponse, PluginCapability, ProbeRequest, ProbeResponse,
    controller_service_capability,
};
use csi_proto::{Endpoint, Listener};
use fakes::{FaultAction, FaultRule, Operation, SecretKind, Times};
use harness::control_plane::ControlPlane;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use support::*;
use tonic::{Request, Response, Status};

const WAIT: Duration = Duration::from_secs(60);
const GIB: i64 = 1 << 30;

fn capability() -> VolumeCapability {
    VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode {
            mode: Mode::MultiNodeMultiWriter as i32,
        }),
    }
}

fn create_request(name: &str, size: i64, secrets: &HashMap<String, String>) -> CreateVolumeRequest {
    CreateVolumeRequest {
        name: name.into(),
        capacity_range: Some(CapacityRange {
            required_bytes: size,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![capability()],
        parameters: HashMap::from([("type".to_string(), "default".to_string())]),
        secrets: secrets.clone(),
        ..Default::default()
    }
}

/// Raises the claim's request to `size`.
async fn request_size(client: &Client, ns: &str, claim: &str, size: &str) {
    let patch = serde_json::json!({ "spec": { "resources": { "requests": { "storage": size } } } });
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
        .patch(claim, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Waits until the claim's status and its PV report `size`.
async fn expanded_to(client: &Client, ns: &str, claim: &str, pv: &str, size: &str) {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    wait_for(
        &format!("claim {claim} and PV {pv} at {size}"),
        WAIT,
        || async {
            let claim = claims.get(claim).await.map_err(|e| e.to_string())?;
            let pv = pvs.get(pv).await.map_err(|e| e.to_string())?;
            let status = claim.status.unwrap_or_default();
            let claim_size = status
                .capacity
                .and_then(|c| c.get("storage").map(|q| q.0.clone()));
            let pv_size = pv
                .spec
                .and_then(|s| s.capacity)
                .and_then(|c| c.get("storage").map(|q| q.0.clone()));
            let conditions = status.conditions.unwrap_or_default();
            if claim_size.as_deref() == Some(size)
                && pv_size.as_deref() == Some(size)
                && conditions.is_empty()
            {
                Ok(Some(()))
            } else {
                Err(format!(
                    "claim {claim_size:?}, PV {pv_size:?}, conditions {conditions:?}"
                ))
            }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resizer_on_a_real_control_plane() {
    let cp = ControlPlane::builder()
        .start()
        .await
        .expect("control plane starts");
    let client = cp.client();
    let cloud = fake_cloud().await;
    let dir = tempfile::tempdir().unwrap();
    let driver = ManilaDriver::start(dir.path(), DRIVER);
    let resizer = resizer(client.clone(), &driver.socket).await;
    let secrets: HashMap<String, String> = cloud.secret(SecretKind::Password).into_iter().collect();

    // A share made by CreateVolume, and a static PV/claim bound to it.
    let channel =
        csi_proto::connect_lazy(&csi_proto::Endpoint::Unix(driver.socket.clone())).unwrap();
    let mut controller = ControllerClient::new(channel);
    let volume = controller
        .create_volume(create_request("expandable", GIB, &secrets))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let ns = "resize";
    namespace(&client, ns).await;
    credentials_secret(&client, &cloud, ns, "manila-creds").await;
    let class: StorageClass = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "manila-expand" },
        "provisioner": DRIVER,
        "allowVolumeExpansion": true,
        "parameters": { "type": "default" },
    }))
    .unwrap();
    Api::<StorageClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    let pv: PersistentVolume = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "pv-expandable" },
        "spec": {
            "capacity": { "storage": "1Gi" },
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "manila-expand",
            "claimRef": { "namespace": ns, "name": "data" },
            "csi": {
                "driver": DRIVER,
                "volumeHandle": volume.volume_id,
                "volumeAttributes": volume.volume_context,
                "controllerExpandSecretRef": { "name": "manila-creds", "namespace": ns },
            },
        }
    }))
    .unwrap();
    Api::<PersistentVolume>::all(client.clone())
        .create(&PostParams::default(), &pv)
        .await
        .unwrap();
    let claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "data", "namespace": ns },
        "spec": {
            "accessModes": ["ReadWriteMany"], "storageClassName": "manila-expand",
            "volumeName": "pv-expandable",
            "resources": { "requests": { "storage": "1Gi" } },
        }
    }))
    .unwrap();
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &claim)
        .await
        .unwrap();
    bound(&client, ns, "data", WAIT).await;

    // Growing the request extends the share; PV and claim report the new size.
    request_size(&client, ns, "data", "3Gi").await;
    expanded_to(&client, ns, "data", "pv-expandable", "3Gi").await;
    // The share really is 3 GiB: asking for the same name at 1 GiB names its size.
    let mismatch = controller
        .create_volume(create_request("expandable", GIB, &secrets))
        .await
        .unwrap_err();
    assert!(mismatch.message().contains("size 3 GiB"), "{mismatch:?}");
    let reasons: Vec<String> = events(&client, ns, "data")
        .await
        .into_iter()
        .map(|(_, r, _)| r)
        .collect();
    assert!(
        reasons.contains(&"Resizing".to_string())
            && reasons.contains(&"VolumeResizeSuccessful".to_string()),
        "{reasons:?}"
    );

    // A failing extend: VolumeResizeFailed naming the cause, retried until the fault is gone.
    let fault = cloud
        .add_fault(
            FaultRule::new(
                Operation::ShareExtend,
                FaultAction::HttpError {
                    status: 413,
                    message: Some("share quota exceeded for the test".into()),
                },
            )
            .times(Times::ALWAYS),
        )
        .unwrap();
    request_size(&client, ns, "data", "5Gi").await;
    wait_for(
        "two VolumeResizeFailed events naming the cause",
        WAIT,
        || async {
            let events = events(&client, ns, "data").await;
            let failed = events
                .iter()
                .filter(|(t, r, m)| {
                    t == "Warning"
                        && r == "VolumeResizeFailed"
                        && m.contains("share quota exceeded for the test")
                })
                .count();
            if failed >= 2 {
                Ok(Some(()))
            } else {
                Err(format!("{events:?}"))
            }
        },
    )
    .await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let conditions = claims
        .get("data")
        .await
        .unwrap()
        .status
        .unwrap()
        .conditions
        .unwrap_or_default();
    assert!(
        conditions.iter().any(|c| c.type_ == "Resizing"),
        "{conditions:?}"
    );
    assert!(cloud.remove_fault(fault));
    expanded_to(&client, ns, "data", "pv-expandable", "5Gi").await;

    resizer.stop().await.unwrap();
    claims
        .delete("data", &DeleteParams::default())
        .await
        .unwrap();
    Api::<PersistentVolume>::all(client.clone())
        .delete("pv-expandable", &DeleteParams::default())
        .await
        .unwrap();
    controller
        .delete_volume(DeleteVolumeRequest {
            volume_id: volume.volume_id.clone(),
            secrets: secrets.clone(),
        })
        .await
        .unwrap();
    wait_for("no leftovers in the fake", WAIT, || async {
        let leftovers = cloud.leftovers();
        if leftovers.is_empty() {
            Ok(Some(()))
        } else {
            Err(format!("{leftovers:?}"))
        }
    })
    .await;
    node_expansion_leaves_the_claim_pending(&client, dir.path()).await;
    cp.shutdown().await.unwrap();
}

/// An in-test driver whose ControllerExpandVolume asks for node expansion.
#[derive(Clone)]
struct NodeExpandDriver;

#[tonic::async_trait]
impl Identity for NodeExpandDriver {
    async fn get_plugin_info(
        &self,
        _: Request<GetPluginInfoRequest>,
    ) -> Result<Response<GetPluginInfoResponse>, Status> {
        Ok(Response::new(GetPluginInfoResponse {
            name: NODE_EXPAND_DRIVER.into(),
            vendor_version: "test".into(),
            manifest: Default::default(),
        }))
    }
    async fn get_plugin_capabilities(
        &self,
        _: Request<GetPluginCapabilitiesRequest>,
    ) -> Result<Response<GetPluginCapabilitiesResponse>, Status> {
        Ok(Response::new(GetPluginCapabilitiesResponse {
            capabilities: vec![PluginCapability {
                r#type: Some(plugin_capability::Type::Service(
                    plugin_capability::Service {
                        r#type: service::Type::ControllerService as i32,
                    },
                )),
            }],
        }))
    }
    async fn probe(&self, _: Request<ProbeRequest>) -> Result<Response<ProbeResponse>, Status> {
        Ok(Response::new(ProbeResponse { ready: Some(true) }))
    }
}

#[tonic::async_trait]
impl Controller for NodeExpandDriver {
    async fn controller_get_capabilities(
        &self,
        _: Request<ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<ControllerGetCapabilitiesResponse>, Status> {
        Ok(Response::new(ControllerGetCapabilitiesResponse {
            capabilities: vec![ControllerServiceCapability {
                r#type: Some(controller_service_capability::Type::Rpc(
                    controller_service_capability::Rpc {
                        r#type: controller_service_capability::rpc::Type::ExpandVolume as i32,
                    },
                )),
            }],
        }))
    }
    async fn controller_expand_volume(
        &self,
        request: Request<ControllerExpandVolumeRequest>,
    ) -> Result<Response<ControllerExpandVolumeResponse>, Status> {
        let required = request
            .into_inner()
            .capacity_range
            .map_or(0, |r| r.required_bytes);
        Ok(Response::new(ControllerExpandVolumeResponse {
            capacity_bytes: required,
            node_expansion_required: true,
        }))
    }
}

const NODE_EXPAND_DRIVER: &str = "nodeexpand.csi.example.org";

async fn node_expansion_leaves_the_claim_pending(client: &Client, dir: &std::path::Path) {
    let socket = dir.join("nodeexpand.sock");
    let listener = Listener::bind(&Endpoint::Unix(socket.clone()))
        .await
        .unwrap();
    let router = tonic::transport::Server::builder()
        .add_service(IdentityServer::new(NodeExpandDriver))
        .add_service(ControllerServer::new(NodeExpandDriver));
    tokio::spawn(csi_proto::serve(router, listener, std::future::pending()));
    let resizer = resizer(client.clone(), &socket).await;
    let ns = "node-expand";
    namespace(client, ns).await;
    let class: StorageClass = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "node-expand" },
        "provisioner": NODE_EXPAND_DRIVER,
        "allowVolumeExpansion": true,
    }))
    .unwrap();
    Api::<StorageClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
    let pv: PersistentVolume = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "pv-node-expand" },
        "spec": {
            "capacity": { "storage": "1Gi" },
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "node-expand",
            "claimRef": { "namespace": ns, "name": "block" },
            "csi": { "driver": NODE_EXPAND_DRIVER, "volumeHandle": "vol-1" },
        }
    }))
    .unwrap();
    Api::<PersistentVolume>::all(client.clone())
        .create(&PostParams::default(), &pv)
        .await
        .unwrap();
    let claim: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "block", "namespace": ns },
        "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": "node-expand",
            "volumeName": "pv-node-expand",
            "resources": { "requests": { "storage": "1Gi" } },
        }
    }))
    .unwrap();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    claims.create(&PostParams::default(), &claim).await.unwrap();
    bound(client, ns, "block", WAIT).await;
    request_size(client, ns, "block", "2Gi").await;
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    wait_for(
        "FileSystemResizePending with the PV at 2Gi",
        WAIT,
        || async {
            let claim = claims.get("block").await.map_err(|e| e.to_string())?;
            let pv = pvs.get("pv-node-expand").await.map_err(|e| e.to_string())?;
            let status = claim.status.unwrap_or_default();
            let conditions: Vec<String> = status
                .conditions
                .iter()
                .flatten()
                .map(|c| c.type_.clone())
                .collect();
            let claim_size = status
                .capacity
                .and_then(|c| c.get("storage").map(|q| q.0.clone()));
            let pv_size = pv
                .spec
                .and_then(|s| s.capacity)
                .and_then(|c| c.get("storage").map(|q| q.0.clone()));
            if conditions == ["FileSystemResizePending"] && pv_size.as_deref() == Some("2Gi") {
                // The node finishes the resize: the claim's capacity stays until then.
                assert_eq!(claim_size.as_deref(), Some("1Gi"));
                Ok(Some(()))
            } else {
                Err(format!(
                    "conditions {conditions:?}, claim {claim_size:?}, PV {pv_size:?}"
                ))
            }
        },
    )
    .await;
    resizer.stop().await.unwrap();
}
