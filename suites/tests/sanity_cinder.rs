//! The sanity suite against the real `cinder-csi-plugin` (controller + node in one process,
//! in a private mount namespace, on a unix socket) with the fake Keystone + Cinder + Nova
//! in-process: one Nova server is the node, and attaching a volume to it makes a real loop
//! device linked in the node's disk directory, which the plugin formats and mounts. Once
//! with mount volumes, once with raw block volumes; then nothing may be left: no volume,
//! snapshot or attachment in the cloud, no loop device over a file of the run, no mount
//! under the scratch directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use csi_proto::v1::controller_client::ControllerClient;
use csi_proto::v1::node_client::NodeClient;
use csi_proto::v1::volume_capability::{self, AccessMode, MountVolume, access_mode::Mode};
use csi_proto::v1::{self, VolumeCapability};
use fakes::{CloudConfig, FakeCloud, ServerSeed};
use futures::future::join_all;
use rstest::rstest;
use suites::sanity::{self, AccessType, GIB, SanityConfig};
use support::Plugin;
use tempfile::TempDir;
use tonic::{Code, Status};

/// The node: a Nova server of the fake cloud, and the plugin's node name.
const NODE: &str = "sanity-node";

const EXPAND_AFTER_PUBLISH: &str =
    "Node Service NodeExpandVolume should work if node-expand is called after node-publish";

/// `CAP_SYS_RESOURCE`'s bit in a capability set.
const CAP_SYS_RESOURCE: u32 = 24;

/// Cases this machine cannot pass with `access` volumes, with the reason: limits of the
/// machine, not driver deviations. Empty where the machine allows everything; an entry whose
/// case passes makes the test fail so it gets removed.
fn expected_failures(access: AccessType) -> Vec<(&'static str, &'static str)> {
    let mut expected = Vec::new();
    if access == AccessType::Mount && !bounding_set_has(CAP_SYS_RESOURCE) {
        expected.push((
            EXPAND_AFTER_PUBLISH,
            "growing a mounted ext4 (resize2fs, EXT4_IOC_RESIZE_FS) needs CAP_SYS_RESOURCE, \
             which this container's capability bounding set lacks",
        ));
    }
    expected
}

/// Whether capability `bit` is in this process's bounding set (`CapBnd` in
/// `/proc/self/status`), which no process of the container can exceed.
fn bounding_set_has(bit: u32) -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let mask = status
        .lines()
        .find_map(|line| line.strip_prefix("CapBnd:"))
        .map(|hex| u64::from_str_radix(hex.trim(), 16).unwrap())
        .expect("CapBnd in /proc/self/status");
    mask & (1 << bit) != 0
}

/// The fake cloud with Cinder and one server, and the plugin (fields drop in order: the
/// plugin first, so its mounts go before the cloud detaches the loop devices).
struct Cinder {
    plugin: Plugin,
    cloud: FakeCloud,
    server_id: String,
    dir: TempDir,
}

impl Cinder {
    async fn start() -> Cinder {
        let dir = support::scratch();
        let mut config = CloudConfig::default();
        config.cinder.present = true;
        let cloud = testkit::cloud::fake_cloud_with(config).await;
        let disk_dir = dir.path().join("by-id");
        let server_id = cloud
            .add_server(&ServerSeed {
                name: NODE.into(),
                availability_zone: "nova".into(),
                id: None,
                disk_dir: Some(disk_dir.clone()),
            })
            .unwrap();
        let plugin = support::start_cinder_plugin(dir.path(), &cloud, NODE, &disk_dir).await;
        Cinder {
            plugin,
            cloud,
            server_id,
            dir,
        }
    }

    fn config(&self, access: AccessType) -> SanityConfig {
        let mut config = SanityConfig::new(self.plugin.endpoint.clone());
        config.mount_dir = self.dir.path().join("csi-mount");
        config.staging_dir = self.dir.path().join("csi-staging");
        config.test_volume_access_type = access;
        // Cinder sizes are whole GiB; small volumes keep mkfs and the copies quick.
        config.test_volume_size = GIB;
        config.test_volume_expand_size = Some(2 * GIB);
        config.idempotent_count = 5;
        config
    }

    /// Where the fake cloud keeps the volumes' files.
    fn volume_files(&self) -> PathBuf {
        let file = self.cloud.volume_file("probe");
        file.parent().unwrap().to_path_buf()
    }

    /// Asserts that nothing of the run is left: in the cloud, on the host's loop devices,
    /// in the plugin's mount namespace.
    fn assert_nothing_left(&self) {
        let leftovers = self.cloud.block_leftovers();
        assert!(
            leftovers.is_empty(),
            "left in the cloud: {leftovers:?}\n{}",
            self.logs()
        );
        let mounts = support::mounts_under(self.plugin.pid(), self.dir.path());
        assert!(
            mounts.is_empty(),
            "mounts left: {mounts:?}\n{}",
            self.logs()
        );
        for root in [self.volume_files(), self.dir.path().to_path_buf()] {
            let devices = support::loop_devices_backed_under(&root);
            assert!(devices.is_empty(), "loop devices left: {devices:?}");
        }
    }

