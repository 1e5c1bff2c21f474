//! kubelet's CSI volume manager in the node agent, on a real control plane (with the
//! attach/detach controller) with the real `nfs-csi-plugin` (local mounter: bind mounts of
//! export directories) and `node-driver-registrar` as host processes:
//!
//! - FailedMount events for a missing claim, an unbound claim and an unregistered driver;
//! - a pod writes into a static NFS PV through its claim, a second pod on the node reads it,
//!   `volumesInUse` lists the volume (and survives the status heartbeat), the kubelet API's
//!   `/stats/summary` reports its usage (NodeGetVolumeStats) with its claim;
//! - an agent restart with running pods: no second NodePublishVolume for them, and deleting
//!   them afterwards still unpublishes (targets no longer mount points, directories gone,
//!   export data intact, `volumesInUse` empty);
//! - a driver needing attachment: the pod waits (Pending) until the VolumeAttachment the
//!   attach/detach controller created is marked attached and the Node lists the volume in
//!   `volumesAttached`; the VolumeAttachment's metadata is the publish context.
//!
//! The plugin runs in its own mount namespace where the agent's run directory is
//! `/var/lib/kubelet` (the path kubelet gives in requests); the run directory's `pods`
//! directory is a shared mount point, so its mounts show on the host as a node plugin pod's
//! Bidirectional mounts would.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, Patch, PatchParams, PostParams};
use node_agent::csi::{attachment_name, unique_volume_name};
use pod_runtime::host_mounts::{is_mount_point, mount_points_under};
use serde_json::json;
use testkit::drivers::{NfsNodePlugin, binary_dir, start_registrar};
use testkit::node::{NodeBed, RunningAgent, volumes_in_use, wait_csi_drivers, wait_volumes_in_use};
use testkit::objects::{
    bound, csi_driver_without_attach, delete_and_wait_gone, namespace, phase, pod_using_claim,
    wait_event, wait_pod_phase, wait_service_account,
};
use testkit::wait_for;

const NS: &str = "csi-volumes";
const NODE: &str = "csi-vol-node";
/// Mounted without attachment (CSIDriver attachRequired: false, podInfoOnMount).
const DRIVER: &str = "nfs.csi.test";
/// No CSIDriver object: attachment required.
const ATTACH_DRIVER: &str = "nfs-attach.csi.test";
const WAIT: Duration = Duration::from_secs(90);

fn static_pv(name: &str, driver: &str, handle: &str, share: &str, claim: &str) -> PersistentVolume {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "mountOptions": ["nfsvers=4.1"],
            "claimRef": {"namespace": NS, "name": claim},
            "csi": {
                "driver": driver,
                "volumeHandle": handle,
                "volumeAttributes": {"server": "127.0.0.1", "share": share}
            }
        }
    }))
    .unwrap()
}

