//! The Cinder CSI driver on the embedded cluster, deployed from `fixtures/cinder-csi/`
//! (`attachRequired: true`), against the fake Cinder + Nova whose attachments are real loop
//! devices: block volumes formatted, mounted, moved between nodes by detach and attach,
//! refused on a second node while in use, created in the zone of the pod's node, restored
//! from snapshots and cloned, used raw as block devices (a multiattach one by two nodes at
//! once), grown offline and online, and kept within the per-node attach limit by the
//! scheduler.
//!
//! One environment (3 nodes: node-1 and node-3 in zone-a, node-2 in zone-b; attach limit 2)
//! runs the scenarios one after the other, each in its own namespace; the teardown proves
//! that no PV, VolumeAttachment, volume, snapshot, attachment or loop device is left.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod cinder_checks;

use std::collections::BTreeMap;

use cinder_checks::{
    BLOCK_OFFSET, GIB_KIB, assert_attached_only_to, attachment_of, clone_claim, fs_size_kib,
    read_block, required_zones, resize_claim, wait_claim_capacity, wait_volume_size, write_block,
};
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::{Api, ListParams};
use kube_support::wait;
use suites::e2e::cinder::{
    CINDER_DEFAULT_CLASS, CINDER_DRIVER_NAME, CINDER_MULTIATTACH_CLASS, CINDER_SNAPSHOT_CLASS,
    CINDER_TOPOLOGY_KEY, CINDER_XFS_CLASS, CinderCsiEnvironment, CinderEnvironmentOptions,
};
use suites::e2e::workload::{
    PodBuilder, Workload, block_claim, claim, claim_from_snapshot, describe_pod,
};

const ATTACH_LIMIT: u32 = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_volumes_on_the_embedded_cluster() {
    testkit::init_tracing(
        "suites=info,cluster=info,node_agent=info,control_plane=info,pod_runtime=info,fakes=warn",
    );
    let env = CinderCsiEnvironment::start(CinderEnvironmentOptions {
        attach_limit: Some(ATTACH_LIMIT),
        ..Default::default()
    })
    .await
    .expect("the Cinder driver deploys");
    tracing::info!(timings = ?env.timings(), "environment started");

    every_node_reports_its_server_zone_and_limit(&env).await;
    a_volume_moves_with_its_data_from_one_node_to_another(&env).await;
    a_read_write_once_volume_is_refused_on_a_second_node_while_in_use(&env).await;
    a_wait_for_first_consumer_volume_is_made_in_the_pod_s_zone(&env).await;
    snapshots_and_clones_hold_the_data(&env).await;
    a_raw_block_volume_is_written_and_read_through_its_device(&env).await;
    a_multiattach_volume_is_shared_as_a_block_device_by_two_nodes(&env).await;
    expansion_grows_the_device_and_the_file_system(&env).await;
    an_xfs_volume_grows_while_its_pod_runs(&env).await;
    the_attach_limit_keeps_the_scheduler_from_over_placing(&env).await;

    env.teardown().await.expect("nothing is left");
}

/// The CSINode of each node: the driver's node ID is the node's Nova server, its topology
/// the node's zone, its allocatable count the configured attach limit.
async fn every_node_reports_its_server_zone_and_limit(env: &CinderCsiEnvironment) {
    let csinodes: Api<CSINode> = Api::all(env.client());
    for node in env.cluster().node_names() {
        let csinode = csinodes.get(&node).await.unwrap();
        let driver = csinode
            .spec
            .drivers
            .iter()
            .find(|d| d.name == CINDER_DRIVER_NAME)
            .unwrap_or_else(|| panic!("{node}'s CSINode lacks the driver: {csinode:?}"));
        assert_eq!(
            Some(driver.node_id.as_str()),
            env.server_of(&node),
            "{node}"
        );
        assert_eq!(
            driver.topology_keys.as_deref(),
            Some(&[CINDER_TOPOLOGY_KEY.to_string()][..]),
            "{node}"
        );
        assert_eq!(
            driver.allocatable.as_ref().and_then(|a| a.count),
            Some(ATTACH_LIMIT as i32),
            "{node}"
        );
    }
}

