//! What the Cinder e2e scenarios check and wait for: block I/O on a device, file system and volume sizes, resized claims, attachments and the zones a PV requires.

use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, TypedLocalObjectReference,
};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube_support::wait;
use suites::e2e::cinder::{CINDER_TOPOLOGY_KEY, CinderCsiEnvironment};
use suites::e2e::workload::{Workload, claim};

/// Where the block tests write on the device.
pub const BLOCK_OFFSET: usize = 1 << 20;
/// A GiB in KiB.
pub const GIB_KIB: u64 = 1 << 20;

/// A script writing `text` at [`BLOCK_OFFSET`] of `device`, bypassing caches.
pub fn write_block(device: &str, text: &str) -> String {
    format!(
        "printf '{text}' | dd of={device} bs=512 seek={} conv=sync,fsync oflag=direct 2>/dev/null",
        BLOCK_OFFSET / 512
    )
}

/// A script printing `len` bytes at [`BLOCK_OFFSET`] of `device`, read past the caches.
pub fn read_block(device: &str, len: usize) -> String {
    format!(
        "dd if={device} bs=512 skip={} count=1 iflag=direct 2>/dev/null | head -c {len}",
        BLOCK_OFFSET / 512
    )
}

/// The size of the file system at `/data` in `pod`, in KiB.
pub async fn fs_size_kib(w: &Workload<'_>, pod: &str) -> u64 {
    let out = w
        .exec(pod, "df -k /data | awk 'NR == 2 {print $2}'")
        .await
        .unwrap();
    out.trim()
        .parse()
        .unwrap_or_else(|_| panic!("df said {out:?}"))
}

/// Asks for `size` on the claim `name`.
pub async fn resize_claim(w: &Workload<'_>, name: &str, size: &str) {
    let patch = serde_json::json!({"spec": {"resources": {"requests": {"storage": size}}}});
    w.claims
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Waits until the cloud's volume `id` is `gib` GiB.
pub async fn wait_volume_size(env: &CinderCsiEnvironment, id: &str, gib: u64) {
    wait::wait_until(
        format!("volume {id} to be {gib} GiB"),
        suites::e2e::workload::WAIT,
        || async move {
            match env.cloud().block_volume(id) {
                Some(v) if v.size == gib && (v.status == "available" || v.status == "in-use") => {
                    Ok(Some(()))
                }
                Some(v) => Err(format!("{} GiB, {}", v.size, v.status)),
                None => Err("gone".into()),
            }
        },
    )
    .await
    .unwrap();
}

/// Waits until the claim's status capacity is `size` (the node grew the file system).
pub async fn wait_claim_capacity(w: &Workload<'_>, name: &str, size: &str) {
    let claims = w.claims.clone();
    wait::wait_until(
        format!("claim {name}'s capacity to be {size}"),
        suites::e2e::workload::WAIT,
        || {
            let claims = claims.clone();
            async move {
                let claim = claims.get(name).await.map_err(|e| e.to_string())?;
                let capacity = suites::e2e::workload::claim_capacity(&claim);
                if capacity.as_deref() == Some(size) {
                    Ok(Some(()))
                } else {
                    Err(format!(
                        "capacity {capacity:?}, conditions {:?}",
                        claim.status.and_then(|s| s.conditions)
                    ))
                }
            }
        },
    )
    .await
    .unwrap();
}

/// Asserts that the cloud has `volume_id` attached to `node`'s server alone, and that its
/// device link is in that node's disk directory only.
pub fn assert_attached_only_to(env: &CinderCsiEnvironment, volume_id: &str, node: &str) {
    let volume = env.cloud().block_volume(volume_id).unwrap();
    assert_eq!(
        volume.attached_to,
        vec![env.server_of(node).unwrap().to_string()],
        "{volume:?}"
    );
    let link = format!("virtio-{}", &volume_id[..20]);
    for other in env.cluster().node_names() {
        let present = env.disk_dir(&other).join(&link).exists();
        assert_eq!(present, other == node, "{link} in {other}'s disk directory");
    }
}

/// The VolumeAttachment of the PV `pv`.
pub async fn attachment_of(env: &CinderCsiEnvironment, pv: &str) -> VolumeAttachment {
    let attachments: Api<VolumeAttachment> = Api::all(env.client());
    let list = attachments.list(&ListParams::default()).await.unwrap();
    let found: Vec<VolumeAttachment> = list
        .items
        .into_iter()
        .filter(|a| a.spec.source.persistent_volume_name.as_deref() == Some(pv))
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    let attachment = found.into_iter().next().unwrap();
    assert_eq!(
        attachment.status.as_ref().map(|s| s.attached),
        Some(true),
        "{attachment:?}"
    );
    attachment
}

/// The zones a PV's node affinity requires.
pub fn required_zones(pv: &PersistentVolume) -> Vec<String> {
    pv.spec
        .as_ref()
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
        .map(|r| {
            r.node_selector_terms
                .iter()
                .flat_map(|t| t.match_expressions.iter().flatten())
                .filter(|e| e.key == CINDER_TOPOLOGY_KEY)
                .flat_map(|e| e.values.iter().flatten().cloned())
                .collect()
        })
        .unwrap_or_default()
}

/// A claim cloned from the claim `source`.
pub fn clone_claim(name: &str, size: &str, source: &str) -> PersistentVolumeClaim {
    let mut clone = claim(name, None, size, "ReadWriteOnce");
    if let Some(spec) = clone.spec.as_mut() {
        spec.data_source = Some(TypedLocalObjectReference {
            api_group: None,
            kind: "PersistentVolumeClaim".into(),
            name: source.into(),
        });
    }
    clone
}
