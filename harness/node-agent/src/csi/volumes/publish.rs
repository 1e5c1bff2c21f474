//! Step 5 of a mount: publishing the volume for the pod (kubelet's SetUp) at
//! `/var/lib/kubelet/pods/<pod uid>/volumes/kubernetes.io~csi/<pv>/mount`, with
//! `vol_data.json` next to it (what unpublishing and reconstruction read), the staging
//! path when staged, the PV's attributes plus pod info (with `podInfoOnMount`) as volume
//! context, and the `nodePublishSecretRef` secrets; then the pod's `fsGroup` ([`fs_group`]).
//! Block volumes are published by [`block`](super::block) with the same input.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use csi_proto::v1::{NodePublishVolumeRequest, VolumeCapability};
use k8s_openapi::api::core::v1::Pod;

use super::fs_group::{self, FsGroupPolicy};
use super::host::VolumeHost;
use super::paths::publish_path;
use super::resolve::ResolvedVolume;
use super::secrets;
use super::vol_data::{VOL_DATA_FILE, VolData};
use crate::csi::RegisteredDriver;
use crate::csi::drivers::node_call;
use crate::csi::error::{Error, Result};

/// Everything NodePublishVolume needs besides the volume.
#[derive(Debug)]
pub(super) struct PublishInput<'a> {
    /// The pod.
    pub pod: &'a Pod,
    /// The driver.
    pub driver: &'a RegisteredDriver,
    /// kubelet's staging path, when the volume is staged.
    pub staging: Option<&'a Path>,
    /// The VolumeAttachment's metadata (empty without attachment).
    pub publish_context: HashMap<String, String>,
    /// The capability (also sent at staging).
    pub capability: VolumeCapability,
    /// The VolumeAttachment's name, when the driver requires attachment.
    pub attachment: Option<String>,
    /// Whether the CSIDriver asks for pod info in the volume context.
    pub pod_info_on_mount: bool,
    /// The CSIDriver's `fsGroupPolicy`.
    pub fs_group_policy: FsGroupPolicy,
}

impl PublishInput<'_> {
    /// The NodePublishVolume request of `resolved` at kubelet's `target`.
    pub fn request(
        &self,
        resolved: &ResolvedVolume,
        target: &Path,
        secrets: HashMap<String, String>,
        volume_context: HashMap<String, String>,
    ) -> NodePublishVolumeRequest {
        NodePublishVolumeRequest {
            volume_id: resolved.csi.volume_handle.clone(),
            publish_context: self.publish_context.clone(),
            staging_target_path: self
                .staging
                .map(|s| s.display().to_string())
                .unwrap_or_default(),
            target_path: target.display().to_string(),
            volume_capability: Some(self.capability.clone()),
            readonly: resolved.read_only,
            secrets,
            volume_context,
        }
    }
}

/// Where a volume is published for a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Published {
    /// kubelet's publish path (what the driver was told; recorded in the state).
    pub target: PathBuf,
    /// What the pod's containers get on this machine: the publish directory, or a block
    /// volume's link to its publish path.
    pub path: PathBuf,
}

/// NodePublishVolume of `resolved` for the pod on `host`, after its `vol_data.json`, then
/// the pod's `fsGroup`. Failures are kubelet's `MountVolume.SetUp failed …`. The caller
/// holds the volume's lock and records it published when this succeeds.
pub(super) async fn publish(
    host: &VolumeHost,
    resolved: &ResolvedVolume,
    input: PublishInput<'_>,
) -> Result<Published> {
    let csi = &resolved.csi;
    let pod = input.pod;
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let setup_failed = |cause: Error| Error::SetUp {
        volume: resolved.pv_name.clone(),
        cause: Box::new(cause),
    };
    let target = publish_path(&uid, &resolved.pv_name);
    let host_target = host.path(&target);
    let data = VolData {
        driver_name: csi.driver.clone(),
        volume_handle: csi.volume_handle.clone(),
        spec_vol_id: resolved.pv_name.clone(),
        node_name: host.node_name.clone(),
        attachment_id: input.attachment.clone().unwrap_or_default(),
        volume_lifecycle_mode: "Persistent".into(),
    };
    if let Some(pv_dir) = host_target.parent() {
        data.write(&pv_dir.join(VOL_DATA_FILE))
            .map_err(setup_failed)?;
    }
    let secrets = secrets::node_publish(&host.client, csi)
        .await
        .map_err(setup_failed)?;
    let mut volume_context = resolved.volume_attributes();
    if input.pod_info_on_mount {
        volume_context.extend(pod_info(pod));
    }
    let request = input.request(resolved, &target, secrets, volume_context);
    node_call(input.driver.node_client().node_publish_volume(request))
        .await
        .map_err(setup_failed)?;
    // Before the volume counts as published: a failure is retried, publish included.
    fs_group::apply(pod, resolved, input.fs_group_policy, &host_target).map_err(setup_failed)?;
    tracing::info!(volume = %resolved.identity().unique_name(), pod = %uid, target = %host_target.display(), "volume published");
    Ok(Published {
        target,
        path: host_target,
    })
}

/// The `csi.storage.k8s.io/*` pod attributes kubelet adds with `podInfoOnMount`.
fn pod_info(pod: &Pod) -> impl Iterator<Item = (String, String)> {
    let account = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .unwrap_or_else(|| "default".into());
    [
        ("pod.name", pod.metadata.name.clone().unwrap_or_default()),
        (
            "pod.namespace",
            pod.metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
        ),
        ("pod.uid", pod.metadata.uid.clone().unwrap_or_default()),
        ("serviceAccount.name", account),
        ("ephemeral", "false".into()),
    ]
    .into_iter()
    .map(|(key, value)| (format!("csi.storage.k8s.io/{key}"), value))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    #[test]
    fn pod_info_names_the_pod_and_its_service_account() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("web".into()),
                uid: Some("u-1".into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                service_account_name: Some("sa".into()),
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        let info: HashMap<String, String> = pod_info(&pod).collect();
        let expected: HashMap<String, String> = [
            ("csi.storage.k8s.io/pod.name", "web"),
            ("csi.storage.k8s.io/pod.namespace", "default"),
            ("csi.storage.k8s.io/pod.uid", "u-1"),
            ("csi.storage.k8s.io/serviceAccount.name", "sa"),
            ("csi.storage.k8s.io/ephemeral", "false"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(info, expected);
    }
}
