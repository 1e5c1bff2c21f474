//! `cinder-csi-plugin`: a CSI driver for OpenStack Cinder block volumes.
//!
//! The controller side creates, deletes, snapshots, expands and lists Cinder volumes and
//! attaches them to Nova servers (ControllerPublish), with the credentials of the cloud
//! configuration file(s) (`--cloud-config`, upstream's INI format). The node side finds the
//! attached disk by its serial, makes a file system when the disk has none, mounts it, and
//! grows it on expansion; an ext file system smaller than its disk (expanded while detached)
//! is grown before it is mounted, which needs no `CAP_SYS_RESOURCE` (see the README).
//!
//! Modules: [`config`] (flags), [`cloud_config`] (the INI file), [`cloud`] (its credentials
//! for the shared `openstack_client`, which holds the Keystone, Cinder and Nova clients),
//! [`controller`], [`node`], [`identity`], [`metadata`] (node id
//! and zone), [`driver`] (wiring), [`error`], [`wait`]; a
//! panic in a handler answers Internal (`csi_proto::panic_guard`).

pub mod cloud;
pub mod cloud_config;
pub mod config;
pub mod controller;
pub mod driver;
pub mod error;
pub mod identity;
pub mod metadata;
pub mod node;
pub mod pvc;
mod rpc_log;
pub mod wait;

pub use error::{Error, Result};
