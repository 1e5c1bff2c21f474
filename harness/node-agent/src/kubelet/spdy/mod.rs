//! SPDY/3.1 as the Kubernetes stream protocols use it over an upgraded HTTP/1.1 connection
//! (what kubectl and client-go up to 1.29 speak for exec, attach and port-forward, and what
//! the apiserver passes through to the kubelet): the frames, the zlib-compressed header
//! blocks (with SPDY/3's dictionary, one compression context per direction), and a
//! [`Session`] that accepts the client's streams and writes to them.
//!
//! Flow control is not enforced in either direction: the Go implementation the clients use
//! sends no WINDOW_UPDATE, so a sender that waited for one would stall after 64 KiB.

mod compression;
mod frame;
mod session;

pub use frame::REFUSED_STREAM;
pub use session::{IncomingStream, Session, Writer};

/// Header name/value pairs (names lower-case).
pub type Headers = Vec<(String, String)>;

/// A SPDY protocol violation or a compression failure.
#[derive(Debug, thiserror::Error)]
pub enum SpdyError {
    /// The connection failed.
    #[error("SPDY connection: {0}")]
    Io(#[from] std::io::Error),
    /// A frame broke the protocol.
    #[error("SPDY protocol error: {0}")]
    Protocol(String),
}