/// A pod on node-1 writes to a ReadWriteOnce ext4 volume; once it is deleted, a pod on
/// node-3 (same zone) reads the data: Nova detached the volume from node-1's server and
/// attached it to node-3's, and the device followed.
async fn a_volume_moves_with_its_data_from_one_node_to_another(env: &CinderCsiEnvironment) {
    let w = Workload::create(env, "cinder-move").await.unwrap();
    w.create_claim(&claim("data", None, "1Gi", "ReadWriteOnce"))
        .await
        .unwrap();
    w.ready_pod(
        &PodBuilder::new("writer", "echo written-on-node-1 > /data/f && sync")
            .claim("data", "/data")
            .node("node-1")
            .build(),
    )
    .await
    .unwrap();
    let bound = w.wait_bound("data").await.unwrap();
    let volume_id = bound.share_id.clone();

    // The pod sees an ext4 file system on a loop device (the Nova attachment).
    let mounts = w
        .exec("writer", "grep ' /data ' /proc/mounts")
        .await
        .unwrap();
    assert!(
        mounts.starts_with("/dev/loop") && mounts.contains(" ext4 "),
        "{mounts}"
    );
    assert_attached_only_to(env, &volume_id, "node-1");

    w.delete_pods(&["writer"]).await.unwrap();
    w.ready_pod(
        &PodBuilder::new("reader", "true")
            .claim("data", "/data")
            .node("node-3")
            .build(),
    )
    .await
    .unwrap();
    assert_eq!(
        w.exec("reader", "cat /data/f").await.unwrap(),
        "written-on-node-1\n"
    );
    assert_attached_only_to(env, &volume_id, "node-3");
    let attachment = attachment_of(env, bound.volume_name()).await;
    assert_eq!(attachment.spec.node_name, "node-3");

    w.delete_pods(&["reader"]).await.unwrap();
    w.cleanup().await.unwrap();
}

/// While a pod on node-1 uses a ReadWriteOnce volume, a pod on node-3 gets the attach/detach
/// controller's Multi-Attach error and waits; when the first pod goes, it starts and sees the
/// first pod's data.
async fn a_read_write_once_volume_is_refused_on_a_second_node_while_in_use(
    env: &CinderCsiEnvironment,
) {
    let w = Workload::create(env, "cinder-rwo").await.unwrap();
    w.create_claim(&claim("single", None, "1Gi", "ReadWriteOnce"))
        .await
        .unwrap();
    w.ready_pod(
        &PodBuilder::new("first", "echo first > /data/owner && sync")
            .claim("single", "/data")
            .node("node-1")
            .build(),
    )
    .await
    .unwrap();
    w.create_pod(
        &PodBuilder::new("second", "true")
            .claim("single", "/data")
            .node("node-3")
            .build(),
    )
    .await
    .unwrap();
    let event = w
        .wait_event("second", "FailedAttachVolume", "Multi-Attach error")
        .await
        .unwrap();
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let second = w.pods.get("second").await.unwrap();
    assert_eq!(
        second.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending"),
        "{}",
        describe_pod(&second)
    );
    let volume_id = w.wait_bound("single").await.unwrap().share_id;
    assert_attached_only_to(env, &volume_id, "node-1");

    w.delete_pods(&["first"]).await.unwrap();
    w.wait_ready("second").await.unwrap();
    assert_eq!(
        w.exec("second", "cat /data/owner").await.unwrap(),
        "first\n"
    );
    assert_attached_only_to(env, &volume_id, "node-3");
    w.delete_pods(&["second"]).await.unwrap();
    w.cleanup().await.unwrap();
}

/// With WaitForFirstConsumer, the volume of a pod bound for node-2 is created in zone-b,
/// and its PV requires that zone.
async fn a_wait_for_first_consumer_volume_is_made_in_the_pod_s_zone(env: &CinderCsiEnvironment) {
    let w = Workload::create(env, "cinder-wffc").await.unwrap();
    w.create_claim(&claim(
        "zonal",
        Some(CINDER_DEFAULT_CLASS),
        "1Gi",
        "ReadWriteOnce",
    ))
    .await
    .unwrap();
    // Not bound before a pod uses it.
    let pending = w.claims.get("zonal").await.unwrap();
    assert_eq!(
        pending.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Pending")
    );
    w.ready_pod(
        &PodBuilder::new("user", "echo zonal > /data/f")
            .claim("zonal", "/data")
            .node("node-2")
            .build(),
    )
    .await
    .unwrap();
    let bound = w.wait_bound("zonal").await.unwrap();
    let zone = env.zone_of("node-2").unwrap();
    assert_eq!(zone, "zone-b");
    let volume = env.cloud().block_volume(&bound.share_id).unwrap();
    assert_eq!(volume.availability_zone, zone, "{volume:?}");
    assert_eq!(required_zones(&bound.volume), vec![zone]);
    w.delete_pods(&["user"]).await.unwrap();
    w.cleanup().await.unwrap();
}

