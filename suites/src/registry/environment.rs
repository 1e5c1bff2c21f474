//! [`RunEnvironment`]: what the embedded default started for a run, for either driver: the
//! Manila driver's environment (NFS shares) or the Cinder driver's (block volumes on loop
//! devices). The run reads the fake cloud, the run directory and the driver's credentials
//! through it, and tears it down at the end.

use std::collections::BTreeMap;
use std::path::Path;

use cluster::Cluster;
use fakes::FakeCloud;

use crate::e2e::cinder::CinderCsiEnvironment;
use crate::e2e::cloud::CloudInspector;
use crate::e2e::{ManilaCsiEnvironment, Result};

/// The environment a run started (see the module docs).
#[derive(Debug)]
pub enum RunEnvironment {
    /// The Manila CSI driver with its NFS node plugin.
    Manila(Box<ManilaCsiEnvironment>),
    /// The Cinder CSI driver, with the fake Cinder and Nova.
    Cinder(Box<CinderCsiEnvironment>),
}

impl RunEnvironment {
    /// The cluster.
    pub fn cluster(&self) -> &Cluster {
        match self {
            RunEnvironment::Manila(env) => env.cluster(),
            RunEnvironment::Cinder(env) => env.cluster(),
        }
    }

    /// The run's own fake cloud, unless the run uses a cloud it did not start.
    pub fn fake_cloud(&self) -> Option<&FakeCloud> {
        match self {
            RunEnvironment::Manila(env) => env.fake_cloud(),
            RunEnvironment::Cinder(env) => Some(env.cloud()),
        }
    }

    /// A Manila client of the fake cloud (Manila runs only).
    pub fn inspector(&self) -> Option<&CloudInspector> {
        self.manila().and_then(ManilaCsiEnvironment::inspector)
    }

    /// The Manila environment, on a Manila run.
    pub fn manila(&self) -> Option<&ManilaCsiEnvironment> {
        match self {
            RunEnvironment::Manila(env) => Some(env.as_ref()),
            RunEnvironment::Cinder(_) => None,
        }
    }

    /// The Cinder environment, on a Cinder run.
    pub fn cinder(&self) -> Option<&CinderCsiEnvironment> {
        match self {
            RunEnvironment::Manila(_) => None,
            RunEnvironment::Cinder(env) => Some(env.as_ref()),
        }
    }

    /// The cluster's run directory (logs, node directories, mounts).
    pub fn run_dir(&self) -> &Path {
        match self {
            RunEnvironment::Manila(env) => env.run_dir(),
            RunEnvironment::Cinder(env) => env.run_dir(),
        }
    }

    /// The cloud credentials the driver was given, as flat `os-*` keys (never log them): what
    /// the look for secrets at the end of a run searches for.
    pub fn driver_secret(&self) -> BTreeMap<String, String> {
        match self {
            RunEnvironment::Manila(env) => env.driver_secret(),
            RunEnvironment::Cinder(env) => env.cloud().secret(fakes::SecretKind::Password),
        }
    }

    /// Tears the environment down, proving nothing is left (see each environment's
    /// `teardown`).
    pub async fn teardown(self) -> Result<()> {
        match self {
            RunEnvironment::Manila(env) => env.teardown().await,
            RunEnvironment::Cinder(env) => env.teardown().await,
        }
    }
}
