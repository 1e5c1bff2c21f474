//! Where an environment's cloud comes from: the fake cloud started in this process (the
//! default), or a cloud the environment does not start (a real one, or a `fake-openstack`
//! process), reached with the credentials of a clouds.yaml.

use std::collections::BTreeMap;
use std::path::PathBuf;

use fakes::{FakeCloud, SecretKind};

use super::super::cloud::CloudInspector;

/// Where an environment's cloud comes from.
#[derive(Debug, Clone, Default)]
pub enum CloudSource {
    /// The fake cloud, started in this process from [`EnvironmentOptions::cloud`]
    /// (`cloud_tls` for HTTPS).
    ///
    /// [`EnvironmentOptions::cloud`]: super::EnvironmentOptions::cloud
    #[default]
    Fake,
    /// A cloud the environment does not start.
    External(ExternalCloud),
}

/// A cloud the environment does not start: its credentials (the driver's Secret) and how the
/// nodes reach its NFS exports.
#[derive(Clone)]
pub struct ExternalCloud {
    /// The flat `os-*` credentials (CA inline), never printed.
    pub secret: BTreeMap<String, String>,
    /// Where they came from (a clouds.yaml and cloud name), for messages.
    pub source: String,
    /// How the NFS node plugin mounts the shares.
    pub nfs: NfsAccess,
}

impl std::fmt::Debug for ExternalCloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalCloud")
            .field("source", &self.source)
            .field("secret", &"[redacted]")
            .field("nfs", &self.nfs)
            .finish()
    }
}

/// How the NFS node plugin mounts a share's export location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NfsAccess {
    /// With the kernel NFS client (a real cloud; the host needs one).
    Kernel,
    /// By binding the export's directory, which is on this host below this root (a
    /// `fake-openstack` process's backend directory).
    Local(PathBuf),
}

/// The cloud of a started environment.
pub(super) enum EnvironmentCloud {
    /// The fake cloud of this process, and a Manila client of it.
    Fake(Box<FakeCloud>, Box<CloudInspector>),
    /// A cloud the environment did not start.
    External(ExternalCloud),
}

impl std::fmt::Debug for EnvironmentCloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EnvironmentCloud::Fake(cloud, _) => f.debug_tuple("Fake").field(cloud).finish(),
            EnvironmentCloud::External(cloud) => f.debug_tuple("External").field(cloud).finish(),
        }
    }
}

impl EnvironmentCloud {
    /// The flat `os-*` credentials for the driver's Secret.
    pub(super) fn driver_secret(&self) -> BTreeMap<String, String> {
        match self {
            EnvironmentCloud::Fake(cloud, _) => cloud.secret(SecretKind::Password),
            EnvironmentCloud::External(cloud) => cloud.secret.clone(),
        }
    }

    /// The fake cloud, if it is one.
    pub(super) fn fake(&self) -> Option<&FakeCloud> {
        match self {
            EnvironmentCloud::Fake(cloud, _) => Some(cloud),
            EnvironmentCloud::External(_) => None,
        }
    }

    /// The Manila client of the fake cloud, if it is one.
    pub(super) fn inspector(&self) -> Option<&CloudInspector> {
        match self {
            EnvironmentCloud::Fake(_, inspector) => Some(inspector),
            EnvironmentCloud::External(_) => None,
        }
    }
}
