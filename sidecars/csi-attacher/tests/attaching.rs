//! The attacher against a real control plane (kube-apiserver 1.20) and in-test CSI drivers
//! on unix sockets that record the controller calls they get: one without
//! PUBLISH_UNPUBLISH_VOLUME (attachments are marked attached without a call, as for the
//! Manila driver) and one with it (publish context, node ids from CSINode, errors).
//!
//! One control plane for the file; the scenarios run concurrently, each with its own driver
//! name and attacher.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use control_plane::ControlPlane;
use csi_attacher::{Attacher, Config};
use csi_proto::v1::controller_server::{Controller, ControllerServer};
use csi_proto::v1::controller_service_capability::{self, rpc};
use csi_proto::v1::volume_capability::access_mode::Mode;
use csi_proto::v1::*;
use k8s_openapi::api::core::v1::{Node, PersistentVolume};
use k8s_openapi::api::storage::v1::{CSINode, VolumeAttachment};
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, ResourceExt};
use testkit::drivers::{TestIdentity, serve_on_socket};
use testkit::objects::{delete_and_wait_gone, events};
use testkit::sidecars::args;
use testkit::task::InProcess;
use testkit::wait_for;
use tonic::{Request, Response, Status};

const WAIT: Duration = Duration::from_secs(60);

/// A controller call the in-test driver received.
#[derive(Clone, Debug)]
enum Call {
    Publish(ControllerPublishVolumeRequest),
    Unpublish(ControllerUnpublishVolumeRequest),
}

/// An in-test controller service that records its calls; it offers
/// PUBLISH_UNPUBLISH_VOLUME when `publish` is set.
struct TestDriver {
    publish: bool,
    calls: Arc<Mutex<Vec<Call>>>,
}

#[tonic::async_trait]
impl Controller for TestDriver {
    async fn controller_get_capabilities(
        &self,
        _: Request<ControllerGetCapabilitiesRequest>,
    ) -> Result<Response<ControllerGetCapabilitiesResponse>, Status> {
        let mut kinds = vec![rpc::Type::CreateDeleteVolume];
        if self.publish {
            kinds.push(rpc::Type::PublishUnpublishVolume);
        }
        Ok(Response::new(ControllerGetCapabilitiesResponse {
            capabilities: kinds
                .into_iter()
                .map(|k| ControllerServiceCapability {
                    r#type: Some(controller_service_capability::Type::Rpc(
                        controller_service_capability::Rpc { r#type: k as i32 },
                    )),
                })
                .collect(),
        }))
    }
    async fn controller_publish_volume(
        &self,
        request: Request<ControllerPublishVolumeRequest>,
    ) -> Result<Response<ControllerPublishVolumeResponse>, Status> {
        let request = request.into_inner();
        self.calls
            .lock()
            .unwrap()
            .push(Call::Publish(request.clone()));
        if request.volume_id.starts_with("fail") {
            return Err(Status::resource_exhausted(format!(
                "volume {} cannot be attached to more nodes",
                request.volume_id
            )));
        }
        Ok(Response::new(ControllerPublishVolumeResponse {
            publish_context: HashMap::from([("devicePath".into(), "/dev/test-0".into())]),
        }))
    }
    async fn controller_unpublish_volume(
        &self,
        request: Request<ControllerUnpublishVolumeRequest>,
    ) -> Result<Response<ControllerUnpublishVolumeResponse>, Status> {
        self.calls
            .lock()
            .unwrap()
            .push(Call::Unpublish(request.into_inner()));
        Ok(Response::new(ControllerUnpublishVolumeResponse {}))
    }
}

/// A running attacher.
type Running = InProcess<sidecar_common::Result<()>>;

/// Serves a test driver named `name` at `<dir>/<name>.sock` and starts an attacher for it.
async fn driver_and_attacher(
    client: &Client,
    dir: &Path,
    name: &str,
    publish: bool,
) -> (Arc<Mutex<Vec<Call>>>, Running) {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let driver = TestDriver {
        publish,
        calls: calls.clone(),
    };
    let socket = dir.join(format!("{name}.sock"));
    let router = tonic::transport::Server::builder()
        .add_service(TestIdentity::with_controller(name).service())
        .add_service(ControllerServer::new(driver));
    serve_on_socket(router, &socket).await;
    let config = <Config as clap::Parser>::try_parse_from(args("csi-attacher", &socket, &[]));
    let attacher = Attacher::new(config.unwrap(), client.clone())
        .await
        .unwrap();
    assert_eq!(attacher.driver_name(), name);
    (calls, InProcess::spawn(|stopped| attacher.run(stopped)))
}

