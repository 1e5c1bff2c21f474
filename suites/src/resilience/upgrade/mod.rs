//! `upgrade`: the Manila CSI driver operator and the driver it installs go from release N-1
//! to the current release (N) the way a user upgrades (the operator manifests applied again;
//! the operator rolls the driver) while pods write to volumes provisioned under N-1; then
//! an attempt to go back to N-1, which the operator refuses. See the operator's README,
//! "Releases": N-1 is the same operator binary with `--release previous`, installing N-1's
//! layout (no resizer, one ClusterRole for every sidecar, the CA mounted from a ConfigMap,
//! classes without expansion) and reporting its own version.
//!
//! The test starts an embedded cluster of its own (two nodes, the fake cloud over TLS, so
//! that the CA layout of each release matters) with release N-1 installed, because the run's
//! shared cluster has the current driver. It needs no other test to stay away, but it runs
//! alone all the same: a second cluster on a 2-core machine slows everything beside it.
//!
//! Writers ([`crate::resilience::writers`]) append a timestamp every 100 ms: two pods on two
//! nodes on an RWX claim, one on an RWO claim; a fourth pod numbers its lines on a claim
//! that is snapshotted before the upgrade. Through the upgrade and after it the test proves:
//! the writer stall (on the timeline, with the time from apply to Available); no write failed
//! and nothing written before is lost; no PV or VolumeSnapshotContent deleted and no
//! StorageClass deleted (the operator's own classes re-created, with an Event, when their
//! parameters change; the user's untouched); the operator Available with the new version;
//! the snapshot taken under N-1 restored under N with its data; a claim of N-1 refused
//! expansion with a clear message and a claim of N expanded; a new claim provisioned and
//! mounted. N-1's manifests applied over N are refused (`DowngradeRefused`) with the driver
//! left as it is, and applying N's again clears the refusal.

mod downgrade;
mod inspect;
mod release_n;
mod release_n_minus_1;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use std::collections::BTreeMap;
use std::time::Duration;

use super::writers::{WriterSpec, Writers};
use crate::e2e::cloud::CloudInspector;
use crate::e2e::timeline::Timeline;
use crate::e2e::workload::{BoundClaim, Workload, claim, pod_with_claim};
use crate::e2e::{
    DEFAULT_STORAGE_CLASS, EnvironmentOptions, Install, ManilaCsiEnvironment, OperatorOptions,
};
use crate::registry::{Needs, TestCase, TestContext, TestError, TestResult};
use crate::{ensure, test_case};
use inspect::Inventory;

const SUITE: &str = "upgrade";

/// How long a step waits (a rollout, a claim, the operator's conditions).
const WAIT: Duration = Duration::from_secs(120);
const CONTROLLER_DEPLOYMENT: &str = "openstack-manila-csi-controllerplugin";
const NODE_PLUGIN_DAEMON_SET: &str = "openstack-manila-csi-nodeplugin";
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
/// The pod numbering its lines on the claim [`DATA_CLAIM`].
const NUMBERED_WRITER: &str = "writer";
/// The claim provisioned under N-1 that is snapshotted and later resized.
const DATA_CLAIM: &str = "data";
/// The numbered writer's script: appends its sequence number to /data/log every 100 ms, a
/// failed write to a file outside the volume; in the foreground, so that nothing of it
/// outlives the container (a background loop would keep the volume busy after the pod is
/// deleted).
const NUMBERED_SCRIPT: &str = "echo before-the-upgrade > /data/before\n\
    trap 'exit 0' TERM\n\
    i=0\n\
    while true; do i=$((i+1)); echo $i >> /data/log || echo $i >> /tmp/write-errors; \
    sleep 0.1; done";

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    vec![test_case!(
        SUITE,
        "should keep pods writing and every volume, snapshot and class while the operator and driver go from release N-1 to N, and refuse to go back",
        Needs::NONE.manila().own_cluster().exclusive(),
        n_minus_1_to_n
    )]
}

/// The releases involved, as the operator reports them.
struct Releases {
    previous: String,
    current: String,
}

/// What the test notes under N-1, to compare with after the upgrade.
struct BeforeUpgrade {
    /// N-1's default StorageClass.
    class: StorageClass,
    /// The uid of the VolumeSnapshotClass (never pruned).
    snapshot_class_uid: Option<String>,
    /// The claim of the numbered writer.
    data: BoundClaim,
    /// The numbered writer's lines when the snapshot was taken.
    lines_at_snapshot: u64,
    /// The VolumeSnapshot `before` of [`DATA_CLAIM`].
    snapshot: DynamicObject,
    /// Every writer pod, and their uids and restart counts.
    writer_pods: Vec<String>,
    pods: BTreeMap<String, (String, i32)>,
    /// Manila's shares and snapshots.
    shares: BTreeMap<String, (u64, String)>,
    cloud_snapshots: BTreeMap<String, String>,
    /// The driver's pods.
    driver_pods: Vec<String>,
    /// PVs, VolumeSnapshotContents, StorageClasses.
    inventory: Inventory,
}