/// A VolumeSnapshot of a volume in use (a Cinder snapshot), a claim restored from it and a
/// clone of the volume, each read on the other node of the zone, hold the data written
/// before.
async fn snapshots_and_clones_hold_the_data(env: &CinderCsiEnvironment) {
    let w = Workload::create(env, "cinder-snap").await.unwrap();
    w.create_claim(&claim("origin", None, "1Gi", "ReadWriteOnce"))
        .await
        .unwrap();
    w.ready_pod(
        &PodBuilder::new("writer", "echo before-snapshot > /data/f && sync")
            .claim("origin", "/data")
            .node("node-1")
            .build(),
    )
    .await
    .unwrap();
    let origin = w.wait_bound("origin").await.unwrap();
    w.ready_snapshot("snap", "origin", CINDER_SNAPSHOT_CLASS)
        .await
        .unwrap();
    // Written after the snapshot: not in the restored volume, but in the clone made next.
    w.exec("writer", "echo after-snapshot > /data/g && sync")
        .await
        .unwrap();
    // A clone of a volume in use: its data is what the writer synced.
    w.create_claim(&clone_claim("clone", "1Gi", "origin"))
        .await
        .unwrap();
    w.create_claim(&claim_from_snapshot(
        "restored",
        None,
        "1Gi",
        "ReadWriteOnce",
        "snap",
    ))
    .await
    .unwrap();
    w.ready_pod(
        &PodBuilder::new("reader", "true")
            .claim("restored", "/restored")
            .claim("clone", "/clone")
            .node("node-3")
            .build(),
    )
    .await
    .unwrap();
    assert_eq!(
        w.exec(
            "reader",
            "cat /restored/f; ls /restored; cat /clone/f /clone/g"
        )
        .await
        .unwrap(),
        "before-snapshot\nf\nlost+found\nbefore-snapshot\nafter-snapshot\n"
    );
    let restored = w.wait_bound("restored").await.unwrap();
    let clone = w.wait_bound("clone").await.unwrap();
    let restored_volume = env.cloud().block_volume(&restored.share_id).unwrap();
    assert!(restored_volume.snapshot_id.is_some(), "{restored_volume:?}");
    let clone_volume = env.cloud().block_volume(&clone.share_id).unwrap();
    assert_eq!(
        clone_volume.source_volid.as_deref(),
        Some(origin.share_id.as_str())
    );
    w.delete_pods(&["writer", "reader"]).await.unwrap();
    w.cleanup().await.unwrap();
}

/// A `volumeMode: Block` claim: the pod gets the device itself (no file system is made),
/// what it writes through it lands in the Cinder volume, and a pod on another node reads it
/// back once the volume has moved.
async fn a_raw_block_volume_is_written_and_read_through_its_device(env: &CinderCsiEnvironment) {
    let w = Workload::create(env, "cinder-block").await.unwrap();
    w.create_claim(&block_claim("raw", None, "1Gi", "ReadWriteOnce"))
        .await
        .unwrap();
    w.ready_pod(
        &PodBuilder::new("writer", &write_block("/dev/xvda", "raw-block-data"))
            .device("raw", "/dev/xvda")
            .node("node-1")
            .build(),
    )
    .await
    .unwrap();
    assert_eq!(
        w.exec(
            "writer",
            "test -b /dev/xvda && blockdev --getsize64 /dev/xvda"
        )
        .await
        .unwrap(),
        "1073741824\n"
    );
    let volume_id = w.wait_bound("raw").await.unwrap().share_id;
    assert_attached_only_to(env, &volume_id, "node-1");
    // The bytes are in the volume's file at the offset written, and nothing formatted it.
    let file = std::fs::read(env.cloud().volume_file(&volume_id)).unwrap();
    assert_eq!(&file[BLOCK_OFFSET..BLOCK_OFFSET + 14], b"raw-block-data");
    assert!(
        file[..BLOCK_OFFSET].iter().all(|b| *b == 0),
        "the device was formatted"
    );

    w.delete_pods(&["writer"]).await.unwrap();
    w.ready_pod(
        &PodBuilder::new("reader", "true")
            .device("raw", "/dev/xvdb")
            .node("node-3")
            .build(),
    )
    .await
    .unwrap();
    assert_eq!(
        w.exec("reader", &read_block("/dev/xvdb", 14))
            .await
            .unwrap(),
        "raw-block-data"
    );
    assert_attached_only_to(env, &volume_id, "node-3");
    w.delete_pods(&["reader"]).await.unwrap();
    w.cleanup().await.unwrap();
}