async fn persistent_volume(client: &Client, name: &str, driver: &str, handle: &str) {
    let pv: PersistentVolume = serde_json::from_value(serde_json::json!({
        "metadata": { "name": name },
        "spec": {
            "capacity": { "storage": "1Gi" },
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "mountOptions": ["nfsvers=4.1"],
            "csi": {
                "driver": driver, "volumeHandle": handle, "fsType": "nfs",
                "volumeAttributes": { "shareID": handle },
            },
        }
    }))
    .unwrap();
    Api::<PersistentVolume>::all(client.clone())
        .create(&PostParams::default(), &pv)
        .await
        .unwrap();
}

async fn attachment(client: &Client, name: &str, driver: &str, pv: &str, node: &str) {
    let va: VolumeAttachment = serde_json::from_value(serde_json::json!({
        "metadata": { "name": name },
        "spec": { "attacher": driver, "nodeName": node, "source": { "persistentVolumeName": pv } },
    }))
    .unwrap();
    Api::<VolumeAttachment>::all(client.clone())
        .create(&PostParams::default(), &va)
        .await
        .unwrap();
}

async fn attached(client: &Client, name: &str) -> VolumeAttachment {
    let vas: Api<VolumeAttachment> = Api::all(client.clone());
    wait_for(
        &format!("VolumeAttachment {name} attached"),
        WAIT,
        || async {
            let va = vas.get(name).await.map_err(|e| e.to_string())?;
            if va.status.as_ref().is_some_and(|s| s.attached) {
                Ok(Some(va))
            } else {
                Err(format!(
                    "status {:?}, finalizers {:?}",
                    va.status, va.metadata.finalizers
                ))
            }
        },
    )
    .await
}

