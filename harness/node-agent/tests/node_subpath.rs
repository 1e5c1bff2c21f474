//! subPath volume mounts in the node agent as kubelet prepares them, on a real control plane
//! with the real `nfs-csi-plugin` (local mounter: bind mounts of export directories) and
//! `node-driver-registrar` as host processes, for a CSI volume and an emptyDir:
//!
//! - a subPath that is a symbolic link out of its volume — to `../`, to `/bin`, to a path
//!   that does not exist (upstream's `/bin/notanexistingpath`, here a directory of the test
//!   that would be created), to `/` made by an init container in an emptyDir — leaves the
//!   container waiting in `CreateContainerConfigError` with kubelet's message and a `Failed`
//!   event, nothing mounted for it and nothing created out of the volume;
//! - existing directories and files and missing directories (created in the volume) are
//!   bind-mounted from `volume-subpaths/` and seen by the container;
//! - those bind mounts go before the volume is unpublished, when the pod is deleted and when
//!   an agent restart finds the pod gone (the orphan sweep).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use pod_runtime::host_mounts::mount_points_under;
use serde_json::{Value, json};
use testkit::drivers::{NfsNodePlugin, binary_dir, start_registrar};
use testkit::node::{NodeBed, RunningAgent, wait_csi_drivers, wait_volumes_in_use};
use testkit::objects::{
    bound, csi_driver_without_attach, delete_and_wait_gone, namespace, wait_event, wait_pod_phase,
    wait_service_account,
};
use testkit::wait_for;

const NS: &str = "subpaths";
const NODE: &str = "subpath-node";
const DRIVER: &str = "nfs-subpath.csi.test";
const WAIT: Duration = Duration::from_secs(90);

/// A pod on the node whose container `main` runs `script` with `mounts` (volume, subPath,
/// path), the claim `data` as volume `data` and an emptyDir `scratch`; `init` (a script
/// mounting `scratch` at `/scratch`) runs first when given.
fn pod(name: &str, script: &str, mounts: &[(&str, &str, &str)], init: Option<&str>) -> Pod {
    let mounts: Vec<Value> = mounts
        .iter()
        .map(|(volume, sub, path)| json!({"name": volume, "subPath": sub, "mountPath": path}))
        .collect();
    let init: Vec<Value> = init
        .into_iter()
        .map(|script| {
            json!({
                "name": "init", "image": "busybox", "command": ["sh", "-c", script],
                "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]
            })
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "nodeName": NODE,
            "restartPolicy": "Never",
            "automountServiceAccountToken": false,
            "terminationGracePeriodSeconds": 2,
            "initContainers": init,
            "containers": [{
                "name": "main", "image": "busybox", "command": ["sh", "-c", script],
                "volumeMounts": mounts
            }],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "scratch", "emptyDir": {}}
            ]
        }
    }))
    .unwrap()
}

/// `<run_dir>/pods/<uid>/volume-subpaths` of `pod`.
fn subpaths_dir(run_dir: &Path, pod: &Pod) -> PathBuf {
    let uid = pod.metadata.uid.clone().unwrap();
    run_dir.join("pods").join(uid).join("volume-subpaths")
}

/// Waits until the container `main` of pod `name` waits in `CreateContainerConfigError` with
/// `message`, and returns the pod.
async fn wait_refused(pods: &Api<Pod>, name: &str, message: &str) -> Pod {
    let what = format!("pod {name}'s container refused with {message:?}");
    wait_for(&what, WAIT, || async {
        let pod = pods.get(name).await.map_err(|e| e.to_string())?;
        let waiting = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.iter().find(|c| c.name == "main"))
            .and_then(|c| c.state.as_ref())
            .and_then(|s| s.waiting.clone());
        let refused = waiting.as_ref().is_some_and(|w| {
            w.reason.as_deref() == Some("CreateContainerConfigError")
                && w.message.as_deref() == Some(message)
        });
        if refused {
            Ok(Some(pod))
        } else {
            Err(format!("{:?}", pod.status))
        }
    })
    .await
}

