//! The node service on real loop devices, over its gRPC unix socket: each test makes a
//! sparse file, attaches it to a loop device, links it in a temporary disk directory the
//! way udev links a virtio disk (`virtio-<first 20 chars of the volume id>`), and calls
//! the Node RPCs. Guards unmount what is left and detach the loop device even when a test
//! fails. Needs root (loop devices, mount), as the node plugin does.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use cinder_csi_plugin::driver::Driver;
use cinder_csi_plugin::identity::identity_service;
use cinder_csi_plugin::node::{NodeService, NodeSettings, mount};
use csi_proto::v1::node_client::NodeClient;
use csi_proto::v1::volume_capability::{
    AccessMode, AccessType, BlockVolume, MountVolume, access_mode::Mode,
};
use csi_proto::v1::{self, VolumeCapability, volume_usage};
use tonic::Code;
use tonic::transport::Channel;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const MIB: u64 = 1 << 20;

/// A loop device over a sparse file; detached on drop.
struct LoopDevice {
    device: PathBuf,
    file: PathBuf,
}

impl LoopDevice {
    fn new(file: PathBuf, size: u64) -> Result<Self, Box<dyn std::error::Error>> {
        std::fs::File::create(&file)?.set_len(size)?;
        let output = Command::new("losetup")
            .args(["-f", "--show"])
            .arg(&file)
            .output()?;
        if !output.status.success() {
            return Err(format!("losetup: {}", String::from_utf8_lossy(&output.stderr)).into());
        }
        let device = PathBuf::from(String::from_utf8(output.stdout)?.trim());
        Ok(LoopDevice { device, file })
    }

    /// Grows the backing file and tells the loop driver (`losetup -c`).
    fn grow(&self, size: u64) -> TestResult {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&self.file)?
            .set_len(size)?;
        let status = Command::new("losetup")
            .arg("-c")
            .arg(&self.device)
            .status()?;
        if !status.success() {
            return Err("losetup -c failed".into());
        }
        Ok(())
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.device).status();
    }
}

/// Unmounts the listed paths on drop (a failed test must not leave mounts behind).
struct Unmount(Vec<PathBuf>);

impl Drop for Unmount {
    fn drop(&mut self) {
        for path in self.0.iter().rev() {
            while mount::is_mount_point(path).unwrap_or(false) {
                if !Command::new("umount")
                    .arg(path)
                    .status()
                    .is_ok_and(|s| s.success())
                {
                    let _ = Command::new("umount").arg("-l").arg(path).status();
                    break;
                }
            }
        }
    }
}

/// A node service serving on a socket in a temp dir, with its disk dir there too.
struct Node {
    client: NodeClient<Channel>,
    disk_dir: PathBuf,
    root: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<()>>,
}

impl Node {
    async fn start() -> Result<Self, Box<dyn std::error::Error>> {
        let root = tempfile::tempdir()?;
        let disk_dir = root.path().join("by-id");
        std::fs::create_dir(&disk_dir)?;
        let node = NodeService::new(NodeSettings {
            node_id: "server-1".into(),
            zone: Some("zone-a".into()),
            additional_topology: Vec::new(),
            max_volumes_per_node: 42,
            disk_dir: disk_dir.clone(),
            rescan_on_resize: true,
        });
        let socket = format!("unix://{}", root.path().join("csi.sock").display());
        let listener = Driver::bind(&socket).await?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let driver = Driver::new(identity_service(false, true), None, Some(node));
        let served = tokio::spawn(async move {
            let _ = driver
                .serve(listener, async {
                    let _ = stopped.await;
                })
                .await;
        });
        let channel = csi_proto::connect(&socket.parse()?).await?;
        Ok(Node {
            client: NodeClient::new(channel),
            disk_dir,
            root,
            stop: Some(stop),
            served: Some(served),
        })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    /// Links `device` as the virtio disk of `volume_id`.
    fn attach(&self, volume_id: &str, device: &Path) -> TestResult {
        let serial: String = volume_id.chars().take(20).collect();
        std::os::unix::fs::symlink(device, self.disk_dir.join(format!("virtio-{serial}")))?;
        Ok(())
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(served) = self.served.take() {
            let _ = served.await;
        }
    }
}

fn mount_capability(fs: &str) -> VolumeCapability {
    VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume {
            fs_type: fs.into(),
            ..Default::default()
        })),
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
    }
}

