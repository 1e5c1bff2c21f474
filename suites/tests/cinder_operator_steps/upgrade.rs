//! The Cinder operator upgraded from release N-1 to N under load: pods write continuously
//! to an attached raw block volume and to an ext4 volume while the operator's manifests are
//! applied again with the current release. Afterwards: N's version reported, N's shape
//! (a ClusterRole per sidecar, the resizer), N-1's shared role pruned,
//! the writers never saw an I/O error (no restart, still writing), their data is intact,
//! and no attachment moved.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::Api;
use kube_support::wait;
use suites::e2e::cinder::{
    CINDER_CONTROLLER_DEPLOYMENT, CINDER_OPERATOR_CLASS, CinderCsiEnvironment,
    CinderOperatorOptions,
};
use suites::e2e::workload::{PodBuilder, Workload, block_claim, claim};

use super::WAIT;
use crate::cinder_checks::assert_attached_only_to;

/// N-1's ClusterRole (and binding) shared by every controller sidecar.
const SHARED_ROLE: &str = "openstack-cinder-csi-controllerplugin";
/// N's ClusterRoles, one per controller sidecar.
const SIDECAR_ROLES: [&str; 4] = [
    "openstack-cinder-csi-provisioner",
    "openstack-cinder-csi-attacher",
    "openstack-cinder-csi-resizer",
    "openstack-cinder-csi-snapshotter",
];
/// The raw device's records start at this 512-byte block.
const FIRST_RECORD: u32 = 16;
/// Records written before wrapping (the test never gets this far).
const RECORDS: u32 = 2048;

/// Appends the next number to `/data/log` and syncs, every 0.2 s; exits (and so restarts) on
/// the first error.
const EXT4_WRITER: &str = "i=0; while :; do echo $i >> /data/log && sync || exit 1; \
                           i=$((i+1)); sleep 0.2; done";

/// Writes `rec-<n>` into block `FIRST_RECORD + n` of the device past the caches, then notes
/// `n` in `/tmp/count`; exits (and so restarts) on the first error.
fn block_writer() -> String {
    format!(
        "i=0; while :; do printf 'rec-%08d' $i | dd of=/dev/xvda bs=512 \
         seek=$(( {FIRST_RECORD} + i % {RECORDS} )) conv=sync,fsync oflag=direct 2>/dev/null \
         || exit 1; echo $i > /tmp/count; i=$((i+1)); sleep 0.2; done"
    )
}

async fn controller_containers(env: &CinderCsiEnvironment) -> Vec<String> {
    let deployment = Api::<Deployment>::namespaced(env.client(), env.namespace())
        .get(CINDER_CONTROLLER_DEPLOYMENT)
        .await
        .unwrap();
    deployment
        .spec
        .unwrap()
        .template
        .spec
        .unwrap()
        .containers
        .into_iter()
        .map(|c| c.name)
        .collect()
}

async fn role_exists(env: &CinderCsiEnvironment, name: &str) -> bool {
    Api::<ClusterRole>::all(env.client())
        .get_opt(name)
        .await
        .unwrap()
        .is_some()
}

/// `(uid, restarts)` of the writer pod `name`.
async fn writer_state(w: &Workload<'_>, env: &CinderCsiEnvironment, name: &str) -> (String, i32) {
    let pod = Api::<Pod>::namespaced(env.client(), w.namespace())
        .get(name)
        .await
        .unwrap();
    let restarts = pod
        .status
        .and_then(|s| s.container_statuses)
        .unwrap_or_default()
        .iter()
        .map(|c| c.restart_count)
        .sum();
    (pod.metadata.uid.unwrap(), restarts)
}

/// The numbers of `/data/log`, which must be 0, 1, 2, … without a gap.
async fn ext4_count(w: &Workload<'_>) -> usize {
    let log = w.exec("ext4-writer", "cat /data/log").await.unwrap();
    let numbers: Vec<usize> = log.lines().map(|l| l.parse().unwrap()).collect();
    assert!(
        numbers.iter().enumerate().all(|(i, n)| i == *n),
        "the ext4 log has a gap or a torn line: {log}"
    );
    numbers.len()
}

/// The records of the raw device up to the last one the writer finished, each checked.
async fn block_count(w: &Workload<'_>) -> u32 {
    let last: u32 = w
        .exec("block-writer", "cat /tmp/count")
        .await
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let count = (last + 1).min(RECORDS);
    let found = w
        .exec(
            "block-writer",
            &format!(
                "dd if=/dev/xvda bs=512 skip={FIRST_RECORD} count={count} iflag=direct \
                 2>/dev/null | tr -d '\\000'"
            ),
        )
        .await
        .unwrap();
    let wanted: String = (0..count).map(|i| format!("rec-{i:08}")).collect();
    assert_eq!(found, wanted, "the raw device's records");
    count
}

