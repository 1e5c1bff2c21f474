//! The storage tests of `conformance run`, grouped in suites named as upstream's Kubernetes
//! storage test suites, each gated by the driver spec file through its
//! [`Needs`](crate::registry::Needs):
//!
//! - [`volumes`]: a volume stores data; its files can be executed;
//! - [`provisioning`]: claims bound to volumes of their size, deleted with them; the
//!   cluster's default class; a Manila share type that does not exist;
//! - [`snapshottable`]: VolumeSnapshots ready with a snapshot in the cloud; claims restored
//!   from them holding the snapshotted data;
//! - [`multivolume`]: several volumes in a pod (filesystem, block, both), one volume in
//!   several pods (one node, two nodes with RWX or a Cinder multiattach block volume); a
//!   ReadWriteOnce volume refused on a second node while the first pod uses it;
//! - [`expansion`]: a claim resized while a pod uses it;
//! - [`volume_mode`]: block volumes on a filesystem-only driver; unused volumes not mounted;
//!   block volumes as raw devices; volumes used in the other mode refused;
//! - [`volume_limits`]: the nodes' volume limits, and the scheduler keeping a pod off a full
//!   node;
//! - [`subpath`]: subPath mounts; [`volume_io`]: files of several sizes; [`fs_group`]:
//!   ownership by fsGroup;
//! - [`topology`]: provisioning that follows where the pod runs, and AllowedTopologies;
//! - [`demo`]: the seed's two writers on two nodes sharing one claim.
//!
//! [`data`] writes and checks seeded data through pods.

pub mod data;
pub mod data_sources;
pub mod demo;
pub mod expansion;
pub mod fs_group;
pub mod multivolume;
pub mod provisioning;
pub mod snapshottable;
pub mod subpath;
pub mod topology;
pub mod volume_io;
pub mod volume_limits;
pub mod volume_mode;
pub mod volumes;

use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::{StorageClass, VolumeAttachment};
use kube::api::Api;
use kube_support::wait;
use openstack_client::manila::model::Share;

use crate::e2e::workload::{BoundClaim, PodBuilder};
use crate::registry::{TestCase, TestContext, TestError, TestResult};

/// Every storage test, in run order.
pub fn tests() -> Vec<TestCase> {
    let mut tests = Vec::new();
    tests.extend(volumes::tests());
    tests.extend(provisioning::tests());
    tests.extend(data_sources::tests());
    tests.extend(snapshottable::tests());
    tests.extend(multivolume::tests());
    tests.extend(expansion::tests());
    tests.extend(volume_mode::tests());
    tests.extend(volume_limits::tests());
    tests.extend(subpath::tests());
    tests.extend(volume_io::tests());
    tests.extend(fs_group::tests());
    tests.extend(topology::tests());
    tests.extend(demo::tests());
    tests
}

/// How long a test waits for one thing to happen (a claim bound, a pod ready, a share
/// extended).
pub const WAIT: Duration = crate::e2e::workload::WAIT;

/// The node a pod was scheduled to.
pub fn node_of(pod: &Pod) -> Option<String> {
    pod.spec.as_ref().and_then(|s| s.node_name.clone())
}

/// The names of the first `count` schedulable nodes, or a skip.
pub fn nodes(ctx: &TestContext<'_>, count: usize) -> TestResult<Vec<String>> {
    let names: Vec<String> = ctx.nodes().iter().map(|n| n.name.clone()).collect();
    if names.len() < count {
        return Err(TestError::skip(format!(
            "needs {count} schedulable nodes, the cluster has {}",
            names.len()
        )));
    }
    Ok(names.into_iter().take(count).collect())
}

/// The names of `count` schedulable nodes in one zone (or without zones: a volume made for
/// one of them can be used on all), the first node's zone first tried; or a skip.
pub fn nodes_in_one_zone(ctx: &TestContext<'_>, count: usize) -> TestResult<Vec<String>> {
    let all = ctx.nodes();
    for node in all {
        let together: Vec<String> = all
            .iter()
            .filter(|n| n.zone == node.zone)
            .map(|n| n.name.clone())
            .take(count)
            .collect();
        if together.len() == count {
            return Ok(together);
        }
    }
    Err(TestError::skip(format!(
        "needs {count} schedulable nodes in one zone, the cluster has {:?}",
        all.iter()
            .map(|n| (n.name.as_str(), n.zone.as_deref()))
            .collect::<Vec<_>>()
    )))
}

