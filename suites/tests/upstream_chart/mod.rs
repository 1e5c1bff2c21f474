//! Upstream's Helm chart on the embedded cluster: its values and refusals, installing and uninstalling it, what its node plugins register, the arguments its containers accept, and upstream's examples applied, run and deleted.

use fakes::NodeMetadata;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use kube_support::wait;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use suites::e2e::binaries::workspace_root;
use suites::e2e::manifests::{AppliedObject, Applier, load};
use suites::e2e::{EnvironmentOptions, ManilaCsiEnvironment};

/// The chart's driver name: the share protocol joined to its `driverName` value.
pub const DRIVER: &str = "nfs.manila.csi.openstack.org";
/// The namespace the chart is installed in (`helm install -n`).
pub const RELEASE_NAMESPACE: &str = "manila-csi-upstream";
/// The Secret upstream's examples name, in namespace `default`.
pub const USER_SECRET: &str = "csi-manila-secrets";
/// The examples' application image (a web server) and its container.
pub const APP_IMAGE: &str = "nginx";
pub const APP_CONTAINER: &str = "web-server";
/// Where the examples mount their volume.
pub const MOUNT: &str = "/var/lib/www";
/// The zones of upstream's topology example (compute and Manila zones alike).
pub const ZONES: [&str; 2] = ["zone-1", "zone-2"];
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// Containers of the chart that this project's binaries do not start with the chart's
/// arguments: `(variant, container, argument)`, where the variant is `default` or `topology`.
pub const KNOWN_REFUSALS: &[(&str, &str, &str)] = &[
    // None today: the resizer accepts `--handle-volume-inuse-error` and the provisioner
    // `--feature-gates=Topology=true`, which it refused until they were added.
];

pub fn upstream_dir() -> PathBuf {
    workspace_root().join("fixtures/manila-csi-upstream")
}

/// The stand-in for the examples' web server image: a program that waits until stopped
/// (the examples only need a container holding the volume; the test reads and writes
/// through `exec`).
pub fn app_stand_in(dir: &Path) -> PathBuf {
    let path = dir.join("web-server");
    std::fs::write(&path, "#!/bin/sh\nexec sleep infinity\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

pub async fn start(app: &Path) -> ManilaCsiEnvironment {
    ManilaCsiEnvironment::start(EnvironmentOptions {
        nodes: 3,
        zones: ZONES.iter().map(|z| z.to_string()).collect(),
        extra_images: vec![(APP_IMAGE.to_string(), app.to_path_buf())],
        ..Default::default()
    })
    .await
    .expect("the environment starts")
}

/// Gives every node a metadata document of its own (a fresh instance id, its zone) and
/// returns the ids by node.
pub fn instance_ids(env: &ManilaCsiEnvironment) -> BTreeMap<String, String> {
    let cloud = env.fake_cloud().expect("the run's own fake cloud");
    let mut ids = BTreeMap::new();
    for node in &env.cluster().description().nodes {
        let id = uuid::Uuid::new_v4().to_string();
        cloud
            .set_node_metadata(
                &node.name,
                NodeMetadata {
                    uuid: id.clone(),
                    availability_zone: node.zone.clone(),
                    name: None,
                },
            )
            .unwrap();
        ids.insert(node.name.clone(), id);
    }
    ids
}

/// The user's part of the examples: the credentials Secret in `default`.
pub async fn create_user_secret(env: &ManilaCsiEnvironment) {
    let secrets: Api<Secret> = Api::namespaced(env.client(), "default");
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(USER_SECRET.into()),
            ..Default::default()
        },
        string_data: Some(env.driver_secret()),
        ..Default::default()
    };
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("creating the examples' Secret");
}

pub async fn delete_user_secret(env: &ManilaCsiEnvironment) {
    let secrets: Api<Secret> = Api::namespaced(env.client(), "default");
    secrets
        .delete(USER_SECRET, &DeleteParams::default())
        .await
        .expect("deleting the examples' Secret");
}

