//! HTTPS for the fake cloud: a CA generated per cloud (rcgen), a server certificate it signs
//! for the listen address, `localhost` and `127.0.0.1`, and a TLS front on the public port
//! that hands each decrypted connection to the wiremock server on a private loopback port.
//! Clients trust the cloud through the CA: `cacert` in clouds.yaml, `os-certAuthority` in the
//! driver's flat secret, `ca-bundle.pem` for the operator.
//!
//! [`MutualTlsFront`] is a second front that requires a client certificate (signed by a
//! client CA of its own) and records the certificates clients presented: what a test puts
//! between a client and a plain-HTTP cloud to see the client authenticate with
//! `os-clientCertPath`/`os-clientKeyPath` (cert-based auth is TLS only: Keystone sees the
//! usual token requests).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{RootCertStore, ServerConfig};

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
    new_ca_der(name).map(|(params, key, pem, _)| (params, key, pem))
}

fn new_ca_der(name: &str) -> Result<(CertificateParams, KeyPair, String, CertificateDer<'static>)> {
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
    Ok((params, key, cert.pem(), cert.der().clone()))
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
        self.server_config_with(None)
    }

    /// The server configuration; with `client_ca`, clients must present a certificate it
    /// signed.
    fn server_config_with(
        &self,
        client_ca: Option<CertificateDer<'static>>,
    ) -> Result<ServerConfig> {
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Tls(format!("TLS versions: {e}")))?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                roots
                    .add(ca)
                    .map_err(|e| Error::Tls(format!("client CA: {e}")))?;
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .build()
                        .map_err(|e| Error::Tls(format!("client certificate verifier: {e}")))?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        builder
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
                task: tokio::spawn(accept_loop(listener, acceptor, backend, None)),
            })
    }
}

/// The DER of the certificates clients presented, first of each chain, in order.
type Presented = Arc<Mutex<Vec<Vec<u8>>>>;

/// A client certificate and its key, PEM, signed by a [`MutualTlsFront`]'s client CA.
#[derive(Clone)]
pub struct ClientCertificate {
    /// The certificate, PEM (`os-clientCertPath`'s content).
    pub cert_pem: String,
    /// The PKCS#8 private key, PEM (`os-clientKeyPath`'s content).
    pub key_pem: String,
    /// The certificate, DER: compare with [`MutualTlsFront::presented`].
    pub der: Vec<u8>,
}

impl std::fmt::Debug for ClientCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientCertificate(<key redacted>)")
    }
}

/// An HTTPS front on `127.0.0.1` that requires a client certificate signed by its own client
/// CA, forwards each connection to a plain-HTTP backend (e.g. a [`crate::FakeCloud`]
/// started without TLS) and records the certificate each client presented. Bound at once
/// (so its URL can go into a seed), serving once [`MutualTlsFront::serve`] names the
/// backend; stops when dropped.
pub struct MutualTlsFront {
    listener: Option<std::net::TcpListener>,
    addr: SocketAddr,
    certificates: CloudCertificates,
    client_ca: CertificateDer<'static>,
    client: ClientCertificate,
    presented: Presented,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for MutualTlsFront {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

impl MutualTlsFront {
    /// Binds `127.0.0.1:0` and generates a server CA and certificate, and a client CA and a
    /// client certificate (common name `csi-client`) it signed.
    pub fn bind() -> Result<Self> {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|source| {
            Error::Bind {
                addr: "127.0.0.1:0".into(),
                source,
            }
        })?;
        let addr = listener.local_addr().map_err(|source| Error::Bind {
            addr: "127.0.0.1:0".into(),
            source,
        })?;
        let certificates = CloudCertificates::generate(IpAddr::V4(Ipv4Addr::LOCALHOST))?;
        let (ca_params, ca_key, _, client_ca) = new_ca_der("fake-openstack client CA")?;
        let issuer = Issuer::new(ca_params, ca_key);
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, "csi-client");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().map_err(tls_error("client key"))?;
        let cert = params
            .signed_by(&key, &issuer)
            .map_err(tls_error("client certificate"))?;
        Ok(MutualTlsFront {
            listener: Some(listener),
            addr,
            certificates,
            client_ca,
            client: ClientCertificate {
                cert_pem: cert.pem(),
                key_pem: key.serialize_pem(),
                der: cert.der().to_vec(),
            },
            presented: Presented::default(),
            task: None,
        })
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The server CA, PEM: what clients trust (`os-certAuthority`).
    pub fn ca_pem(&self) -> &str {
        &self.certificates.ca_pem
    }

    /// The client certificate the front accepts.
    pub fn client_certificate(&self) -> &ClientCertificate {
        &self.client
    }

    /// The DER of the certificate each accepted client presented, in order.
    pub fn presented(&self) -> Vec<Vec<u8>> {
        self.presented
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Starts forwarding to `backend` (needs a Tokio runtime that outlives the front). A
    /// second call does nothing.
    pub fn serve(&mut self, backend: SocketAddr) -> Result<()> {
        let Some(listener) = self.listener.take() else {
            return Ok(());
        };
        let config = self
            .certificates
            .server_config_with(Some(self.client_ca.clone()))?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = listener
            .set_nonblocking(true)
            .and_then(|()| TcpListener::from_std(listener))
            .map_err(|source| Error::Bind {
                addr: self.addr.to_string(),
                source,
            })?;
        self.task = Some(tokio::spawn(accept_loop(
            listener,
            acceptor,
            backend,
            Some(self.presented.clone()),
        )));
        Ok(())
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    backend: SocketAddr,
    presented: Option<Presented>,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::debug!(error = %e, "TLS front: accept failed");
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let presented = presented.clone();
        tokio::spawn(async move {
            let mut tls = match acceptor.accept(stream).await {
                Ok(tls) => tls,
                Err(e) => {
                    // A client that does not trust the CA ends here: its side reports it.
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
            };
            if let Some(presented) = &presented
                && let Some(cert) = tls.get_ref().1.peer_certificates().and_then(|c| c.first())
            {
                presented
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(cert.to_vec());
            }
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