async fn n_minus_1_to_n(ctx: &TestContext<'_>) -> TestResult {
    let timeline = ctx.timeline();
    let releases = Releases {
        previous: OperatorOptions::PREVIOUS_RELEASE.version()?,
        current: OperatorOptions::CURRENT_RELEASE.version()?,
    };
    ensure!(
        releases.previous != releases.current,
        "N-1 and N report the same version {}",
        releases.current
    );
    timeline.record(
        "test",
        format!(
            "starting an embedded cluster of the test's own (2 nodes, the fake cloud over TLS) with release N-1 ({}) of the operator",
            releases.previous
        ),
    );
    // Dropped on a failure, the environment still ends its cluster and removes its files.
    let env = start_release_n_minus_1()
        .await
        .map_err(|e| TestError::failed(format!("installing release N-1: {e}")))?;
    env.wait_operator_version(&releases.previous, WAIT).await?;
    timeline.record(
        "cluster",
        format!("release N-1 ({}) Available", releases.previous),
    );
    let fake = env
        .fake_cloud()
        .ok_or_else(|| TestError::failed("the test's environment has no fake cloud"))?;
    let manila = CloudInspector::new(fake)?;
    release_n_minus_1::check_installed(&env).await?;
    let workload = Workload::create(&env, "upgrade").await?;
    let nodes = env.cluster().node_names();
    ensure!(
        nodes.len() >= 2,
        "two nodes needed, the cluster has {nodes:?}"
    );
    let data = release_n_minus_1::numbered_writer(&workload).await?;
    let writers = start_writers(&workload, &nodes, timeline).await?;
    let before =
        release_n_minus_1::note(&env, &workload, &writers, &manila, data, timeline).await?;

    release_n::upgrade(&env, &releases, &workload, &writers, &before, timeline).await?;
    release_n::volumes_undisturbed(&env, &workload, &manila, &before).await?;
    release_n::snapshot_restores(&workload, &before, &releases, timeline).await?;
    release_n::expansion(&env, &workload, &manila, &before, &nodes[1]).await?;
    downgrade::refused(&env, &releases, &workload, &writers, &before, timeline).await?;

    // Its volume was published before the upgrade restarted the node plugin: the restarted
    // plugin unpublishes it.
    writers.stop().await?;
    workload
        .delete_pods(&[NUMBERED_WRITER, "restored-reader", "fresh-user"])
        .await?;
    let classes: Api<StorageClass> = Api::all(env.client());
    classes.delete(USER_CLASS, &DeleteParams::default()).await?;
    workload.cleanup().await?;
    env.teardown().await?;
    timeline.record("test", "the test's cluster torn down: nothing left behind");
    Ok(())
}

/// An embedded cluster of two nodes with the fake cloud over TLS and release N-1 of the
/// operator installed (not yet waited for: see
/// [`ManilaCsiEnvironment::wait_operator_version`]). The upgrade benchmark starts the same.
pub async fn start_release_n_minus_1() -> crate::e2e::Result<ManilaCsiEnvironment> {
    ManilaCsiEnvironment::start(EnvironmentOptions {
        nodes: 2,
        cloud_tls: true,
        install: Install::Operator(OperatorOptions {
            release: OperatorOptions::PREVIOUS_RELEASE,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
}

/// The timestamp writers of an upgrade: claims `shared` (ReadWriteMany) and `single`
/// (ReadWriteOnce) of the default class, written to by `w-rwx-1` on the first of `nodes`,
/// `w-rwx-2` on the second and `w-rwo` on the first.
pub async fn start_writers<'w, 'a>(
    workload: &'w Workload<'a>,
    nodes: &[String],
    timeline: &Timeline,
) -> TestResult<Writers<'w, 'a>> {
    ensure!(
        nodes.len() >= 2,
        "two nodes needed, the cluster has {nodes:?}"
    );
    for (name, mode) in [("shared", "ReadWriteMany"), ("single", "ReadWriteOnce")] {
        workload
            .bound_claim(&claim(name, Some(DEFAULT_STORAGE_CLASS), "1Gi", mode))
            .await?;
    }
    Writers::start(
        workload,
        timeline,
        vec![
            WriterSpec::new("w-rwx-1", "shared").on(&nodes[0]),
            WriterSpec::new("w-rwx-2", "shared").on(&nodes[1]),
            WriterSpec::new("w-rwo", "single").on(&nodes[0]),
        ],
    )
    .await
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

/// A pod mounting `claim` at /data and running [`NUMBERED_SCRIPT`].
fn numbered_writer_pod(claim: &str) -> Pod {
    let mut pod = pod_with_claim(NUMBERED_WRITER, claim, None, "");
    if let Some(spec) = pod.spec.as_mut() {
        spec.containers[0].command = Some(vec!["sh".into(), "-c".into(), NUMBERED_SCRIPT.into()]);
    }
    pod
}
