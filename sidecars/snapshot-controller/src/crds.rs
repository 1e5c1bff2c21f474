//! The CRDs of the snapshot API, as shipped in `fixtures/crds/`, and their installation.
//!
//! The YAML files are the single source of the schema: they are compiled into this crate so
//! tests, suites and the operator install exactly what a user applies with kubectl.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_support::crd;

use crate::Result;

/// The CRD manifests: (file name, YAML).
pub const MANIFESTS: [(&str, &str); 3] = [
    (
        "snapshot.storage.k8s.io_volumesnapshotclasses.yaml",
        include_str!("../../../fixtures/crds/snapshot.storage.k8s.io_volumesnapshotclasses.yaml"),
    ),
    (
        "snapshot.storage.k8s.io_volumesnapshotcontents.yaml",
        include_str!("../../../fixtures/crds/snapshot.storage.k8s.io_volumesnapshotcontents.yaml"),
    ),
    (
        "snapshot.storage.k8s.io_volumesnapshots.yaml",
        include_str!("../../../fixtures/crds/snapshot.storage.k8s.io_volumesnapshots.yaml"),
    ),
];

/// The three CRDs, parsed.
pub fn definitions() -> Result<Vec<CustomResourceDefinition>> {
    Ok(crd::parse_all(&MANIFESTS)?)
}

/// Applies the CRDs (server-side apply, field manager `field_manager`) and waits until each
/// is Established, for at most `timeout` in all ([`kube_support::crd::install`]).
pub async fn install(client: &kube::Client, field_manager: &str, timeout: Duration) -> Result<()> {
    Ok(crd::install(client, field_manager, &definitions()?, timeout).await?)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn manifests_parse_into_v1_crds_with_status_and_short_names() {
        let crds = definitions().unwrap();
        let summary: Vec<_> = crds
            .iter()
            .map(|crd| {
                let version = &crd.spec.versions[0];
                (
                    crd.spec.names.kind.clone(),
                    crd.spec.scope.clone(),
                    version.name.clone(),
                    version
                        .subresources
                        .as_ref()
                        .and_then(|s| s.status.as_ref())
                        .is_some(),
                    crd.spec.names.short_names.clone().unwrap_or_default()[0].clone(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (
                    "VolumeSnapshotClass".into(),
                    "Cluster".into(),
                    "v1".into(),
                    false,
                    "vsclass".into()
                ),
                (
                    "VolumeSnapshotContent".into(),
                    "Cluster".into(),
                    "v1".into(),
                    true,
                    "vsc".into()
                ),
                (
                    "VolumeSnapshot".into(),
                    "Namespaced".into(),
                    "v1".into(),
                    true,
                    "vs".into()
                ),
            ]
        );
    }
}
