//! CSI (Container Storage Interface) v1 bindings for tonic, plus the endpoint
//! plumbing every CSI plugin and client needs.
//!
//! - [`v1`]: messages, enums, tonic servers and clients generated at build time from
//!   `proto/csi.proto` (spec v1.11.0, package `csi.v1`) with the pure-Rust `protox`
//!   compiler: no system `protoc` is needed.
//! - [`registration::v1`]: kubelet's plugin-registration API (`package pluginregistration`,
//!   service `Registration` with `GetInfo` and `NotifyRegistrationStatus`), which
//!   node-driver-registrar serves and the node agent's plugin watcher calls.
//! - [`Endpoint`]: a CSI endpoint as given on command lines (`unix:///path`, `unix:/path`,
//!   a bare path, or `tcp://host:port`).
//! - [`connect`] / [`connect_lazy`]: a tonic [`Channel`](tonic::transport::Channel) to an
//!   endpoint, over a unix socket or TCP.
//! - [`Listener`] and [`serve`]: bind an endpoint (replacing a stale unix socket) and run a
//!   tonic router on it until a shutdown future resolves.
//! - [`identity::IdentityService`]: the Identity service both drivers serve, its Probe
//!   asking a [`identity::Readiness`].
//! - [`in_flight::InFlight`]: one operation per volume or snapshot at a time; a second
//!   request for the same key is refused (the drivers answer `Aborted`).
//! - [`plugin_server`]: a plugin's `--endpoint` bound and its services served behind panic
//!   guards; [`capability`]: the RPC capabilities its Controller and Node services list.
//! - [`panic_guard::PanicGuard`]: wraps a generated service so a panic in a handler answers
//!   `Internal` naming the method.
//! - [`rpc_log::handle`]: runs a plugin's RPC handler, logging the call with its secrets
//!   redacted ([`rpc_log::Redact`]) and its outcome, and mapping its error to a status.
//!
//! ```no_run
//! use csi_proto::v1::{identity_client::IdentityClient, ProbeRequest};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let endpoint: csi_proto::Endpoint = "unix:///csi/csi.sock".parse()?;
//! let channel = csi_proto::connect(&endpoint).await?;
//! let ready = IdentityClient::new(channel).probe(ProbeRequest {}).await?;
//! println!("{:?}", ready.into_inner().ready);
//! # Ok(())
//! # }
//! ```

pub mod capability;
mod client;
mod endpoint;
mod error;
pub mod identity;
pub mod in_flight;
pub mod panic_guard;
pub mod plugin_server;
pub mod rpc_log;
mod server;

pub use client::{connect, connect_lazy};
pub use endpoint::Endpoint;
pub use error::{Error, Result};
pub use server::{Listener, serve};

/// The tonic and prost-types versions the bindings are generated for.
pub use {prost_types, tonic};

/// The CSI v1 API (`package csi.v1`): messages, enums, `*_server` and `*_client` modules.
#[allow(
    missing_docs,
    clippy::all,
    clippy::pedantic,
    clippy::unwrap_used,
    clippy::expect_used
)]
pub mod v1 {
    tonic::include_proto!("csi.v1");

    /// The encoded `FileDescriptorSet` of `csi.proto` and its imports (for gRPC
    /// reflection or for inspecting options such as `csi_secret`).
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/csi_descriptor.bin"));
}

/// kubelet's plugin-registration API.
pub mod registration {
    /// Version v1 (`k8s.io/kubelet/pkg/apis/pluginregistration/v1`; protobuf package
    /// `pluginregistration`): messages and the `registration_server`/`registration_client`
    /// modules.
    #[allow(
        missing_docs,
        clippy::all,
        clippy::pedantic,
        clippy::unwrap_used,
        clippy::expect_used
    )]
    pub mod v1 {
        tonic::include_proto!("pluginregistration");
    }

    /// `PluginInfo.type` of a CSI driver.
    pub const CSI_PLUGIN_TYPE: &str = "CSIPlugin";
}

/// The CSI specification version these bindings follow.
pub const CSI_SPEC_VERSION: &str = "1.11.0";
