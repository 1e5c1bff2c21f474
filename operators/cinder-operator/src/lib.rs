//! The Cinder CSI driver operator: it installs the Cinder CSI driver
//! (`cinder.csi.openstack.org`) and keeps it as the cluster-scoped `ClusterCSIDriver` of that
//! name asks, as upstream's openstack-cinder-csi-driver-operator does.
//!
//! What is here so far are the pure parts of a reconcile: the configuration translation
//! ([`cloud_conf`], with the user's INI configuration filtered by [`user_config`]), the
//! cloud check reading the compute and volume availability zones over the user's CA
//! ([`cloud`]), the topology decision from them ([`zones`]), and the
//! driver's manifests ([`assets`]) for the operator's configuration ([`config`]). The
//! reconcile itself is to be built on the shared operator library (`operator-kit`).
//!
//! Modules layer without circles: [`config`] and [`zones`] at the bottom, [`user_config`];
//! [`cloud_conf`] (→ `config`, `user_config`), [`cloud`] (→ `cloud_conf`, `zones`) and
//! [`assets`] (→ `config`).

pub mod assets;
pub mod cloud;
pub mod cloud_conf;
pub mod config;
pub mod user_config;
pub mod zones;

pub use config::OperatorConfig;