/// A ReadWriteMany block claim of the `multiattach` volume type: Nova attaches the volume to
/// both nodes' servers at once, and what one pod writes the other reads.
async fn a_multiattach_volume_is_shared_as_a_block_device_by_two_nodes(env: &CinderCsiEnvironment) {
    let w = Workload::create(env, "cinder-rwx").await.unwrap();
    w.create_claim(&block_claim(
        "shared",
        Some(CINDER_MULTIATTACH_CLASS),
        "1Gi",
        "ReadWriteMany",
    ))
    .await
    .unwrap();
    for (pod, node) in [("left", "node-1"), ("right", "node-3")] {
        w.create_pod(
            &PodBuilder::new(pod, "true")
                .device("shared", "/dev/shared")
                .node(node)
                .build(),
        )
        .await
        .unwrap();
    }
    w.wait_ready("left").await.unwrap();
    w.wait_ready("right").await.unwrap();
    let volume_id = w.wait_bound("shared").await.unwrap().share_id;
    let volume = env.cloud().block_volume(&volume_id).unwrap();
    assert!(volume.multiattach, "{volume:?}");
    let mut servers = volume.attached_to.clone();
    servers.sort();
    let mut expected = vec![
        env.server_of("node-1").unwrap().to_string(),
        env.server_of("node-3").unwrap().to_string(),
    ];
    expected.sort();
    assert_eq!(servers, expected);

    w.exec("left", &write_block("/dev/shared", "from-the-left"))
        .await
        .unwrap();
    assert_eq!(
        w.exec("right", &read_block("/dev/shared", 13))
            .await
            .unwrap(),
        "from-the-left"
    );
    w.delete_pods(&["left", "right"]).await.unwrap();
    w.cleanup().await.unwrap();
}

/// Expansion. Offline: the claim of a volume no pod uses is grown; the volume grows in
/// Cinder and the next pod finds the file system grown (the node grows it when it stages the
/// volume). Online: the claim of a volume in use is grown again; Cinder extends the in-use
/// volume (3.42) and the pod sees its device grow at once. Growing a mounted ext4 needs
/// CAP_SYS_RESOURCE, which this machine's containers lack, so the file system catches up
/// when the volume is staged again, in the pod that follows.
async fn expansion_grows_the_device_and_the_file_system(env: &CinderCsiEnvironment) {
    let w = Workload::create(env, "cinder-grow").await.unwrap();
    w.create_claim(&claim("grow", None, "1Gi", "ReadWriteOnce"))
        .await
        .unwrap();
    w.ready_pod(
        &PodBuilder::new("first", "echo kept > /data/f && sync")
            .claim("grow", "/data")
            .node("node-1")
            .build(),
    )
    .await
    .unwrap();
    let bound = w.wait_bound("grow").await.unwrap();
    let before = fs_size_kib(&w, "first").await;
    assert!(before < GIB_KIB, "{before} KiB");
    w.delete_pods(&["first"]).await.unwrap();

    // Offline.
    resize_claim(&w, "grow", "2Gi").await;
    wait_volume_size(env, &bound.share_id, 2).await;
    w.ready_pod(
        &PodBuilder::new("second", "true")
            .claim("grow", "/data")
            .node("node-3")
            .build(),
    )
    .await
    .unwrap();
    wait_claim_capacity(&w, "grow", "2Gi").await;
    let grown = fs_size_kib(&w, "second").await;
    assert!(grown > GIB_KIB && grown <= 2 * GIB_KIB, "{grown} KiB");
    assert_eq!(w.exec("second", "cat /data/f").await.unwrap(), "kept\n");

    // Online: the device grows under the running pod.
    resize_claim(&w, "grow", "3Gi").await;
    wait_volume_size(env, &bound.share_id, 3).await;
    let device = "$(awk '$2 == \"/data\" {print $1}' /proc/mounts)";
    let w_ref = &w;
    wait::wait_until(
        "the pod's device to be 3 GiB",
        suites::e2e::workload::WAIT,
        || async move {
            let size = w_ref
                .exec("second", &format!("blockdev --getsize64 {device}"))
                .await
                .map_err(|e| e.to_string())?;
            if size.trim() == (3u64 << 30).to_string() {
                Ok(Some(()))
            } else {
                Err(format!("{} bytes", size.trim()))
            }
        },
    )
    .await
    .unwrap();
    w.delete_pods(&["second"]).await.unwrap();
    // The next stage grows the file system (and kubelet's node expansion then finds nothing
    // left to do, whether or not it could grow it online).
    w.ready_pod(
        &PodBuilder::new("third", "true")
            .claim("grow", "/data")
            .node("node-1")
            .build(),
    )
    .await
    .unwrap();
    wait_claim_capacity(&w, "grow", "3Gi").await;
    let grown = fs_size_kib(&w, "third").await;
    assert!(grown > 2 * GIB_KIB && grown <= 3 * GIB_KIB, "{grown} KiB");
    assert_eq!(w.exec("third", "cat /data/f").await.unwrap(), "kept\n");
    w.delete_pods(&["third"]).await.unwrap();
    w.cleanup().await.unwrap();
}

