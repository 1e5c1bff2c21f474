//! kubelet's CSI volume manager: mounting the `persistentVolumeClaim` volumes of pods backed
//! by CSI persistent volumes, unmounting them when pods go, reconstructing what is mounted
//! after an agent restart, `volumesInUse`, and node-side expansion.
//!
//! Paths in requests are kubelet's (`/var/lib/kubelet/…`, as a node plugin running in a pod
//! with that directory mounted sees them); the agent works on their place in its run
//! directory ([`PluginPaths::host_path`](super::PluginPaths::host_path)). See [`paths`] for
//! the names and [`vol_data`] for the metadata files kubelet leaves next to staging and
//! publish directories.
//!
//! [`VolumeManager`] ([`manager`]) holds the public operations, the volumes' locks and
//! their record ([`state`]: which pods want each volume, what is staged and published,
//! changed only through its named transitions). Each step of a volume's life is a module of
//! free functions given what they need (a [`host::VolumeHost`]: the client, the node's name
//! and paths; the driver), which make the node calls and file changes and leave locking and
//! recording to the manager. Following one volume, as kubelet 1.20 mounts it
//! ([`VolumeManager::mount`]):
//!
//! 1. [`resolve`]: the claim must exist and be Bound to a PV with `spec.csi`, and the pod
//!    must use it as the PV's `volumeMode` says;
//! 2. the driver must be registered on the node; the volume is added to `volumesInUse`
//!    ([`state`], reported by [`in_use`]);
//! 3. [`attach`]: when the CSIDriver object asks for attachment (or is missing), the volume
//!    must be listed in the Node's `status.volumesAttached` and the VolumeAttachment's
//!    `attachmentMetadata` is the publish context;
//! 4. [`stage`]: with the node `STAGE_UNSTAGE_VOLUME` capability ([`capability`] says
//!    which volume capability), the volume is staged once per node, shared by its pods;
//! 5. [`publish`]: then it is published for the pod, and gets the pod's `fsGroup` when the
//!    CSIDriver's `fsGroupPolicy` says so ([`fs_group`]); the secrets of both calls come
//!    from [`secrets`].
//!
//! Block volumes (`volumeMode: Block`, used in containers' `volumeDevices`) take the same
//! steps with kubelet's block paths and messages ([`block`]): their `vol_data.json` first,
//! staging at a directory, publishing at a file the driver creates, then a link in the
//! pod's `volumeDevices` directory that the container runtime shows at the `devicePath`; no
//! `fsGroup`, no pod info in the volume context (as kubelet 1.20), no statistics. A PV whose
//! `volumeMode` does not match the pod's use of the claim is refused first.
//!
//! Then [`teardown`] when the pod goes, [`expand`] for `FileSystemResizePending` claims,
//! [`reconstruct`] after a restart, [`stats`] for the kubelet API's `/stats/summary`.
//! Errors are kubelet's event messages ([`Error`](super::Error)).

mod attach;
mod block;
mod capability;
mod expand;
mod fs_group;
mod host;
mod in_use;
mod manager;
mod paths;
mod publish;
mod reconstruct;
mod resolve;
mod secrets;
mod stage;
mod state;
mod stats;
mod teardown;
mod vol_data;

pub use capability::kubelet_volume_capability;
pub use expand::FS_RESIZE_PENDING;
pub use manager::{PodVolume, VolumeManager};
pub use paths::{
    CSI_PLUGIN_NAME, attachment_name, block_publish_path, block_staging_path, publish_path,
    staging_path, unique_volume_name,
};
pub use stats::VolumeStats;
pub use vol_data::VOL_DATA_FILE;