fn block_capability() -> VolumeCapability {
    VolumeCapability {
        access_type: Some(AccessType::Block(BlockVolume {})),
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
    }
}

fn stage(
    volume_id: &str,
    staging: &Path,
    capability: VolumeCapability,
) -> v1::NodeStageVolumeRequest {
    v1::NodeStageVolumeRequest {
        volume_id: volume_id.into(),
        publish_context: HashMap::from([("DevicePath".into(), "/dev/vdb".into())]),
        staging_target_path: staging.display().to_string(),
        volume_capability: Some(capability),
        ..Default::default()
    }
}

fn publish(
    volume_id: &str,
    staging: &Path,
    target: &Path,
    capability: VolumeCapability,
) -> v1::NodePublishVolumeRequest {
    v1::NodePublishVolumeRequest {
        volume_id: volume_id.into(),
        staging_target_path: staging.display().to_string(),
        target_path: target.display().to_string(),
        volume_capability: Some(capability),
        ..Default::default()
    }
}

/// Whether this process may grow a mounted ext4 (CAP_SYS_RESOURCE, bit 24 of CapEff).
fn can_resize_online() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 24) != 0)
}

fn blkid_type(device: &Path) -> String {
    Command::new("blkid")
        .args(["-p", "-s", "TYPE", "-o", "value"])
        .arg(device)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

async fn bytes_total(
    client: &mut NodeClient<Channel>,
    volume_id: &str,
    path: &Path,
) -> Result<i64, Box<dyn std::error::Error>> {
    let stats = client
        .node_get_volume_stats(v1::NodeGetVolumeStatsRequest {
            volume_id: volume_id.into(),
            volume_path: path.display().to_string(),
            staging_target_path: String::new(),
        })
        .await?
        .into_inner();
    stats
        .usage
        .iter()
        .find(|u| u.unit == volume_usage::Unit::Bytes as i32)
        .map(|u| u.total)
        .ok_or_else(|| "no byte usage".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stage_formats_once_and_expand_grows_the_file_system() -> TestResult {
    let node = Node::start().await?;
    let volume_id = "9d1c5f8e-2b7a-4c3d-8e9f-0a1b2c3d4e5f";
    let disk = LoopDevice::new(node.path("disk.img"), 64 * MIB)?;
    node.attach(volume_id, &disk.device)?;
    let staging = node.path("staging");
    let target = node.path("pods/uid/volumes/pv/mount");
    let _unmount = Unmount(vec![staging.clone(), target.clone()]);
    let mut client = node.client.clone();

    assert_eq!(
        blkid_type(&disk.device),
        "",
        "a fresh device has no file system"
    );
    client
        .node_stage_volume(stage(volume_id, &staging, mount_capability("ext4")))
        .await?;
    assert!(mount::is_mount_point(&staging)?);
    assert_eq!(blkid_type(&disk.device), "ext4");
    // Staging again is a no-op.
    client
        .node_stage_volume(stage(volume_id, &staging, mount_capability("ext4")))
        .await?;

    client
        .node_publish_volume(publish(
            volume_id,
            &staging,
            &target,
            mount_capability("ext4"),
        ))
        .await?;
    assert!(mount::is_mount_point(&target)?);
    std::fs::write(target.join("data.txt"), b"kept across stages")?;
    assert_eq!(
        std::fs::read(staging.join("data.txt"))?,
        b"kept across stages"
    );

    client
        .node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
            volume_id: volume_id.into(),
            target_path: target.display().to_string(),
        })
        .await?;
    assert!(!target.exists(), "the target is removed");
    client
        .node_unstage_volume(v1::NodeUnstageVolumeRequest {
            volume_id: volume_id.into(),
            staging_target_path: staging.display().to_string(),
        })
        .await?;
    assert!(!mount::is_mount_point(&staging)?);

    // A second stage finds the file system and does not reformat: the data survives.
    client
        .node_stage_volume(stage(volume_id, &staging, mount_capability("ext4")))
        .await?;
    assert_eq!(
        std::fs::read(staging.join("data.txt"))?,
        b"kept across stages"
    );
    client
        .node_publish_volume(publish(
            volume_id,
            &staging,
            &target,
            mount_capability("ext4"),
        ))
        .await?;

    let before = bytes_total(&mut client, volume_id, &target).await?;
    disk.grow(128 * MIB)?;
    let expanded = client
        .node_expand_volume(v1::NodeExpandVolumeRequest {
            volume_id: volume_id.into(),
            volume_path: target.display().to_string(),
            capacity_range: Some(v1::CapacityRange {
                required_bytes: (128 * MIB) as i64,
                limit_bytes: 0,
            }),
            staging_target_path: staging.display().to_string(),
            volume_capability: Some(mount_capability("ext4")),
            secrets: HashMap::new(),
        })
        .await;
    if can_resize_online() {
        assert_eq!(expanded?.into_inner().capacity_bytes, (128 * MIB) as i64);
        let after = bytes_total(&mut client, volume_id, &target).await?;
        assert!(
            after > before + (48 * MIB) as i64,
            "file system grew: {before} -> {after}"
        );
    } else {
        // Growing a mounted ext4 needs CAP_SYS_RESOURCE, which containers often drop (this
        // machine's does): the caller is told which command failed and why, and the volume
        // stays usable.
        let status = expanded
            .err()
            .ok_or("resize2fs succeeded without CAP_SYS_RESOURCE")?;
        assert_eq!(status.code(), Code::Internal);
        assert!(
            status.message().contains("resize2fs")
                && status.message().contains("Permission denied"),
            "{}",
            status.message()
        );
        assert_eq!(bytes_total(&mut client, volume_id, &target).await?, before);
    }
    assert_eq!(
        std::fs::read(target.join("data.txt"))?,
        b"kept across stages"
    );

    client
        .node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
            volume_id: volume_id.into(),
            target_path: target.display().to_string(),
        })
        .await?;
    client
        .node_unstage_volume(v1::NodeUnstageVolumeRequest {
            volume_id: volume_id.into(),
            staging_target_path: staging.display().to_string(),
        })
        .await?;
    assert!(!mount::is_mount_point(&staging)? && !mount::is_mount_point(&target)?);
    node.stop().await;
    Ok(())
}

