//! What a Kubernetes user sees on the embedded cluster (3 simulated nodes): workloads run
//! through the real controllers and scheduler, node agents run the pods.
//!
//! Every test attaches to the run's shared cluster ([`Cluster::shared`]: started by the
//! nextest setup script, or by the first test of this process under `cargo test`) and works
//! in a namespace of its own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cluster::{Cluster, TestNamespace};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::batch::v1::{Job, JobStatus};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::conditions::is_pod_running;
use kube_support::wait::{wait_deleted, wait_for, wait_until};
use serde::de::DeserializeOwned;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(60);

async fn setup(prefix: &str) -> (Cluster, TestNamespace) {
    let cluster = Cluster::shared().await.expect("the shared cluster");
    let ns = cluster.namespace(prefix).await.expect("a test namespace");
    (cluster, ns)
}

fn from_json<T: DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

async fn create<K>(api: &Api<K>, value: serde_json::Value) -> K
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    api.create(&PostParams::default(), &from_json(value))
        .await
        .expect("create")
}

/// A busybox pod running `script` with `sh -c`.
fn shell_pod(name: &str, script: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": name },
        "spec": {
            "terminationGracePeriodSeconds": 5,
            "containers": [{ "name": "app", "image": "busybox:1.36", "command": ["sh", "-c", script] }]
        }
    })
}

async fn pods_with(ns: &TestNamespace, selector: &str) -> Vec<Pod> {
    let pods: Api<Pod> = ns.api();
    pods.list(&ListParams::default().labels(selector))
        .await
        .expect("list pods")
        .items
}

fn pod_state(pod: &Pod) -> String {
    let status = pod.status.as_ref();
    format!(
        "{} on {} {}",
        pod.metadata.name.as_deref().unwrap_or("?"),
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .unwrap_or("-"),
        status.and_then(|s| s.phase.as_deref()).unwrap_or("-")
    )
}

fn is_running(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        && pod.metadata.deletion_timestamp.is_none()
}

/// Creates the pod `manifest` and waits until it runs.
async fn run_pod(pods: &Api<Pod>, manifest: serde_json::Value) -> Pod {
    let name = manifest["metadata"]["name"].as_str().unwrap().to_string();
    create(pods, manifest).await;
    wait_for(pods, &name, is_pod_running(), WAIT)
        .await
        .unwrap()
        .unwrap()
}