    fn logs(&self) -> String {
        format!("--- cinder-csi-plugin log:\n{}", self.plugin.log())
    }
}

#[rstest]
#[case::mount(AccessType::Mount)]
#[case::block(AccessType::Block)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cinder_driver_passes_every_applicable_sanity_case(#[case] access: AccessType) {
    let env = Cinder::start().await;
    let report = sanity::run(env.config(access)).await.unwrap();
    let summary = report.summary();
    println!("{summary}");

    let failed: BTreeSet<&str> = report.failures().map(|c| c.name.as_str()).collect();
    let expected_failures = expected_failures(access);
    let expected: BTreeSet<&str> = expected_failures.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        failed,
        expected,
        "unexpected failures (or expected failures that now pass):\n{summary}\n{}",
        env.logs()
    );
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    // The driver has every controller and node capability the suite's core cases need:
    // those must have run, not been skipped.
    for must_run in [
        "Controller Service [Controller Server] volume lifecycle should be idempotent",
        "Controller Service [Controller Server] CreateVolume should create volume from an existing source volume",
        "Controller Service [Controller Server] ListVolumes pagination should detect volumes added between pages and accept tokens when the last volume from a page is deleted",
        "ListSnapshots [Controller Server] should return next token when a limited number of entries are requested",
        "Node Service should be idempotent",
        EXPAND_AFTER_PUBLISH,
    ] {
        let case = report
            .cases
            .iter()
            .find(|c| c.name == must_run)
            .unwrap_or_else(|| panic!("no case {must_run:?}"));
        assert!(
            !matches!(case.outcome, sanity::Outcome::Skipped(_)),
            "{must_run} was skipped: {:?}",
            case.outcome
        );
    }
    env.assert_nothing_left();
    assert!(
        !env.dir.path().join("csi-mount").exists(),
        "the mount dir was not removed"
    );
}

fn writer(access: AccessType) -> VolumeCapability {
    VolumeCapability {
        access_type: Some(match access {
            AccessType::Mount => volume_capability::AccessType::Mount(MountVolume::default()),
            AccessType::Block => {
                volume_capability::AccessType::Block(volume_capability::BlockVolume {})
            }
        }),
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
    }
}

/// `count` copies of one call at once; each must succeed or answer Aborted (the driver's
/// answer to a call on a name or volume that another call is working on). The successes.
async fn at_once<T, F>(count: usize, call: impl Fn() -> F) -> Vec<T>
where
    F: std::future::Future<Output = Result<tonic::Response<T>, Status>>,
{
    let results = join_all((0..count).map(|_| call())).await;
    let mut done = Vec::new();
    for result in results {
        match result {
            Ok(response) => done.push(response.into_inner()),
            Err(status) if status.code() == Code::Aborted => {}
            Err(status) => panic!("a concurrent call failed: {status}"),
        }
    }
    done
}

fn path_text(path: &Path) -> String {
    path.display().to_string()
}

