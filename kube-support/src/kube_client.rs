//! A Kubernetes client from `--kubeconfig`, else kube's default (in-cluster, then
//! `$KUBECONFIG`/`~/.kube/config`).

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// No client could be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No Kubernetes client configuration could be loaded.
    #[error("Kubernetes client configuration")]
    Config(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The configuration was read but the client could not be built from it.
    #[error("Kubernetes API: building the client")]
    Build(#[source] kube::Error),
}

/// Builds the client a binary talks to the API server with: from the kubeconfig file
/// `kubeconfig` when given, else kube's inferred configuration.
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, ClientError> {
    let config = match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path).map_err(|e| ClientError::Config(Box::new(e)))?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(|e| ClientError::Config(Box::new(e)))?
        }
        None => Config::infer()
            .await
            .map_err(|e| ClientError::Config(Box::new(e)))?,
    };
    Client::try_from(config).map_err(ClientError::Build)
}