/// `df`'s view of the file system mounted at `path`: its size in bytes (statvfs).
fn statfs_bytes(path: &Path) -> Result<u64, Box<dyn std::error::Error>> {
    let stat = nix::sys::statvfs::statvfs(path)?;
    Ok(stat.blocks() as u64 * stat.fragment_size() as u64)
}

fn expand_request(volume_id: &str, path: &Path, bytes: u64) -> v1::NodeExpandVolumeRequest {
    v1::NodeExpandVolumeRequest {
        volume_id: volume_id.into(),
        volume_path: path.display().to_string(),
        capacity_range: Some(v1::CapacityRange {
            required_bytes: bytes as i64,
            limit_bytes: 0,
        }),
        volume_capability: Some(mount_capability("ext4")),
        ..Default::default()
    }
}

/// A volume expanded while detached: NodeStageVolume grows its ext4 before mounting it
/// (offline, so without CAP_SYS_RESOURCE), and NodeExpandVolume then has nothing to do and
/// succeeds, on machines that could not grow it mounted too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stage_grows_a_file_system_smaller_than_its_device_before_mounting() -> TestResult {
    let node = Node::start().await?;
    let volume_id = "0ff11e00-6a0e-4b1d-9c3e-5f7a8b9c0d1e";
    let disk = LoopDevice::new(node.path("grown.img"), 64 * MIB)?;
    node.attach(volume_id, &disk.device)?;
    let staging = node.path("staging");
    let target = node.path("pods/uid/volumes/pv/mount");
    let _unmount = Unmount(vec![staging.clone(), target.clone()]);
    let mut client = node.client.clone();
    let unstage = v1::NodeUnstageVolumeRequest {
        volume_id: volume_id.into(),
        staging_target_path: staging.display().to_string(),
    };

    client
        .node_stage_volume(stage(volume_id, &staging, mount_capability("ext4")))
        .await?;
    let small = statfs_bytes(&staging)?;
    assert!(small <= 64 * MIB, "{small}");
    // NodeExpandVolume on a file system that fills its device does nothing, and succeeds.
    let unchanged = client
        .node_expand_volume(expand_request(volume_id, &staging, 64 * MIB))
        .await?
        .into_inner();
    assert_eq!(unchanged.capacity_bytes, (64 * MIB) as i64);
    std::fs::write(staging.join("data.txt"), b"kept across growth")?;
    client.node_unstage_volume(unstage.clone()).await?;

    // Expanded while detached: the device is bigger than its file system.
    disk.grow(128 * MIB)?;
    client
        .node_stage_volume(stage(volume_id, &staging, mount_capability("ext4")))
        .await?;
    let grown = statfs_bytes(&staging)?;
    assert!(
        grown > small + 48 * MIB && grown <= 128 * MIB,
        "the file system grew on NodeStageVolume: {small} -> {grown}"
    );
    assert_eq!(
        std::fs::read(staging.join("data.txt"))?,
        b"kept across growth"
    );

    client
        .node_publish_volume(publish(
            volume_id,
            &staging,
            &target,
            mount_capability("ext4"),
        ))
        .await?;
    // What kubelet calls next: nothing left to do, so it succeeds even where growing a
    // mounted ext4 is refused.
    let expanded = client
        .node_expand_volume(expand_request(volume_id, &target, 128 * MIB))
        .await?
        .into_inner();
    assert_eq!(expanded.capacity_bytes, (128 * MIB) as i64);
    assert_eq!(
        bytes_total(&mut client, volume_id, &target).await?,
        grown as i64
    );

    client
        .node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
            volume_id: volume_id.into(),
            target_path: target.display().to_string(),
        })
        .await?;
    client.node_unstage_volume(unstage).await?;
    assert!(!mount::is_mount_point(&staging)? && !mount::is_mount_point(&target)?);
    node.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_volume_binds_the_device_file_onto_the_target() -> TestResult {
    let node = Node::start().await?;
    let volume_id = "b10c0000-1111-2222-3333-444455556666";
    let disk = LoopDevice::new(node.path("block.img"), 32 * MIB)?;
    node.attach(volume_id, &disk.device)?;
    let staging = node.path("staging");
    let target = node.path("plugins/volumeDevices/publish/pv/pod-uid");
    let _unmount = Unmount(vec![target.clone()]);
    let mut client = node.client.clone();

    client
        .node_stage_volume(stage(volume_id, &staging, block_capability()))
        .await?;
    assert!(
        !mount::is_mount_point(&staging)?,
        "raw block is not mounted at staging"
    );
    assert_eq!(blkid_type(&disk.device), "", "raw block is never formatted");
    client
        .node_publish_volume(publish(volume_id, &staging, &target, block_capability()))
        .await?;
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata(&target)?.file_type().is_block_device());
    assert_eq!(
        bytes_total(&mut client, volume_id, &target).await?,
        (32 * MIB) as i64
    );
    disk.grow(48 * MIB)?;
    let expanded = client
        .node_expand_volume(v1::NodeExpandVolumeRequest {
            volume_id: volume_id.into(),
            volume_path: target.display().to_string(),
            volume_capability: Some(block_capability()),
            ..Default::default()
        })
        .await?
        .into_inner();
    assert_eq!(expanded.capacity_bytes, (48 * MIB) as i64);
    assert_eq!(
        bytes_total(&mut client, volume_id, &target).await?,
        (48 * MIB) as i64
    );

    client
        .node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
            volume_id: volume_id.into(),
            target_path: target.display().to_string(),
        })
        .await?;
    assert!(!target.exists());
    client
        .node_unstage_volume(v1::NodeUnstageVolumeRequest {
            volume_id: volume_id.into(),
            staging_target_path: staging.display().to_string(),
        })
        .await?;
    node.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_with_another_file_system_is_not_reformatted() -> TestResult {
    let node = Node::start().await?;
    let volume_id = "e2e20000-aaaa-bbbb-cccc-ddddeeeeffff";
    let disk = LoopDevice::new(node.path("ext2.img"), 16 * MIB)?;
    let made = Command::new("mkfs.ext2")
        .args(["-F", "-q"])
        .arg(&disk.device)
        .status()?;
    assert!(made.success());
    node.attach(volume_id, &disk.device)?;
    let staging = node.path("staging");
    let _unmount = Unmount(vec![staging.clone()]);
    let mut client = node.client.clone();
    let status = client
        .node_stage_volume(stage(volume_id, &staging, mount_capability("ext4")))
        .await
        .err()
        .ok_or("staging over ext2 as ext4 succeeded")?;
    assert_eq!(status.code(), Code::FailedPrecondition);
    assert!(status.message().contains("ext2"), "{}", status.message());
    assert_eq!(blkid_type(&disk.device), "ext2");
    node.stop().await;
    Ok(())
}

