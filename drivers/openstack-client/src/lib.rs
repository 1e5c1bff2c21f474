//! `openstack-client`: the OpenStack client of the workspace, shared by both CSI drivers, the
//! operator and the suites.
//!
//! Modules: [`credentials`] (the flat `os-*` secret and clouds.yaml, found as gophercloud
//! finds it, in [`clouds`]), [`keystone`] (a v3 session: password, application credential,
//! trust, token, client certificate and domain scope; one authentication in flight per
//! credential set, see [`single_flight`]), [`http`] (TLS/CA settings, transport and API
//! errors), [`manila`] (the Manila v2 client and its [`manila::Connector`]), [`cinder`] and
//! [`nova`] (the Cinder v3 and Nova v2.1 calls over one [`block_storage::BlockStorageCloud`]),
//! [`metadata`] (the instance metadata service), [`wait`] (polling with back-off) and
//! [`secret`] (values that never print). Errors are one [`Error`]; each caller maps it to its
//! own (a driver to gRPC codes).

pub mod block_storage;
pub mod cinder;
pub mod clouds;
pub mod credentials;
pub mod error;
pub mod http;
pub mod keystone;
pub mod manila;
pub mod metadata;
pub mod nova;
pub mod secret;
pub mod single_flight;
pub mod wait;

pub use block_storage::BlockStorageCloud;
pub use credentials::Credentials;
pub use error::{Error, Result};
pub use manila::{Connector, ManilaClient};
pub use secret::Secret;
