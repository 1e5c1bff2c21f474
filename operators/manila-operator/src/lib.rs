//! The Manila CSI driver operator: it installs the Manila CSI driver (with the NFS node
//! plugin it forwards to) and keeps it as the cluster-scoped `ClusterCSIDriver`
//! `manila.csi.openstack.org` asks, as upstream's csi-driver-manila-operator does.
//!
//! One reconcile ([`controller`]) reads the cloud credentials ([`cloud`]), looks Manila up in
//! the Keystone catalog and lists share types; when Manila is there it writes the driver's
//! flat Secret ([`secret_sync`]), applies the embedded manifests of its release ([`release`],
//! [`assets`], [`apply`]), deletes what an earlier release installed and this one does not ([`prune`]) and
//! creates one StorageClass per share type ([`storage_classes`]); then it reports conditions
//! ([`status`]) on the ClusterCSIDriver and the ClusterOperator. An operator older than the one
//! that installed the driver leaves it as it is ([`downgrade`]).
//!
//! The modules form layers (see the README's Layout): [`api`], [`release`], [`config`],
//! [`status`], [`apply`], [`metrics`] and [`crds`] at the bottom; the parts of a reconcile,
//! each with its own error type, above them; [`controller`] on top, the only importer of
//! [`error`].

pub mod api;
pub mod apply;
pub mod assets;
pub mod cloud;
pub mod config;
pub mod controller;
pub mod crds;
pub mod downgrade;
pub mod error;
pub mod metrics;
pub mod prune;
pub mod release;
pub mod secret_sync;
pub mod status;
pub mod storage_classes;

pub use config::OperatorConfig;
pub use error::{Error, Result};