/// Online expansion of a file system: an xfs volume in use is grown (xfs_growfs, unlike
/// resize2fs on a mounted ext4, needs no CAP_SYS_RESOURCE): the claim reaches the new size
/// and the running pod sees the larger file system, its data kept.
async fn an_xfs_volume_grows_while_its_pod_runs(env: &CinderCsiEnvironment) {
    let w = Workload::create(env, "cinder-xfs").await.unwrap();
    w.create_claim(&claim(
        "xfs",
        Some(CINDER_XFS_CLASS),
        "1Gi",
        "ReadWriteOnce",
    ))
    .await
    .unwrap();
    w.ready_pod(
        &PodBuilder::new("user", "echo on-xfs > /data/f && sync")
            .claim("xfs", "/data")
            .node("node-2")
            .build(),
    )
    .await
    .unwrap();
    let mounts = w.exec("user", "grep ' /data ' /proc/mounts").await.unwrap();
    assert!(mounts.contains(" xfs "), "{mounts}");
    let before = fs_size_kib(&w, "user").await;
    assert!(before < GIB_KIB, "{before} KiB");
    resize_claim(&w, "xfs", "2Gi").await;
    wait_claim_capacity(&w, "xfs", "2Gi").await;
    let after = fs_size_kib(&w, "user").await;
    assert!(
        after > GIB_KIB && after <= 2 * GIB_KIB,
        "{before} -> {after} KiB"
    );
    assert_eq!(w.exec("user", "cat /data/f").await.unwrap(), "on-xfs\n");
    w.delete_pods(&["user"]).await.unwrap();
    w.cleanup().await.unwrap();
}

/// Each node takes at most [`ATTACH_LIMIT`] volumes: of seven pods with a volume each, six
/// run, at most two per node, and the seventh stays Pending with the scheduler saying the
/// nodes exceed their volume count.
async fn the_attach_limit_keeps_the_scheduler_from_over_placing(env: &CinderCsiEnvironment) {
    let w = Workload::create(env, "cinder-limit").await.unwrap();
    let names: Vec<String> = (1..=7).map(|i| format!("user-{i}")).collect();
    for name in &names {
        w.create_claim(&claim(name, None, "1Gi", "ReadWriteOnce"))
            .await
            .unwrap();
        w.create_pod(&PodBuilder::new(name, "true").claim(name, "/data").build())
            .await
            .unwrap();
    }
    // Six Ready, whichever they are.
    let pods = w.pods.clone();
    let running = wait::wait_until(
        "six of the seven pods Ready",
        suites::e2e::workload::WAIT,
        || {
            let pods = pods.clone();
            async move {
                let list = pods
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
                let ready: Vec<_> = list
                    .items
                    .iter()
                    .filter(|p| suites::e2e::workload::pod_is_ready(p))
                    .cloned()
                    .collect();
                if ready.len() >= 6 {
                    Ok(Some(ready))
                } else {
                    Err(list
                        .items
                        .iter()
                        .map(describe_pod)
                        .collect::<Vec<_>>()
                        .join("; "))
                }
            }
        },
    )
    .await
    .unwrap();
    assert_eq!(running.len(), 6);
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    for pod in &running {
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap();
        *per_node.entry(node).or_default() += 1;
    }
    assert_eq!(
        per_node,
        BTreeMap::from([
            ("node-1".to_string(), 2),
            ("node-2".to_string(), 2),
            ("node-3".to_string(), 2)
        ])
    );
    let waiting = names
        .iter()
        .find(|n| {
            !running
                .iter()
                .any(|p| p.metadata.name.as_deref() == Some(n.as_str()))
        })
        .unwrap();
    w.wait_event(waiting, "FailedScheduling", "max volume count")
        .await
        .unwrap();
    let pod = w.pods.get(waiting).await.unwrap();
    assert_eq!(
        pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        None,
        "{}",
        describe_pod(&pod)
    );
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    w.delete_pods(&names).await.unwrap();
    w.cleanup().await.unwrap();
}
