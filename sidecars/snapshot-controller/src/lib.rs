//! The `snapshot.storage.k8s.io/v1` API and the snapshot controller.
//!
//! - [`api`]: Rust types for VolumeSnapshot, VolumeSnapshotContent and VolumeSnapshotClass,
//!   and the finalizer/annotation names shared with the CSI snapshotter and the provisioner.
//! - [`crds`]: the CRD manifests of `fixtures/crds/` and [`crds::install`] (apply + wait for
//!   Established).
//! - [`controller`]: the snapshot controller (upstream external-snapshotter's "common
//!   controller"): creates and binds VolumeSnapshotContents for VolumeSnapshots, copies their
//!   status, manages the snapshot finalizers and applies the deletion policy. The CSI calls
//!   are the snapshotter sidecar's job.
//!
//! ```no_run
//! # async fn demo(client: kube::Client) -> snapshot_controller::Result<()> {
//! use std::time::Duration;
//! snapshot_controller::crds::install(&client, "my-tests", Duration::from_secs(30)).await?;
//! snapshot_controller::controller::run(client, std::future::pending()).await;
//! # Ok(()) }
//! ```

pub mod api;
pub mod controller;
pub mod crds;

pub use api::{
    DeletionPolicy, VolumeSnapshot, VolumeSnapshotClass, VolumeSnapshotContent,
    VolumeSnapshotContentSpec, VolumeSnapshotContentStatus, VolumeSnapshotSpec,
    VolumeSnapshotStatus,
};

/// What can go wrong in this crate. The variants from `PvcNotFound` on describe a snapshot
/// the controller cannot make progress on; they are reported on the VolumeSnapshot's status
/// and as Warning events, and retried with back-off.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Installing the CRDs failed: a manifest compiled into the crate does not parse, the
    /// API refused one, or one did not become Established.
    #[error(transparent)]
    Crd(#[from] kube_support::crd::CrdError),
    /// An API call failed.
    #[error("{action}")]
    Kube {
        /// What was being done.
        action: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// An object lacks a field the API server always sets (name, namespace, uid).
    #[error("{kind} has no {field}")]
    MissingField {
        /// The kind of object.
        kind: &'static str,
        /// The missing field.
        field: &'static str,
    },
    /// The source PVC does not exist.
    #[error("the source PVC {namespace}/{name} does not exist")]
    PvcNotFound {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The source PVC is not bound to a PV yet.
    #[error("the source PVC {namespace}/{name} is not bound to a PV yet (phase {phase})")]
    PvcNotBound {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its phase.
        phase: String,
    },
    /// The source PVC is being deleted.
    #[error("the source PVC {namespace}/{name} is being deleted")]
    PvcBeingDeleted {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The PV of the source PVC is missing.
    #[error("the PV {name} bound to the source PVC does not exist")]
    PvNotFound {
        /// The PV's name.
        name: String,
    },
    /// The PV is not a CSI volume, so no CSI driver can snapshot it.
    #[error("the PV {name} is not a CSI volume and cannot be snapshotted")]
    PvNotCsi {
        /// The PV's name.
        name: String,
    },
    /// The named class does not exist.
    #[error("the VolumeSnapshotClass {name} does not exist")]
    ClassNotFound {
        /// The class name.
        name: String,
    },
    /// No class is marked default for the driver.
    #[error("no default VolumeSnapshotClass for driver {driver}")]
    NoDefaultClass {
        /// The driver of the source volume.
        driver: String,
    },
    /// More than one class is marked default for the driver.
    #[error("{} default VolumeSnapshotClasses for driver {driver}: {}", names.len(), names.join(", "))]
    MultipleDefaultClasses {
        /// The driver of the source volume.
        driver: String,
        /// The default classes.
        names: Vec<String>,
    },
    /// The class belongs to another driver than the source volume.
    #[error(
        "the VolumeSnapshotClass {class} is for driver {class_driver}, but the source volume belongs to {volume_driver}"
    )]
    ClassDriverMismatch {
        /// The class name.
        class: String,
        /// The class's driver.
        class_driver: String,
        /// The PV's driver.
        volume_driver: String,
    },
    /// The class's snapshotter secret parameters are wrong.
    #[error("VolumeSnapshotClass {class}: {reason}")]
    SecretParameters {
        /// The class name.
        class: String,
        /// What is wrong.
        reason: String,
    },
    /// The source names neither or both of a PVC and a content.
    #[error(
        "spec.source must name exactly one of persistentVolumeClaimName and volumeSnapshotContentName"
    )]
    InvalidSource,
    /// The pre-provisioned content does not exist.
    #[error("the VolumeSnapshotContent {name} does not exist")]
    ContentNotFound {
        /// The content name.
        name: String,
    },
    /// The content's volumeSnapshotRef points at another snapshot.
    #[error("the VolumeSnapshotContent {content} is bound to {bound_to}, not to this snapshot")]
    ContentBoundElsewhere {
        /// The content name.
        content: String,
        /// What its volumeSnapshotRef names (namespace/name, uid).
        bound_to: String,
    },
    /// A pre-provisioned content has no snapshotHandle.
    #[error(
        "the VolumeSnapshotContent {name} has no spec.source.snapshotHandle, so it is not a pre-provisioned snapshot"
    )]
    ContentNotPreProvisioned {
        /// The content name.
        name: String,
    },
}

impl Error {
    /// A client error with what was being done.
    pub(crate) fn kube(action: impl Into<String>, source: kube::Error) -> Self {
        Self::Kube {
            action: action.into(),
            source,
        }
    }

    /// Whether this is an optimistic-concurrency conflict (retried, never reported).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Kube { source: kube::Error::Api(status), .. } if status.code == 409)
    }
}

impl From<kube_support::finalizers::FinalizerError> for Error {
    fn from(error: kube_support::finalizers::FinalizerError) -> Self {
        Self::Kube {
            action: error.what,
            source: error.source,
        }
    }
}

/// This crate's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
