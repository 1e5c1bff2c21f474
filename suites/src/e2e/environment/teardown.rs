//! The explicit end of an environment: what the workloads left is deleted, nothing may be left
//! in the cluster or the fake cloud, and the cluster stops gracefully.

use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube_support::wait;

use super::super::error::{Error, Result};
use super::super::snapshots;
use super::{Install, ManilaCsiEnvironment};

impl ManilaCsiEnvironment {
    /// Deletes what the workloads left (VolumeSnapshots, pods using claims, claims), waits
    /// until no PV and no VolumeSnapshotContent is left, checks the fake cloud has no share
    /// or snapshot left, deletes what it applied and stops the cluster. Every step runs; the
    /// first failure is returned.
    pub async fn teardown(mut self) -> Result<()> {
        let mut first_error: Option<Error> = None;
        if let Err(e) = self.drain_volumes().await {
            first_error.get_or_insert(e);
        }
        if let Err(e) = self.check_leftovers() {
            first_error.get_or_insert(e);
        }
        if first_error.is_none() {
            let timeout = self.options.teardown_timeout;
            if let Err(e) = self.applier.delete_all(timeout).await {
                first_error.get_or_insert(e);
            }
            if matches!(self.options.install, Install::Operator(_))
                && let Err(e) = self.remove_operator_leftovers(timeout).await
            {
                first_error.get_or_insert(e);
            }
            let namespaces: Api<Namespace> = Api::all(self.client());
            let mut names = vec![self.options.namespace.clone()];
            names.extend(self.instances.iter().map(|i| i.namespace.clone()));
            for name in &names {
                if let Err(e) =
                    ignore_not_found(namespaces.delete(name, &DeleteParams::default()).await)
                {
                    first_error.get_or_insert(Error::Kube {
                        action: format!("deleting namespace {name}"),
                        source: e,
                    });
                }
            }
            for name in &names {
                if let Err(e) = wait::wait_deleted(&namespaces, name, timeout).await {
                    first_error.get_or_insert(e.into());
                }
            }
        } else {
            let diagnostics = self.diagnostics().await;
            tracing::error!("teardown found leftovers; the driver's pods:\n{diagnostics}");
        }
        if let Err(e) = self.stop().await {
            first_error.get_or_insert(e);
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Stops the cluster gracefully and removes the run directory (unless kept).
    pub(super) async fn stop(&mut self) -> Result<()> {
        self.cluster_guard.stop().await
    }

    async fn drain_volumes(&self) -> Result<()> {
        drain_volumes(&self.client(), self.options.teardown_timeout).await
    }
    /// Fails unless the fake cloud is free of shares and snapshots (a cloud the environment
    /// did not start is the caller's to check).
    fn check_leftovers(&self) -> Result<()> {
        let Some(cloud) = self.cloud.fake() else {
            return Ok(());
        };
        let leftovers = cloud.leftovers();
        if leftovers.shares.is_empty() && leftovers.snapshots.is_empty() {
            return Ok(());
        }
        Err(Error::Leftovers(format!(
            "the fake cloud still has shares {:?} and snapshots {:?}",
            leftovers.shares, leftovers.snapshots
        )))
    }
}

/// Deletes the VolumeSnapshots, the pods using claims and the claims of the whole cluster,
/// and waits (at most `timeout`) until no PV and no VolumeSnapshotContent is left.
pub(crate) async fn drain_volumes(
    client: &kube::Client,
    timeout: std::time::Duration,
) -> Result<()> {
    let client = client.clone();
    let snapshots_api = snapshots::volume_snapshots_all(&client);
    for snapshot in snapshots_api
        .list(&ListParams::default())
        .await
        .map_err(Error::kube("listing VolumeSnapshots"))?
    {
        let ns = snapshot.metadata.namespace.clone().unwrap_or_default();
        let name = snapshot.metadata.name.clone().unwrap_or_default();
        let api = snapshots::volume_snapshots(&client, &ns);
        ignore_not_found(api.delete(&name, &DeleteParams::default()).await)
            .map_err(Error::kube(format!("deleting VolumeSnapshot {ns}/{name}")))?;
    }
    let claims: Api<PersistentVolumeClaim> = Api::all(client.clone());
    let claim_list = claims
        .list(&ListParams::default())
        .await
        .map_err(Error::kube("listing PVCs"))?;
    let pods: Api<Pod> = Api::all(client.clone());
    for pod in pods
        .list(&ListParams::default())
        .await
        .map_err(Error::kube("listing pods"))?
    {
        let uses_claim = pod
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_ref())
            .is_some_and(|v| v.iter().any(|v| v.persistent_volume_claim.is_some()));
        if uses_claim {
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
            ignore_not_found(api.delete(&name, &DeleteParams::default()).await)
                .map_err(Error::kube(format!("deleting pod {ns}/{name}")))?;
        }
    }
    for claim in claim_list {
        let ns = claim.metadata.namespace.clone().unwrap_or_default();
        let name = claim.metadata.name.clone().unwrap_or_default();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &ns);
        ignore_not_found(api.delete(&name, &DeleteParams::default()).await)
            .map_err(Error::kube(format!("deleting PVC {ns}/{name}")))?;
    }
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let contents = snapshots::volume_snapshot_contents(&client);
    wait::wait_until(
        "no PersistentVolume and no VolumeSnapshotContent left",
        timeout,
        || {
            let volumes = volumes.clone();
            let contents = contents.clone();
            async move {
                let pvs = volumes
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
                let vscs = contents
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
                if pvs.items.is_empty() && vscs.items.is_empty() {
                    return Ok(Some(()));
                }
                let mut left: Vec<String> = pvs
                    .items
                    .iter()
                    .map(|pv| format!("PV {}", wait::summarize(pv)))
                    .collect();
                left.extend(vscs.items.iter().map(|c: &DynamicObject| {
                    format!(
                        "VolumeSnapshotContent {}: {}",
                        c.metadata.name.as_deref().unwrap_or("?"),
                        c.data
                            .get("status")
                            .map(|s| s.to_string())
                            .unwrap_or_default()
                    )
                }));
                Err(left.join("; "))
            }
        },
    )
    .await?;
    Ok(())
}

pub(crate) fn ignore_not_found<T>(result: kube::Result<T>) -> kube::Result<()> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
