//! Reading what the upgrade may change: the driver's objects and pods, the operator's Events
//! and versions, the cluster's inventory of volumes, snapshot contents and classes, the
//! numbered writer's log, and Manila's shares and snapshots.

use super::{NUMBERED_WRITER, OPERATOR_LEASE, WAIT};
use crate::e2e::cloud::CloudInspector;
use crate::e2e::timeline::Timeline;
use crate::e2e::workload::{Workload, describe_pod, pod_is_ready};
use crate::e2e::{
    CONTROLLER_SELECTOR, DRIVER_NAME, ManilaCsiEnvironment, NODE_PLUGIN_SELECTOR, condition,
    snapshots,
};
use crate::registry::{TestError, TestResult};
use crate::{ensure, ensure_eq};
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, PersistentVolume, Pod, PodSpec, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DynamicObject, ListParams};
use kube_support::wait;
use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

/// The uids of every object `api` lists, by name.
async fn uids<K>(api: &Api<K>) -> TestResult<BTreeMap<String, String>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(api
        .list_metadata(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|o| {
            (
                o.metadata.name.unwrap_or_default(),
                o.metadata.uid.unwrap_or_default(),
            )
        })
        .collect())
}

/// The PVs, VolumeSnapshotContents and StorageClasses, by name → uid.
#[derive(Debug)]
pub(super) struct Inventory {
    pub volumes: BTreeMap<String, String>,
    pub contents: BTreeMap<String, String>,
    pub classes: BTreeMap<String, String>,
}

impl Inventory {
    pub async fn take(client: &kube::Client) -> TestResult<Inventory> {
        Ok(Inventory {
            volumes: uids(&Api::<PersistentVolume>::all(client.clone())).await?,
            contents: uids(&snapshots::volume_snapshot_contents(client)).await?,
            classes: uids(&Api::<StorageClass>::all(client.clone())).await?,
        })
    }
}

