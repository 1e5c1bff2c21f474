//! The kubelet API's TLS: a serving certificate from the cluster CA, and client certificates
//! verified against the cluster CA when a client offers one (callers with a bearer token
//! offer none, so a certificate is optional at the TLS level and required, or a token, by
//! [`auth`](super::auth)).

use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

use super::error::{Error, Result};

/// The server's TLS configuration: `cert`/`key` (PEM) to serve, client certificates checked
/// against the CA certificates in `client_ca` (PEM). Only HTTP/1.1 is offered: the exec,
/// attach and port-forward upgrades are HTTP/1.1 upgrades.
pub fn server_config(cert: &Path, key: &Path, client_ca: &Path) -> Result<Arc<ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| Error::tls(cert, e))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| Error::tls(key, e))?;
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_file_iter(client_ca).map_err(|e| Error::tls(client_ca, e))? {
        let ca = ca.map_err(|e| Error::tls(client_ca, e))?;
        roots.add(ca).map_err(|e| Error::tls(client_ca, e))?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| Error::tls(client_ca, e))?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::tls(cert, e))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .map_err(|e| Error::tls(cert, e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
