//! Why a CSI plugin could not be registered, or a CSI volume mounted, unmounted or expanded.
//!
//! Volume errors come in two layers, as kubelet's messages do. The outer layer names the
//! operation as kubelet's events do ([`Error::SetUp`], [`Error::MountDevice`],
//! [`Error::ProcessClaim`], …); its `Display` is the whole event message, the cause included
//! (`MountVolume.SetUp failed for volume "pv-1" : rpc error: …`), so the cause is not also
//! its `source`. The inner layer says what went wrong (an API or RPC error, a missing
//! driver, …), with API and I/O errors as `source`.

use std::path::PathBuf;

use crate::error_chain;

/// Errors of the plugin watcher and the volume manager; each names the socket, driver,
/// volume or object at fault.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The plugin is not a CSI plugin (`PluginInfo.type` is not `CSIPlugin`).
    #[error("no handler registered for plugin type {found:?} at socket {}", socket.display())]
    PluginType {
        /// The registration socket.
        socket: PathBuf,
        /// The type the plugin announced.
        found: String,
    },
    /// None of the CSI versions the plugin announced is one the agent speaks (1.x).
    #[error(
        "none of the CSI versions reported by driver {driver:?} ({versions:?}) are supported: 1.x is"
    )]
    UnsupportedVersions {
        /// The driver name.
        driver: String,
        /// The versions it announced.
        versions: Vec<String>,
    },
    /// The plugin announced an empty name.
    #[error("the plugin at socket {} reported an empty name", socket.display())]
    EmptyName {
        /// The registration socket.
        socket: PathBuf,
    },
    /// A unix socket could not be reached.
    #[error("connecting to {endpoint}")]
    Connect {
        /// The socket.
        endpoint: String,
        /// The cause.
        #[source]
        source: csi_proto::Error,
    },
    /// A gRPC call failed or did not answer in time.
    #[error("{call} on {endpoint}: {} ({:?})", status.message(), status.code())]
    Call {
        /// The RPC, e.g. `NodeGetInfo`.
        call: &'static str,
        /// The socket called.
        endpoint: String,
        /// The answer.
        status: tonic::Status,
    },
    /// NodeGetInfo returned no node id.
    #[error("driver {driver:?}: NodeGetInfo returned an empty node_id")]
    EmptyNodeId {
        /// The driver name.
        driver: String,
    },
    /// A topology segment contradicts a label the Node already has.
    #[error(
        "detected topology value collision: driver {driver:?} reported {key}={wanted:?} but the Node has {key}={existing:?}"
    )]
    TopologyCollision {
        /// The driver name.
        driver: String,
        /// The label key.
        key: String,
        /// The Node's value.
        existing: String,
        /// The driver's value.
        wanted: String,
    },
    /// The Node's `csi.volume.kubernetes.io/nodeid` annotation is not a JSON string map.
    #[error("the Node's annotation {key} is not a JSON map of driver to node id: {reason}")]
    BadNodeIdAnnotation {
        /// The annotation key.
        key: &'static str,
        /// The parse error.
        reason: String,
    },
    /// An API request failed.
    #[error("{action}")]
    Api {
        /// What was being done, e.g. `updating CSINode "node-a"` or `reading Node "node-a"`.
        action: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A plugin or volume directory or file could not be created, read or removed.
    #[error("{action} {}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },

    // Volume operations: kubelet's event messages, cause included.
    /// A pod's claim could not be resolved to a bound PV.
    #[error(
        "Unable to attach or mount volumes: unmounted volumes=[{volume}]: error processing PVC {claim}: {}",
        error_chain(cause.as_ref())
    )]
    ProcessClaim {
        /// The pod's volume name.
        volume: String,
        /// `<namespace>/<claim>`.
        claim: String,
        /// Why.
        cause: Box<Error>,
    },
    /// The volume is not attached to the node yet: retried about every second.
    #[error(
        "Unable to attach or mount volumes: unmounted volumes=[{volume}], unattached volumes=[{volume}]: volume {unique:?} (PV {pv:?}) is not yet attached according to the status of Node {node:?}"
    )]
    NotAttached {
        /// The pod's volume name.
        volume: String,
        /// The unique volume name.
        unique: String,
        /// The PV.
        pv: String,
        /// The node.
        node: String,
    },
    /// Publishing the volume for a pod failed (or something it needs).
    #[error("MountVolume.SetUp failed for volume {volume:?} : {}", error_chain(cause.as_ref()))]
    SetUp {
        /// The PV (the pod's volume name for inline volumes).
        volume: String,
        /// Why.
        cause: Box<Error>,
    },
    /// Reading the attachment state failed.
    #[error(
        "MountVolume.WaitForAttach failed for volume {volume:?} : {}",
        error_chain(cause.as_ref())
    )]
    WaitForAttach {
        /// The PV.
        volume: String,
        /// Why.
        cause: Box<Error>,
    },
    /// Staging the volume on the node failed.
    #[error(
        "MountVolume.MountDevice failed for volume {volume:?} : {}",
        error_chain(cause.as_ref())
    )]
    MountDevice {
        /// The PV.
        volume: String,
        /// Why.
        cause: Box<Error>,
    },
    /// Unpublishing the volume of a pod failed.
    #[error(
        "UnmountVolume.TearDown failed for volume {volume:?}{} pod {pod:?} : {}",
        unique.as_ref().map(|u| format!(" (UniqueName: {u:?})")).unwrap_or_default(),
        error_chain(cause.as_ref())
    )]
    TearDown {
        /// The PV.
        volume: String,
        /// The unique volume name, when its `vol_data.json` could be read.
        unique: Option<String>,
        /// The pod UID.
        pod: String,
        /// Why.
        cause: Box<Error>,
    },
    /// Unstaging the volume failed.
    #[error(
        "UnmountDevice failed for volume {volume:?} (UniqueName: {unique:?}) on node {node:?} : {}",
        error_chain(cause.as_ref())
    )]
    UnmountDevice {
        /// The PV.
        volume: String,
        /// The unique volume name.
        unique: String,
        /// The node.
        node: String,
        /// Why.
        cause: Box<Error>,
    },
    /// Staging a block volume on the node failed (kubelet's `SetUpDevice`).
    #[error(
        "MapVolume.SetUpDevice failed for volume {volume:?} : {}",
        error_chain(cause.as_ref())
    )]
    SetUpDevice {
        /// The PV.
        volume: String,
        /// Why.
        cause: Box<Error>,
    },
    /// Publishing a block volume for a pod failed (kubelet's `MapPodDevice`).
    #[error(
        "MapVolume.MapPodDevice failed for volume {volume:?} : {}",
        error_chain(cause.as_ref())
    )]
    MapPodDevice {
        /// The PV.
        volume: String,
        /// Why.
        cause: Box<Error>,
    },
    /// Unpublishing a pod's block volume failed.
    #[error(
        "UnmapVolume.UnmapPodDevice failed for volume {volume:?}{} pod {pod:?} : {}",
        unique.as_ref().map(|u| format!(" (UniqueName: {u:?})")).unwrap_or_default(),
        error_chain(cause.as_ref())
    )]
    UnmapPodDevice {
        /// The PV.
        volume: String,
        /// The unique volume name, when its `vol_data.json` could be read.
        unique: Option<String>,
        /// The pod UID.
        pod: String,
        /// Why.
        cause: Box<Error>,
    },
    /// Unstaging a block volume (or removing its directories) failed.
    #[error(
        "UnmapDevice.TearDownDevice failed for volume {volume:?} (UniqueName: {unique:?}) on node {node:?} : {}",
        error_chain(cause.as_ref())
    )]
    TearDownDevice {
        /// The PV.
        volume: String,
        /// The unique volume name.
        unique: String,
        /// The node.
        node: String,
        /// Why.
        cause: Box<Error>,
    },
    /// A container names a block volume in `volumeMounts` or a filesystem volume in
    /// `volumeDevices`.
    #[error(
        "Unable to attach or mount volumes: unmounted volumes=[{volume}]: volume {volume} has volumeMode {mode}, but is specified in {field}"
    )]
    VolumeModeMismatch {
        /// The pod's volume name.
        volume: String,
        /// The PV's `volumeMode` (`Filesystem` when unset).
        mode: String,
        /// `volumeMounts` or `volumeDevices`.
        field: &'static str,
    },
    /// Growing the volume's file system failed.
    #[error(
        "MountVolume.NodeExpandVolume failed for volume {volume:?} : {}",
        error_chain(cause.as_ref())
    )]
    NodeExpand {
        /// The PV.
        volume: String,
        /// Why.
        cause: Box<Error>,
    },
    /// Several operations failed (unmounting a pod's volumes), joined with `; `.
    #[error("{}", .0.iter().map(|e| error_chain(e)).collect::<Vec<_>>().join("; "))]
    Several(Vec<Error>),

    // What went wrong inside a volume operation.
    /// The pod volume is neither a `persistentVolumeClaim` nor a `csi` volume.
    #[error("volume {volume:?} is not a claim")]
    NotAClaim {
        /// The pod's volume name.
        volume: String,
    },
    /// Inline (ephemeral) `csi` volumes are refused.
    #[error(
        "kubernetes.io/csi: inline (ephemeral) CSI volumes are not supported by the node agent"
    )]
    InlineVolume,
    /// The claim does not exist.
    #[error("failed to fetch PVC from API server: persistentvolumeclaims {claim:?} not found")]
    ClaimNotFound {
        /// The claim name.
        claim: String,
    },
    /// The claim is not Bound to a PV.
    #[error("PVC is not bound")]
    ClaimNotBound,
    /// The PV the claim is bound to does not exist.
    #[error("failed to fetch PV {pv:?} from API server: persistentvolumes {pv:?} not found")]
    PvNotFound {
        /// The PV name.
        pv: String,
    },
    /// The PV is bound to another claim (another UID).
    #[error("found PV object {pv:?} but it has a ClaimRef that points to a different PVC")]
    ClaimRefMismatch {
        /// The PV name.
        pv: String,
    },
    /// The PV is not a CSI volume.
    #[error(
        "PV {pv:?} (claim {claim}) has no spec.csi: the node agent mounts CSI persistent volumes only"
    )]
    NotCsi {
        /// The PV name.
        pv: String,
        /// `<namespace>/<claim>`.
        claim: String,
    },
    /// The volume's driver is not registered on the node.
    #[error(
        "kubernetes.io/csi: {step}: driver name {driver} not found in the list of registered CSI drivers"
    )]
    DriverNotRegistered {
        /// kubelet's step, e.g. `mounter.SetUpAt failed to get CSI client`.
        step: &'static str,
        /// The driver name.
        driver: String,
    },
    /// NodeGetCapabilities failed.
    #[error(
        "kubernetes.io/csi: NodeGetCapabilities of driver {driver:?}: rpc error: code = {:?} desc = {}",
        status.code(),
        status.message()
    )]
    NodeCapabilities {
        /// The driver name.
        driver: String,
        /// The driver's answer.
        status: tonic::Status,
    },
    /// A node call (NodeStageVolume, NodePublishVolume, …) failed or did not answer in
    /// time; kubelet's text.
    #[error("rpc error: code = {:?} desc = {}", status.code(), status.message())]
    Rpc {
        /// The driver's answer (`DeadlineExceeded` on timeout).
        status: tonic::Status,
    },
    /// A target or staging path is still a mount point after the driver unmounted it.
    #[error("{} is still a mount point after {call}", path.display())]
    StillMounted {
        /// The path on this machine.
        path: PathBuf,
        /// The RPC that should have unmounted it.
        call: &'static str,
    },
    /// NodePublishVolume of a block volume succeeded but left nothing at the publish path.
    #[error("NodePublishVolume left no device at {}", path.display())]
    NoPublishedDevice {
        /// The publish path on this machine.
        path: PathBuf,
    },
    /// The pod's `fsGroup` could not be applied to the published volume.
    #[error("applyFSGroup failed for vol {handle}: {}", error_chain(cause.as_ref()))]
    ApplyFsGroup {
        /// The volume handle.
        handle: String,
        /// Why.
        cause: Box<Error>,
    },
    /// A `vol_data.json` file could not be parsed or encoded.
    #[error("{action} {}", path.display())]
    VolData {
        /// `parsing` or `encoding`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// The PV has no `storage` capacity to expand to.
    #[error("PV {pv:?} has no capacity")]
    NoCapacity {
        /// The PV name.
        pv: String,
    },
    /// The PV's capacity is not a byte quantity.
    #[error("PV {pv:?} capacity")]
    BadCapacity {
        /// The PV name.
        pv: String,
        /// The cause, naming the quantity.
        #[source]
        source: Box<kube_support::quantity::QuantityError>,
    },
}