/// Creates `claim` and waits until it is Bound, as [`Workload::bound_claim`]; a claim of a
/// WaitForFirstConsumer class is bound by a pod of its own using it (on `node` when given,
/// so that the volume is made where the test's pods will run), deleted once it is bound.
///
/// [`Workload::bound_claim`]: crate::e2e::workload::Workload::bound_claim
pub async fn bind_claim(
    ctx: &TestContext<'_>,
    claim: &PersistentVolumeClaim,
    node: Option<&str>,
) -> TestResult<BoundClaim> {
    let w = ctx.workload();
    let name = claim.metadata.name.clone().unwrap_or_default();
    w.create_claim(claim).await?;
    // The class as admission gave it (a claim without one gets the default class).
    let created = w.claims.get(&name).await?;
    let spec = created.spec.clone().unwrap_or_default();
    let late = match spec.storage_class_name.as_deref() {
        // "" binds to a volume made beforehand, not by a class.
        Some(class) if !class.is_empty() => {
            let classes: Api<StorageClass> = Api::all(ctx.client());
            classes.get(class).await?.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer")
        }
        _ => false,
    };
    if !late {
        return Ok(w.wait_bound(&name).await?);
    }
    let binder = format!("bind-{name}");
    let mut pod = PodBuilder::new(&binder, "true");
    pod = if spec.volume_mode.as_deref() == Some("Block") {
        pod.device(&name, "/mnt/volume1")
    } else {
        pod.claim(&name, "/mnt/volume1")
    };
    if let Some(node) = node {
        pod = pod.node(node);
    }
    w.ready_pod(&pod.build()).await?;
    let bound = w.wait_bound(&name).await?;
    w.delete_pods(&[&binder]).await?;
    // Unused again only once detached: tests then act on a volume no node holds.
    wait_detached(ctx, bound.volume_name()).await?;
    Ok(bound)
}

/// Waits until no VolumeAttachment of the PV `volume` is left (the attach/detach controller
/// detached it from every node; at once for a driver that needs no attach).
pub async fn wait_detached(ctx: &TestContext<'_>, volume: &str) -> TestResult {
    let attachments: Api<VolumeAttachment> = Api::all(ctx.client());
    let detached = wait::wait_until(format!("PV {volume} detached"), WAIT, || {
        let attachments = attachments.clone();
        async move {
            let left: Vec<String> = attachments
                .list(&Default::default())
                .await
                .map_err(|e| e.to_string())?
                .items
                .into_iter()
                .filter(|a| a.spec.source.persistent_volume_name.as_deref() == Some(volume))
                .map(|a| {
                    format!(
                        "{} on {}",
                        a.metadata.name.unwrap_or_default(),
                        a.spec.node_name
                    )
                })
                .collect();
            if left.is_empty() {
                Ok(Some(()))
            } else {
                Err(format!("VolumeAttachments {}", left.join(", ")))
            }
        }
    })
    .await;
    Ok(ctx.workload().check("volume detached", detached).await?)
}

/// Waits until the cloud's share `id` satisfies `wanted` (a description says what), and
/// returns it; a failure says what the share was last.
pub async fn wait_share(
    ctx: &TestContext<'_>,
    id: &str,
    what: &str,
    wanted: impl Fn(&Share) -> bool + Send + Sync,
) -> TestResult<Share> {
    let cloud = ctx.cloud()?;
    let found = wait::wait_until(format!("share {id} {what}"), WAIT, || {
        let wanted = &wanted;
        async move {
            match cloud.share(id).await {
                Ok(Some(share)) if wanted(&share) => Ok(Some(share)),
                Ok(Some(share)) => Err(format!(
                    "status {}, size {} GiB, zone {:?}",
                    share.status, share.size, share.availability_zone
                )),
                Ok(None) => Err("not found".into()),
                Err(e) => Err(e.to_string()),
            }
        }
    })
    .await;
    Ok(ctx
        .workload()
        .check(&format!("share {what}"), found)
        .await?)
}

/// Waits until the cloud no longer has the share `id`.
pub async fn wait_share_gone(ctx: &TestContext<'_>, id: &str) -> TestResult {
    let cloud = ctx.cloud()?;
    let gone = wait::wait_until(format!("share {id} deleted"), WAIT, || async move {
        match cloud.share(id).await {
            Ok(None) => Ok(Some(())),
            Ok(Some(share)) => Err(format!("status {}", share.status)),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    Ok(ctx.workload().check("share deleted", gone).await?)
}

/// Whether the driver under test is the Cinder CSI driver (its volumes are Cinder volumes:
/// block devices attached to nodes, volume types such as `multiattach`).
pub fn is_cinder(ctx: &TestContext<'_>) -> bool {
    ctx.driver().name == crate::e2e::cinder::CINDER_DRIVER_NAME
}

/// The sum of the restart counts of a pod's containers.
pub fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|c| c.iter().map(|c| c.restart_count).sum())
        .unwrap_or_default()
}
