//! kubelet's CSI volume manager in the node agent, on a real control plane (with the
//! attach/detach controller) with the real `nfs-csi-plugin` (local mounter: bind mounts of
//! export directories) and `node-driver-registrar` as host processes:
//!
//! - FailedMount events for a missing claim, an unbound claim and an unregistered driver;
//! - a pod writes into a static NFS PV through its claim, a second pod on the node reads it,
//!   `volumesInUse` lists the volume (and survives the status heartbeat);
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

mod control_plane_support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use control_plane_support::wait_for;
use harness::control_plane::{ClientIdentity, ControlPlane};
use harness::node::csi::{attachment_name, unique_volume_name};
use harness::node::{NodeAgent, NodeAgentConfig, Timings};
use harness::runtime::Lifeline;
use k8s_openapi::api::core::v1::{
    Event, Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ServiceAccount,
};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, VolumeAttachment};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::process::{Child, Command};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const NS: &str = "csi-volumes";
const NODE: &str = "csi-vol-node";
/// Mounted without attachment (CSIDriver attachRequired: false, podInfoOnMount).
const DRIVER: &str = "nfs.csi.test";
/// No CSIDriver object: attachment required.
const ATTACH_DRIVER: &str = "nfs-attach.csi.test";
const WAIT: Duration = Duration::from_secs(90);

struct RunningAgent {
    stop: oneshot::Sender<()>,
    task: JoinHandle<harness::node::Result<()>>,
}

fn start_agent(config: NodeAgentConfig) -> RunningAgent {
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(NodeAgent::run(config, async move {
        let _ = stopped.await;
    }));
    RunningAgent { stop, task }
}

impl RunningAgent {
    async fn stop(self) {
        self.stop.send(()).unwrap();
        self.task.await.unwrap().expect("the agent stops cleanly");
    }
}

/// The directory of the binaries of `packages` (one binary each, named after it), built if
/// missing or stale.
fn build_binaries(packages: &[&str]) -> PathBuf {
    let wanted: Vec<(&str, &str)> = packages.iter().map(|p| (*p, *p)).collect();
    let paths = harness::workspace::binaries(&wanted).unwrap();
    paths[0].parent().unwrap().to_path_buf()
}

/// The NFS plugin for `driver`, in a mount namespace of its own where `run_dir` is
/// `/var/lib/kubelet` (mounts below `run_dir/pods` propagate back: it is a shared mount
/// point); its log (one line per gRPC call) goes to `log`.
fn start_nfs_plugin(
    binary: &Path,
    run_dir: &Path,
    driver: &str,
    export_root: &Path,
    log: &Path,
) -> (Child, PathBuf) {
    let socket = run_dir.join("plugins").join(driver).join("csi.sock");
    std::fs::create_dir_all(socket.parent().unwrap()).unwrap();
    // The namespace's root mount is made private first so that nothing mounted at
    // /var/lib/kubelet shows outside; the rbind copies of the shared pods/plugins mounts
    // stay peers of the host's.
    let script = r#"set -e
mkdir -p /var/lib/kubelet
mount --make-private "$(stat -c %m /var/lib/kubelet)"
mount --rbind "$RUN_DIR" /var/lib/kubelet
exec "$PLUGIN" --endpoint "unix://$SOCKET" --nodeid "$NODE_NAME" --drivername "$DRIVER" --mounter local --local-export-root "$EXPORTS"
"#;
    let log = std::fs::File::create(log).unwrap();
    let child = Command::new("unshare")
        .args(["--mount", "--propagation", "unchanged", "sh", "-c", script])
        .env("RUN_DIR", run_dir)
        .env("PLUGIN", binary)
        .env("SOCKET", &socket)
        .env("NODE_NAME", NODE)
        .env("DRIVER", driver)
        .env("EXPORTS", export_root)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    (child, socket)
}

fn start_registrar(binary: &Path, driver_socket: &Path, run_dir: &Path, driver: &str) -> Child {
    Command::new(binary)
        .arg(format!("--csi-address={}", driver_socket.display()))
        .arg(format!(
            "--kubelet-registration-path=/var/lib/kubelet/plugins/{driver}/csi.sock"
        ))
        .arg(format!(
            "--plugin-registration-path={}",
            run_dir.join("plugins_registry").display()
        ))
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// How many calls of `method` the plugin logged as successful.
fn calls(log: &Path, method: &str) -> usize {
    let suffix = format!("/csi.v1.Node/{method}");
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("gRPC call OK") && l.contains(&suffix))
        .count()
}

fn is_mount_point(path: &Path) -> bool {
    let wanted = path.to_string_lossy().into_owned();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|m| m == wanted)
}

fn mounts_under(dir: &Path) -> Vec<String> {
    let prefix = dir.to_string_lossy().into_owned();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| m.starts_with(&prefix))
        .map(str::to_owned)
        .collect()
}

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

fn pod_with_claim(name: &str, claim: &str, script: &str) -> Pod {
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
                "volumeMounts": [{"name": "data", "mountPath": "/data"}]
            }],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        }
    }))
    .unwrap()
}

