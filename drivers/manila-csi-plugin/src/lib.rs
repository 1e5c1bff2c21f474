//! `manila-csi-plugin`: a CSI driver for OpenStack Manila shares.
//!
//! The controller side creates, deletes, snapshots and expands Manila shares using the
//! OpenStack credentials found in each request's secrets. The node side does not mount
//! anything itself: it looks the share up, builds the protocol-specific volume context
//! (NFS `server`/`share`, or CephFS monitors and cephx key) and forwards the Node RPCs to a
//! partner node plugin (`--fwdendpoint`).
//!
//! Modules: [`config`] (flags), [`options`] (StorageClass parameters), [`protocol`] (NFS/CephFS adapters), [`export_location`], [`wait`],
//! [`error`], [`metadata`] (node id and zone from the OpenStack metadata service), [`pvc`] (`--pvc-annotations`: claim annotations as
//! scheduler hints). The OpenStack client (Keystone, Manila, the metadata service, waits) is the
//! shared `openstack_client` crate. A panic in a handler answers Internal (`csi_proto::panic_guard`).

pub mod config;
pub mod controller;
pub mod driver;
pub mod error;
pub mod export_location;
pub mod identity;
pub mod metadata;
pub mod node;
pub mod options;
pub mod protocol;
pub mod pvc;
mod rpc_log;
pub mod wait;

pub use error::{Error, Result};
