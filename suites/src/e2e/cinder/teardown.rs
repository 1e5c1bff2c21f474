//! The explicit end of a [`CinderCsiEnvironment`]: what the workloads left is deleted, and
//! nothing may be left in the cluster (PVs, VolumeSnapshotContents, VolumeAttachments), in
//! the fake cloud (volumes, snapshots, attachments) or on the host (loop devices).

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, DeleteParams, ListParams};
use kube_support::wait;

use super::super::environment::teardown::{drain_volumes, ignore_not_found};
use super::super::error::{Error, Result};
use super::CinderCsiEnvironment;

impl CinderCsiEnvironment {
    /// Deletes what the workloads left, waits until no PV, VolumeSnapshotContent and
    /// VolumeAttachment is left, checks the fake cloud holds no volume, snapshot, attachment
    /// or loop device, deletes what it applied (and, installed by the operator, what the
    /// operator made that outlives it: its StorageClass, the ClusterOperator) and stops the
    /// cluster. Every step runs; the
    /// first failure is returned.
    pub async fn teardown(mut self) -> Result<()> {
        let mut first_error: Option<Error> = None;
        let timeout = self.options.teardown_timeout;
        if let Err(e) = drain_volumes(&self.client(), timeout).await {
            first_error.get_or_insert(e);
        }
        if let Err(e) = self.wait_no_attachments().await {
            first_error.get_or_insert(e);
        }
        if let Err(e) = self.check_leftovers() {
            first_error.get_or_insert(e);
        }
        if first_error.is_none() {
            if let Err(e) = self.applier.delete_all(timeout).await {
                first_error.get_or_insert(e);
            }
            if self.installed_by_operator()
                && let Err(e) = self.remove_operator_leftovers(timeout).await
            {
                first_error.get_or_insert(e);
            }
            let namespaces: Api<Namespace> = Api::all(self.client());
            let name = self.options.namespace.clone();
            if let Err(e) =
                ignore_not_found(namespaces.delete(&name, &DeleteParams::default()).await)
            {
                first_error.get_or_insert(Error::Kube {
                    action: format!("deleting namespace {name}"),
                    source: e,
                });
            } else if let Err(e) = wait::wait_deleted(&namespaces, &name, timeout).await {
                first_error.get_or_insert(e.into());
            }
        } else {
            let diagnostics = self.diagnostics().await;
            tracing::error!("teardown found leftovers; the driver's pods:\n{diagnostics}");
        }
        if let Err(e) = self.cluster_guard.stop().await {
            first_error.get_or_insert(e);
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Waits until the attach/detach controller and csi-attacher have removed every
    /// VolumeAttachment (each detach is a Nova detach in the fake cloud).
    async fn wait_no_attachments(&self) -> Result<()> {
        let attachments: Api<VolumeAttachment> = Api::all(self.client());
        wait::wait_until(
            "no VolumeAttachment left",
            self.options.teardown_timeout,
            || {
                let attachments = attachments.clone();
                async move {
                    let list = attachments
                        .list(&ListParams::default())
                        .await
                        .map_err(|e| e.to_string())?;
                    if list.items.is_empty() {
                        return Ok(Some(()));
                    }
                    Err(list
                        .items
                        .iter()
                        .map(wait::summarize)
                        .collect::<Vec<_>>()
                        .join("; "))
                }
            },
        )
        .await?;
        Ok(())
    }

    /// Fails unless the fake cloud is free of volumes, snapshots, attachments and loop
    /// devices.
    fn check_leftovers(&self) -> Result<()> {
        let leftovers = self.cloud.block_leftovers();
        if leftovers.is_empty() {
            return Ok(());
        }
        Err(Error::Leftovers(format!(
            "the fake cloud still has volumes {:?}, snapshots {:?}, attachments {:?} and loop devices {:?}",
            leftovers.volumes,
            leftovers.volume_snapshots,
            leftovers.attachments,
            leftovers.loop_devices
        )))
    }
}