fn claim(name: &str, volume: Option<&str>) -> PersistentVolumeClaim {
    let mut spec = json!({
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "",
        "resources": {"requests": {"storage": "1Gi"}}
    });
    if let Some(volume) = volume {
        spec["volumeName"] = json!(volume);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

/// A pod on the node running `script` with the claim `claim` at `/data`.
fn pod_with_claim(name: &str, claim: &str, script: &str) -> Pod {
    pod_using_claim(name, NODE, claim, script)
}

/// How many calls of the Node service's `method` the plugin logged as successful.
fn calls(plugin: &NfsNodePlugin, method: &str) -> usize {
    plugin
        .process
        .successful_calls(&format!("/csi.v1.Node/{method}"))
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap()
}

#[tokio::test]
async fn claims_of_csi_volumes_are_mounted_into_pods_and_unmounted() {
    // Both binaries with one cargo call (when stale), before the plugins ask for them.
    binary_dir(&["nfs-csi-plugin", "node-driver-registrar"]);
    let bed = NodeBed::start().await;
    let client = bed.client();
    let dir = bed.dir();
    let mut config = bed.agent_config(NODE, testkit::node::pod_sandbox());
    // The kubelet API, for /stats/summary.
    let serving = control_plane::write_serving_pair(
        dir,
        "kubelet",
        &bed.cp
            .ca()
            .serving_cert(&format!("system:node:{NODE}"), &["127.0.0.1".into()])
            .unwrap(),
    )
    .unwrap();
    config.kubelet_api = Some(node_agent::KubeletApiConfig {
        serving_cert: serving.cert,
        serving_key: serving.key,
        port: 0,
    });
    let run_dir = config.run_dir.clone();
    let mut agent = RunningAgent::start(config.clone());

    namespace(&client, NS).await;
    wait_service_account(&client, NS, "default", WAIT).await;
    csi_driver_without_attach(&client, DRIVER).await;

    // Plugins and registrars; the exports.
    let exports = dir.join("exports");
    for share in ["share1", "share2"] {
        std::fs::create_dir_all(exports.join(share)).unwrap();
    }
    std::fs::write(exports.join("share1/existing"), "kept").unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    wait_for("the Node", WAIT, || async {
        nodes.get_opt(NODE).await.map_err(|e| e.to_string())
    })
    .await;
    let plugin = NfsNodePlugin::start(
        &run_dir,
        NODE,
        DRIVER,
        &exports,
        &dir.join("nfs-plugin.log"),
    );
    let attach_plugin = NfsNodePlugin::start(
        &run_dir,
        NODE,
        ATTACH_DRIVER,
        &exports,
        &dir.join("nfs-attach-plugin.log"),
    );
    let _registrars = [(&plugin, DRIVER), (&attach_plugin, ATTACH_DRIVER)].map(|(p, driver)| {
        let log = dir.join(format!("{driver}-registrar.log"));
        start_registrar(&p.socket, &run_dir, driver, &log)
    });
    wait_csi_drivers(&client, NODE, &[DRIVER, ATTACH_DRIVER], WAIT).await;

    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let post = PostParams::default();

    // 1. FailedMount: a missing claim, an unbound claim, an unregistered driver.
    pods.create(&post, &pod_with_claim("no-claim", "missing", "sleep 60"))
        .await
        .unwrap();
    let message = wait_event(&client, NS, "no-claim", "FailedMount", "missing", WAIT).await;
    assert!(
        message.contains(&format!("error processing PVC {NS}/missing"))
            && message.contains("persistentvolumeclaims \"missing\" not found"),
        "{message}"
    );
    claims.create(&post, &claim("unbound", None)).await.unwrap();
    pods.create(
        &post,
        &pod_with_claim("unbound-claim", "unbound", "sleep 60"),
    )
    .await
    .unwrap();
    wait_event(
        &client,
        NS,
        "unbound-claim",
        "FailedMount",
        "PVC is not bound",
        WAIT,
    )
    .await;
    pvs.create(
        &post,
        &static_pv(
            "pv-absent",
            "absent.csi.test",
            "absent-1",
            "/share1",
            "absent",
        ),
    )
    .await
    .unwrap();
    claims
        .create(&post, &claim("absent", Some("pv-absent")))
        .await
        .unwrap();
    pods.create(&post, &pod_with_claim("no-driver", "absent", "sleep 60"))
        .await
        .unwrap();
    let message = wait_event(
        &client,
        NS,
        "no-driver",
        "FailedMount",
        "driver name absent.csi.test not found in the list of registered CSI drivers",
        WAIT,
    )
    .await;
    assert!(
        message.starts_with("MountVolume.SetUp failed for volume \"pv-absent\""),
        "{message}"
    );
    for name in ["no-claim", "unbound-claim", "no-driver"] {
        assert_eq!(phase(&pods.get(name).await.unwrap()), "Pending");
    }
    for name in ["no-claim", "unbound-claim", "no-driver"] {
        delete_and_wait_gone(&pods, name, WAIT).await;
    }

    // 2. A static NFS volume: a pod writes, a second pod on the node reads.
    let unique = unique_volume_name(DRIVER, "share-1");
    pvs.create(
        &post,
        &static_pv("pv-nfs", DRIVER, "share-1", "/share1", "data"),
    )
    .await
    .unwrap();
    claims
        .create(&post, &claim("data", Some("pv-nfs")))
        .await
        .unwrap();
    bound(&client, NS, "data", WAIT).await;
    pods.create(
        &post,
        &pod_with_claim(
            "writer",
            "data",
            "echo written-by-pod > /data/from-writer && cat /data/existing > /data/writer-saw && sleep 3600",
        ),
    )
    .await
    .unwrap();
    let writer = wait_pod_phase(&pods, "writer", "Running", WAIT).await;
    wait_for("the writer's file in the export", WAIT, || async {
        Ok(std::fs::read_to_string(exports.join("share1/writer-saw"))
            .ok()
            .filter(|t| t == "kept"))
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(exports.join("share1/from-writer")).unwrap(),
        "written-by-pod\n"
    );
    let writer_target = run_dir.join(format!(
        "pods/{}/volumes/kubernetes.io~csi/pv-nfs/mount",
        uid(&writer)
    ));
    assert!(
        is_mount_point(&writer_target).unwrap(),
        "{}",
        writer_target.display()
    );
    let vol_data: serde_json::Value = serde_json::from_slice(
        &std::fs::read(writer_target.parent().unwrap().join("vol_data.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(vol_data["driverName"], DRIVER);
    assert_eq!(vol_data["volumeHandle"], "share-1");
    assert_eq!(vol_data["specVolID"], "pv-nfs");
    wait_volumes_in_use(&client, NODE, std::slice::from_ref(&unique), WAIT).await;
    // The kubelet API's /stats/summary (through the apiserver) has the volume's usage from
    // the driver's NodeGetVolumeStats, named after the pod's volume, with its claim.
    let summary_path = format!("/api/v1/nodes/{NODE}/proxy/stats/summary");
    let volume = wait_for("the CSI volume in the stats summary", WAIT, || async {
        let request = http::Request::get(&summary_path).body(Vec::new()).unwrap();
        let summary: serde_json::Value =
            client.request(request).await.map_err(|e| e.to_string())?;
        Ok(summary["pods"]
            .as_array()
            .and_then(|pods| pods.iter().find(|p| p["podRef"]["name"] == "writer"))
            .and_then(|p| p["volume"].as_array())
            .and_then(|v| v.iter().find(|v| v["name"] == "data"))
            .cloned())
    })
    .await;
    assert_eq!(
        volume["pvcRef"],
        json!({"name": "data", "namespace": NS}),
        "{volume}"
    );
    assert!(
        volume["capacityBytes"].as_i64().unwrap_or(0) > 0,
        "{volume}"
    );
    assert!(volume["usedBytes"].as_i64().is_some(), "{volume}");
    // The status heartbeat keeps it.
    let heartbeat = |node: &Node| {
        node.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
            .and_then(|c| c.last_heartbeat_time.clone())
    };
    let before = heartbeat(&nodes.get(NODE).await.unwrap());
    let after = wait_for("a later status heartbeat", WAIT, || async {
        let node = nodes.get(NODE).await.map_err(|e| e.to_string())?;
        Ok(Some(node).filter(|n| heartbeat(n) > before))
    })
    .await;
    assert_eq!(
        after.status.unwrap().volumes_in_use,
        Some(vec![unique.clone()])
    );

    pods.create(
        &post,
        &pod_with_claim(
            "reader",
            "data",
            "cat /data/from-writer > /data/reader-saw && sleep 3600",
        ),
    )
    .await
    .unwrap();
    let reader = wait_pod_phase(&pods, "reader", "Running", WAIT).await;
    wait_for("the reader's copy in the export", WAIT, || async {
        Ok(std::fs::read_to_string(exports.join("share1/reader-saw"))
            .ok()
            .filter(|t| t == "written-by-pod\n"))
    })
    .await;
    let reader_target = run_dir.join(format!(
        "pods/{}/volumes/kubernetes.io~csi/pv-nfs/mount",
        uid(&reader)
    ));
    assert!(is_mount_point(&reader_target).unwrap());
    assert_eq!(calls(&plugin, "NodePublishVolume"), 2);
    assert_eq!(
        calls(&plugin, "NodeStageVolume"),
        0,
        "the plugin does not stage"
    );

    // 3. Restart of the agent with both pods running: no second publish for them.
    agent.stop().await;
    agent = RunningAgent::start(config.clone());
    pods.create(
        &post,
        &pod_with_claim(
            "after-restart",
            "data",
            "ls /data > /dev/null && sleep 3600",
        ),
    )
    .await
    .unwrap();
    let after_restart = wait_pod_phase(&pods, "after-restart", "Running", WAIT).await;
    assert_eq!(
        calls(&plugin, "NodePublishVolume"),
        3,
        "only the new pod's volume is published after the restart"
    );
    assert!(is_mount_point(&writer_target).unwrap() && is_mount_point(&reader_target).unwrap());
    assert_eq!(
        volumes_in_use(&client, NODE).await,
        std::slice::from_ref(&unique)
    );

    // Deleting them unpublishes: no mount left, pod directories gone, data intact.
    for name in ["writer", "reader", "after-restart"] {
        delete_and_wait_gone(&pods, name, WAIT).await;
    }
    assert_eq!(calls(&plugin, "NodeUnpublishVolume"), 3);
    for pod in [&writer, &reader, &after_restart] {
        let pod_dir = run_dir.join("pods").join(uid(pod));
        assert!(!pod_dir.exists(), "{} is left", pod_dir.display());
    }
    let pods_dir = std::fs::canonicalize(run_dir.join("pods")).unwrap();
    assert_eq!(
        mount_points_under(&pods_dir).unwrap(),
        std::slice::from_ref(&pods_dir)
    );
    assert_eq!(
        std::fs::read_to_string(exports.join("share1/from-writer")).unwrap(),
        "written-by-pod\n"
    );
    assert_eq!(
        std::fs::read_to_string(exports.join("share1/existing")).unwrap(),
        "kept"
    );
    wait_volumes_in_use(&client, NODE, &[], WAIT).await;

    // 4. Attachment required: Pending until the VolumeAttachment is attached.
    let attach_unique = unique_volume_name(ATTACH_DRIVER, "share-2");
    pvs.create(
        &post,
        &static_pv("pv-attach", ATTACH_DRIVER, "share-2", "/share2", "attach"),
    )
    .await
    .unwrap();
    claims
        .create(&post, &claim("attach", Some("pv-attach")))
        .await
        .unwrap();
    pods.create(
        &post,
        &pod_with_claim(
            "attached",
            "attach",
            "echo attached > /data/from-attached && sleep 3600",
        ),
    )
    .await
    .unwrap();
    let attachments: Api<VolumeAttachment> = Api::all(client.clone());
    let va_name = attachment_name("share-2", ATTACH_DRIVER, NODE);
    let va = wait_for("the VolumeAttachment", WAIT, || async {
        attachments
            .get_opt(&va_name)
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    assert_eq!(va.spec.attacher, ATTACH_DRIVER);
    assert_eq!(va.spec.node_name, NODE);
    wait_volumes_in_use(&client, NODE, std::slice::from_ref(&attach_unique), WAIT).await;
    let pending = pods.get("attached").await.unwrap();
    assert_eq!(phase(&pending), "Pending");
    let attached_list = nodes
        .get(NODE)
        .await
        .unwrap()
        .status
        .and_then(|s| s.volumes_attached)
        .unwrap_or_default();
    assert!(
        attached_list.iter().all(|a| a.name != attach_unique),
        "{attached_list:?}"
    );
    assert_eq!(calls(&attach_plugin, "NodePublishVolume"), 0);
    // The attacher's part, done by hand.
    attachments
        .patch_status(
            &va_name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "attached": true,
                "attachmentMetadata": {"exported-by": "test"}
            }})),
        )
        .await
        .unwrap();
    wait_for("volumesAttached listing the volume", WAIT, || async {
        let node = nodes.get(NODE).await.map_err(|e| e.to_string())?;
        let attached = node
            .status
            .and_then(|s| s.volumes_attached)
            .unwrap_or_default();
        Ok(attached
            .iter()
            .any(|a| a.name == attach_unique)
            .then_some(()))
    })
    .await;
    let attached_pod = wait_pod_phase(&pods, "attached", "Running", WAIT).await;
    wait_for("the attached pod's file", WAIT, || async {
        Ok(
            std::fs::read_to_string(exports.join("share2/from-attached"))
                .ok()
                .filter(|t| t == "attached\n"),
        )
    })
    .await;
    let vol_data: serde_json::Value = serde_json::from_slice(
        &std::fs::read(run_dir.join(format!(
            "pods/{}/volumes/kubernetes.io~csi/pv-attach/vol_data.json",
            uid(&attached_pod)
        )))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(vol_data["attachmentID"], va_name.as_str());
    assert_eq!(calls(&attach_plugin, "NodePublishVolume"), 1);
    delete_and_wait_gone(&pods, "attached", WAIT).await;
    assert_eq!(calls(&attach_plugin, "NodeUnpublishVolume"), 1);
    assert_eq!(mount_points_under(&pods_dir).unwrap().len(), 1);
    wait_volumes_in_use(&client, NODE, &[], WAIT).await;

    // The agent's shared mount points outlive it (as a kubelet's would); the scratch
    // directory unmounts them when dropped.
    agent.stop().await;
}
