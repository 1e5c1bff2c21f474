//! `multiVolume` (upstream `multivolume.go`): several volumes in one pod across its
//! re-creation, one volume used by several pods at once (on one node, read-only, on several
//! nodes), and a ReadWriteOnce volume refused on a second node while the first pod uses it;
//! where the driver claims `block`, the same with raw block volumes (upstream's `block
//! volmode` patterns) and a Cinder multiattach volume shared by two nodes.
//!
//! [`concurrent`]: one volume, several pods; [`attach`]: volumes and nodes (Multi-Attach).

mod attach;
mod concurrent;

use driver_spec::Capability;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;

use super::data::{check_seeded, check_seeded_block, write_seeded, write_seeded_block};
use super::provisioning::access_mode;
use super::{node_of, nodes_in_one_zone};
use crate::e2e::workload::{PodBuilder, Workload, block_claim, claim};
use crate::registry::{DriverConfig, Needs, TestCase, TestContext, TestError, TestResult};
use crate::{ensure_eq, test_case};

const SUITE: &str = "multiVolume";

const PERSISTENCE: &[Capability] = &[Capability::Persistence, Capability::Exec];
const PERSISTENCE_BLOCK: &[Capability] =
    &[Capability::Persistence, Capability::Exec, Capability::Block];
const MULTI_PODS: &[Capability] = &[Capability::MultiPods, Capability::Exec];
const MULTI_PODS_BLOCK: &[Capability] =
    &[Capability::MultiPods, Capability::Exec, Capability::Block];

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            SUITE,
            "should access to two volumes with the same volume mode and retain data across pod recreation on the same node",
            Needs::capabilities(PERSISTENCE),
            two_volumes_same_node
        ),
        test_case!(
            SUITE,
            "should access to two volumes with the same volume mode and retain data across pod recreation on different node",
            Needs::capabilities(PERSISTENCE).nodes(2),
            two_volumes_other_node
        ),
        test_case!(
            SUITE,
            "should access to two volumes with the same volume mode and retain data across pod recreation on the same node (block volmode)",
            Needs::capabilities(PERSISTENCE_BLOCK),
            two_block_volumes_same_node
        ),
        test_case!(
            SUITE,
            "should access to two volumes with the same volume mode and retain data across pod recreation on different node (block volmode)",
            Needs::capabilities(PERSISTENCE_BLOCK).nodes(2),
            two_block_volumes_other_node
        ),
        test_case!(
            SUITE,
            "should access to two volumes with different volume mode and retain data across pod recreation on the same node",
            Needs::capabilities(PERSISTENCE_BLOCK),
            mixed_volumes_same_node
        ),
        test_case!(
            SUITE,
            "should access to two volumes with different volume mode and retain data across pod recreation on different node",
            Needs::capabilities(PERSISTENCE_BLOCK).nodes(2),
            mixed_volumes_other_node
        ),
        test_case!(
            SUITE,
            "should concurrently access the single volume from pods on the same node",
            Needs::capabilities(MULTI_PODS),
            concurrent::same_node
        ),
        test_case!(
            SUITE,
            "should concurrently access the single volume from pods on the same node (block volmode)",
            Needs::capabilities(MULTI_PODS_BLOCK),
            concurrent::same_node_block
        ),
        test_case!(
            SUITE,
            "should concurrently access the single read-only volume from pods on the same node",
            Needs::capabilities(MULTI_PODS),
            concurrent::read_only_same_node
        ),
        test_case!(
            SUITE,
            "should concurrently access the single volume from pods on different node",
            Needs::capabilities(&[Capability::Rwx, Capability::Exec]).nodes(2),
            concurrent::different_nodes
        ),
        test_case!(
            SUITE,
            "should refuse a ReadWriteOnce volume on a second node (Multi-Attach) until the first pod is gone",
            Needs::capabilities(&[Capability::Exec])
                .nodes(2)
                .driver(DriverConfig::AttachRequired),
            attach::read_write_once
        ),
        test_case!(
            SUITE,
            "should share a ReadWriteMany block volume of volume type multiattach between pods on two nodes",
            Needs::capabilities(&[Capability::Block, Capability::Exec]).nodes(2),
            attach::multiattach_block
        ),
    ]
}

/// A volume's mode: a file system mounted in the pod, or a raw block device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Filesystem,
    Block,
}

impl Mode {
    /// The claim `name` in this mode.
    fn claim(
        self,
        name: &str,
        class: &str,
        size: &str,
        access_mode: &str,
    ) -> PersistentVolumeClaim {
        match self {
            Mode::Filesystem => claim(name, Some(class), size, access_mode),
            Mode::Block => block_claim(name, Some(class), size, access_mode),
        }
    }

