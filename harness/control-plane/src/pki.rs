//! The control plane's keys and certificates: one generated CA signs every serving and
//! client certificate, as in a kubeadm cluster; a separate key pair signs service-account
//! tokens. Keys are ECDSA P-256 (accepted by every Kubernetes component).

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use kube_support::error::IoContext;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

use super::error::{Error, Result};

/// A certificate and its private key, both PEM.
#[derive(Clone)]
pub struct CertifiedKeyPem {
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The private key (PKCS#8), PEM. Secret: never logged.
    pub key_pem: String,
}

impl std::fmt::Debug for CertifiedKeyPem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertifiedKeyPem")
            .field("cert_pem", &self.cert_pem)
            .field("key_pem", &"<redacted>")
            .finish()
    }
}

/// Paths of a certificate and key written to disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFiles {
    /// The certificate file.
    pub cert: PathBuf,
    /// The private key file.
    pub key: PathBuf,
}

/// The cluster CA: signs the serving certificates of the components and client
/// certificates (admin, components, later node agents).
pub struct ClusterCa {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
    key_pem: String,
}

impl std::fmt::Debug for ClusterCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterCa")
            .field("cert_pem", &self.cert_pem)
            .finish_non_exhaustive()
    }
}

/// A client identity as Kubernetes reads it from a certificate: user = CN, group = O.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    /// The user name (certificate CN), e.g. `kubernetes-admin`.
    pub user: String,
    /// The group (certificate O), e.g. `system:masters`.
    pub group: Option<String>,
}

impl ClusterCa {
    /// Generates a new CA.
    pub fn generate(name: &str) -> Result<Self> {
        let key = KeyPair::generate().map_err(Error::cert("CA key"))?;
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
            .map_err(Error::cert("CA certificate"))?;
        Ok(Self {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA's private key, PEM (the controller-manager signs CSRs with it). Secret.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// A serving certificate for `names` (IP addresses or DNS names).
    pub fn serving_cert(&self, common_name: &str, names: &[String]) -> Result<CertifiedKeyPem> {
        let mut params = self.leaf(common_name, None)?;
        params.subject_alt_names = names
            .iter()
            .map(|name| match name.parse::<IpAddr>() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) => name
                    .clone()
                    .try_into()
                    .map(SanType::DnsName)
                    .map_err(Error::cert(format!("SAN {name:?}"))),
            })
            .collect::<Result<_>>()?;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(common_name, params)
    }

    /// A client certificate for `identity`.
    pub fn client_cert(&self, identity: &ClientIdentity) -> Result<CertifiedKeyPem> {
        let mut params = self.leaf(&identity.user, identity.group.as_deref())?;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(&identity.user, params)
    }

    fn leaf(&self, common_name: &str, organization: Option<&str>) -> Result<CertificateParams> {
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        if let Some(org) = organization {
            params
                .distinguished_name
                .push(DnType::OrganizationName, org);
        }
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.use_authority_key_identifier_extension = true;
        Ok(params)
    }

    fn sign(&self, what: &str, params: CertificateParams) -> Result<CertifiedKeyPem> {
        let key = KeyPair::generate().map_err(Error::cert(format!("key for {what}")))?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(Error::cert(format!("certificate for {what}")))?;
        Ok(CertifiedKeyPem {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// The names the apiserver's serving certificate is valid for: loopback, the in-cluster
/// service names and the first address of the service range (these are only names in a
/// certificate; nothing is routed there).
pub fn apiserver_names(service_ip: Ipv4Addr) -> Vec<String> {
    let mut names: Vec<String> = vec![
        Ipv4Addr::LOCALHOST.to_string(),
        "::1".into(),
        service_ip.to_string(),
        "localhost".into(),
        "kubernetes".into(),
        "kubernetes.default".into(),
        "kubernetes.default.svc".into(),
        "kubernetes.default.svc.cluster.local".into(),
    ];
    names.dedup();
    names
}

/// Generates the service-account signing key: (private key PEM, public key PEM).
pub fn service_account_key() -> Result<(String, String)> {
    let key = KeyPair::generate().map_err(Error::cert("service-account signing key"))?;
    Ok((key.serialize_pem(), key.public_key_pem()))
}

/// Writes `content` to `path`, private to the owner.
pub fn write_private(path: &Path, content: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(Error::io("creating", path))?;
    file.write_all(content.as_bytes())
        .map_err(Error::io("writing", path))
}

/// Writes a certificate and key as `<dir>/<name>.crt` and `<dir>/<name>.key`.
pub fn write_pair(dir: &Path, name: &str, pair: &CertifiedKeyPem) -> Result<CertFiles> {
    let files = CertFiles {
        cert: dir.join(format!("{name}.crt")),
        key: dir.join(format!("{name}.key")),
    };
    write_private(&files.cert, &pair.cert_pem)?;
    write_private(&files.key, &pair.key_pem)?;
    Ok(files)
}
