//! The Cinder operator's releases and the upgrade N-1 → N as a user does it: the operator
//! installed as release N-1 ([`CinderOperatorOptions::PREVIOUS_RELEASE`]), then its
//! manifests (`rbac.yaml`, `operator.yaml`) applied again with the same values and the
//! current release ([`CinderCsiEnvironment::upgrade_operator`]): a rollout of the
//! operator's Deployment, after which the new operator reports its version.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DynamicObject};
use kube_support::wait;

use super::super::environment::{cluster_csi_driver_resource, operand_versions};
use super::super::error::{Error, Result};
use super::super::manifests::Applier;
use super::operator::{
    CINDER_CLUSTER_OPERATOR, CINDER_OPERATOR_DEPLOYMENT, CinderOperatorOptions,
    CinderOperatorRelease, condition_of, operator_fixtures_dir,
};
use super::{CINDER_DRIVER_NAME, CinderCsiEnvironment, CinderInstall};

impl CinderCsiEnvironment {
    /// Upgrades (or downgrades) the installed operator to `release` as a user would: the
    /// operator manifests applied again with the same values and the new
    /// `${OPERATOR_RELEASE}`, then waits until the operator's Deployment has rolled out and
    /// the operator reports `release`'s version on the ClusterCSIDriver and the
    /// ClusterOperator, Available, not Progressing, not Degraded. The environment's install
    /// options keep the release it started with (teardown does not depend on it).
    pub async fn upgrade_operator(
        &self,
        release: CinderOperatorRelease,
        timeout: Duration,
    ) -> Result<DynamicObject> {
        let CinderInstall::Operator(installed) = &self.options.install else {
            return Err(Error::Unexpected(
                "the environment did not install the Cinder operator (CinderInstall::Operator)"
                    .into(),
            ));
        };
        let operator = CinderOperatorOptions {
            release,
            ..installed.clone()
        };
        let vars = self.operator_vars(&operator)?;
        // The environment's field manager; its applier already remembers these objects for
        // teardown.
        let mut applier = Applier::new(self.client());
        let dir = operator_fixtures_dir();
        for file in ["rbac.yaml", "operator.yaml"] {
            applier.apply_file(&dir.join(file), &vars).await?;
        }
        tracing::info!(
            release = release.as_str(),
            "Cinder operator manifests applied: rolling out"
        );
        self.wait_operator_rollout(timeout).await?;
        self.wait_operator_version(&release.version()?, timeout)
            .await
    }

    /// Waits until the operator's Deployment has rolled out: its generation observed, every
    /// replica updated and available, no old one left.
    async fn wait_operator_rollout(&self, timeout: Duration) -> Result<()> {
        let api: Api<Deployment> = Api::namespaced(self.client(), &self.options.namespace);
        let found = wait::wait_until(
            format!("Deployment {CINDER_OPERATOR_DEPLOYMENT} rolled out"),
            timeout,
            || {
                let api = api.clone();
                async move {
                    let deployment = api
                        .get(CINDER_OPERATOR_DEPLOYMENT)
                        .await
                        .map_err(|e| e.to_string())?;
                    let wanted = deployment
                        .spec
                        .as_ref()
                        .and_then(|s| s.replicas)
                        .unwrap_or(1);
                    let observed = deployment.metadata.generation.unwrap_or(0);
                    let status = deployment.status.unwrap_or_default();
                    let seen = status.observed_generation.unwrap_or(0) >= observed;
                    let updated = status.updated_replicas.unwrap_or(0);
                    let available = status.available_replicas.unwrap_or(0);
                    let total = status.replicas.unwrap_or(0);
                    if seen && updated == wanted && available == wanted && total == wanted {
                        Ok(Some(()))
                    } else {
                        Err(format!(
                            "generation observed: {seen}; replicas {total}, updated {updated}, \
                             available {available} of {wanted}"
                        ))
                    }
                }
            },
        )
        .await;
        match found {
            Ok(()) => Ok(()),
            Err(e) => Err(Error::Diagnosed {
                what: format!("waiting for Deployment {CINDER_OPERATOR_DEPLOYMENT} to roll out"),
                cause: e.to_string(),
                diagnostics: self.diagnostics().await,
            }),
        }
    }

    /// Waits until the ClusterCSIDriver's `status.version` and every version of the
    /// ClusterOperator are `version`, the ClusterOperator Available, not Progressing, not
    /// Degraded; returns the ClusterOperator.
    pub async fn wait_operator_version(
        &self,
        version: &str,
        timeout: Duration,
    ) -> Result<DynamicObject> {
        let drivers: Api<DynamicObject> =
            Api::all_with(self.client(), &cluster_csi_driver_resource());
        let found = wait::wait_until(
            format!("ClusterCSIDriver {CINDER_DRIVER_NAME} at version {version}"),
            timeout,
            || {
                let drivers = drivers.clone();
                async move {
                    let driver = drivers
                        .get(CINDER_DRIVER_NAME)
                        .await
                        .map_err(|e| e.to_string())?;
                    let found = driver
                        .data
                        .pointer("/status/version")
                        .and_then(|v| v.as_str())
                        .unwrap_or("")
                        .to_string();
                    if found == version {
                        Ok(Some(()))
                    } else {
                        Err(format!("status.version {found:?}"))
                    }
                }
            },
        )
        .await;
        if let Err(e) = found {
            return Err(Error::Diagnosed {
                what: format!("waiting for ClusterCSIDriver {CINDER_DRIVER_NAME} at {version}"),
                cause: e.to_string(),
                diagnostics: self.diagnostics().await,
            });
        }
        self.wait_cluster_operator(
            &format!("every version {version}, Available, not Progressing, not Degraded"),
            timeout,
            |object| {
                let versions = operand_versions(object);
                let is = |type_: &str, status: &str| condition_of(object, type_).0 == status;
                !versions.is_empty()
                    && versions.iter().all(|(_, v)| v == version)
                    && is("Available", "True")
                    && is("Progressing", "False")
                    && is("Degraded", "False")
            },
        )
        .await
        .map_err(|e| match e {
            Error::Diagnosed {
                what,
                cause,
                diagnostics,
            } => Error::Diagnosed {
                what: format!("{what} (ClusterOperator {CINDER_CLUSTER_OPERATOR})"),
                cause,
                diagnostics,
            },
            other => other,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::super::operator::package_version;
    use super::*;

    #[test]
    fn the_version_is_the_packages_and_n_minus_1_has_the_suffix() {
        let manifest =
            "[package]\nname = \"x\"\nversion = \"1.2.3\"\n[dependencies]\nversion = \"9\"\n";
        assert_eq!(package_version(manifest).as_deref(), Some("1.2.3"));
        assert_eq!(package_version("[dependencies]\nversion = \"9\"\n"), None);
        let current = CinderOperatorRelease::Current.version().unwrap();
        assert_eq!(
            CinderOperatorRelease::Previous.version().unwrap(),
            format!("{current}-previous")
        );
        assert_eq!(CinderOperatorRelease::Previous.as_str(), "previous");
    }
}
