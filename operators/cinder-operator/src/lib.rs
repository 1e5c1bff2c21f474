//! The Cinder CSI driver operator: it installs the Cinder CSI driver
//! (`cinder.csi.openstack.org`) and keeps it as the cluster-scoped `ClusterCSIDriver` of that
//! name asks, as upstream's openstack-cinder-csi-driver-operator does, reporting on the
//! ClusterOperator `openstack-cinder-csi-driver-operator`.
//!
//! It is built on the library the operators share, [`operator_kit`] (apply and prune,
//! conditions, status reporting, Events, metrics, the downgrade check, StorageClasses, the
//! removal refusal, start-up), with [`identity::IDENTITY`] as its parameter. What is Cinder's
//! own is here: the configuration translation ([`cloud_conf`], with the user's INI
//! configuration filtered by [`user_config`], from the objects [`inputs`] reads), the cloud
//! check reading the compute and volume availability zones over the user's CA ([`cloud`]),
//! the topology decision ([`zones`]), the driver's manifests ([`assets`]) for the operator's
//! configuration ([`config`]), and the reconcile ([`controller`]).
//!
//! Modules layer without circles: [`identity`], [`config`] and [`zones`] at the bottom,
//! [`user_config`]; [`cloud_conf`] (→ `config`, `user_config`), [`inputs`] (→ `cloud_conf`,
//! `config`), [`cloud`] (→ `cloud_conf`, `zones`) and [`assets`] (→ `config`, `identity`);
//! [`error`] gathers their errors; [`controller`] on top.

pub mod assets;
pub mod cloud;
pub mod cloud_conf;
pub mod config;
pub mod controller;
pub mod error;
pub mod identity;
pub mod inputs;
pub mod user_config;
pub mod zones;

pub use config::OperatorConfig;
pub use error::{Error, Result};