pub async fn run() {
    let env = CinderCsiEnvironment::start(suites::e2e::cinder::CinderEnvironmentOptions {
        nodes: 2,
        install: suites::e2e::cinder::CinderInstall::Operator(CinderOperatorOptions {
            release: CinderOperatorOptions::PREVIOUS_RELEASE,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .expect("the Cinder operator N-1 installs the driver");
    let previous = CinderOperatorOptions::PREVIOUS_RELEASE.version().unwrap();
    env.wait_operator_version(&previous, WAIT).await.unwrap();

    // N-1's shape: one shared sidecar role, no resizer.
    assert!(role_exists(&env, SHARED_ROLE).await);
    for role in SIDECAR_ROLES {
        assert!(!role_exists(&env, role).await, "{role} under N-1");
    }
    let containers = controller_containers(&env).await;
    assert!(
        !containers.iter().any(|c| c == "csi-resizer"),
        "{containers:?}"
    );

    let w = Workload::create(&env, "cinderop-upgrade").await.unwrap();
    w.create_claim(&claim(
        "data",
        Some(CINDER_OPERATOR_CLASS),
        "1Gi",
        "ReadWriteOnce",
    ))
    .await
    .unwrap();
    w.create_claim(&block_claim(
        "raw",
        Some(CINDER_OPERATOR_CLASS),
        "1Gi",
        "ReadWriteOnce",
    ))
    .await
    .unwrap();
    w.ready_pod(
        &PodBuilder::new("ext4-writer", EXT4_WRITER)
            .claim("data", "/data")
            .node("node-1")
            .build(),
    )
    .await
    .unwrap();
    w.ready_pod(
        &PodBuilder::new("block-writer", &block_writer())
            .device("raw", "/dev/xvda")
            .node("node-2")
            .build(),
    )
    .await
    .unwrap();
    let data = w.wait_bound("data").await.unwrap();
    let raw = w.wait_bound("raw").await.unwrap();
    let attached = |id: &str| env.cloud().block_volume(id).unwrap().attached_to;
    let before = (attached(&data.share_id), attached(&raw.share_id));
    let writers_before = (
        writer_state(&w, &env, "ext4-writer").await,
        writer_state(&w, &env, "block-writer").await,
    );
    // Both writers have written before the upgrade starts.
    wait::wait_until("both writers have written", WAIT, || async {
        let ext4 = w.exec("ext4-writer", "wc -l < /data/log").await;
        let block = w.exec("block-writer", "cat /tmp/count").await;
        match (ext4, block) {
            (Ok(a), Ok(b)) if a.trim().parse::<u32>().unwrap_or(0) > 2 && !b.trim().is_empty() => {
                Ok(Some(()))
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await
    .unwrap();
    let ext4_at_upgrade = ext4_count(&w).await;
    let block_at_upgrade = block_count(&w).await;

    let started = std::time::Instant::now();
    let operator = env
        .upgrade_operator(CinderOperatorOptions::CURRENT_RELEASE, WAIT * 3)
        .await
        .expect("the operator upgrades to N");
    tracing::info!(took = ?started.elapsed(), conditions = %suites::e2e::describe_conditions(&operator), "N-1 → N");

    // N's shape; N-1's shared role and binding pruned.
    let current = CinderOperatorOptions::CURRENT_RELEASE.version().unwrap();
    assert_ne!(current, previous);
    for role in SIDECAR_ROLES {
        assert!(role_exists(&env, role).await, "{role} under N");
    }
    wait::wait_until("N-1's shared ClusterRole pruned", WAIT, || async {
        if role_exists(&env, SHARED_ROLE).await {
            Err(format!("ClusterRole {SHARED_ROLE} still there"))
        } else {
            Ok(Some(()))
        }
    })
    .await
    .unwrap();
    let containers = controller_containers(&env).await;
    assert!(
        containers.iter().any(|c| c == "csi-resizer"),
        "{containers:?}"
    );
    env.wait_pod_ready(suites::e2e::cinder::CINDER_CONTROLLER_SELECTOR, WAIT)
        .await
        .unwrap();

    // The writers kept writing through the upgrade, without an error (a failed write exits
    // the loop and restarts the container), and every record is there.
    wait::wait_until(
        "the writers keep writing after the upgrade",
        WAIT,
        || async {
            let ext4 = ext4_count(&w).await;
            let block = block_count(&w).await;
            if ext4 > ext4_at_upgrade + 5 && block > block_at_upgrade + 5 {
                Ok(Some(()))
            } else {
                Err(format!("ext4 {ext4} lines, block {block} records"))
            }
        },
    )
    .await
    .unwrap();
    let writers_after = (
        writer_state(&w, &env, "ext4-writer").await,
        writer_state(&w, &env, "block-writer").await,
    );
    assert_eq!(writers_after, writers_before, "the same pods, no restart");
    assert_eq!(
        writers_before.0.1 + writers_before.1.1,
        0,
        "no restart at all"
    );

    // No attachment moved.
    assert_eq!((attached(&data.share_id), attached(&raw.share_id)), before);
    assert_attached_only_to(&env, &data.share_id, "node-1");
    assert_attached_only_to(&env, &raw.share_id, "node-2");

    w.cleanup().await.unwrap();
    env.teardown().await.expect("nothing is left");
}