/// Installs the chart's manifests of `variant` (`default`: the top directory, `topology`:
/// `topology/`) with the NFS node plugin they forward to.
pub async fn install(env: &ManilaCsiEnvironment, variant: &str) -> Applier {
    let namespaces: Api<Namespace> = Api::all(env.client());
    let namespace = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(RELEASE_NAMESPACE.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .expect("creating the release namespace");
    let vars = BTreeMap::from([
        ("NAMESPACE".to_string(), RELEASE_NAMESPACE.to_string()),
        (
            "EXPORT_ROOT".to_string(),
            env.export_root().display().to_string(),
        ),
    ]);
    let dir = upstream_dir();
    let plugins = match variant {
        "default" => dir.clone(),
        other => dir.join(other),
    };
    let mut applier = Applier::new(env.client());
    for path in [
        dir.join("rbac.yaml"),
        dir.join("csidriver.yaml"),
        dir.join("nfs-nodeplugin.yaml"),
        plugins.join("controllerplugin.yaml"),
        plugins.join("nodeplugin.yaml"),
    ] {
        applier
            .apply_file(&path, &vars)
            .await
            .unwrap_or_else(|e| panic!("applying {}: {e}", path.display()));
    }
    applier
}

/// Deletes the release and its namespace.
pub async fn uninstall(env: &ManilaCsiEnvironment, mut applier: Applier) {
    applier.delete_all(TIMEOUT).await.expect("uninstalling");
    let namespaces: Api<Namespace> = Api::all(env.client());
    namespaces
        .delete(RELEASE_NAMESPACE, &DeleteParams::default())
        .await
        .expect("deleting the release namespace");
    wait::wait_deleted(&namespaces, RELEASE_NAMESPACE, TIMEOUT)
        .await
        .expect("the release namespace goes");
}

/// Waits until every node's CSINode lists the chart's driver, and returns
/// `(node ID, topology keys)` by node.
pub async fn registrations(env: &ManilaCsiEnvironment) -> BTreeMap<String, (String, Vec<String>)> {
    let csinodes: Api<CSINode> = Api::all(env.client());
    let nodes = env.cluster().node_names();
    wait::wait_until(
        format!("every node's CSINode to list {DRIVER}"),
        TIMEOUT,
        || {
            let csinodes = csinodes.clone();
            let nodes = nodes.clone();
            async move {
                let mut found = BTreeMap::new();
                let mut missing = Vec::new();
                for node in &nodes {
                    let entry = csinodes
                        .get_opt(node)
                        .await
                        .map_err(|e| e.to_string())?
                        .and_then(|c| c.spec.drivers.into_iter().find(|d| d.name == DRIVER));
                    match entry {
                        Some(d) => {
                            found.insert(
                                node.clone(),
                                (d.node_id, d.topology_keys.unwrap_or_default()),
                            );
                        }
                        None => missing.push(node.clone()),
                    }
                }
                if missing.is_empty() {
                    Ok(Some(found))
                } else {
                    Err(format!("registered: {found:?}; not yet: {missing:?}"))
                }
            }
        },
    )
    .await
    .expect("the node plugins register")
}

/// The state of every container of the release's pods, once each has started or failed
/// to: `(pod, container) → (running, log of its last attempt)`.
pub async fn settled_containers(
    env: &ManilaCsiEnvironment,
) -> BTreeMap<(String, String), (bool, String)> {
    let pods: Api<Pod> = Api::namespaced(env.client(), RELEASE_NAMESPACE);
    let states = wait::wait_until(
        "every container of the release to run or to have ended",
        TIMEOUT,
        || {
            let pods = pods.clone();
            async move {
                let list = pods
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
                let mut states = BTreeMap::new();
                let mut pending = Vec::new();
                for pod in &list.items {
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    let wanted = pod.spec.as_ref().map_or(0, |s| s.containers.len());
                    let statuses = pod
                        .status
                        .as_ref()
                        .and_then(|s| s.container_statuses.clone())
                        .unwrap_or_default();
                    if statuses.len() < wanted {
                        pending.push(format!("{name}: {} of {wanted} containers", statuses.len()));
                        continue;
                    }
                    for status in statuses {
                        let state = status.state.clone().unwrap_or_default();
                        let ended = state.terminated.is_some()
                            || status.restart_count > 0
                            || status
                                .last_state
                                .as_ref()
                                .is_some_and(|s| s.terminated.is_some());
                        if state.running.is_some() && status.restart_count == 0 {
                            states.insert((name.clone(), status.name.clone()), true);
                        } else if ended {
                            states.insert((name.clone(), status.name.clone()), false);
                        } else {
                            pending.push(format!("{name}/{}: {state:?}", status.name));
                        }
                    }
                }
                if list.items.is_empty() {
                    pending.push("no pods yet".into());
                }
                if pending.is_empty() {
                    Ok(Some(states))
                } else {
                    Err(pending.join("; "))
                }
            }
        },
    )
    .await
    .expect("the release's containers start");
    let mut out = BTreeMap::new();
    for ((pod, container), running) in states {
        let log = match env
            .cluster()
            .logs(RELEASE_NAMESPACE, &pod, &container, false)
            .await
        {
            Ok(log) if !log.trim().is_empty() => log,
            _ => env
                .cluster()
                .logs(RELEASE_NAMESPACE, &pod, &container, true)
                .await
                .unwrap_or_default(),
        };
        out.insert((pod, container), (running, log));
    }
    out
}

/// Asserts that every container of the release runs, except the [`KNOWN_REFUSALS`] of
/// `variant`, which must have refused exactly their argument. Returns the containers that
/// refused.
pub async fn check_arguments(env: &ManilaCsiEnvironment, variant: &str) -> Vec<String> {
    let known: BTreeMap<&str, &str> = KNOWN_REFUSALS
        .iter()
        .filter(|(v, _, _)| *v == variant)
        .map(|(_, c, a)| (*c, *a))
        .collect();
    let mut problems = Vec::new();
    let mut refused = Vec::new();
    for ((pod, container), (running, log)) in settled_containers(env).await {
        match (known.get(container.as_str()), running) {
            (None, true) => {}
            (None, false) => problems.push(format!(
                "{pod}/{container} does not run; its log:\n{}",
                tail(&log)
            )),
            (Some(argument), _) => {
                if running || !log.contains(&format!("unexpected argument '{argument}")) {
                    problems.push(format!(
                        "{pod}/{container} was listed in KNOWN_REFUSALS as refusing {argument}, \
                         but it runs: {running}; its log:\n{}",
                        tail(&log)
                    ));
                } else {
                    eprintln!(
                        "KNOWN GAP ({variant}): {pod}/{container} refuses the chart's {argument}"
                    );
                    refused.push(container.clone());
                }
            }
        }
    }
    assert!(
        problems.is_empty(),
        "the chart's argument lists ({variant}):\n{}",
        problems.join("\n")
    );
    refused
}

pub fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// Applies an example file into `namespace` (its namespaced objects name none, as
/// `kubectl apply -n` takes them).
pub async fn apply_example(
    applier: &mut Applier,
    file: &str,
    namespace: &str,
    vars: &BTreeMap<String, String>,
) {
    let path = upstream_dir().join("examples").join(file);
    for mut object in load(&path, vars).unwrap() {
        let kind = object.types.as_ref().map(|t| t.kind.clone()).unwrap();
        if matches!(
            kind.as_str(),
            "Pod" | "PersistentVolumeClaim" | "VolumeSnapshot"
        ) {
            object.metadata.namespace = Some(namespace.into());
        }
        applier
            .apply(object)
            .await
            .unwrap_or_else(|e| panic!("applying {kind} of {file}: {e}"));
    }
}

/// Deletes what `applier` applied, newest first, each gone before the next (a snapshot
/// before its class, a claim's pod before the claim).
pub async fn delete_in_order(env: &ManilaCsiEnvironment, applier: &Applier) {
    for object in applier.applied().iter().rev() {
        delete_and_wait(env, object).await;
    }
}

pub async fn delete_and_wait(env: &ManilaCsiEnvironment, object: &AppliedObject) {
    let api: Api<DynamicObject> = match &object.namespace {
        Some(ns) => Api::namespaced_with(env.client(), ns, &object.resource),
        None => Api::all_with(env.client(), &object.resource),
    };
    match api.delete(&object.name, &DeleteParams::foreground()).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(e) => panic!("deleting {}: {e}", object.describe()),
    }
    wait::wait_for_described(
        &api,
        &object.name,
        &format!("{} to be deleted", object.describe()),
        |found: Option<&DynamicObject>| found.is_none(),
        TIMEOUT,
    )
    .await
    .unwrap_or_else(|e| panic!("{} is not deleted: {e}", object.describe()));
}

