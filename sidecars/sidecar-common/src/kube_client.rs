//! A Kubernetes client from `--kubeconfig`, else kube's default (in-cluster, then
//! `$KUBECONFIG`/`~/.kube/config`).

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use crate::error::{Error, Result};

/// Builds the client the sidecar talks to the API server with.
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client> {
    let config = match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path).map_err(|e| Error::KubeConfig(Box::new(e)))?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(|e| Error::KubeConfig(Box::new(e)))?
        }
        None => Config::infer()
            .await
            .map_err(|e| Error::KubeConfig(Box::new(e)))?,
    };
    Client::try_from(config).map_err(|source| Error::Kube {
        what: "building the client".into(),
        source,
    })
}
