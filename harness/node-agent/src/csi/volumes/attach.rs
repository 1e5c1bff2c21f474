//! Step 3 of a mount: the CSIDriver object's policy and, when it asks for attachment (or
//! is missing), waiting for the attach/detach controller: the volume must be listed in the
//! Node's `status.volumesAttached`, and its VolumeAttachment's `attachmentMetadata` is the
//! publish context. kubelet does not create VolumeAttachments itself: the
//! kube-controller-manager's attach/detach controller does, and an external-attacher
//! (`sidecars/csi-attacher`) calls ControllerPublishVolume and marks them attached.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::{CSIDriver, VolumeAttachment};
use kube::Client;
use kube::api::Api;

use super::fs_group::FsGroupPolicy;
use super::host::VolumeHost;
use super::resolve::ResolvedVolume;
use crate::csi::error::{Error, Result};

/// What the driver's CSIDriver object asks of kubelet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct DriverPolicy {
    /// `attachRequired` (true without a CSIDriver object).
    pub attach_required: bool,
    /// `podInfoOnMount` (false without a CSIDriver object).
    pub pod_info_on_mount: bool,
    /// `fsGroupPolicy` (`ReadWriteOnceWithFSType` without a CSIDriver object or the field).
    pub fs_group_policy: FsGroupPolicy,
}

/// The CSIDriver policy of `driver`, read with `client`.
pub(super) async fn driver_policy(client: &Client, driver: &str) -> Result<DriverPolicy> {
    let csi_drivers: Api<CSIDriver> = Api::all(client.clone());
    let spec = csi_drivers
        .get_opt(driver)
        .await
        .map_err(Error::api(format!(
            "kubernetes.io/csi: reading CSIDriver {driver:?}"
        )))?
        .map(|d| d.spec);
    Ok(DriverPolicy {
        attach_required: spec
            .as_ref()
            .and_then(|s| s.attach_required)
            .unwrap_or(true),
        pod_info_on_mount: spec
            .as_ref()
            .and_then(|s| s.pod_info_on_mount)
            .unwrap_or(false),
        fs_group_policy: FsGroupPolicy::parse(
            spec.as_ref().and_then(|s| s.fs_group_policy.as_deref()),
        ),
    })
}

/// The publish context of an attached volume on `host` (the VolumeAttachment
/// `attachment`'s metadata); [`Error::NotAttached`] while the Node does not list the volume
/// in `volumesAttached` or the VolumeAttachment is not attached. Reads only.
pub(super) async fn publish_context(
    host: &VolumeHost,
    resolved: &ResolvedVolume,
    attachment: &str,
) -> Result<HashMap<String, String>> {
    let pv = &resolved.pv_name;
    let unique = resolved.identity().unique_name();
    let wait_failed = |cause: Error| Error::WaitForAttach {
        volume: pv.clone(),
        cause: Box::new(cause),
    };
    let not_attached = || Error::NotAttached {
        volume: resolved.volume_name.clone(),
        unique: unique.clone(),
        pv: pv.clone(),
        node: host.node_name.clone(),
    };
    let nodes: Api<Node> = Api::all(host.client.clone());
    let node = nodes
        .get(&host.node_name)
        .await
        .map_err(Error::api(format!("reading Node {:?}", host.node_name)))
        .map_err(wait_failed)?;
    let attached = node
        .status
        .and_then(|s| s.volumes_attached)
        .unwrap_or_default()
        .iter()
        .any(|a| a.name == unique);
    if !attached {
        return Err(not_attached());
    }
    let attachments: Api<VolumeAttachment> = Api::all(host.client.clone());
    let va = attachments
        .get_opt(attachment)
        .await
        .map_err(Error::api(format!(
            "reading VolumeAttachment {attachment:?}"
        )))
        .map_err(wait_failed)?;
    match va.and_then(|va| va.status) {
        Some(status) if status.attached => Ok(status
            .attachment_metadata
            .unwrap_or_default()
            .into_iter()
            .collect()),
        _ => Err(not_attached()),
    }
}
