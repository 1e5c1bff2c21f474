//! The resizer against a real control plane (kube-apiserver + controller-manager 1.20, whose
//! PV controller binds the static PV and claim), the fake cloud and the real
//! `manila-csi-plugin` (controller only, ONLINE expansion, no node expansion).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use csi_proto::v1::controller_server::{Controller, ControllerServer};
use csi_proto::v1::{
    ControllerExpandVolumeRequest, ControllerExpandVolumeResponse,
    ControllerGetCapabilitiesRequest, ControllerGetCapabilitiesResponse,
    ControllerServiceCapability, DeleteVolumeRequest, controller_service_capability,
};
use fakes::{FaultAction, FaultRule, Operation, Times};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, SecretReference};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use support::resizer;
use testkit::cloud::{credentials_secret, csi_secrets, wait_no_leftovers};
use testkit::drivers::{
    MANILA_DRIVER as DRIVER, TestIdentity, create_volume_request, serve_on_socket,
};
use testkit::objects::{events, namespace, wait_events};
use testkit::sidecars::ControllerBed;
use testkit::task::InProcess;
use testkit::volumes::StaticVolume;
use testkit::wait_for;
use tonic::{Request, Response, Status};

const WAIT: Duration = Duration::from_secs(60);
const GIB: i64 = 1 << 30;

/// Raises the claim's request to `size`.
async fn request_size(client: &Client, ns: &str, claim: &str, size: &str) {
    let patch = json!({ "spec": { "resources": { "requests": { "storage": size } } } });
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
        .patch(claim, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Creates the StorageClass `name` of `provisioner` with `parameters` (a JSON object) that
/// allows volume expansion.
async fn expandable_class(client: &Client, name: &str, provisioner: &str, parameters: Value) {
    let class: StorageClass = serde_json::from_value(json!({
        "metadata": { "name": name },
        "provisioner": provisioner,
        "allowVolumeExpansion": true,
        "parameters": parameters,
    }))
    .unwrap();
    Api::<StorageClass>::all(client.clone())
        .create(&PostParams::default(), &class)
        .await
        .unwrap();
}

/// The storage the claim's status reports and the PV's capacity.
fn sizes(claim: PersistentVolumeClaim, pv: PersistentVolume) -> (Option<String>, Option<String>) {
    let storage =
        |capacity: BTreeMap<String, Quantity>| capacity.get("storage").map(|q| q.0.clone());
    let claim_size = claim.status.and_then(|s| s.capacity).and_then(storage);
    let pv_size = pv.spec.and_then(|s| s.capacity).and_then(storage);
    (claim_size, pv_size)
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
            let conditions = claim
                .status
                .as_ref()
                .and_then(|s| s.conditions.clone())
                .unwrap_or_default();
            let pv = pvs.get(pv).await.map_err(|e| e.to_string())?;
            let (claim_size, pv_size) = sizes(claim, pv);
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
    let bed = ControllerBed::start(&["nova", "zone-b"], &["--with-topology"]).await;
    let (client, cloud) = (bed.client(), &bed.cloud);
    let resizer = resizer(client.clone(), &bed.driver.socket).await;
    let resizer = InProcess::spawn(|stopped| resizer.run(stopped));

    // A share made by CreateVolume, and a static PV/claim bound to it.
    let mut controller = bed.driver.controller();
    let volume = controller
        .create_volume(create_volume_request("expandable", GIB, csi_secrets(cloud)))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let ns = "resize";
    namespace(&client, ns).await;
    credentials_secret(&client, cloud, ns, "manila-creds").await;
    expandable_class(
        &client,
        "manila-expand",
        DRIVER,
        json!({ "type": "default" }),
    )
    .await;
    let mut static_volume =
        StaticVolume::new("pv-expandable", ns, "data", DRIVER, &volume.volume_id);
    static_volume.class = "manila-expand".into();
    static_volume.csi.volume_attributes = Some(volume.volume_context.clone().into_iter().collect());
    static_volume.csi.controller_expand_secret_ref = Some(SecretReference {
        name: Some("manila-creds".into()),
        namespace: Some(ns.into()),
    });
    static_volume.create_bound(&client, WAIT).await;

    // Growing the request extends the share; PV and claim report the new size.
    request_size(&client, ns, "data", "3Gi").await;
    expanded_to(&client, ns, "data", "pv-expandable", "3Gi").await;
    // The share really is 3 GiB: asking for the same name at 1 GiB names its size.
    let mismatch = controller
        .create_volume(create_volume_request("expandable", GIB, csi_secrets(cloud)))
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
    wait_events(&client, ns, "data", 2, WAIT, |t, r, m| {
        t == "Warning"
            && r == "VolumeResizeFailed"
            && m.contains("share quota exceeded for the test")
    })
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
            secrets: csi_secrets(cloud),
        })
        .await
        .unwrap();
    wait_no_leftovers(cloud, WAIT).await;
    node_expansion_leaves_the_claim_pending(&client, bed.dir()).await;
    bed.shutdown().await;
}

/// An in-test driver whose ControllerExpandVolume asks for node expansion.
struct NodeExpandDriver;

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
    let router = tonic::transport::Server::builder()
        .add_service(TestIdentity::with_controller(NODE_EXPAND_DRIVER).service())
        .add_service(ControllerServer::new(NodeExpandDriver));
    serve_on_socket(router, &socket).await;
    let resizer = resizer(client.clone(), &socket).await;
    let resizer = InProcess::spawn(|stopped| resizer.run(stopped));
    let ns = "node-expand";
    namespace(client, ns).await;
    expandable_class(client, "node-expand", NODE_EXPAND_DRIVER, json!({})).await;
    let mut static_volume =
        StaticVolume::new("pv-node-expand", ns, "block", NODE_EXPAND_DRIVER, "vol-1");
    static_volume.class = "node-expand".into();
    static_volume.access_mode = "ReadWriteOnce".into();
    static_volume.create_bound(client, WAIT).await;
    request_size(client, ns, "block", "2Gi").await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    wait_for(
        "FileSystemResizePending with the PV at 2Gi",
        WAIT,
        || async {
            let claim = claims.get("block").await.map_err(|e| e.to_string())?;
            let conditions: Vec<String> = claim
                .status
                .iter()
                .flat_map(|s| s.conditions.iter().flatten())
                .map(|c| c.type_.clone())
                .collect();
            let pv = pvs.get("pv-node-expand").await.map_err(|e| e.to_string())?;
            let (claim_size, pv_size) = sizes(claim, pv);
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