/// The same calls at once, then once more (as kubelet and the sidecars retry after
/// Aborted): one volume, one snapshot, one attachment, one mount each; all undone the same
/// way.
#[rstest]
#[case::mount(AccessType::Mount)]
#[case::block(AccessType::Block)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_and_repeated_calls_make_one_of_each(#[case] access: AccessType) {
    const AT_ONCE: usize = 4;
    let env = Cinder::start().await;
    let channel = csi_proto::connect(&env.plugin.endpoint).await.unwrap();
    let controller = ControllerClient::new(channel.clone());
    let node = NodeClient::new(channel);
    let capability = writer(access);
    let staging = env.dir.path().join("staging");
    let target = env.dir.path().join("target");

    let create = || {
        let mut controller = controller.clone();
        let capability = capability.clone();
        async move {
            controller
                .create_volume(v1::CreateVolumeRequest {
                    name: "pvc-concurrent".into(),
                    capacity_range: Some(v1::CapacityRange {
                        required_bytes: GIB,
                        limit_bytes: 0,
                    }),
                    volume_capabilities: vec![capability],
                    ..Default::default()
                })
                .await
        }
    };
    let mut volumes = at_once(AT_ONCE, create).await;
    volumes.extend(at_once(1, create).await);
    let ids: BTreeSet<String> = volumes
        .iter()
        .map(|v| v.volume.as_ref().unwrap().volume_id.clone())
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let volume_id = ids.into_iter().next().unwrap();
    assert_eq!(env.cloud.block_leftovers().volumes.len(), 1);

    let snapshot = || {
        let mut controller = controller.clone();
        let volume_id = volume_id.clone();
        async move {
            controller
                .create_snapshot(v1::CreateSnapshotRequest {
                    source_volume_id: volume_id,
                    name: "snap-concurrent".into(),
                    ..Default::default()
                })
                .await
        }
    };
    let mut snapshots = at_once(AT_ONCE, snapshot).await;
    snapshots.extend(at_once(1, snapshot).await);
    let snapshot_ids: BTreeSet<String> = snapshots
        .iter()
        .map(|s| s.snapshot.as_ref().unwrap().snapshot_id.clone())
        .collect();
    assert_eq!(snapshot_ids.len(), 1, "{snapshot_ids:?}");
    assert_eq!(env.cloud.block_leftovers().volume_snapshots.len(), 1);

    let publish = || {
        let mut controller = controller.clone();
        let request = v1::ControllerPublishVolumeRequest {
            volume_id: volume_id.clone(),
            node_id: env.server_id.clone(),
            volume_capability: Some(capability.clone()),
            ..Default::default()
        };
        async move { controller.controller_publish_volume(request).await }
    };
    let mut published = at_once(AT_ONCE, publish).await;
    published.extend(at_once(1, publish).await);
    let contexts: BTreeSet<_> = published
        .iter()
        .map(|p| p.publish_context.get("DevicePath").cloned())
        .collect();
    assert_eq!(contexts.len(), 1, "{contexts:?}");
    assert_eq!(env.cloud.block_leftovers().attachments.len(), 1);

    let stage = || {
        let mut node = node.clone();
        let request = v1::NodeStageVolumeRequest {
            volume_id: volume_id.clone(),
            staging_target_path: path_text(&staging),
            volume_capability: Some(capability.clone()),
            ..Default::default()
        };
        async move { node.node_stage_volume(request).await }
    };
    at_once(AT_ONCE, stage).await;
    assert_eq!(at_once(1, stage).await.len(), 1);
    let node_publish = || {
        let mut node = node.clone();
        let request = v1::NodePublishVolumeRequest {
            volume_id: volume_id.clone(),
            staging_target_path: path_text(&staging),
            target_path: path_text(&target),
            volume_capability: Some(capability.clone()),
            ..Default::default()
        };
        async move { node.node_publish_volume(request).await }
    };
    at_once(AT_ONCE, node_publish).await;
    assert_eq!(at_once(1, node_publish).await.len(), 1);
    let mounts = support::mounts_under(env.plugin.pid(), env.dir.path());
    let expected_mounts = match access {
        AccessType::Mount => vec![path_text(&staging), path_text(&target)],
        AccessType::Block => vec![path_text(&target)],
    };
    assert_eq!(mounts, expected_mounts, "{}", env.logs());

    let node_unpublish = || {
        let mut node = node.clone();
        let request = v1::NodeUnpublishVolumeRequest {
            volume_id: volume_id.clone(),
            target_path: path_text(&target),
        };
        async move { node.node_unpublish_volume(request).await }
    };
    at_once(AT_ONCE, node_unpublish).await;
    assert_eq!(at_once(1, node_unpublish).await.len(), 1);
    let unstage = || {
        let mut node = node.clone();
        let request = v1::NodeUnstageVolumeRequest {
            volume_id: volume_id.clone(),
            staging_target_path: path_text(&staging),
        };
        async move { node.node_unstage_volume(request).await }
    };
    at_once(AT_ONCE, unstage).await;
    assert_eq!(at_once(1, unstage).await.len(), 1);
    let unpublish = || {
        let mut controller = controller.clone();
        let request = v1::ControllerUnpublishVolumeRequest {
            volume_id: volume_id.clone(),
            node_id: env.server_id.clone(),
            ..Default::default()
        };
        async move { controller.controller_unpublish_volume(request).await }
    };
    at_once(AT_ONCE, unpublish).await;
    assert_eq!(at_once(1, unpublish).await.len(), 1);

    let snapshot_id = snapshot_ids.into_iter().next().unwrap();
    let delete_snapshot = || {
        let mut controller = controller.clone();
        let request = v1::DeleteSnapshotRequest {
            snapshot_id: snapshot_id.clone(),
            ..Default::default()
        };
        async move { controller.delete_snapshot(request).await }
    };
    at_once(AT_ONCE, delete_snapshot).await;
    assert_eq!(at_once(1, delete_snapshot).await.len(), 1);
    let delete = || {
        let mut controller = controller.clone();
        let request = v1::DeleteVolumeRequest {
            volume_id: volume_id.clone(),
            ..Default::default()
        };
        async move { controller.delete_volume(request).await }
    };
    at_once(AT_ONCE, delete).await;
    assert_eq!(at_once(1, delete).await.len(), 1);
    env.assert_nothing_left();
    assert!(!target.exists(), "the target path was not removed");
}