/// For a wait: the stdout of `argv` in the container `app` of `pod` once it exits 0 with
/// some output; otherwise what went wrong.
async fn output_of(
    cluster: &Cluster,
    ns: &TestNamespace,
    pod: &str,
    argv: &[&str],
) -> Result<Option<String>, String> {
    match cluster.exec(ns.name(), pod, "app", argv).await {
        Ok(out) if out.code() == 0 && !out.stdout.is_empty() => {
            Ok(Some(String::from_utf8_lossy(&out.stdout).into_owned()))
        }
        Ok(out) => Err(format!(
            "exit {}: {}",
            out.code(),
            String::from_utf8_lossy(&out.stderr)
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// Waits until the Deployment `web` has rolled out `generation` to 3 ready replicas.
async fn wait_rolled_out(deployments: &Api<Deployment>, generation: i64) {
    wait_for(deployments, "web", deployment_complete(generation, 3), WAIT)
        .await
        .unwrap();
}

fn deployment_complete(generation: i64, replicas: i32) -> impl Fn(Option<&Deployment>) -> bool {
    move |d: Option<&Deployment>| {
        let Some(d) = d else { return false };
        let Some(s) = &d.status else { return false };
        s.observed_generation.unwrap_or(0) >= generation
            && s.updated_replicas == Some(replicas)
            && s.ready_replicas == Some(replicas)
            && s.available_replicas == Some(replicas)
            && s.replicas == Some(replicas)
    }
}

#[tokio::test]
async fn deployment_of_three_replicas_runs_and_survives_a_rollout() {
    let (_cluster, ns) = setup("deploy").await;
    let deployments: Api<Deployment> = ns.api();
    let created = create(
        &deployments,
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": { "name": "web" },
            "spec": {
                "replicas": 3,
                "selector": { "matchLabels": { "app": "web" } },
                "template": {
                    "metadata": { "labels": { "app": "web" } },
                    "spec": {
                        "terminationGracePeriodSeconds": 2,
                        "containers": [{ "name": "app", "image": "busybox:1.36",
                                         "command": ["sh", "-c", "echo started; exec sleep 3600"] }]
                    }
                }
            }
        }),
    )
    .await;
    wait_rolled_out(&deployments, created.metadata.generation.unwrap()).await;
    let first: Vec<String> = pods_with(&ns, "app=web")
        .await
        .iter()
        .filter(|p| is_running(p))
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(first.len(), 3, "three running pods: {first:?}");

    // Roll out a new image: new pods replace the old ones, the Deployment completes.
    let patch = json!({ "spec": { "template": { "spec": { "containers": [
        { "name": "app", "image": "busybox:1.37" }
    ] } } } });
    let patched = deployments
        .patch("web", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .unwrap();
    let generation = patched.metadata.generation.unwrap();
    assert!(generation > created.metadata.generation.unwrap());
    wait_rolled_out(&deployments, generation).await;
    let pods = wait_until("only the 3 new pods left", WAIT, || {
        let ns = &ns;
        async move {
            let pods = pods_with(ns, "app=web").await;
            let done = pods.len() == 3
                && pods.iter().all(|p| {
                    is_running(p)
                        && p.spec.as_ref().unwrap().containers[0].image.as_deref()
                            == Some("busybox:1.37")
                });
            if done {
                Ok(Some(pods))
            } else {
                Err(pods.iter().map(pod_state).collect::<Vec<_>>().join(", "))
            }
        }
    })
    .await
    .unwrap();
    for pod in &pods {
        assert!(
            !first.contains(pod.metadata.name.as_ref().unwrap()),
            "{} is an old pod",
            pod.metadata.name.as_ref().unwrap()
        );
    }
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn daemonset_lands_one_pod_per_node() {
    let (cluster, ns) = setup("ds").await;
    let daemonsets: Api<DaemonSet> = ns.api();
    create(
        &daemonsets,
        json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": { "name": "agent" },
            "spec": {
                "selector": { "matchLabels": { "app": "agent" } },
                "template": {
                    "metadata": { "labels": { "app": "agent" } },
                    "spec": {
                        "terminationGracePeriodSeconds": 2,
                        "containers": [{ "name": "agent", "image": "busybox:1.36",
                                         "command": ["sleep", "3600"] }]
                    }
                }
            }
        }),
    )
    .await;
    let nodes = cluster.node_names();
    let want = nodes.len() as i32;
    wait_for(
        &daemonsets,
        "agent",
        move |d: Option<&DaemonSet>| {
            d.and_then(|d| d.status.as_ref())
                .is_some_and(|s| s.desired_number_scheduled == want && s.number_ready == want)
        },
        WAIT,
    )
    .await
    .unwrap();
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    for pod in pods_with(&ns, "app=agent").await {
        assert!(is_running(&pod), "{}", pod_state(&pod));
        let node = pod.spec.unwrap().node_name.unwrap();
        *per_node.entry(node).or_default() += 1;
    }
    let expected: BTreeMap<String, usize> = nodes.into_iter().map(|n| (n, 1)).collect();
    assert_eq!(per_node, expected);
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn job_completes_and_exit_codes_are_recorded() {
    let (cluster, ns) = setup("job").await;
    let jobs: Api<Job> = ns.api();
    for (name, script) in [
        ("ok", "echo done; exit 0"),
        ("fails", "echo failing; exit 3"),
    ] {
        create(
            &jobs,
            json!({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": { "name": name },
                "spec": {
                    "backoffLimit": 0,
                    "template": {
                        "metadata": { "labels": { "job": name } },
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{ "name": "work", "image": "busybox:1.36",
                                             "command": ["sh", "-c", script] }]
                        }
                    }
                }
            }),
        )
        .await;
    }
    let succeeded: fn(&JobStatus) -> Option<i32> = |s| s.succeeded;
    let failed: fn(&JobStatus) -> Option<i32> = |s| s.failed;
    for (job, pods_ended) in [("ok", succeeded), ("fails", failed)] {
        let done = move |j: Option<&Job>| {
            j.and_then(|j| j.status.as_ref()).and_then(pods_ended) == Some(1)
        };
        wait_for(&jobs, job, done, WAIT).await.unwrap();
    }
    for (job, phase, code, output) in [
        ("ok", "Succeeded", 0, "done"),
        ("fails", "Failed", 3, "failing"),
    ] {
        let pods = pods_with(&ns, &format!("job={job}")).await;
        assert_eq!(pods.len(), 1, "one pod for job {job}");
        let pod = &pods[0];
        let status = pod.status.as_ref().unwrap();
        assert_eq!(status.phase.as_deref(), Some(phase), "{}", pod_state(pod));
        let terminated = status.container_statuses.as_ref().unwrap()[0]
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .expect("terminated state");
        assert_eq!(terminated.exit_code, code);
        let logs = cluster
            .logs(
                ns.name(),
                pod.metadata.name.as_ref().unwrap(),
                "work",
                false,
            )
            .await
            .unwrap();
        assert_eq!(logs.trim(), output);
    }
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn crashing_container_is_restarted_with_back_off() {
    let (cluster, ns) = setup("crash").await;
    let pods: Api<Pod> = ns.api();
    create(&pods, shell_pod("crasher", "echo crashing; exit 1")).await;
    let pod = wait_for(
        &pods,
        "crasher",
        |p: Option<&Pod>| {
            let Some(cs) = p
                .and_then(|p| p.status.as_ref())
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.first())
            else {
                return false;
            };
            let backing_off = cs
                .state
                .as_ref()
                .and_then(|s| s.waiting.as_ref())
                .and_then(|w| w.reason.as_deref())
                == Some("CrashLoopBackOff");
            cs.restart_count >= 1 && backing_off
        },
        WAIT,
    )
    .await
    .unwrap()
    .unwrap();
    let cs = &pod
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0];
    let last = cs
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("last state terminated");
    assert_eq!(last.exit_code, 1);
    let previous = cluster
        .logs(ns.name(), "crasher", "app", true)
        .await
        .unwrap();
    assert!(previous.contains("crashing"), "previous log: {previous:?}");
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn pod_deletion_is_graceful() {
    let (cluster, ns) = setup("graceful").await;
    let pods: Api<Pod> = ns.api();
    // Records SIGTERM in a file (read through exec until the pod goes), then exits 0.
    let mut pod = shell_pod(
        "polite",
        "trap 'echo TERM > /tmp/term; sleep 1; exit 0' TERM; echo up > /tmp/up; while true; do sleep 0.1; done",
    );
    pod["spec"]["terminationGracePeriodSeconds"] = json!(30);
    run_pod(&pods, pod).await;
    wait_until("the container's start marker", WAIT, || {
        output_of(&cluster, &ns, "polite", &["cat", "/tmp/up"])
    })
    .await
    .unwrap();

    let asked = Instant::now();
    pods.delete("polite", &DeleteParams::default())
        .await
        .unwrap();
    // While it terminates, the pod is still there with a deletion timestamp and the trap ran.
    let term = wait_until("the TERM trap to run", WAIT, || {
        output_of(&cluster, &ns, "polite", &["cat", "/tmp/term"])
    })
    .await;
    wait_deleted(&pods, "polite", WAIT).await.unwrap();
    let took = asked.elapsed();
    // The trap may have finished before exec caught it; then the deletion was prompt anyway.
    if let Ok(term) = term {
        assert_eq!(term.trim(), "TERM");
    }
    assert!(
        took < Duration::from_secs(25),
        "a pod that exits on SIGTERM is gone long before its 30 s grace period: {took:?}"
    );

    // A pod ignoring SIGTERM is killed once its grace period is over.
    let mut stubborn = shell_pod("stubborn", "trap '' TERM; while true; do sleep 0.1; done");
    stubborn["spec"]["terminationGracePeriodSeconds"] = json!(2);
    run_pod(&pods, stubborn).await;
    let asked = Instant::now();
    pods.delete("stubborn", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&pods, "stubborn", WAIT).await.unwrap();
    let took = asked.elapsed();
    assert!(
        took >= Duration::from_secs(2),
        "killed only after the 2 s grace period: {took:?}"
    );
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn config_map_and_secret_volumes_and_env_appear_inside_the_container() {
    let (cluster, ns) = setup("config").await;
    create(
        &ns.api::<ConfigMap>(),
        json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "settings" },
                "data": { "greeting": "hello", "color": "blue" } }),
    )
    .await;
    create(
        &ns.api::<Secret>(),
        json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "creds" },
                "stringData": { "password": "s3cr3t" } }),
    )
    .await;
    run_pod(
        &ns.api(),
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "consumer" },
            "spec": {
                "terminationGracePeriodSeconds": 2,
                "volumes": [
                    { "name": "settings", "configMap": { "name": "settings" } },
                    { "name": "creds", "secret": { "secretName": "creds" } }
                ],
                "containers": [{
                    "name": "app", "image": "busybox:1.36", "command": ["sleep", "3600"],
                    "env": [
                        { "name": "PLAIN", "value": "plain-value" },
                        { "name": "GREETING", "valueFrom": { "configMapKeyRef": { "name": "settings", "key": "greeting" } } },
                        { "name": "PASSWORD", "valueFrom": { "secretKeyRef": { "name": "creds", "key": "password" } } }
                    ],
                    "volumeMounts": [
                        { "name": "settings", "mountPath": "/etc/settings" },
                        { "name": "creds", "mountPath": "/etc/creds", "readOnly": true }
                    ]
                }]
            }
        }),
    )
    .await;
    let exec = |argv: &'static [&'static str]| {
        let cluster = cluster.clone();
        let ns = ns.name().to_string();
        async move {
            let out = cluster.exec(&ns, "consumer", "app", argv).await.unwrap();
            assert_eq!(
                out.code(),
                0,
                "{argv:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        }
    };
    assert_eq!(exec(&["cat", "/etc/settings/greeting"]).await, "hello");
    assert_eq!(exec(&["cat", "/etc/settings/color"]).await, "blue");
    assert_eq!(exec(&["cat", "/etc/creds/password"]).await, "s3cr3t");
    assert_eq!(
        exec(&["sh", "-c", "echo $PLAIN $GREETING $PASSWORD"]).await,
        "plain-value hello s3cr3t\n"
    );
    assert_eq!(exec(&["hostname"]).await, "consumer\n");
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn in_cluster_client_is_allowed_what_its_role_grants_and_refused_the_rest() {
    let (cluster, ns) = setup("rbac").await;
    create(
        &ns.api::<ServiceAccount>(),
        json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": "reader" } }),
    )
    .await;
    create(
        &ns.api::<Role>(),
        json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": { "name": "pod-reader" },
                "rules": [{ "apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"] }] }),
    )
    .await;
    create(
        &ns.api::<RoleBinding>(),
        json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": { "name": "reader-reads-pods" },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader" },
                "subjects": [{ "kind": "ServiceAccount", "name": "reader", "namespace": ns.name() }] }),
    )
    .await;
    ns.wait_service_account("reader").await.unwrap();
    let mut pod = shell_pod("client", "exec sleep 3600");
    pod["spec"]["serviceAccountName"] = json!("reader");
    run_pod(&ns.api(), pod).await;

    // kubectl inside the pod is an unmodified in-cluster client (service-account token,
    // KUBERNETES_SERVICE_HOST/PORT, ca.crt).
    let kubectl = async |args: &[&str]| {
        let argv = [&["kubectl"][..], args].concat();
        cluster
            .exec(ns.name(), "client", "app", &argv)
            .await
            .unwrap()
    };
    let ns_name = ns.name();
    let allowed = kubectl(&["get", "pods", "-n", ns_name, "-o", "name"]).await;
    assert_eq!(
        allowed.code(),
        0,
        "listing pods is granted: {}",
        String::from_utf8_lossy(&allowed.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&allowed.stdout).trim(),
        "pod/client"
    );

    for refused in [
        &["get", "secrets", "-n", ns_name][..],
        &["get", "pods", "-n", "kube-system"],
        &["delete", "pod", "client", "-n", ns_name, "--dry-run=server"],
    ] {
        let out = kubectl(refused).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.code(), 0, "{refused:?} must be refused");
        assert!(
            stderr.contains("forbidden")
                && stderr.contains(&format!("system:serviceaccount:{ns_name}:reader")),
            "{refused:?}: {stderr}"
        );
    }
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn node_agent_restart_keeps_pods_running() {
    let (cluster, ns) = setup("restart").await;
    let node = cluster.node_names().last().unwrap().clone();
    let pods: Api<Pod> = ns.api();
    // `$$$$`: Kubernetes turns `$$` in a command into `$`, so the shell sees `$$`.
    let mut pod = shell_pod("survivor", "echo $$$$ > /tmp/pid; exec sleep 3600");
    pod["spec"]["nodeName"] = json!(node);
    let before = run_pod(&pods, pod).await;
    let container = |p: &Pod| {
        p.status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0]
            .clone()
    };
    let read_pid = || output_of(&cluster, &ns, "survivor", &["cat", "/tmp/pid"]);
    let pid_before = wait_until("the container's pid file", WAIT, read_pid)
        .await
        .unwrap();

    cluster.restart_node_agent(&node).await.unwrap();

    // Same container, same process, no restart; exec works again once the new agent has
    // adopted its pods (until then the API answers "pod does not exist", as a kubelet would).
    let pid_after = wait_until("the pid file after the restart", WAIT, read_pid)
        .await
        .unwrap();
    assert_eq!(pid_before, pid_after);
    let alive = cluster
        .exec(
            ns.name(),
            "survivor",
            "app",
            &["sh", "-c", "kill -0 $(cat /tmp/pid) && echo alive"],
        )
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&alive.stdout),
        "alive\n",
        "exit {}: {}",
        alive.code(),
        String::from_utf8_lossy(&alive.stderr)
    );
    // The new agent runs new pods and still manages the adopted one.
    let mut second = shell_pod("newcomer", "exec sleep 3600");
    second["spec"]["nodeName"] = json!(node);
    run_pod(&pods, second).await;
    let after = pods.get("survivor").await.unwrap();
    assert!(is_running(&after), "{}", pod_state(&after));
    let (b, a) = (container(&before), container(&after));
    assert_eq!(a.restart_count, 0);
    assert_eq!(a.container_id, b.container_id);
    assert_eq!(
        a.state
            .as_ref()
            .and_then(|s| s.running.as_ref())
            .and_then(|r| r.started_at.clone()),
        b.state
            .as_ref()
            .and_then(|s| s.running.as_ref())
            .and_then(|r| r.started_at.clone())
    );
    pods.delete("survivor", &DeleteParams::default())
        .await
        .unwrap();
    wait_deleted(&pods, "survivor", WAIT).await.unwrap();
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn kubectl_get_pods_all_namespaces_lists_them() {
    let (cluster, ns) = setup("kubectl").await;
    let pods: Api<Pod> = ns.api();
    let pod = run_pod(&pods, shell_pod("listed", "exec sleep 3600")).await;
    let node = pod.spec.unwrap().node_name.unwrap();
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig())
        .args(["get", "pods", "-A", "-o", "wide", "--no-headers"])
        .output()
        .expect("kubectl runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kubectl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find(|l| l.split_whitespace().take(2).eq([ns.name(), "listed"]))
        .unwrap_or_else(|| panic!("no line for {}/listed in:\n{stdout}", ns.name()));
    let columns: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(columns[2], "1/1", "{line}");
    assert_eq!(columns[3], "Running", "{line}");
    assert!(columns.contains(&node.as_str()), "{line}");
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn a_failed_wait_reports_the_last_seen_state_and_cleanup_reports_leftovers() {
    let (cluster, ns) = setup("reports").await;
    let pods: Api<Pod> = ns.api();
    run_pod(&pods, shell_pod("sleeper", "exec sleep 3600")).await;
    let err = wait_for(
        &pods,
        "sleeper",
        |p: Option<&Pod>| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                == Some("Succeeded")
        },
        Duration::from_secs(1),
    )
    .await
    .unwrap_err();
    assert_eq!(err.what, "pod sleeper");
    assert!(
        err.last_seen.starts_with("sleeper: ") && err.last_seen.contains(r#""phase":"Running""#),
        "{err}"
    );

    // A cluster-scoped object carrying the namespace's labels and not deleted is reported.
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(cluster.client());
    let name = format!("{}-leftover", ns.name());
    create(
        &roles,
        json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": { "name": name, "labels": ns.labels() }, "rules": [] }),
    )
    .await;
    let err = ns.cleanup().await.unwrap_err().to_string();
    assert!(err.contains(&format!("ClusterRole {name}")), "{err}");
    roles.delete(&name, &DeleteParams::default()).await.unwrap();
}