/// The names of `before` that are gone from `after`, and those there with another uid.
pub(super) fn gone_and_replaced(
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

fn pod_spec_of<T>(spec: Option<&T>, template: impl Fn(&T) -> Option<&PodSpec>) -> PodSpec {
    spec.and_then(template).cloned().unwrap_or_default()
}

/// The container names of a Deployment's pods.
pub(super) fn container_names(deployment: &Deployment) -> Vec<String> {
    pod_spec_of(deployment.spec.as_ref(), |s| s.template.spec.as_ref())
        .containers
        .into_iter()
        .map(|c| c.name)
        .collect()
}

/// The volume names of a Deployment's pods.
pub(super) fn volume_names(deployment: &Deployment) -> Vec<String> {
    names_of_volumes(pod_spec_of(deployment.spec.as_ref(), |s| {
        s.template.spec.as_ref()
    }))
}

/// The volume names of a DaemonSet's pods.
pub(super) fn daemon_set_volume_names(daemon_set: &DaemonSet) -> Vec<String> {
    names_of_volumes(pod_spec_of(daemon_set.spec.as_ref(), |s| {
        s.template.spec.as_ref()
    }))
}

fn names_of_volumes(spec: PodSpec) -> Vec<String> {
    spec.volumes
        .unwrap_or_default()
        .into_iter()
        .map(|v| v.name)
        .collect()
}

/// A Secret's data as text.
pub(super) fn secret_text(secret: &Secret) -> BTreeMap<String, String> {
    secret
        .data
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
        .collect()
}

/// The class's parameters naming the controller-expand secret.
pub(super) fn expand_parameters(class: &StorageClass) -> Vec<String> {
    class
        .parameters
        .clone()
        .unwrap_or_default()
        .into_keys()
        .filter(|k| k.contains("controller-expand"))
        .collect()
}

/// The uids of the driver's pods (controller and Manila node plugins).
pub(super) async fn driver_pod_uids(env: &ManilaCsiEnvironment) -> TestResult<Vec<String>> {
    let pods: Api<Pod> = Api::namespaced(env.client(), env.namespace());
    let mut found = Vec::new();
    for selector in [CONTROLLER_SELECTOR, NODE_PLUGIN_SELECTOR] {
        for pod in pods.list(&ListParams::default().labels(selector)).await? {
            found.push(pod.metadata.uid.unwrap_or_default());
        }
    }
    Ok(found)
}

/// The Events about the ClusterCSIDriver (the operator's).
pub(super) async fn operator_events(env: &ManilaCsiEnvironment) -> TestResult<Vec<Event>> {
    let events: Api<Event> = Api::namespaced(env.client(), "default");
    Ok(events
        .list(&ListParams::default().fields(&format!("involvedObject.name={DRIVER_NAME}")))
        .await?
        .items)
}

/// Whether an Event of `reason` holds every text of `contains`.
pub(super) fn has_event(events: &[Event], reason: &str, contains: &[&str]) -> bool {
    events.iter().any(|e| {
        let message = e.message.as_deref().unwrap_or("");
        e.reason.as_deref() == Some(reason) && contains.iter().all(|c| message.contains(c))
    })
}

/// Reasons and messages of `events`, for a failure message.
pub(super) fn describe_events(events: &[Event]) -> String {
    events
        .iter()
        .map(|e| {
            format!(
                "{}: {}",
                e.reason.as_deref().unwrap_or("?"),
                e.message.as_deref().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether the condition `type_` of `object` has `status`.
pub(super) fn condition_is(object: &DynamicObject, type_: &str, status: &str) -> bool {
    condition(object, type_).is_some_and(|c| c["status"] == status)
}

/// Records on the timeline when the operator's leader Lease was last acquired, and when
/// each pod of the driver's namespace created at or after `since` was created and became
/// Ready (the API server's times: whole seconds for pods).
pub(super) async fn record_rollout(
    env: &ManilaCsiEnvironment,
    timeline: &Timeline,
    since: SystemTime,
) -> TestResult {
    let leases: Api<Lease> = Api::namespaced(env.client(), env.namespace());
    if let Some(lease) = leases.get_opt(OPERATOR_LEASE).await?
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
    for pod in pods.list(&ListParams::default()).await? {
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
    Ok(())
}

/// The uids and restart counts of `names`' pods, checked to be Ready.
pub(super) async fn pods_as_they_are(
    workload: &Workload<'_>,
    names: &[&str],
) -> TestResult<BTreeMap<String, (String, i32)>> {
    let mut found = BTreeMap::new();
    for name in names {
        let pod = workload.pods.get(name).await?;
        ensure!(
            pod_is_ready(&pod),
            "pod {name} is not Ready: {}",
            describe_pod(&pod)
        );
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
    Ok(found)
}

/// How many numbered lines `log` holds, checked to be 1, 2, 3, … without a gap. Only complete
/// lines count: the writer may be appending one right now.
pub(super) fn numbered_lines(log: &str, what: &str) -> TestResult<u64> {
    let complete = &log[..log.rfind('\n').map_or(0, |end| end + 1)];
    for (index, line) in complete.lines().enumerate() {
        let want = index as u64 + 1;
        let number: u64 = line.trim().parse().map_err(|_| {
            TestError::failed(format!("line {want} of {what} is {line:?}, not a number"))
        })?;
        ensure_eq!(number, want, "line {want} of {what}");
    }
    Ok(complete.lines().count() as u64)
}

/// The sequence numbers the numbered writer appended, checked to be 1, 2, 3, … without a gap.
pub(super) async fn written(workload: &Workload<'_>) -> TestResult<u64> {
    let log = workload.exec(NUMBERED_WRITER, "cat /data/log").await?;
    numbered_lines(&log, "/data/log")
}

/// Waits until the numbered writer has appended more than `count` lines.
pub(super) async fn wait_written_beyond(workload: &Workload<'_>, count: u64) -> TestResult<u64> {
    Ok(wait::wait_until(
        format!("more than {count} lines in /data/log"),
        WAIT,
        || async move {
            match written(workload).await {
                Ok(now) if now > count => Ok(Some(now)),
                Ok(now) => Err(format!("{now} lines")),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await?)
}

/// `(size in GiB, status)` of every share, by id.
pub(super) async fn shares(manila: &CloudInspector) -> TestResult<BTreeMap<String, (u64, String)>> {
    Ok(manila
        .shares()
        .await?
        .into_iter()
        .map(|s| (s.id, (s.size, s.status)))
        .collect())
}

/// The status of every share snapshot, by id.
pub(super) async fn cloud_snapshots(
    manila: &CloudInspector,
) -> TestResult<BTreeMap<String, String>> {
    Ok(manila
        .snapshots()
        .await?
        .into_iter()
        .map(|s| (s.id, s.status))
        .collect())
}
