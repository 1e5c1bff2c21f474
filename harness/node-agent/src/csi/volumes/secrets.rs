//! The secrets of NodeStageVolume and NodePublishVolume: the data of the Secret a PV's
//! `nodeStageSecretRef` or `nodePublishSecretRef` names (the Node authorizer lets a node
//! read them once a pod on it uses the PV).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, Secret, SecretReference};
use kube::Client;
use kube::api::Api;

use crate::csi::error::{Error, Result};

/// The secrets of NodeStageVolume: those of the PV's `nodeStageSecretRef` (see [`read`]).
pub(super) async fn node_stage(
    client: &Client,
    csi: &CSIPersistentVolumeSource,
) -> Result<HashMap<String, String>> {
    read(
        client,
        csi.node_stage_secret_ref.as_ref(),
        "NodeStageSecretRef",
    )
    .await
}

/// The secrets of NodePublishVolume: those of the PV's `nodePublishSecretRef` (see
/// [`read`]).
pub(super) async fn node_publish(
    client: &Client,
    csi: &CSIPersistentVolumeSource,
) -> Result<HashMap<String, String>> {
    read(
        client,
        csi.node_publish_secret_ref.as_ref(),
        "NodePublishSecretRef",
    )
    .await
}

/// The data of the Secret `reference` names, read with `client`, as strings (never logged);
/// none without a reference. `field` names the reference in errors (`NodeStageSecretRef`).
async fn read(
    client: &Client,
    reference: Option<&SecretReference>,
    field: &str,
) -> Result<HashMap<String, String>> {
    let Some(reference) = reference else {
        return Ok(HashMap::new());
    };
    let name = reference.name.clone().unwrap_or_default();
    let namespace = reference
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &namespace);
    let secret = secrets.get(&name).await.map_err(Error::api(format!(
        "kubernetes.io/csi: failed to get {field} {namespace}/{name}"
    )))?;
    Ok(secret
        .data
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
        .chain(secret.string_data.unwrap_or_default())
        .collect())
}