/// The plugin watcher's and volume manager's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn api(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Error::Api { action, source }
    }

    pub(crate) fn is_conflict(&self) -> bool {
        matches!(self, Error::Api { source: kube::Error::Api(status), .. } if status.code == 409)
    }

    /// `Ok` without errors, the error itself when there is one, [`Error::Several`]
    /// otherwise.
    pub(crate) fn all(mut errors: Vec<Error>) -> Result<()> {
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(Error::Several(errors)),
        }
    }

    /// Whether the volume is only waiting to be attached (retried about every second rather
    /// than with back-off).
    pub fn is_not_attached(&self) -> bool {
        matches!(self, Error::NotAttached { .. })
    }
}

impl kube_support::error::IoContext for Error {
    fn from_io(action: &'static str, path: PathBuf, source: std::io::Error) -> Self {
        Error::Io {
            action,
            path,
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use kube_support::error::IoContext;

    fn rpc(code: tonic::Code, message: &str) -> Box<Error> {
        Box::new(Error::Rpc {
            status: tonic::Status::new(code, message),
        })
    }

    #[test]
    fn volume_operations_read_as_kubelets_events() {
        let setup = Error::SetUp {
            volume: "pv-1".into(),
            cause: Box::new(Error::DriverNotRegistered {
                step: "mounter.SetUpAt failed to get CSI client",
                driver: "d.example.com".into(),
            }),
        };
        assert_eq!(
            setup.to_string(),
            "MountVolume.SetUp failed for volume \"pv-1\" : kubernetes.io/csi: mounter.SetUpAt failed to get CSI client: driver name d.example.com not found in the list of registered CSI drivers"
        );
        let claim = Error::ProcessClaim {
            volume: "data".into(),
            claim: "ns/missing".into(),
            cause: Box::new(Error::ClaimNotFound {
                claim: "missing".into(),
            }),
        };
        assert_eq!(
            claim.to_string(),
            "Unable to attach or mount volumes: unmounted volumes=[data]: error processing PVC ns/missing: failed to fetch PVC from API server: persistentvolumeclaims \"missing\" not found"
        );
        let device = Error::MountDevice {
            volume: "pv-1".into(),
            cause: rpc(tonic::Code::Internal, "boom"),
        };
        assert_eq!(
            device.to_string(),
            "MountVolume.MountDevice failed for volume \"pv-1\" : rpc error: code = Internal desc = boom"
        );
        let teardown = Error::TearDown {
            volume: "pv-1".into(),
            unique: Some("kubernetes.io/csi/d^h".into()),
            pod: "u-1".into(),
            cause: rpc(tonic::Code::Unavailable, "gone"),
        };
        assert_eq!(
            teardown.to_string(),
            "UnmountVolume.TearDown failed for volume \"pv-1\" (UniqueName: \"kubernetes.io/csi/d^h\") pod \"u-1\" : rpc error: code = Unavailable desc = gone"
        );
        let unstage = Error::UnmountDevice {
            volume: "pv-1".into(),
            unique: "kubernetes.io/csi/d^h".into(),
            node: "node-a".into(),
            cause: Box::new(Error::StillMounted {
                path: "/run/globalmount".into(),
                call: "NodeUnstageVolume",
            }),
        };
        assert_eq!(
            unstage.to_string(),
            "UnmountDevice failed for volume \"pv-1\" (UniqueName: \"kubernetes.io/csi/d^h\") on node \"node-a\" : /run/globalmount is still a mount point after NodeUnstageVolume"
        );
    }

    #[test]
    fn causes_are_in_the_message_once_and_several_errors_are_joined() {
        let io = Error::io("creating", "/run/x")(std::io::Error::other("disk full"));
        let device = Error::MountDevice {
            volume: "pv-1".into(),
            cause: Box::new(io),
        };
        assert_eq!(
            error_chain(&device),
            "MountVolume.MountDevice failed for volume \"pv-1\" : creating /run/x: disk full"
        );
        assert!(std::error::Error::source(&device).is_none());

        let several = Error::all(vec![
            Error::ClaimNotBound,
            Error::NoCapacity { pv: "pv-1".into() },
        ])
        .unwrap_err();
        assert_eq!(
            several.to_string(),
            "PVC is not bound; PV \"pv-1\" has no capacity"
        );
        assert!(Error::all(Vec::new()).is_ok());
        assert!(matches!(
            Error::all(vec![Error::ClaimNotBound]),
            Err(Error::ClaimNotBound)
        ));
        let waiting = Error::NotAttached {
            volume: "data".into(),
            unique: "kubernetes.io/csi/d^h".into(),
            pv: "pv-1".into(),
            node: "node-a".into(),
        };
        assert!(waiting.is_not_attached() && !several.is_not_attached());
    }
}
