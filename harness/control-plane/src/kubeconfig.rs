//! Kubeconfig files for the admin and the components.

use std::path::Path;

use kube::config::{
    AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};

use super::error::{Error, Result};
use super::pki::{CertFiles, write_private};

/// Writes a kubeconfig at `path` for `user`, authenticating with the client certificate in
/// `client`, trusting the CA in `ca_file`. Paths are absolute so the file works from anywhere.
pub fn write(
    path: &Path,
    cluster_name: &str,
    server: &str,
    ca_file: &Path,
    user: &str,
    client: &CertFiles,
) -> Result<()> {
    let context_name = format!("{user}@{cluster_name}");
    let config = Kubeconfig {
        clusters: vec![NamedCluster {
            name: cluster_name.to_string(),
            cluster: Some(Cluster {
                server: Some(server.to_string()),
                certificate_authority: Some(ca_file.display().to_string()),
                ..Default::default()
            }),
            ..Default::default()
        }],
        auth_infos: vec![NamedAuthInfo {
            name: user.to_string(),
            auth_info: Some(AuthInfo {
                client_certificate: Some(client.cert.display().to_string()),
                client_key: Some(client.key.display().to_string()),
                ..Default::default()
            }),
            ..Default::default()
        }],
        contexts: vec![NamedContext {
            name: context_name.clone(),
            context: Some(Context {
                cluster: cluster_name.to_string(),
                user: Some(user.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        }],
        current_context: Some(context_name),
        api_version: Some("v1".into()),
        kind: Some("Config".into()),
        ..Default::default()
    };
    let yaml = serde_yaml::to_string(&config).map_err(|source| Error::Kubeconfig {
        path: path.to_path_buf(),
        source,
    })?;
    write_private(path, &yaml)
}
