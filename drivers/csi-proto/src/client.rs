//! Connecting tonic clients to CSI endpoints.

use std::path::PathBuf;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Uri};

use crate::{
    endpoint::Endpoint,
    error::{Error, Result, error_chain},
};

/// Connects to a CSI endpoint and returns a channel for any generated client
/// (`IdentityClient::new(channel)`, `NodeClient::new(channel.clone())`, …).
///
/// Fails at once when nothing listens there (e.g. the socket does not exist yet); use
/// [`connect_lazy`] to get a channel that connects on first use and reconnects later.
pub async fn connect(endpoint: &Endpoint) -> Result<Channel> {
    let result = match endpoint {
        Endpoint::Unix(path) => {
            tonic_endpoint(endpoint)?
                .connect_with_connector(unix_connector(path.clone()))
                .await
        }
        Endpoint::Tcp(_) => tonic_endpoint(endpoint)?.connect().await,
    };
    result.map_err(|source| Error::Transport {
        action: "cannot connect to",
        endpoint: endpoint.to_string(),
        detail: error_chain(&source),
    })
}

/// Returns a channel to a CSI endpoint that connects on its first call (and reconnects
/// after failures). Errors then surface as `Unavailable` statuses on the calls.
pub fn connect_lazy(endpoint: &Endpoint) -> Result<Channel> {
    Ok(match endpoint {
        Endpoint::Unix(path) => {
            tonic_endpoint(endpoint)?.connect_with_connector_lazy(unix_connector(path.clone()))
        }
        Endpoint::Tcp(_) => tonic_endpoint(endpoint)?.connect_lazy(),
    })
}

fn tonic_endpoint(endpoint: &Endpoint) -> Result<tonic::transport::Endpoint> {
    // For a unix socket the URI only fills the HTTP/2 :authority; the connector decides
    // where the bytes go.
    let uri = match endpoint {
        Endpoint::Unix(_) => "http://localhost".to_owned(),
        Endpoint::Tcp(address) => format!("http://{address}"),
    };
    tonic::transport::Endpoint::from_shared(uri).map_err(|source| Error::InvalidEndpoint {
        endpoint: endpoint.to_string(),
        reason: error_chain(&source),
    })
}

fn unix_connector(
    path: PathBuf,
) -> impl tower::Service<
    Uri,
    Response = TokioIo<UnixStream>,
    Error = std::io::Error,
    Future = impl Future<Output = std::io::Result<TokioIo<UnixStream>>> + Send,
> + Clone
+ Send
+ 'static {
    tower::service_fn(move |_: Uri| {
        let path = path.clone();
        async move { Ok(TokioIo::new(UnixStream::connect(path).await?)) }
    })
}
