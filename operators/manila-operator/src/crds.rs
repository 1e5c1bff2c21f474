//! The operator's CRDs, as shipped in `fixtures/crds/` (ClusterCSIDriver and
//! ClusterOperator), compiled in, and their installation.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};

/// The CRD manifests: (file name, YAML).
pub const MANIFESTS: [(&str, &str); 2] = [
    (
        "operator.openshift.io_clustercsidrivers.yaml",
        include_str!("../../../fixtures/crds/operator.openshift.io_clustercsidrivers.yaml"),
    ),
    (
        "config.openshift.io_clusteroperators.yaml",
        include_str!("../../../fixtures/crds/config.openshift.io_clusteroperators.yaml"),
    ),
];

/// Installing the CRDs failed.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// A manifest does not parse.
    #[error("CRD manifest {file}: {source}")]
    Manifest {
        /// The file.
        file: &'static str,
        /// The parse error.
        #[source]
        source: serde_yaml::Error,
    },
    /// The API refused.
    #[error("applying CRD {name}: {source}")]
    Apply {
        /// The CRD.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// It was not Established in time.
    #[error("CRD {name} not Established within {timeout:?}")]
    NotEstablished {
        /// The CRD.
        name: String,
        /// How long it was given.
        timeout: Duration,
    },
}

/// The two CRDs, parsed.
pub fn definitions() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    MANIFESTS
        .iter()
        .map(|(file, yaml)| {
            serde_yaml::from_str(yaml).map_err(|source| CrdError::Manifest { file, source })
        })
        .collect()
}

/// Applies the CRDs (server-side apply, field manager `field_manager`) and waits until each
/// is Established.
pub async fn install(client: &Client, field_manager: &str) -> Result<(), CrdError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let timeout = Duration::from_secs(30);
    for crd in definitions()? {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(
            &name,
            &PatchParams::apply(field_manager).force(),
            &Patch::Apply(&crd),
        )
        .await
        .map_err(|source| CrdError::Apply {
            name: name.clone(),
            source,
        })?;
        let established = await_condition(api.clone(), &name, conditions::is_crd_established());
        match tokio::time::timeout(timeout, established).await {
            Ok(Ok(_)) => {}
            _ => return Err(CrdError::NotEstablished { name, timeout }),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use kube::Resource;

    use super::*;
    use crate::api::{ClusterCSIDriver, ClusterOperator};

    fn check<K: Resource<DynamicType = ()>>(crd: &CustomResourceDefinition) {
        assert_eq!(crd.spec.group, K::group(&()));
        assert_eq!(crd.spec.names.kind, K::kind(&()));
        assert_eq!(crd.spec.names.plural, K::plural(&()));
        assert_eq!(crd.spec.scope, "Cluster");
        assert!(
            crd.spec
                .versions
                .iter()
                .any(|v| v.name == K::version(&()) && v.storage)
        );
    }

    #[test]
    fn the_manifests_describe_the_rust_types() {
        let definitions = definitions().unwrap();
        check::<ClusterCSIDriver>(&definitions[0]);
        check::<ClusterOperator>(&definitions[1]);
    }
}
