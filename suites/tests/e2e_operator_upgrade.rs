//! Upgrading the Manila CSI driver operator from release N-1 to the current release, on its
//! own embedded cluster with the fake cloud over TLS (so the CA layout matters), while pods
//! write to volumes provisioned under N-1; then an attempt to go back to N-1, which the
//! operator refuses. See the operator README, "Releases".
//!
//! Writers ([`suites::resilience::writers`]) append a timestamp every 100 ms: two pods on two
//! nodes on an RWX claim, one on an RWO claim. The test records on a [`Timeline`] what it did
//! when and what each writer saw (its longest stall), prints the writer stall of the upgrade
//! and of the refused downgrade, and prints the whole timeline when it fails.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use harness::cluster::wait;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, PersistentVolume, Pod, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::GroupVersionKind;
use suites::conformance::{TestResult, Timeline};
use suites::e2e::snapshots::volume_snapshot_contents;
use suites::e2e::workload::{
    Workload, claim, claim_capacity, claim_from_snapshot, describe_pod, pod_is_ready,
    pod_with_claim, volume_capacity,
};
use suites::e2e::{
    CA_CONFIG_MAP, DEFAULT_STORAGE_CLASS, DRIVER_NAME, DRIVER_SECRET, EnvironmentOptions, Install,
    ManilaCsiEnvironment, NODE_PLUGIN_SELECTOR, OPERATOR_MANAGED_SELECTOR, OperatorOptions,
    SNAPSHOT_CLASS, condition, describe_conditions,
};
use suites::resilience::writers::{self, WriterSpec, Writers};

const LOGS: &str = "suites=info,harness=info,e2e_operator_upgrade=info";
const WAIT: Duration = Duration::from_secs(120);
const CONTROLLER_DEPLOYMENT: &str = "openstack-manila-csi-controllerplugin";
/// A StorageClass the user made (a copy of N-1's default class).
const USER_CLASS: &str = "upgrade-users-own";
/// The operator's leader Lease.
const OPERATOR_LEASE: &str = "manila-csi-driver-operator-lock";
/// The operator's condition about the installed version (a refused downgrade).
const VERSION_DEGRADED: &str = "ManilaOperatorVersionControllerDegraded";
/// N-1's ClusterRole and binding for every controller sidecar.
const SHARED_ROLE: &str = "openstack-manila-csi-controllerplugin";
/// Where N-1 mounts the CA bundle in the driver's containers, as its Secret names it.
const PREVIOUS_CA_PATH: &str = "/usr/share/pki/ca-trust-source/cloud-provider-ca-bundle.pem";
/// The writer's script: appends its sequence number to /data/log every 100 ms, a failed
/// write to a file outside the volume; in the foreground, so that nothing of it outlives the
/// container (a background loop would keep the volume busy after the pod is deleted).
const WRITER: &str = "echo before-the-upgrade > /data/before\n\
    trap 'exit 0' TERM\n\
    i=0\n\
    while true; do i=$((i+1)); echo $i >> /data/log || echo $i >> /tmp/write-errors; \
    sleep 0.1; done";

/// A pod mounting `claim` at /data and running [`WRITER`].
fn writer_pod(claim: &str) -> Pod {
    let mut pod = pod_with_claim("writer", claim, None, "");
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers[0].command = Some(vec!["sh".into(), "-c".into(), WRITER.into()]);
    }
    pod
}

fn container_names(deployment: &Deployment) -> Vec<String> {
    deployment
        .spec
        .as_ref()
        .map(|s| s.template.spec.clone().unwrap_or_default().containers)
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.name)
        .collect()
}

fn volume_names(deployment: &Deployment) -> Vec<String> {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .and_then(|s| s.volumes)
        .unwrap_or_default()
        .into_iter()
        .map(|v| v.name)
        .collect()
}

fn daemon_set_volume_names(daemon_set: &DaemonSet) -> Vec<String> {
    daemon_set
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .and_then(|s| s.volumes)
        .unwrap_or_default()
        .into_iter()
        .map(|v| v.name)
        .collect()
}

fn secret_text(secret: &Secret) -> BTreeMap<String, String> {
    secret
        .data
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8(v.0).unwrap()))
        .collect()
}

fn expand_parameters(class: &StorageClass) -> Vec<String> {
    class
        .parameters
        .clone()
        .unwrap_or_default()
        .into_keys()
        .filter(|k| k.contains("controller-expand"))
        .collect()
}

/// The uids of the driver's pods (controller and Manila node plugins).
async fn driver_pod_uids(env: &ManilaCsiEnvironment) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(env.client(), env.namespace());
    let mut uids = Vec::new();
    for selector in [
        "app=openstack-manila-csi,component=controllerplugin",
        NODE_PLUGIN_SELECTOR,
    ] {
        for pod in pods
            .list(&ListParams::default().labels(selector))
            .await
            .unwrap()
        {
            uids.push(pod.metadata.uid.unwrap());
        }
    }
    uids
}