#[tokio::test]
async fn staging_a_volume_that_is_not_attached_names_the_paths_tried() -> TestResult {
    let node = Node::start().await?;
    let mut client = node.client.clone();
    let status = client
        .node_stage_volume(stage(
            "0123456789abcdefghijXYZ",
            &node.path("staging"),
            mount_capability("ext4"),
        ))
        .await
        .err()
        .ok_or("staging a missing device succeeded")?;
    assert_eq!(status.code(), Code::NotFound);
    assert!(
        status.message().contains("virtio-0123456789abcdefghij"),
        "{}",
        status.message()
    );
    node.stop().await;
    Ok(())
}

#[tokio::test]
async fn node_info_reports_the_limit_and_zone_and_capabilities() -> TestResult {
    let node = Node::start().await?;
    let mut client = node.client.clone();
    let info = client
        .node_get_info(v1::NodeGetInfoRequest {})
        .await?
        .into_inner();
    assert_eq!(info.node_id, "server-1");
    assert_eq!(info.max_volumes_per_node, 42);
    assert_eq!(
        info.accessible_topology.map(|t| t.segments),
        Some(HashMap::from([(
            "topology.cinder.csi.openstack.org/zone".to_string(),
            "zone-a".to_string()
        )]))
    );
    let capabilities = client
        .node_get_capabilities(v1::NodeGetCapabilitiesRequest {})
        .await?
        .into_inner()
        .capabilities;
    assert_eq!(capabilities.len(), 3);
    let missing = client
        .node_stage_volume(v1::NodeStageVolumeRequest::default())
        .await
        .err()
        .map(|s| s.code());
    assert_eq!(missing, Some(Code::InvalidArgument));
    node.stop().await;
    Ok(())
}

