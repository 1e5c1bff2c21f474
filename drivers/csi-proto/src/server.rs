//! Serving tonic routers on CSI endpoints.

use std::{
    os::unix::fs::FileTypeExt,
    path::{Path, PathBuf},
};

use tokio::net::{TcpListener, UnixListener};
use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};
use tonic::{
    body::Body,
    codegen::{Bytes, Service, http},
    service::Routes,
    transport::server::Router,
};
use tower::Layer;

use crate::{
    endpoint::Endpoint,
    error::{Error, Result, error_chain},
};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A bound CSI endpoint, ready for [`serve`].
///
/// Binding first and serving second lets a caller learn the real address of
/// `tcp://127.0.0.1:0` ([`Listener::local_endpoint`]) and know the socket exists before
/// starting clients.
#[derive(Debug)]
pub struct Listener {
    kind: ListenerKind,
}

#[derive(Debug)]
enum ListenerKind {
    Unix {
        listener: UnixListener,
        path: PathBuf,
    },
    Tcp {
        listener: TcpListener,
    },
}

impl Listener {
    /// Binds an endpoint.
    ///
    /// For a unix socket: the parent directory must exist ([`Error::SocketDirMissing`]);
    /// a stale socket left at the path by a previous run is removed; any other kind of
    /// file there is left alone and reported ([`Error::NotASocket`]).
    pub async fn bind(endpoint: &Endpoint) -> Result<Self> {
        let io_error = |action, detail| Error::Io {
            action,
            endpoint: endpoint.to_string(),
            detail,
        };
        let kind = match endpoint {
            Endpoint::Unix(path) => {
                check_socket_dir(path)?;
                if remove_stale_socket(path)
                    .map_err(|e| io_error("cannot remove stale socket", e))?
                    == StalePath::NotASocket
                {
                    return Err(Error::NotASocket {
                        socket: path.clone(),
                    });
                }
                let listener = UnixListener::bind(path).map_err(|e| io_error("cannot bind", e))?;
                ListenerKind::Unix {
                    listener,
                    path: path.clone(),
                }
            }
            Endpoint::Tcp(address) => {
                let listener = TcpListener::bind(address.as_str())
                    .await
                    .map_err(|e| io_error("cannot bind", e))?;
                ListenerKind::Tcp { listener }
            }
        };
        Ok(Self { kind })
    }

    /// The endpoint actually bound (for TCP, with the port the system chose for `:0`).
    pub fn local_endpoint(&self) -> Endpoint {
        match &self.kind {
            ListenerKind::Unix { path, .. } => Endpoint::Unix(path.clone()),
            ListenerKind::Tcp { listener } => match listener.local_addr() {
                Ok(address) => Endpoint::Tcp(address.to_string()),
                // A bound TCP listener always has an address; keep a usable fallback.
                Err(_) => Endpoint::Tcp("0.0.0.0:0".to_owned()),
            },
        }
    }
}

fn check_socket_dir(path: &Path) -> Result<()> {
    let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) else {
        return Ok(());
    };
    if dir.is_dir() {
        Ok(())
    } else {
        Err(Error::SocketDirMissing {
            socket: path.to_owned(),
            dir: dir.to_owned(),
        })
    }
}

#[derive(Debug, PartialEq, Eq)]
enum StalePath {
    /// Nothing there (any more).
    Clear,
    /// Something else than a socket: left alone.
    NotASocket,
}

fn remove_stale_socket(path: &Path) -> std::io::Result<StalePath> {
    match std::fs::symlink_metadata(path) {
        Ok(metadata) if metadata.file_type().is_socket() => {
            std::fs::remove_file(path).map(|()| StalePath::Clear)
        }
        Ok(_) => Ok(StalePath::NotASocket),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(StalePath::Clear),
        Err(error) => Err(error),
    }
}

/// Serves a tonic router on a bound listener until `shutdown` resolves, then removes the
/// unix socket file.
///
/// ```no_run
/// use csi_proto::{Endpoint, Listener, serve};
/// use tonic::transport::Server;
///
/// # async fn run(identity: impl csi_proto::v1::identity_server::Identity)
/// # -> Result<(), csi_proto::Error> {
/// let listener = Listener::bind(&"unix:///csi/csi.sock".parse::<Endpoint>()?).await?;
/// let router = Server::builder()
///     .add_service(csi_proto::v1::identity_server::IdentityServer::new(identity));
/// serve(router, listener, async { tokio::signal::ctrl_c().await.ok(); }).await
/// # }
/// ```
pub async fn serve<L, ResBody>(
    router: Router<L>,
    listener: Listener,
    shutdown: impl Future<Output = ()>,
) -> Result<()>
where
    L: Layer<Routes>,
    L::Service:
        Service<http::Request<Body>, Response = http::Response<ResBody>> + Clone + Send + 'static,
    <L::Service as Service<http::Request<Body>>>::Future: Send,
    <L::Service as Service<http::Request<Body>>>::Error: Into<BoxError> + Send,
    ResBody: tonic::codegen::Body<Data = Bytes> + Send + 'static,
    ResBody::Error: Into<BoxError>,
{
    let endpoint = listener.local_endpoint();
    let result = match listener.kind {
        ListenerKind::Unix { listener, path } => {
            let result = router
                .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown)
                .await;
            // Best effort: a leftover socket is replaced by the next bind anyway.
            let _ = std::fs::remove_file(&path);
            result
        }
        ListenerKind::Tcp { listener } => {
            router
                .serve_with_incoming_shutdown(TcpListenerStream::new(listener), shutdown)
                .await
        }
    };
    result.map_err(|source| Error::Transport {
        action: "serving failed on",
        endpoint: endpoint.to_string(),
        detail: error_chain(&source),
    })
}