async fn operator_events(env: &ManilaCsiEnvironment) -> Vec<Event> {
    let events: Api<Event> = Api::namespaced(env.client(), "default");
    events
        .list(&ListParams::default().fields(&format!("involvedObject.name={DRIVER_NAME}")))
        .await
        .unwrap()
        .items
}

fn has_event(events: &[Event], reason: &str, contains: &[&str]) -> bool {
    events.iter().any(|e| {
        let message = e.message.as_deref().unwrap_or("");
        e.reason.as_deref() == Some(reason) && contains.iter().all(|c| message.contains(c))
    })
}

/// How many numbered lines `log` holds, checked to be 1, 2, 3, … without a gap. Only complete
/// lines count: the writer may be appending one right now.
fn numbered_lines(log: &str, what: &str) -> u64 {
    let complete = &log[..log.rfind('\n').map_or(0, |end| end + 1)];
    let numbers: Vec<u64> = complete
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    for (index, number) in numbers.iter().enumerate() {
        assert_eq!(*number, index as u64 + 1, "a gap in {what} at line {index}");
    }
    numbers.len() as u64
}

/// The sequence numbers the writer appended, checked to be 1, 2, 3, … without a gap.
async fn written(workload: &Workload<'_>) -> u64 {
    let log = workload.exec("writer", "cat /data/log").await.unwrap();
    numbered_lines(&log, "/data/log")
}

/// Waits until the writer has appended more than `count` lines.
async fn wait_written_beyond(workload: &Workload<'_>, count: u64) -> u64 {
    wait::wait_until(
        format!("more than {count} lines in /data/log"),
        WAIT,
        || async move {
            let now = written(workload).await;
            if now > count {
                Ok(Some(now))
            } else {
                Err(format!("{now} lines"))
            }
        },
    )
    .await
    .unwrap()
}

/// Manila's view of the shares, over TLS with the cloud's CA (the suite's `CloudInspector`
/// speaks plain HTTP only).
struct Manila {
    http: reqwest::Client,
    auth_url: String,
    manila_url: String,
    account: fakes::config::Account,
}