/// Waits until pod `name` runs and returns it.
pub async fn running_pod(env: &ManilaCsiEnvironment, namespace: &str, name: &str) -> Pod {
    let pods: Api<Pod> = Api::namespaced(env.client(), namespace);
    let found = wait::wait_for(
        &pods,
        name,
        |pod: Option<&Pod>| {
            pod.and_then(|p| p.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                == Some("Running")
        },
        TIMEOUT,
    )
    .await;
    match found {
        Ok(pod) => pod.unwrap(),
        Err(e) => panic!(
            "pod {namespace}/{name} does not run: {e}\n{}",
            env.diagnostics().await
        ),
    }
}

/// Runs `script` with `sh -c` in the example pod's container; its standard output.
pub async fn sh(env: &ManilaCsiEnvironment, namespace: &str, pod: &str, script: &str) -> String {
    let out = env
        .cluster()
        .exec(namespace, pod, APP_CONTAINER, &["sh", "-c", script])
        .await
        .unwrap_or_else(|e| panic!("exec in {namespace}/{pod}: {e}"));
    assert!(
        out.status.success(),
        "`{script}` in {namespace}/{pod}: {:?}, stderr {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The share behind the claim `claim` (its PV's volume handle).
pub async fn share_of(env: &ManilaCsiEnvironment, namespace: &str, claim: &str) -> String {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(env.client(), namespace);
    let bound = wait::wait_for(
        &claims,
        claim,
        |c: Option<&PersistentVolumeClaim>| {
            c.and_then(|c| c.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                == Some("Bound")
        },
        TIMEOUT,
    )
    .await
    .expect("the claim binds")
    .unwrap();
    let pv_name = bound.spec.unwrap().volume_name.unwrap();
    let pvs: Api<k8s_openapi::api::core::v1::PersistentVolume> = Api::all(env.client());
    let pv = pvs.get(&pv_name).await.unwrap();
    pv.spec.unwrap().csi.unwrap().volume_handle
}
