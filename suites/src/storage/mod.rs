//! The storage tests of `conformance run`, grouped in suites named as upstream's Kubernetes
//! storage test suites, each gated by the driver spec file through its
//! [`Needs`](crate::registry::Needs):
//!
//! - [`volumes`]: a volume stores data; its files can be executed;
//! - [`provisioning`]: claims bound to volumes of their size, deleted with them; the
//!   cluster's default class; a Manila share type that does not exist;
//! - [`snapshottable`]: VolumeSnapshots ready with a snapshot in the cloud; claims restored
//!   from them holding the snapshotted data;
//! - [`multivolume`]: a ReadWriteMany volume used by pods on two nodes; a ReadWriteOnce
//!   volume refused on a second node while the first pod uses it;
//! - [`expansion`]: a claim resized while a pod uses it;
//! - [`volume_mode`]: block volumes on a filesystem-only driver; unused volumes not mounted;
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
pub mod volume_mode;
pub mod volumes;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube_support::wait;
use openstack_client::manila::model::Share;

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

/// The sum of the restart counts of a pod's containers.
pub fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|c| c.iter().map(|c| c.restart_count).sum())
        .unwrap_or_default()
}