impl Manila {
    fn new(cloud: &fakes::FakeCloud) -> Manila {
        let ca = cloud.ca_pem().expect("a TLS cloud has a CA");
        let http = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap())
            .build()
            .unwrap();
        Manila {
            http,
            auth_url: cloud.auth_url(),
            manila_url: cloud.manila_url(),
            account: cloud.account(),
        }
    }

    async fn get(&self, path: &str) -> Result<serde_json::Value, String> {
        let auth = serde_json::json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": self.account.user_name,
                "domain": {"name": self.account.domain_name},
                "password": self.account.password.expose(),
            }}},
            "scope": {"project": {
                "name": self.account.project_name,
                "domain": {"name": self.account.domain_name},
            }},
        }});
        let url = format!("{}/auth/tokens", self.auth_url.trim_end_matches('/'));
        let response = self.http.post(&url).json(&auth).send().await;
        let response = response.map_err(|e| format!("POST {url}: {e}"))?;
        let token = response
            .headers()
            .get("X-Subject-Token")
            .and_then(|v| v.to_str().ok())
            .ok_or(format!("POST {url}: no token ({})", response.status()))?
            .to_string();
        let url = format!("{}/{path}", self.manila_url.trim_end_matches('/'));
        let response = self
            .http
            .get(&url)
            .header("X-Auth-Token", token)
            .header("X-OpenStack-Manila-API-Version", "2.45")
            .send()
            .await
            .map_err(|e| format!("GET {url}: {e}"))?;
        response.json().await.map_err(|e| format!("GET {url}: {e}"))
    }

    /// The status of every share snapshot, by id.
    async fn snapshots(&self) -> BTreeMap<String, String> {
        let body = self.get("snapshots/detail").await.unwrap();
        body["snapshots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|snapshot| {
                (
                    snapshot["id"].as_str().unwrap().to_string(),
                    snapshot["status"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    /// `(size in GiB, status)` of every share, by id.
    async fn shares(&self) -> BTreeMap<String, (u64, String)> {
        let body = self.get("shares/detail").await.unwrap();
        body["shares"]
            .as_array()
            .unwrap()
            .iter()
            .map(|share| {
                (
                    share["id"].as_str().unwrap().to_string(),
                    (
                        share["size"].as_u64().unwrap(),
                        share["status"].as_str().unwrap().to_string(),
                    ),
                )
            })
            .collect()
    }
}

/// Raises the claim's request to `size`.
async fn resize(workload: &Workload<'_>, claim: &str, size: &str) -> kube::Result<()> {
    let patch = serde_json::json!({"spec": {"resources": {"requests": {"storage": size}}}});
    workload
        .claims
        .patch(claim, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

/// Prints the test's timeline when the test ends other than by setting `passed`: a failed
/// assertion (a panic) or an error returned early.
struct ShowTimelineOnFailure {
    timeline: Timeline,
    passed: bool,
}

impl Drop for ShowTimelineOnFailure {
    fn drop(&mut self) {
        if !self.passed {
            eprintln!(
                "--- the failed test's timeline ---\n{}",
                self.timeline.render()
            );
        }
    }
}

/// A [`TestResult`] of the resilience helpers as this test's result.
fn tested<T>(result: TestResult<T>) -> anyhow::Result<T> {
    result.map_err(|e| anyhow::anyhow!("{e}"))
}

/// The uid of every object `api` lists, by name.
async fn uids<K>(api: &Api<K>) -> BTreeMap<String, String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list_metadata(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|o| {
            (
                o.metadata.name.unwrap_or_default(),
                o.metadata.uid.unwrap_or_default(),
            )
        })
        .collect()
}

/// The PVs, VolumeSnapshotContents and StorageClasses, by name → uid.
#[derive(Debug)]
struct Inventory {
    volumes: BTreeMap<String, String>,
    contents: BTreeMap<String, String>,
    classes: BTreeMap<String, String>,
}

impl Inventory {
    async fn take(client: &kube::Client) -> Inventory {
        Inventory {
            volumes: uids(&Api::<PersistentVolume>::all(client.clone())).await,
            contents: uids(&volume_snapshot_contents(client)).await,
            classes: uids(&Api::<StorageClass>::all(client.clone())).await,
        }
    }
}

/// The names of `before` that are gone from `after`, and those there with another uid.
fn gone_and_replaced(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> (Vec<String>, Vec<String>) {
    let gone = before
        .keys()
        .filter(|name| !after.contains_key(*name))
        .cloned()
        .collect();
    let replaced = before
        .iter()
        .filter(|(name, uid)| after.get(*name).is_some_and(|now| now != *uid))
        .map(|(name, _)| name.clone())
        .collect();
    (gone, replaced)
}

/// The `(name, version)` pairs of a ClusterOperator's `status.versions`.
fn operator_versions(operator: &DynamicObject) -> BTreeMap<String, String> {
    operator
        .data
        .pointer("/status/versions")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .map(|v| {
            let text = |key: &str| v[key].as_str().unwrap_or("").to_string();
            (text("name"), text("version"))
        })
        .collect()
}

fn condition_is(object: &DynamicObject, type_: &str, status: &str) -> bool {
    condition(object, type_).is_some_and(|c| c["status"] == status)
}

/// Records on the timeline when the operator's leader Lease was last acquired, and when
/// each pod of the driver's namespace created at or after `since` was created and became
/// Ready (the API server's times: whole seconds for pods).
async fn record_rollout(env: &ManilaCsiEnvironment, timeline: &Timeline, since: SystemTime) {
    let leases: Api<Lease> = Api::namespaced(env.client(), env.namespace());
    if let Some(lease) = leases.get_opt(OPERATOR_LEASE).await.unwrap()
        && let Some(spec) = lease.spec
        && let Some(acquired) = spec.acquire_time
    {
        timeline.record_wall(
            SystemTime::from(acquired.0),
            "operator",
            format!(
                "Lease {OPERATOR_LEASE} acquired by {}",
                spec.holder_identity.unwrap_or_default()
            ),
        );
    }
    let pods: Api<Pod> = Api::namespaced(env.client(), env.namespace());
    let since = since - Duration::from_secs(1);
    for pod in pods.list(&ListParams::default()).await.unwrap() {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(created) = pod.metadata.creation_timestamp.as_ref() else {
            continue;
        };
        let created = SystemTime::from(created.0);
        if created < since {
            continue;
        }
        timeline.record_wall(
            created,
            "cluster",
            format!("pod {name} created (to the second)"),
        );
        let ready = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready" && c.status == "True"))
            .and_then(|c| c.last_transition_time.as_ref());
        if let Some(ready) = ready {
            timeline.record_wall(
                SystemTime::from(ready.0),
                "cluster",
                format!("pod {name} Ready"),
            );
        }
    }
}

/// The uids and restart counts of `names`' pods, checked to be Ready.
async fn pods_as_they_are(
    workload: &Workload<'_>,
    names: &[&str],
) -> BTreeMap<String, (String, i32)> {
    let mut found = BTreeMap::new();
    for name in names {
        let pod = workload.pods.get(name).await.unwrap();
        assert!(pod_is_ready(&pod), "{}", describe_pod(&pod));
        let restarts: i32 = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .map(|c| c.iter().map(|c| c.restart_count).sum())
            .unwrap_or_default();
        found.insert(
            name.to_string(),
            (pod.metadata.uid.clone().unwrap_or_default(), restarts),
        );
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_current_operator_adopts_release_n_minus_1_under_writers_and_refuses_to_go_back()
-> anyhow::Result<()> {
    testkit::init_tracing(LOGS);
    let previous = OperatorOptions::PREVIOUS_RELEASE.version()?;
    let current = OperatorOptions::CURRENT_RELEASE.version()?;
    assert_ne!(previous, current);
    let timeline = Timeline::new();
    let mut guard = ShowTimelineOnFailure {
        timeline: timeline.clone(),
        passed: false,
    };
    let env = ManilaCsiEnvironment::start(EnvironmentOptions {
        nodes: 2,
        cloud_tls: true,
        install: Install::Operator(OperatorOptions {
            release: OperatorOptions::PREVIOUS_RELEASE,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await?;
    let client = env.client();
    let namespace = env.namespace().to_string();
    env.wait_operator_version(&previous, WAIT).await?;
    timeline.record("cluster", format!("release N-1 ({previous}) Available"));

    // --- Release N-1 as installed ---
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    let daemon_sets: Api<DaemonSet> = Api::namespaced(client.clone(), &namespace);
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let classes: Api<StorageClass> = Api::all(client.clone());
    let controller = deployments.get(CONTROLLER_DEPLOYMENT).await?;
    assert_eq!(
        container_names(&controller),
        [
            "csi-driver",
            "csi-provisioner",
            "csi-snapshotter",
            "csi-liveness-probe"
        ]
    );
    assert!(volume_names(&controller).contains(&"cacert".to_string()));
    let node_plugin = daemon_sets.get("openstack-manila-csi-nodeplugin").await?;
    assert!(daemon_set_volume_names(&node_plugin).contains(&"cacert".to_string()));
    assert!(roles.get_opt(SHARED_ROLE).await?.is_some());
    assert!(bindings.get_opt(SHARED_ROLE).await?.is_some());
    for sidecar in ["provisioner", "resizer", "snapshotter"] {
        let name = format!("openstack-manila-csi-{sidecar}");
        assert!(roles.get_opt(&name).await?.is_none(), "{name}");
    }
    let secret = secret_text(&secrets.get(DRIVER_SECRET).await?);
    assert_eq!(
        secret.get("os-certAuthorityPath").map(String::as_str),
        Some(PREVIOUS_CA_PATH)
    );
    assert!(!secret.contains_key("os-certAuthority"));
    let old_class = classes.get(DEFAULT_STORAGE_CLASS).await?;
    assert_ne!(old_class.allow_volume_expansion, Some(true));
    assert!(expand_parameters(&old_class).is_empty());
    let snapshot_classes: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("snapshot.storage.k8s.io", "v1", "VolumeSnapshotClass"),
            "volumesnapshotclasses",
        ),
    );
    let snapshot_class_uid = snapshot_classes.get(SNAPSHOT_CLASS).await?.metadata.uid;

    // A claim of N-1's class (provisioned over TLS with the mounted CA), written to every
    // 100 ms by a pod numbering its lines.
    let workload = Workload::create(&env, "upgrade").await?;
    let data = workload
        .bound_claim(&claim(
            "data",
            Some(DEFAULT_STORAGE_CLASS),
            "1Gi",
            "ReadWriteMany",
        ))
        .await?;
    workload.ready_pod(&writer_pod("data")).await?;
    wait_written_beyond(&workload, 10).await;
    // N-1 offers no expansion: the apiserver refuses the resize of its class's claims.
    let refused = resize(&workload, "data", "2Gi").await.unwrap_err();
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403
            && s.message.contains("storageclass that provisions the pvc must support resize")),
        "{refused}"
    );
    // Timestamp writers: an RWX claim written from both nodes, an RWO claim.
    let nodes = env.cluster().node_names();
    assert!(nodes.len() >= 2, "{nodes:?}");
    for (name, mode) in [("shared", "ReadWriteMany"), ("single", "ReadWriteOnce")] {
        workload
            .bound_claim(&claim(name, Some(DEFAULT_STORAGE_CLASS), "1Gi", mode))
            .await?;
    }
    let writers = tested(
        Writers::start(
            &workload,
            &timeline,
            vec![
                WriterSpec::new("w-rwx-1", "shared").on(&nodes[0]),
                WriterSpec::new("w-rwx-2", "shared").on(&nodes[1]),
                WriterSpec::new("w-rwo", "single").on(&nodes[0]),
            ],
        )
        .await,
    )?;
    let mut writer_pods = vec!["writer"];
    writer_pods.extend(writers.pods());
    let writer_pods_before = pods_as_they_are(&workload, &writer_pods).await;
    // A StorageClass of the user's: no operator of any release may touch it.
    let mut user_class = old_class.clone();
    user_class.metadata = kube::api::ObjectMeta {
        name: Some(USER_CLASS.into()),
        labels: Some(workload.labels()),
        ..Default::default()
    };
    classes.create(&PostParams::default(), &user_class).await?;
    // A snapshot of the numbered claim, taken by N-1's snapshotter (with the shared role).
    let lines_at_snapshot = written(&workload).await;
    let snapshot = workload
        .ready_snapshot("before", "data", SNAPSHOT_CLASS)
        .await?;
    timeline.record(
        "test",
        format!("VolumeSnapshot before of claim data ready ({lines_at_snapshot} lines before it)"),
    );
    let manila = Manila::new(env.fake_cloud().expect("the fake cloud"));
    let shares_before = manila.shares().await;
    assert_eq!(
        shares_before.get(&data.share_id),
        Some(&(1, "available".to_string()))
    );
    let snapshots_before = manila.snapshots().await;
    assert_eq!(snapshots_before.len(), 1, "{snapshots_before:?}");
    let driver_pods_before = driver_pod_uids(&env).await;
    let inventory_before = Inventory::take(&client).await;
    assert_eq!(
        inventory_before.volumes.len(),
        3,
        "{:?}",
        inventory_before.volumes
    );
    assert_eq!(
        inventory_before.contents.len(),
        1,
        "{:?}",
        inventory_before.contents
    );

    // --- The upgrade: the operator manifests applied with the current release ---
    let lines_before = written(&workload).await;
    let files_before = tested(writers.read().await)?;
    let (upgrade_started, _) = writers::now();
    let timings = env
        .upgrade_operator_and_wait(OperatorOptions::CURRENT_RELEASE, WAIT, &timeline)
        .await?;
    record_rollout(&env, &timeline, upgrade_started).await;
    // Writes go on after the upgrade; nothing written before is lost, no write failed.
    tested(writers.wait_written_since(SystemTime::now()).await)?;
    let stall = tested(
        writers
            .check_since(upgrade_started, Some(&files_before))
            .await,
    )?;
    println!(
        "upgrade N-1 → N: writer stall {:.3} s (from {}), apply → Available {:.1?} (rolled out \
         after {:.1?})",
        stall.length.as_secs_f64(),
        writers::wall(stall.from),
        timings.available,
        timings.rolled_out
    );
    let driver = env.cluster_csi_driver().await?;
    assert_eq!(driver.data["status"]["version"], current.as_str());

    // --- The current release's shape ---
    let controller = deployments.get(CONTROLLER_DEPLOYMENT).await?;
    let mut containers = container_names(&controller);
    containers.sort();
    assert_eq!(
        containers,
        [
            "csi-driver",
            "csi-liveness-probe",
            "csi-provisioner",
            "csi-resizer",
            "csi-snapshotter"
        ]
    );
    assert!(!volume_names(&controller).contains(&"cacert".to_string()));
    let node_plugin = daemon_sets.get("openstack-manila-csi-nodeplugin").await?;
    assert!(!daemon_set_volume_names(&node_plugin).contains(&"cacert".to_string()));
    assert!(roles.get_opt(SHARED_ROLE).await?.is_none());
    assert!(bindings.get_opt(SHARED_ROLE).await?.is_none());
    for sidecar in ["provisioner", "resizer", "snapshotter"] {
        let name = format!("openstack-manila-csi-{sidecar}");
        assert!(roles.get_opt(&name).await?.is_some(), "{name}");
        assert!(bindings.get_opt(&name).await?.is_some(), "{name}");
    }
    let secret = secret_text(&secrets.get(DRIVER_SECRET).await?);
    let ca = env
        .fake_cloud()
        .expect("the fake cloud")
        .ca_pem()
        .expect("a TLS cloud has a CA");
    assert_eq!(
        secret.get("os-certAuthority").map(|s| s.trim()),
        Some(ca.trim())
    );
    assert!(!secret.contains_key("os-certAuthorityPath"));
    let new_class = classes.get(DEFAULT_STORAGE_CLASS).await?;
    assert_ne!(new_class.metadata.uid, old_class.metadata.uid, "re-created");
    assert_eq!(new_class.allow_volume_expansion, Some(true));
    assert_eq!(
        expand_parameters(&new_class),
        [
            "csi.storage.k8s.io/controller-expand-secret-name",
            "csi.storage.k8s.io/controller-expand-secret-namespace",
        ]
    );
    let events = operator_events(&env).await;
    assert!(
        has_event(
            &events,
            "StorageClassRecreated",
            &[DEFAULT_STORAGE_CLASS, "controller-expand-secret-name"]
        ),
        "{events:?}"
    );
    for kind in ["ClusterRole", "ClusterRoleBinding"] {
        assert!(
            has_event(
                &events,
                &format!("{kind}Deleted"),
                &[SHARED_ROLE, "no longer installs"]
            ),
            "{kind}: {events:?}"
        );
    }
    // The new Secret and templates restarted the driver's pods.
    let driver_pods_after = driver_pod_uids(&env).await;
    assert!(
        driver_pods_after
            .iter()
            .all(|uid| !driver_pods_before.contains(uid)),
        "{driver_pods_before:?} → {driver_pods_after:?}"
    );
    // Not pruned: the snapshot class.
    assert_eq!(
        snapshot_classes.get(SNAPSHOT_CLASS).await?.metadata.uid,
        snapshot_class_uid
    );
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), &namespace);
    assert!(maps.get_opt(CA_CONFIG_MAP).await?.is_some());
    // No PV, VolumeSnapshotContent or StorageClass deleted; the only classes with a new uid
    // are the operator's, re-created (with an Event) because their parameters changed.
    let inventory_after = Inventory::take(&client).await;
    let (gone, replaced) = gone_and_replaced(&inventory_before.volumes, &inventory_after.volumes);
    assert!(
        gone.is_empty() && replaced.is_empty(),
        "PVs gone {gone:?}, replaced {replaced:?}"
    );
    let (gone, replaced) = gone_and_replaced(&inventory_before.contents, &inventory_after.contents);
    assert!(
        gone.is_empty() && replaced.is_empty(),
        "VolumeSnapshotContents gone {gone:?}, replaced {replaced:?}"
    );
    let (gone, replaced) = gone_and_replaced(&inventory_before.classes, &inventory_after.classes);
    assert!(gone.is_empty(), "StorageClasses gone: {gone:?}");
    let managed: BTreeSet<String> = classes
        .list_metadata(&ListParams::default().labels(OPERATOR_MANAGED_SELECTOR))
        .await?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert!(managed.contains(DEFAULT_STORAGE_CLASS), "{managed:?}");
    assert!(!replaced.contains(&USER_CLASS.to_string()), "{replaced:?}");
    for name in &replaced {
        assert!(
            managed.contains(name),
            "{name} replaced, not the operator's"
        );
        assert!(
            has_event(&events, "StorageClassRecreated", &[name]),
            "{name} replaced without an Event: {events:?}"
        );
    }

    // --- The volumes in use were not disturbed ---
    assert_eq!(
        pods_as_they_are(&workload, &writer_pods).await,
        writer_pods_before,
        "writer pods re-created or restarted"
    );
    let lines_after = wait_written_beyond(&workload, lines_before + 10).await;
    let errors = workload
        .exec("writer", "cat /tmp/write-errors 2>/dev/null || true")
        .await?;
    assert_eq!(errors, "", "writes failed during the upgrade");
    assert_eq!(
        workload.exec("writer", "cat /data/before").await?,
        "before-the-upgrade\n"
    );
    workload
        .exec("writer", "echo after-the-upgrade > /data/after")
        .await?;
    let share_dir = env
        .fake_cloud()
        .expect("the fake cloud")
        .share_dir(&data.share_id);
    assert_eq!(
        std::fs::read_to_string(share_dir.join("after"))?,
        "after-the-upgrade\n"
    );
    let in_share = std::fs::read_to_string(share_dir.join("log"))?
        .lines()
        .count() as u64;
    assert!(in_share >= lines_after, "{in_share} < {lines_after}");
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let pv = volumes.get(data.volume_name()).await?;
    assert_eq!(pv.metadata.uid, data.volume.metadata.uid);
    assert_eq!(
        manila.shares().await,
        shares_before,
        "no share deleted or changed"
    );
    assert_eq!(
        manila.snapshots().await,
        snapshots_before,
        "no snapshot deleted"
    );
    let kept = workload.snapshots().get("before").await?;
    assert_eq!(kept.metadata.uid, snapshot.metadata.uid);
    assert_eq!(kept.data["status"]["readyToUse"], true);

    // --- The snapshot taken under N-1 restores under N, with the data it held ---
    let restored = workload
        .bound_claim(&claim_from_snapshot(
            "restored",
            Some(DEFAULT_STORAGE_CLASS),
            "1Gi",
            "ReadWriteMany",
            "before",
        ))
        .await?;
    assert_ne!(restored.share_id, data.share_id);
    workload
        .ready_pod(&pod_with_claim("restored-reader", "restored", None, ""))
        .await?;
    assert_eq!(
        workload.exec("restored-reader", "cat /data/before").await?,
        "before-the-upgrade\n"
    );
    let restored_log = workload.exec("restored-reader", "cat /data/log").await?;
    let restored_lines = numbered_lines(&restored_log, "the restored /data/log");
    assert!(
        restored_lines >= lines_at_snapshot,
        "the restored log has {restored_lines} lines, {lines_at_snapshot} were written before \
         the snapshot"
    );
    assert_eq!(
        workload
            .exec(
                "restored-reader",
                "test -e /data/after && echo yes || echo no"
            )
            .await?,
        "no\n",
        "the restore holds what was written after the snapshot"
    );
    timeline.record(
        "test",
        format!("snapshot before restored under {current}: {restored_lines} lines"),
    );

    // --- Expansion ---
    // A claim provisioned under N-1 has no controller-expand secret on its PV (N-1's class
    // named none, and a PV's CSI source is immutable): the apiserver now accepts the resize
    // (the class allows expansion), but the driver refuses a call without credentials, and
    // the share keeps its size.
    assert!(
        pv.spec
            .as_ref()
            .and_then(|s| s.csi.as_ref())
            .is_some_and(|c| c.controller_expand_secret_ref.is_none())
    );
    resize(&workload, "data", "2Gi").await?;
    let event = workload
        .wait_event("data", "VolumeResizeFailed", "secrets are required")
        .await?;
    assert!(
        event
            .message
            .as_deref()
            .unwrap_or("")
            .contains("InvalidArgument"),
        "{event:?}"
    );
    assert_eq!(
        manila.shares().await.get(&data.share_id),
        Some(&(1, "available".to_string()))
    );
    // A claim of the re-created class is expanded: share extended, PV capacity updated.
    let fresh = workload
        .bound_claim(&claim(
            "fresh",
            Some(DEFAULT_STORAGE_CLASS),
            "1Gi",
            "ReadWriteMany",
        ))
        .await?;
    assert!(
        fresh
            .volume
            .spec
            .as_ref()
            .and_then(|s| s.csi.as_ref())
            .is_some_and(|c| c.controller_expand_secret_ref.is_some())
    );
    resize(&workload, "fresh", "2Gi").await?;
    let manila = &manila;
    let share_id = fresh.share_id.as_str();
    let extended = wait::wait_until(
        format!("share {share_id} extended to 2 GiB"),
        WAIT,
        || async move {
            match manila.shares().await.get(share_id) {
                Some((2, status)) if status == "available" => Ok(Some(())),
                share => Err(format!("{share:?}")),
            }
        },
    )
    .await;
    workload.check("share extended", extended).await?;
    let pv_grown = wait::wait_for_described(
        &volumes,
        fresh.volume_name(),
        "PV capacity 2Gi",
        |pv: Option<&PersistentVolume>| pv.and_then(volume_capacity).as_deref() == Some("2Gi"),
        WAIT,
    )
    .await;
    workload.check("PV capacity 2Gi", pv_grown).await?;
    let claim_grown = wait::wait_for_described(
        &workload.claims,
        "fresh",
        "claim capacity 2Gi",
        |c: Option<&k8s_openapi::api::core::v1::PersistentVolumeClaim>| {
            c.and_then(claim_capacity).as_deref() == Some("2Gi")
        },
        WAIT,
    )
    .await;
    workload.check("claim capacity 2Gi", claim_grown).await?;
    // The new claim mounts: a pod writes to it, and the bytes are in its share.
    workload
        .ready_pod(&pod_with_claim(
            "fresh-user",
            "fresh",
            Some(&nodes[1]),
            "echo provisioned-after-the-upgrade > /data/fresh",
        ))
        .await?;
    assert_eq!(
        workload.exec("fresh-user", "cat /data/fresh").await?,
        "provisioned-after-the-upgrade\n"
    );
    let fresh_dir = env
        .fake_cloud()
        .expect("the fake cloud")
        .share_dir(&fresh.share_id);
    assert_eq!(
        std::fs::read_to_string(fresh_dir.join("fresh"))?,
        "provisioned-after-the-upgrade\n"
    );

    // --- Going back: N-1's manifests applied over N are refused ---
    let driver_pods_at_n = driver_pod_uids(&env).await;
    let generation = |d: &Deployment| d.metadata.generation;
    let controller_generation = generation(&deployments.get(CONTROLLER_DEPLOYMENT).await?);
    let class_uid = classes.get(DEFAULT_STORAGE_CLASS).await?.metadata.uid;
    let secret_at_n = secrets.get(DRIVER_SECRET).await?.data;
    let files_before = tested(writers.read().await)?;
    let (downgrade_started, _) = writers::now();
    timeline.record(
        "inject",
        format!("operator manifests applied with release previous ({previous})"),
    );
    env.upgrade_operator(OperatorOptions::PREVIOUS_RELEASE)
        .await?;
    timeline.record("operator", "operator Deployment rolled out");
    let env_ref = &env;
    let refusal = wait::wait_until(
        "ClusterCSIDriver: ManilaOperatorVersionControllerDegraded=True",
        WAIT,
        || async move {
            let driver = env_ref
                .cluster_csi_driver()
                .await
                .map_err(|e| e.to_string())?;
            match condition(&driver, VERSION_DEGRADED) {
                Some(c) if c["status"] == "True" => Ok(Some(c.clone())),
                _ => Err(describe_conditions(&driver)),
            }
        },
    )
    .await?;
    let message = refusal["message"].as_str().unwrap_or_default().to_string();
    timeline.record("operator", format!("{VERSION_DEGRADED}: {message}"));
    record_rollout(&env, &timeline, downgrade_started).await;
    assert_eq!(refusal["reason"], "DowngradeRefused", "{refusal}");
    assert!(
        message.starts_with(&format!(
            "refusing to downgrade the Manila CSI driver from version {current} to {previous}"
        )),
        "{message}"
    );
    assert!(message.contains("left as it is"), "{message}");
    assert!(
        message.contains(&format!("operator manifests of version {current} or later")),
        "{message}"
    );
    // The ClusterOperator: Degraded with the message, still Available (the driver works),
    // the operator's version N-1 and the driver's still N.
    let operator = env
        .wait_cluster_operator("Degraded by the refused downgrade, Available", WAIT, |o| {
            condition_is(o, "Degraded", "True") && condition_is(o, "Available", "True")
        })
        .await?;
    let degraded = condition(&operator, "Degraded")
        .cloned()
        .unwrap_or_default();
    assert!(
        degraded["message"]
            .as_str()
            .is_some_and(|m| m.contains(&message)),
        "{degraded}"
    );
    assert_eq!(
        operator_versions(&operator),
        BTreeMap::from([
            ("manila-csi-driver".to_string(), current.clone()),
            ("operator".to_string(), previous.clone()),
        ])
    );
    let driver = env.cluster_csi_driver().await?;
    assert_eq!(driver.data["status"]["version"], current.as_str());
    let events = operator_events(&env).await;
    assert!(
        has_event(
            &events,
            "DowngradeRefused",
            &[&current, &previous, "left as it is"]
        ),
        "{events:?}"
    );
    // The driver left as N installed it.
    assert_eq!(driver_pod_uids(&env).await, driver_pods_at_n);
    let controller = deployments.get(CONTROLLER_DEPLOYMENT).await?;
    assert_eq!(generation(&controller), controller_generation);
    assert!(container_names(&controller).contains(&"csi-resizer".to_string()));
    assert!(roles.get_opt(SHARED_ROLE).await?.is_none());
    for sidecar in ["provisioner", "resizer", "snapshotter"] {
        let name = format!("openstack-manila-csi-{sidecar}");
        assert!(roles.get_opt(&name).await?.is_some(), "{name}");
    }
    assert_eq!(
        classes.get(DEFAULT_STORAGE_CLASS).await?.metadata.uid,
        class_uid
    );
    assert_eq!(secrets.get(DRIVER_SECRET).await?.data, secret_at_n);
    tested(writers.wait_written_since(SystemTime::now()).await)?;
    let stall = tested(
        writers
            .check_since(downgrade_started, Some(&files_before))
            .await,
    )?;
    println!(
        "refused downgrade N → N-1: writer stall {:.3} s (from {})",
        stall.length.as_secs_f64(),
        writers::wall(stall.from)
    );

    // Applying N's manifests again is the way back: Available, not Degraded, with N's
    // version, and nothing of the driver touched.
    let (reapplied, _) = writers::now();
    env.upgrade_operator_and_wait(OperatorOptions::CURRENT_RELEASE, WAIT, &timeline)
        .await?;
    record_rollout(&env, &timeline, reapplied).await;
    let driver = env.cluster_csi_driver().await?;
    assert!(
        condition_is(&driver, VERSION_DEGRADED, "False"),
        "{}",
        describe_conditions(&driver)
    );
    assert_eq!(driver_pod_uids(&env).await, driver_pods_at_n);
    assert_eq!(
        generation(&deployments.get(CONTROLLER_DEPLOYMENT).await?),
        controller_generation
    );
    tested(writers.check_since(reapplied, None).await)?;
    assert_eq!(
        pods_as_they_are(&workload, &writer_pods).await,
        writer_pods_before,
        "writer pods re-created or restarted"
    );

    // Its volume was published before the upgrade restarted the node plugin: the restarted
    // plugin unpublishes it.
    tested(writers.stop().await)?;
    workload
        .delete_pods(&["writer", "restored-reader", "fresh-user"])
        .await?;
    classes.delete(USER_CLASS, &DeleteParams::default()).await?;
    workload.cleanup().await?;
    env.teardown().await?;
    guard.passed = true;
    println!("{}", timeline.render());
    Ok(())
}