    /// `pod` using the claim `claim` at `path`: mounted there, or the device file there.
    fn give(self, pod: PodBuilder, claim: &str, path: &str) -> PodBuilder {
        match self {
            Mode::Filesystem => pod.claim(claim, path),
            Mode::Block => pod.device(claim, path),
        }
    }

    /// Writes the data of `seed` into the volume at `path` of `pod`, at `slot`: the file
    /// `data<slot>` below the mount, or the `slot`-th block of the device.
    async fn write(
        self,
        w: &Workload<'_>,
        pod: &str,
        path: &str,
        slot: u64,
        seed: u64,
    ) -> TestResult {
        match self {
            Mode::Filesystem => write_seeded(w, pod, &format!("{path}/data{slot}"), seed).await,
            Mode::Block => write_seeded_block(w, pod, path, slot, seed).await,
        }
    }

    /// Fails unless [`Mode::write`]'s `slot` holds the data of `seed`.
    async fn check(
        self,
        w: &Workload<'_>,
        pod: &str,
        path: &str,
        slot: u64,
        seed: u64,
    ) -> TestResult {
        match self {
            Mode::Filesystem => check_seeded(w, pod, &format!("{path}/data{slot}"), seed).await,
            Mode::Block => check_seeded_block(w, pod, path, slot, seed).await,
        }
    }
}

/// Upstream's `testAccessMultipleVolumes` across a re-creation of the pod: a pod with two
/// claims (in `modes`) writes seeded data to both; a new pod with the same claims (on another
/// node when `other_node`, else the first pod's node) reads it back and writes again.
async fn two_volumes(ctx: &TestContext<'_>, other_node: bool, modes: [Mode; 2]) -> TestResult {
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    let size = ctx.claim_size();
    let access = access_mode(ctx);
    let volumes = [("vol-1", "/mnt/volume1"), ("vol-2", "/mnt/volume2")];
    for ((name, _), mode) in volumes.iter().zip(modes) {
        w.create_claim(&mode.claim(name, &class, &size, access))
            .await?;
    }
    let pod = |name: &str| {
        volumes.iter().zip(modes).fold(
            PodBuilder::new(name, "true"),
            |pod, ((claim, path), mode)| mode.give(pod, claim, path),
        )
    };
    // Two nodes of one zone: a zonal volume is usable in its zone only.
    let pair = if other_node {
        Some(nodes_in_one_zone(ctx, 2)?)
    } else {
        None
    };
    let first = match &pair {
        Some(pair) => pod("first").node(&pair[0]),
        None => pod("first"),
    };
    // A late binding class binds the claims once the pod is scheduled.
    let first = w.ready_pod(&first.build()).await?;
    for (name, _) in volumes {
        w.wait_bound(name).await?;
    }
    let first_node =
        node_of(&first).ok_or_else(|| TestError::failed("the first pod has no node"))?;
    for (index, ((_, path), mode)) in volumes.iter().zip(modes).enumerate() {
        let seed = 100 + index as u64;
        mode.write(w, "first", path, 0, seed).await?;
        mode.check(w, "first", path, 0, seed).await?;
    }
    w.delete_pods(&["first"]).await?;

    let second = match &pair {
        Some(pair) => pod("second").node(&pair[1]),
        None => pod("second").node(&first_node),
    };
    let second = w.ready_pod(&second.build()).await?;
    let second_node = node_of(&second).unwrap_or_default();
    ensure_eq!(
        second_node == first_node,
        !other_node,
        "whether the pod came back on the same node ({first_node} then {second_node})"
    );
    for (index, ((_, path), mode)) in volumes.iter().zip(modes).enumerate() {
        mode.check(w, "second", path, 0, 100 + index as u64).await?;
        mode.write(w, "second", path, 0, 200 + index as u64).await?;
        mode.check(w, "second", path, 0, 200 + index as u64).await?;
    }
    w.delete_pods(&["second"]).await?;
    Ok(())
}

async fn two_volumes_same_node(ctx: &TestContext<'_>) -> TestResult {
    two_volumes(ctx, false, [Mode::Filesystem; 2]).await
}

async fn two_volumes_other_node(ctx: &TestContext<'_>) -> TestResult {
    two_volumes(ctx, true, [Mode::Filesystem; 2]).await
}

async fn two_block_volumes_same_node(ctx: &TestContext<'_>) -> TestResult {
    two_volumes(ctx, false, [Mode::Block; 2]).await
}

async fn two_block_volumes_other_node(ctx: &TestContext<'_>) -> TestResult {
    two_volumes(ctx, true, [Mode::Block; 2]).await
}

async fn mixed_volumes_same_node(ctx: &TestContext<'_>) -> TestResult {
    two_volumes(ctx, false, [Mode::Filesystem, Mode::Block]).await
}

async fn mixed_volumes_other_node(ctx: &TestContext<'_>) -> TestResult {
    two_volumes(ctx, true, [Mode::Filesystem, Mode::Block]).await
}