/// xfs: NodeStageVolume makes the file system (mkfs.xfs needs 300 MiB at least), and
/// NodeExpandVolume grows it while it is mounted (xfs_growfs needs no CAP_SYS_RESOURCE, so
/// online expansion works here too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xfs_is_made_on_stage_and_grown_online() -> TestResult {
    let node = Node::start().await?;
    let volume_id = "5a6b7c8d-1e2f-4a3b-9c8d-7e6f5a4b3c2d";
    let disk = LoopDevice::new(node.path("disk.img"), 512 * MIB)?;
    node.attach(volume_id, &disk.device)?;
    let staging = node.path("staging");
    let target = node.path("pods/uid/volumes/pv/mount");
    let _unmount = Unmount(vec![staging.clone(), target.clone()]);
    let mut client = node.client.clone();

    client
        .node_stage_volume(stage(volume_id, &staging, mount_capability("xfs")))
        .await?;
    assert_eq!(blkid_type(&disk.device), "xfs");
    client
        .node_publish_volume(publish(
            volume_id,
            &staging,
            &target,
            mount_capability("xfs"),
        ))
        .await?;
    std::fs::write(target.join("data.txt"), b"on xfs")?;
    let before = statfs_bytes(&target)?;
    assert!(before < 512 * MIB, "{before}");

    disk.grow(1024 * MIB)?;
    let mut request = expand_request(volume_id, &target, 1024 * MIB);
    request.staging_target_path = staging.display().to_string();
    request.volume_capability = Some(mount_capability("xfs"));
    let expanded = client.node_expand_volume(request).await?.into_inner();
    assert_eq!(expanded.capacity_bytes, (1024 * MIB) as i64);
    let after = statfs_bytes(&target)?;
    assert!(
        after > 900 * MIB && after <= 1024 * MIB,
        "the mounted xfs grew: {before} -> {after}"
    );
    assert_eq!(std::fs::read(target.join("data.txt"))?, b"on xfs");

    client
        .node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
            volume_id: volume_id.into(),
            target_path: target.display().to_string(),
        })
        .await?;
    client
        .node_unstage_volume(v1::NodeUnstageVolumeRequest {
            volume_id: volume_id.into(),
            staging_target_path: staging.display().to_string(),
        })
        .await?;
    assert!(!mount::is_mount_point(&staging)? && !mount::is_mount_point(&target)?);
    node.stop().await;
    Ok(())
}
