//! HTTPS for the fake cloud: a CA generated per cloud (rcgen), a server certificate it signs
//! for the listen address, `localhost` and `127.0.0.1`, and a TLS front on the public port
//! that hands each decrypted connection to the wiremock server on a private loopback port.
//! Clients trust the cloud through the CA: `cacert` in clouds.yaml, `os-certAuthority` in the
//! driver's flat secret, `ca-bundle.pem` for the operator.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::error::{Error, Result};

/// A CA and the server certificate it signed.
pub(crate) struct CloudCertificates {
    /// The CA certificate, PEM: what clients trust.
    pub(crate) ca_pem: String,
    server_cert: CertificateDer<'static>,
    server_key: PrivatePkcs8KeyDer<'static>,
}

fn tls_error(what: &str) -> impl FnOnce(rcgen::Error) -> Error + '_ {
    move |e| Error::Tls(format!("{what}: {e}"))
}

fn new_ca(name: &str) -> Result<(CertificateParams, KeyPair, String)> {
    let key = KeyPair::generate().map_err(tls_error("CA key"))?;
    let mut params = CertificateParams::default();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params
        .self_signed(&key)
        .map_err(tls_error("CA certificate"))?;
    Ok((params, key, cert.pem()))
}

impl CloudCertificates {
    /// A fresh CA and a server certificate for `ip`, `127.0.0.1` and `localhost`.
    pub(crate) fn generate(ip: IpAddr) -> Result<Self> {
        let (ca_params, ca_key, ca_pem) = new_ca("fake-openstack CA")?;
        let issuer = Issuer::new(ca_params, ca_key);
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, "fake-openstack");
        let mut ips = vec![IpAddr::V4(Ipv4Addr::LOCALHOST), ip];
        if ip.is_unspecified() {
            ips.pop();
        }
        ips.dedup();
        params.subject_alt_names = ips.into_iter().map(SanType::IpAddress).collect();
        params.subject_alt_names.push(SanType::DnsName(
            "localhost".try_into().map_err(tls_error("SAN localhost"))?,
        ));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().map_err(tls_error("server key"))?;
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(tls_error("server certificate"))?;
        Ok(CloudCertificates {
            ca_pem,
            server_cert: cert.der().clone(),
            server_key: PrivatePkcs8KeyDer::from(key.serialize_der()),
        })
    }

    fn server_config(&self) -> Result<ServerConfig> {
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Tls(format!("TLS versions: {e}")))?
            .with_no_client_auth()
            .with_single_cert(
                vec![self.server_cert.clone()],
                PrivateKeyDer::Pkcs8(self.server_key.clone_key()),
            )
            .map_err(|e| Error::Tls(format!("server certificate: {e}")))
    }
}

/// The PEM of a CA that signed nothing the fake serves: what a test uses to prove that a
/// wrong CA bundle is refused.
pub fn unrelated_ca_pem() -> Result<String> {
    new_ca("some other CA").map(|(_, _, pem)| pem)
}

/// The TLS front: accepts on the public listener, terminates TLS, and copies bytes to and
/// from `backend`. Stops accepting when dropped.
pub(crate) struct TlsFront {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsFront {
    /// Serves TLS on `listener` (already bound) for the plain HTTP server at `backend`.
    pub(crate) fn spawn(
        listener: std::net::TcpListener,
        backend: SocketAddr,
        certificates: &CloudCertificates,
    ) -> Result<Self> {
        let acceptor = TlsAcceptor::from(Arc::new(certificates.server_config()?));
        let addr = listener.local_addr().map_err(|source| Error::Bind {
            addr: "the TLS listener".into(),
            source,
        })?;
        listener
            .set_nonblocking(true)
            .and_then(|()| TcpListener::from_std(listener))
            .map_err(|source| Error::Bind {
                addr: addr.to_string(),
                source,
            })
            .map(|listener| TlsFront {
                task: tokio::spawn(accept_loop(listener, acceptor, backend)),
            })
    }
}

async fn accept_loop(listener: TcpListener, acceptor: TlsAcceptor, backend: SocketAddr) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::debug!(error = %e, "TLS front: accept failed");
                continue;
            }
        };
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let mut tls = match acceptor.accept(stream).await {
                Ok(tls) => tls,
                Err(e) => {
                    // A client that does not trust the CA ends here: its side reports it.
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
            };
            let mut plain = match TcpStream::connect(backend).await {
                Ok(plain) => plain,
                Err(e) => {
                    tracing::warn!(%backend, error = %e, "TLS front: backend unreachable");
                    return;
                }
            };
            if let Err(e) = tokio::io::copy_bidirectional(&mut tls, &mut plain).await {
                tracing::debug!(%peer, error = %e, "TLS front: connection ended");
            }
        });
    }
}