/// Waits until the VolumeAttachment `name` reports an attach error, and returns its message.
async fn attach_error(vas: &Api<VolumeAttachment>, name: &str) -> String {
    wait_for(&format!("attachError on {name}"), WAIT, || async {
        let va = vas.get(name).await.map_err(|e| e.to_string())?;
        match va
            .status
            .and_then(|s| s.attach_error)
            .and_then(|e| e.message)
        {
            Some(message) => Ok(Some(message)),
            None => Err("no attachError yet".into()),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attacher_on_a_real_control_plane() {
    let cp = ControlPlane::builder()
        .start()
        .await
        .expect("control plane starts");
    let client = cp.client();
    let dir = tempfile::Builder::new()
        .prefix("attaching-")
        .tempdir()
        .unwrap();
    tokio::join!(
        without_publish_capability_attachments_are_marked_attached(&client, dir.path()),
        with_publish_capability_the_driver_is_called(&client, dir.path()),
    );
    cp.shutdown().await.unwrap();
}

async fn without_publish_capability_attachments_are_marked_attached(client: &Client, dir: &Path) {
    const DRIVER: &str = "nopublish.csi.example.org";
    let (calls, attacher) = driver_and_attacher(client, dir, DRIVER, false).await;
    let vas: Api<VolumeAttachment> = Api::all(client.clone());
    persistent_volume(client, "pv-nopublish", DRIVER, "share-1").await;
    attachment(client, "va-nopublish", DRIVER, "pv-nopublish", "node-a").await;
    // An attachment for another driver is left alone.
    attachment(
        client,
        "va-foreign",
        "other.csi.example.org",
        "pv-nopublish",
        "node-a",
    )
    .await;

    let va = attached(client, "va-nopublish").await;
    assert_eq!(va.finalizers(), [format!("external-attacher/{DRIVER}")]);
    assert_eq!(va.status.unwrap().attachment_metadata, None);
    assert!(
        calls.lock().unwrap().is_empty(),
        "{:?}",
        calls.lock().unwrap()
    );

    delete_and_wait_gone(&vas, "va-nopublish", WAIT).await;
    assert!(
        calls.lock().unwrap().is_empty(),
        "{:?}",
        calls.lock().unwrap()
    );
    let foreign = vas.get("va-foreign").await.unwrap();
    assert!(
        foreign.finalizers().is_empty() && !foreign.status.as_ref().is_some_and(|s| s.attached),
        "{foreign:?}"
    );
    attacher.stop().await.unwrap();
}

async fn with_publish_capability_the_driver_is_called(client: &Client, dir: &Path) {
    const DRIVER: &str = "publish.csi.example.org";
    let (calls, attacher) = driver_and_attacher(client, dir, DRIVER, true).await;
    let vas: Api<VolumeAttachment> = Api::all(client.clone());
    let node: Node =
        serde_json::from_value(serde_json::json!({ "metadata": { "name": "node-p" } })).unwrap();
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
    let csinode: CSINode = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "node-p" },
        "spec": { "drivers": [ { "name": DRIVER, "nodeID": "node-p-id" } ] },
    }))
    .unwrap();
    Api::<CSINode>::all(client.clone())
        .create(&PostParams::default(), &csinode)
        .await
        .unwrap();
    persistent_volume(client, "pv-publish", DRIVER, "vol-1").await;
    attachment(client, "va-publish", DRIVER, "pv-publish", "node-p").await;

    let va = attached(client, "va-publish").await;
    assert_eq!(
        va.status.as_ref().unwrap().attachment_metadata,
        Some([("devicePath".to_string(), "/dev/test-0".to_string())].into())
    );
    assert_eq!(va.finalizers(), [format!("external-attacher/{DRIVER}")]);
    // The PV got the attacher's finalizer: deleting it now leaves it in place until no
    // attachment refers to it.
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pv = pvs.get("pv-publish").await.unwrap();
    assert!(
        pv.finalizers()
            .contains(&format!("external-attacher/{DRIVER}")),
        "{:?}",
        pv.finalizers()
    );
    pvs.delete("pv-publish", &DeleteParams::default())
        .await
        .unwrap();
    let publish = calls.lock().unwrap().iter().find_map(|c| match c {
        Call::Publish(p) if p.volume_id == "vol-1" => Some(p.clone()),
        _ => None,
    });
    let publish = publish.expect("ControllerPublishVolume for vol-1");
    assert_eq!(publish.node_id, "node-p-id");
    assert!(!publish.readonly);
    assert_eq!(
        publish.volume_context.get("shareID").map(String::as_str),
        Some("vol-1")
    );
    let capability = publish.volume_capability.unwrap();
    assert_eq!(
        capability.access_mode.unwrap().mode,
        Mode::SingleNodeWriter as i32
    );
    let Some(volume_capability::AccessType::Mount(mount)) = capability.access_type else {
        panic!("not a mount capability");
    };
    assert_eq!(
        (mount.fs_type.as_str(), mount.mount_flags),
        ("nfs", vec!["nfsvers=4.1".to_string()])
    );

    // A failing publish: attachError and a Warning event naming the cause, retried.
    persistent_volume(client, "pv-fail", DRIVER, "fail-2").await;
    attachment(client, "va-fail", DRIVER, "pv-fail", "node-p").await;
    let error = attach_error(&vas, "va-fail").await;
    assert!(
        error.contains("ResourceExhausted") && error.contains("cannot be attached to more nodes"),
        "{error}"
    );
    wait_for("two AttachFailed events about va-fail", WAIT, || async {
        let failed = events(client, "default", "va-fail")
            .await
            .iter()
            .filter(|(_, reason, _)| reason == "AttachFailed")
            .count();
        let publishes = calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| matches!(c, Call::Publish(p) if p.volume_id == "fail-2"))
            .count();
        if failed >= 2 && publishes >= 2 {
            Ok(Some(()))
        } else {
            Err(format!("{failed} events, {publishes} publish calls"))
        }
    })
    .await;
    // An attachment to a node without an id for the driver fails with the reason.
    attachment(client, "va-noid", DRIVER, "pv-publish", "node-unknown").await;
    let error = attach_error(&vas, "va-noid").await;
    assert!(
        error.contains("node-unknown") && error.contains("has no ID"),
        "{error}"
    );

    delete_and_wait_gone(&vas, "va-publish", WAIT).await;
    let unpublished = calls.lock().unwrap().iter().any(
        |c| matches!(c, Call::Unpublish(u) if u.volume_id == "vol-1" && u.node_id == "node-p-id"),
    );
    assert!(unpublished, "{:?}", calls.lock().unwrap());
    let pv = pvs.get("pv-publish").await.unwrap();
    assert!(pv.metadata.deletion_timestamp.is_some(), "{pv:?}");
    delete_and_wait_gone(&vas, "va-fail", WAIT).await;
    delete_and_wait_gone(&vas, "va-noid", WAIT).await;
    wait_for(
        "PV pv-publish gone once no attachment uses it",
        WAIT,
        || async {
            match pvs.get_opt("pv-publish").await.map_err(|e| e.to_string())? {
                None => Ok(Some(())),
                Some(pv) => Err(format!("finalizers {:?}", pv.metadata.finalizers)),
            }
        },
    )
    .await;
    attacher.stop().await.unwrap();
}