#[tokio::test]
async fn sub_paths_stay_inside_their_volume_and_their_mounts_go_with_the_pod() {
    binary_dir(&["nfs-csi-plugin", "node-driver-registrar"]);
    let bed = NodeBed::start().await;
    let client = bed.client();
    let dir = bed.dir();
    let config = bed.agent_config(NODE, testkit::node::pod_sandbox());
    let run_dir = config.run_dir.clone();
    let mut agent = RunningAgent::start(config.clone());
    namespace(&client, NS).await;
    wait_service_account(&client, NS, "default", WAIT).await;
    csi_driver_without_attach(&client, DRIVER).await;

    // The share: a directory with a file, and links out of it.
    let exports = dir.join("exports");
    let share = exports.join("share1");
    std::fs::create_dir_all(share.join("existing")).unwrap();
    std::fs::write(share.join("existing/file"), "seeded\n").unwrap();
    let outside = dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let not_there = outside.join("notanexistingpath");
    std::os::unix::fs::symlink("../", share.join("escape-up")).unwrap();
    std::os::unix::fs::symlink("/bin", share.join("escape-bin")).unwrap();
    std::os::unix::fs::symlink(&not_there, share.join("dangling")).unwrap();

    std::fs::create_dir_all(run_dir.join("plugins_registry")).unwrap();
    let plugin = NfsNodePlugin::start(&run_dir, NODE, DRIVER, &exports, &dir.join("plugin.log"));
    let _registrar = start_registrar(&plugin.socket, &run_dir, DRIVER, &dir.join("reg.log"));
    wait_csi_drivers(&client, NODE, &[DRIVER], WAIT).await;
    let pv: PersistentVolume = serde_json::from_value(json!({
        "metadata": {"name": "pv-subpath"},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {"namespace": NS, "name": "data"},
            "csi": {
                "driver": DRIVER,
                "volumeHandle": "share-1",
                "volumeAttributes": {"server": "127.0.0.1", "share": "/share1"}
            }
        }
    }))
    .unwrap();
    let post = PostParams::default();
    Api::<PersistentVolume>::all(client.clone())
        .create(&post, &pv)
        .await
        .unwrap();
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": "pv-subpath",
            "resources": {"requests": {"storage": "1Gi"}}
        }
    }))
    .unwrap();
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), NS)
        .create(&post, &claim)
        .await
        .unwrap();
    bound(&client, NS, "data", WAIT).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);

    // 1. Links out of the volume: refused, nothing mounted, nothing created.
    let prepare = "failed to prepare subPath for volumeMount \"data\" of container \"main\"";
    let create =
        "failed to create subPath directory for volumeMount \"data\" of container \"main\"";
    let scratch_prepare =
        "failed to prepare subPath for volumeMount \"scratch\" of container \"main\"";
    let cases = [
        (
            "escape-up",
            pod(
                "escape-up",
                "sleep 3600",
                &[("data", "escape-up", "/sub")],
                None,
            ),
            prepare,
        ),
        (
            "escape-bin",
            pod(
                "escape-bin",
                "sleep 3600",
                &[("data", "escape-bin", "/sub")],
                None,
            ),
            prepare,
        ),
        (
            "dangling",
            pod(
                "dangling",
                "sleep 3600",
                &[("data", "dangling", "/sub")],
                None,
            ),
            create,
        ),
        (
            "escape-root",
            pod(
                "escape-root",
                "sleep 3600",
                &[("scratch", "root", "/sub")],
                Some("ln -s / /scratch/root"),
            ),
            scratch_prepare,
        ),
    ];
    for (name, pod, message) in &cases {
        pods.create(&post, pod).await.unwrap();
        let refused = wait_refused(&pods, name, message).await;
        wait_event(
            &client,
            NS,
            name,
            "Failed",
            &format!("Error: {message}"),
            WAIT,
        )
        .await;
        let mounted = mount_points_under(&subpaths_dir(&run_dir, &refused)).unwrap();
        assert!(mounted.is_empty(), "{name}: {mounted:?}");
    }
    assert!(
        !not_there.exists(),
        "the dangling link's target was created"
    );
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);

    // 2. An existing directory and file, a missing directory (created in the share) and a
    // missing one in the emptyDir.
    let good = pod(
        "good",
        "cat /existing/file /file > /new/copied && echo made > /made/x && sleep 3600",
        &[
            ("data", "existing", "/existing"),
            ("data", "existing/file", "/file"),
            ("data", "missing/deeper", "/new"),
            ("scratch", "made", "/made"),
        ],
        None,
    );
    pods.create(&post, &good).await.unwrap();
    let good = wait_pod_phase(&pods, "good", "Running", WAIT).await;
    wait_for("the copy through the subPaths", WAIT, || async {
        Ok(std::fs::read_to_string(share.join("missing/deeper/copied"))
            .ok()
            .filter(|t| t == "seeded\nseeded\n"))
    })
    .await;
    let good_subpaths = subpaths_dir(&run_dir, &good);
    let mounted = mount_points_under(&good_subpaths).unwrap();
    assert_eq!(mounted.len(), 4, "{mounted:?}");
    let uid = good.metadata.uid.clone().unwrap();
    let scratch = node_agent::pod_dir(&run_dir, NS, "good", &uid).join("volumes/scratch");
    assert_eq!(
        std::fs::read_to_string(scratch.join("made/x")).unwrap(),
        "made\n"
    );

    // 3. Deleted: the subPath mounts go, then the volume is unpublished.
    for (name, ..) in &cases {
        delete_and_wait_gone(&pods, name, WAIT).await;
    }
    delete_and_wait_gone(&pods, "good", WAIT).await;
    assert!(!good_subpaths.exists());
    assert!(!run_dir.join("pods").join(&uid).exists());

    // 4. Gone while the agent was stopped: the orphan sweep unmounts the subPaths first.
    let orphan = pod(
        "orphan",
        "sleep 3600",
        &[("data", "existing", "/existing")],
        None,
    );
    pods.create(&post, &orphan).await.unwrap();
    let orphan = wait_pod_phase(&pods, "orphan", "Running", WAIT).await;
    let orphan_subpaths = subpaths_dir(&run_dir, &orphan);
    assert_eq!(mount_points_under(&orphan_subpaths).unwrap().len(), 1);
    agent.stop().await;
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    pods.delete("orphan", &now).await.unwrap();
    agent = RunningAgent::start(config.clone());
    let orphan_dir = run_dir
        .join("pods")
        .join(orphan.metadata.uid.clone().unwrap());
    wait_for("the orphan's directory gone", WAIT, || async {
        if orphan_dir.exists() {
            Err(format!("{:?}", mount_points_under(&orphan_dir)))
        } else {
            Ok(Some(()))
        }
    })
    .await;

    let pods_dir = std::fs::canonicalize(run_dir.join("pods")).unwrap();
    assert_eq!(
        mount_points_under(&pods_dir).unwrap(),
        std::slice::from_ref(&pods_dir)
    );
    assert_eq!(
        std::fs::read_to_string(share.join("existing/file")).unwrap(),
        "seeded\n"
    );
    wait_volumes_in_use(&client, NODE, &[], WAIT).await;
    agent.stop().await;
    drop(_registrar);
    drop(plugin);
    bed.shutdown().await;
}