fn phase(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

async fn wait_phase(pods: &Api<Pod>, name: &str, wanted: &str) -> Pod {
    wait_for(&format!("pod {name} {wanted}"), WAIT, || async {
        let pod = pods.get(name).await.map_err(|e| e.to_string())?;
        if phase(&pod) == wanted {
            Ok(Some(pod))
        } else {
            Err(format!("phase {:?}: {:?}", phase(&pod), pod.status))
        }
    })
    .await
}

async fn wait_event(client: &Client, pod: &str, reason: &str, text: &str) -> String {
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    wait_for(
        &format!("a {reason} event of {pod} with {text:?}"),
        WAIT,
        || async {
            let list = events
                .list(&ListParams::default().fields(&format!("involvedObject.name={pod}")))
                .await
                .map_err(|e| e.to_string())?;
            let messages: Vec<String> = list
                .items
                .iter()
                .filter(|e| e.reason.as_deref() == Some(reason))
                .filter_map(|e| e.message.clone())
                .collect();
            match messages.iter().find(|m| m.contains(text)) {
                Some(m) => Ok(Some(m.clone())),
                None => Err(format!("{reason} events: {messages:?}")),
            }
        },
    )
    .await
}

async fn delete_and_wait_gone(pods: &Api<Pod>, name: &str) {
    pods.delete(name, &DeleteParams::default()).await.unwrap();
    wait_for(&format!("pod {name} gone"), WAIT, || async {
        match pods.get_opt(name).await.map_err(|e| e.to_string())? {
            None => Ok(Some(())),
            Some(p) => Err(format!("still there: {:?}", p.status.and_then(|s| s.phase))),
        }
    })
    .await;
}

async fn volumes_in_use(nodes: &Api<Node>) -> Vec<String> {
    nodes
        .get(NODE)
        .await
        .unwrap()
        .status
        .and_then(|s| s.volumes_in_use)
        .unwrap_or_default()
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap()
}

#[tokio::test]
async fn claims_of_csi_volumes_are_mounted_into_pods_and_unmounted() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("harness=info")
        .with_test_writer()
        .try_init();
    let bin = build_binaries(&["nfs-csi-plugin", "node-driver-registrar"]);
    let cp = ControlPlane::builder()
        .start()
        .await
        .expect("control plane starts");
    let client = cp.client();
    let dir = harness::runtime::host_mounts::ScratchDir::new().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cp.write_kubeconfig(
        &kubeconfig,
        &ClientIdentity {
            user: format!("system:node:{NODE}"),
            group: Some("system:nodes".into()),
        },
    )
    .unwrap();
    let run_dir = dir.path().join("node");
    let mut config = NodeAgentConfig::new(
        NODE,
        kubeconfig,
        &run_dir,
        cp.ports().apiserver,
        cp.ca_file(),
    );
    config.sandbox_helper = Some(PathBuf::from(env!("CARGO_BIN_EXE_pod-sandbox")));
    config.lifeline = Some(Lifeline::this_process().unwrap());
    config.timings = Timings {
        node_status_interval: Duration::from_secs(2),
        retry_interval: Duration::from_millis(500),
        ..Timings::default()
    };
    let mut agent = start_agent(config.clone());

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap(),
        )
        .await
        .unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NS);
    wait_for("the default ServiceAccount", WAIT, || async {
        accounts.get_opt("default").await.map_err(|e| e.to_string())
    })
    .await;
    let drivers: Api<CSIDriver> = Api::all(client.clone());
    drivers
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": DRIVER},
                "spec": {"attachRequired": false, "podInfoOnMount": true}
            }))
            .unwrap(),
        )
        .await
        .unwrap();

    // Plugins and registrars; the exports.
    let exports = dir.path().join("exports");
    for share in ["share1", "share2"] {
        std::fs::create_dir_all(exports.join(share)).unwrap();
    }
    std::fs::write(exports.join("share1/existing"), "kept").unwrap();
    let nodes: Api<Node> = Api::all(client.clone());
    wait_for("the Node", WAIT, || async {
        nodes.get_opt(NODE).await.map_err(|e| e.to_string())
    })
    .await;
    let log = dir.path().join("nfs-plugin.log");
    let attach_log = dir.path().join("nfs-attach-plugin.log");
    let (_plugin, socket) = start_nfs_plugin(
        &bin.join("nfs-csi-plugin"),
        &run_dir,
        DRIVER,
        &exports,
        &log,
    );
    let (_attach_plugin, attach_socket) = start_nfs_plugin(
        &bin.join("nfs-csi-plugin"),
        &run_dir,
        ATTACH_DRIVER,
        &exports,
        &attach_log,
    );
    let registrar = bin.join("node-driver-registrar");
    let _registrar = start_registrar(&registrar, &socket, &run_dir, DRIVER);
    let _attach_registrar = start_registrar(&registrar, &attach_socket, &run_dir, ATTACH_DRIVER);
    let csinodes: Api<CSINode> = Api::all(client.clone());
    wait_for("both drivers in the CSINode", WAIT, || async {
        let csinode = csinodes.get(NODE).await.map_err(|e| e.to_string())?;
        let names: Vec<&str> = csinode
            .spec
            .drivers
            .iter()
            .map(|d| d.name.as_str())
            .collect();
        if names.contains(&DRIVER) && names.contains(&ATTACH_DRIVER) {
            Ok(Some(()))
        } else {
            Err(format!("drivers {names:?}"))
        }
    })
    .await;

    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let post = PostParams::default();

    // 1. FailedMount: a missing claim, an unbound claim, an unregistered driver.
    pods.create(&post, &pod_with_claim("no-claim", "missing", "sleep 60"))
        .await
        .unwrap();
    let message = wait_event(&client, "no-claim", "FailedMount", "missing").await;
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
    wait_event(&client, "unbound-claim", "FailedMount", "PVC is not bound").await;
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
        "no-driver",
        "FailedMount",
        "driver name absent.csi.test not found in the list of registered CSI drivers",
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
        delete_and_wait_gone(&pods, name).await;
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
    wait_for("claim data Bound", WAIT, || async {
        let pvc = claims.get("data").await.map_err(|e| e.to_string())?;
        let phase = pvc.status.and_then(|s| s.phase);
        Ok((phase.as_deref() == Some("Bound")).then_some(()))
    })
    .await;
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
    let writer = wait_phase(&pods, "writer", "Running").await;
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
        is_mount_point(&writer_target),
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
    wait_for("volumesInUse listing the volume", WAIT, || async {
        let in_use = volumes_in_use(&nodes).await;
        Ok((in_use == [unique.clone()]).then_some(()))
    })
    .await;
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
    let reader = wait_phase(&pods, "reader", "Running").await;
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
    assert!(is_mount_point(&reader_target));
    assert_eq!(calls(&log, "NodePublishVolume"), 2);
    assert_eq!(
        calls(&log, "NodeStageVolume"),
        0,
        "the plugin does not stage"
    );

    // 3. Restart of the agent with both pods running: no second publish for them.
    agent.stop().await;
    agent = start_agent(config.clone());
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
    let after_restart = wait_phase(&pods, "after-restart", "Running").await;
    assert_eq!(
        calls(&log, "NodePublishVolume"),
        3,
        "only the new pod's volume is published after the restart"
    );
    assert!(is_mount_point(&writer_target) && is_mount_point(&reader_target));
    assert_eq!(volumes_in_use(&nodes).await, std::slice::from_ref(&unique));

    // Deleting them unpublishes: no mount left, pod directories gone, data intact.
    for name in ["writer", "reader", "after-restart"] {
        delete_and_wait_gone(&pods, name).await;
    }
    assert_eq!(calls(&log, "NodeUnpublishVolume"), 3);
    for pod in [&writer, &reader, &after_restart] {
        let pod_dir = run_dir.join("pods").join(uid(pod));
        assert!(!pod_dir.exists(), "{} is left", pod_dir.display());
    }
    assert_eq!(
        mounts_under(&run_dir.join("pods")),
        [run_dir.join("pods").display().to_string()]
    );
    assert_eq!(
        std::fs::read_to_string(exports.join("share1/from-writer")).unwrap(),
        "written-by-pod\n"
    );
    assert_eq!(
        std::fs::read_to_string(exports.join("share1/existing")).unwrap(),
        "kept"
    );
    wait_for("volumesInUse empty", WAIT, || async {
        let in_use = volumes_in_use(&nodes).await;
        if in_use.is_empty() {
            Ok(Some(()))
        } else {
            Err(format!("{in_use:?}"))
        }
    })
    .await;

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
    wait_for(
        "volumesInUse listing the volume to attach",
        WAIT,
        || async {
            let in_use = volumes_in_use(&nodes).await;
            Ok((in_use == [attach_unique.clone()]).then_some(()))
        },
    )
    .await;
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
    assert_eq!(calls(&attach_log, "NodePublishVolume"), 0);
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
    let attached_pod = wait_phase(&pods, "attached", "Running").await;
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
    assert_eq!(calls(&attach_log, "NodePublishVolume"), 1);
    delete_and_wait_gone(&pods, "attached").await;
    assert_eq!(calls(&attach_log, "NodeUnpublishVolume"), 1);
    assert_eq!(mounts_under(&run_dir.join("pods")).len(), 1);
    wait_for("volumesInUse empty again", WAIT, || async {
        let in_use = volumes_in_use(&nodes).await;
        Ok(in_use.is_empty().then_some(()))
    })
    .await;

    agent.stop().await;
    // The agent's shared mount points outlive it (as a kubelet's would); the test's go.
    for dir in ["pods", "plugins"] {
        let _ = nix::mount::umount2(&run_dir.join(dir), nix::mount::MntFlags::MNT_DETACH);
    }
}
