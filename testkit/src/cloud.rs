//! The fake OpenStack cloud in-process, and its credentials in the shapes tests hand on.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use fakes::{CloudConfig, FakeCloud, SecretKind};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};

use crate::wait::wait_for;

/// The fake cloud with its default seed (one zone, `nova`). Its backend directory goes
/// with it when dropped.
pub async fn fake_cloud() -> FakeCloud {
    fake_cloud_with(CloudConfig::default()).await
}

/// The fake cloud with Manila availability zones `zones`.
pub async fn fake_cloud_in_zones(zones: &[&str]) -> FakeCloud {
    let mut config = CloudConfig::default();
    config.manila.availability_zones = zones.iter().map(|z| z.to_string()).collect();
    fake_cloud_with(config).await
}

/// The fake cloud with `config`.
pub async fn fake_cloud_with(config: CloudConfig) -> FakeCloud {
    FakeCloud::start(config)
        .await
        .unwrap_or_else(|e| panic!("starting the fake cloud: {e}"))
}

/// The cloud's flat `os-*` credentials (password) as a CSI request's `secrets` map.
pub fn csi_secrets(cloud: &FakeCloud) -> HashMap<String, String> {
    cloud.secret(SecretKind::Password).into_iter().collect()
}

/// Creates the Secret `namespace/name` holding the cloud's flat `os-*` credentials.
pub async fn credentials_secret(client: &Client, cloud: &FakeCloud, namespace: &str, name: &str) {
    let data: BTreeMap<String, ByteString> = cloud
        .secret(SecretKind::Password)
        .into_iter()
        .map(|(k, v)| (k, ByteString(v.into_bytes())))
        .collect();
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..Default::default()
        },
        data: Some(data),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap_or_else(|e| panic!("creating Secret {namespace}/{name}: {e}"));
}

/// The StorageClass parameter keys naming a Secret, per operation: (name, namespace).
const SECRET_PARAMETER_KEYS: [(&str, &str); 4] = [
    (
        "csi.storage.k8s.io/provisioner-secret-name",
        "csi.storage.k8s.io/provisioner-secret-namespace",
    ),
    (
        "csi.storage.k8s.io/node-stage-secret-name",
        "csi.storage.k8s.io/node-stage-secret-namespace",
    ),
    (
        "csi.storage.k8s.io/node-publish-secret-name",
        "csi.storage.k8s.io/node-publish-secret-namespace",
    ),
    (
        "csi.storage.k8s.io/controller-expand-secret-name",
        "csi.storage.k8s.io/controller-expand-secret-namespace",
    ),
];

/// StorageClass parameters pointing every CSI operation that takes a secret (provision,
/// node stage, node publish, controller expand) at the Secret `namespace/name`.
pub fn secret_parameters<'a>(name: &'a str, namespace: &'a str) -> Vec<(&'static str, &'a str)> {
    SECRET_PARAMETER_KEYS
        .iter()
        .flat_map(|(name_key, namespace_key)| [(*name_key, name), (*namespace_key, namespace)])
        .collect()
}

/// Waits until the fake cloud holds nothing a test made (no share, snapshot or access rule
/// left); fails the test with the leftovers otherwise.
pub async fn wait_no_leftovers(cloud: &FakeCloud, timeout: Duration) {
    wait_for("no leftovers in the fake cloud", timeout, || async {
        let leftovers = cloud.leftovers();
        if leftovers.is_empty() {
            Ok(Some(()))
        } else {
            Err(format!("{leftovers:?}"))
        }
    })
    .await
}
