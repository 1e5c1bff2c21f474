//! Installing CustomResourceDefinitions and waiting until the apiserver serves them: the
//! one install-and-wait of the workspace, for the CRDs a crate compiles in (the snapshot
//! API's, the operator's) and for CRDs applied from files (the suites').
//!
//! A CRD is usable once its `Established` condition is true; until then creating its
//! objects fails. [`install`] applies (server-side, forced: the manifests are the source of
//! truth) and then waits with [`wait_established`], whose timeout error says what the CRD
//! last looked like.

use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::conditions;

use crate::wait::{WaitError, wait_for_described};

/// Installing CRDs failed.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// A manifest does not parse.
    #[error("CRD manifest {file} does not parse")]
    Manifest {
        /// The manifest's file name.
        file: &'static str,
        /// The parse error.
        #[source]
        source: serde_yaml::Error,
    },
    /// The API refused the CRD.
    #[error("applying CRD {name}")]
    Apply {
        /// The CRD.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// A CRD was not Established in time (or its watch failed for good).
    #[error(transparent)]
    NotEstablished(#[from] WaitError),
}

/// The CRDs of `manifests` ((file name, YAML) pairs, e.g. `include_str!`ed), parsed.
pub fn parse_all(
    manifests: &[(&'static str, &'static str)],
) -> Result<Vec<CustomResourceDefinition>, CrdError> {
    manifests
        .iter()
        .map(|&(file, yaml)| {
            serde_yaml::from_str(yaml).map_err(|source| CrdError::Manifest { file, source })
        })
        .collect()
}

/// Applies `crds` (server-side apply with force, field manager `field_manager`), then waits
/// until each is Established, for at most `timeout` in all.
pub async fn install(
    client: &Client,
    field_manager: &str,
    crds: &[CustomResourceDefinition],
    timeout: Duration,
) -> Result<(), CrdError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(field_manager).force();
    let mut names = Vec::new();
    for crd in crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &params, &Patch::Apply(crd))
            .await
            .map_err(|source| CrdError::Apply {
                name: name.clone(),
                source,
            })?;
        names.push(name);
    }
    Ok(wait_established(client, &names, timeout).await?)
}

/// Waits until every CRD of `names` is Established, for at most `timeout` in all.
pub async fn wait_established(
    client: &Client,
    names: &[String],
    timeout: Duration,
) -> Result<(), WaitError> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let deadline = Instant::now() + timeout;
    for name in names {
        let left = deadline.saturating_duration_since(Instant::now());
        wait_for_described(
            &api,
            name,
            &format!("CRD {name} to be Established"),
            conditions::is_crd_established(),
            left,
        )
        .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const CRD: &str = "
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true}]
";

    #[test]
    fn manifests_parse_in_order_and_a_bad_one_is_named() {
        let crds = parse_all(&[("widgets.yaml", CRD)]).unwrap();
        assert_eq!(
            crds[0].metadata.name.as_deref(),
            Some("widgets.example.com")
        );
        let error = parse_all(&[("widgets.yaml", CRD), ("broken.yaml", "spec: [")]).unwrap_err();
        assert_eq!(error.to_string(), "CRD manifest broken.yaml does not parse");
    }
}
