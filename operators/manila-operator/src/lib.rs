//! The Manila CSI driver operator: it installs the Manila CSI driver (with the NFS node
//! plugin it forwards to) and keeps it as the cluster-scoped `ClusterCSIDriver`
//! `manila.csi.openstack.org` asks, as upstream's csi-driver-manila-operator does.
//!
//! It is built on the library the operators share, [`operator_kit`] (the API types, apply and
//! prune, conditions, status reporting, Events, metrics, releases and the downgrade check,
//! StorageClass re-creation, the CRDs, start-up), with [`identity::IDENTITY`] as its
//! parameter. What is Manila's own is here: one reconcile ([`controller`]) reads the cloud
//! credentials ([`cloud`]), looks Manila up in the Keystone catalog and lists share types;
//! when Manila is there it writes the driver's flat Secret ([`secret_sync`]), applies the
//! embedded manifests of its release ([`release`], [`assets`]), deletes what an earlier
//! release installed and this one does not ([`prune`]) and creates one StorageClass per share
//! type ([`storage_classes`]); then it reports conditions on the ClusterCSIDriver and the
//! ClusterOperator.
//!
//! The modules form layers (see the README's Layout): [`identity`], [`release`] and
//! [`config`] at the bottom; the parts of a reconcile, each with its own error type, above
//! them; [`controller`] on top, the only importer of [`error`].

pub mod assets;
pub mod cloud;
pub mod config;
pub mod controller;
pub mod driver_config;
pub mod error;
pub mod identity;
pub mod prune;
pub mod release;
pub mod secret_sync;
pub mod storage_classes;

pub use config::OperatorConfig;
pub use error::{Error, Result};
