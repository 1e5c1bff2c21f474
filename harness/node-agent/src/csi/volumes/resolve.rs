//! Step 1 of a mount: a pod's `persistentVolumeClaim` volume to its CSI PV ([`resolve`]).
//! The claim must exist and be Bound, the PV must exist, be bound to that claim (same UID)
//! and have `spec.csi`. Inline `csi` volumes are refused. Then kubelet's check of the pod's
//! use of the claim against the PV's `volumeMode` ([`check_volume_mode`]).

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, PersistentVolume, PersistentVolumeClaim, PersistentVolumeSpec, Pod,
    Volume,
};
use kube::Client;
use kube::api::Api;

use super::state::VolumeIdentity;
use crate::csi::error::{Error, Result};

/// A pod volume resolved to its CSI PV.
#[derive(Debug, Clone)]
pub(super) struct ResolvedVolume {
    /// The pod's volume name.
    pub volume_name: String,
    /// The PV name.
    pub pv_name: String,
    /// The PV's spec.
    pub spec: PersistentVolumeSpec,
    /// The PV's CSI source.
    pub csi: CSIPersistentVolumeSource,
    /// Whether the pod's claim or the PV asks for a read-only mount.
    pub read_only: bool,
}

impl ResolvedVolume {
    /// Which volume.
    pub fn identity(&self) -> VolumeIdentity {
        VolumeIdentity {
            driver: self.csi.driver.clone(),
            handle: self.csi.volume_handle.clone(),
            pv: self.pv_name.clone(),
            block: self.is_block(),
        }
    }

    /// Whether the PV is a block volume (`volumeMode: Block`).
    pub fn is_block(&self) -> bool {
        self.spec.volume_mode.as_deref() == Some("Block")
    }

    /// The PV's `volumeAttributes`: the volume context of NodeStageVolume and
    /// NodePublishVolume.
    pub fn volume_attributes(&self) -> HashMap<String, String> {
        self.csi
            .volume_attributes
            .clone()
            .unwrap_or_default()
            .into_iter()
            .collect()
    }
}

/// Resolves `volume` of `pod` (a `persistentVolumeClaim` volume) to its PV, read with
/// `client`, with kubelet's messages when it cannot. Reads only.
pub(super) async fn resolve(client: &Client, pod: &Pod, volume: &Volume) -> Result<ResolvedVolume> {
    if volume.csi.is_some() {
        return Err(Error::SetUp {
            volume: volume.name.clone(),
            cause: Box::new(Error::InlineVolume),
        });
    }
    let Some(claim) = &volume.persistent_volume_claim else {
        return Err(Error::NotAClaim {
            volume: volume.name.clone(),
        });
    };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let claim_name = &claim.claim_name;
    let process_claim = |cause: Error| Error::ProcessClaim {
        volume: volume.name.clone(),
        claim: format!("{namespace}/{claim_name}"),
        cause: Box::new(cause),
    };
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    let pvc = claims
        .get_opt(claim_name)
        .await
        .map_err(Error::api("failed to fetch PVC from API server"))
        .and_then(|pvc| {
            pvc.ok_or_else(|| Error::ClaimNotFound {
                claim: claim_name.clone(),
            })
        })
        .map_err(process_claim)?;
    let phase = pvc.status.as_ref().and_then(|s| s.phase.as_deref());
    let pv_name = pvc
        .spec
        .as_ref()
        .and_then(|s| s.volume_name.clone())
        .unwrap_or_default();
    if phase != Some("Bound") || pv_name.is_empty() {
        return Err(process_claim(Error::ClaimNotBound));
    }
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pv = pvs
        .get_opt(&pv_name)
        .await
        .map_err(Error::api(format!(
            "failed to fetch PV {pv_name:?} from API server"
        )))
        .and_then(|pv| {
            pv.ok_or_else(|| Error::PvNotFound {
                pv: pv_name.clone(),
            })
        })
        .map_err(process_claim)?;
    let spec = pv.spec.unwrap_or_default();
    let claim_ref_uid = spec.claim_ref.as_ref().and_then(|r| r.uid.clone());
    if claim_ref_uid.is_some() && claim_ref_uid != pvc.metadata.uid {
        return Err(process_claim(Error::ClaimRefMismatch { pv: pv_name }));
    }
    let Some(csi) = spec.csi.clone() else {
        return Err(Error::SetUp {
            volume: pv_name.clone(),
            cause: Box::new(Error::NotCsi {
                pv: pv_name,
                claim: format!("{namespace}/{claim_name}"),
            }),
        });
    };
    Ok(ResolvedVolume {
        volume_name: volume.name.clone(),
        read_only: claim.read_only == Some(true) || csi.read_only == Some(true),
        pv_name,
        spec,
        csi,
    })
}

/// kubelet's check of a pod's use of a claim against the PV's `volumeMode`: a block volume
/// can only be in `volumeDevices`, a filesystem one only in `volumeMounts`.
pub(super) fn check_volume_mode(pod: &Pod, resolved: &ResolvedVolume) -> Result<()> {
    let (mut mounted, mut mapped) = (false, false);
    for c in crate::pod_containers(pod) {
        let name = &resolved.volume_name;
        mounted |= c.volume_mounts.iter().flatten().any(|m| &m.name == name);
        mapped |= c.volume_devices.iter().flatten().any(|d| &d.name == name);
    }
    let mode = resolved
        .spec
        .volume_mode
        .clone()
        .unwrap_or_else(|| "Filesystem".into());
    let field = match (resolved.is_block(), mounted, mapped) {
        (true, true, _) => "volumeMounts",
        (false, _, true) => "volumeDevices",
        _ => return Ok(()),
    };
    Err(Error::VolumeModeMismatch {
        volume: resolved.volume_name.clone(),
        mode,
        field,
    })
}
