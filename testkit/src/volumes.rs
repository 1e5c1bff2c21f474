//! PersistentVolumes of claims: the one a claim is bound to, and volumes made outside
//! Kubernetes and brought in by hand (a CSI PV pre-bound to a claim, which the control
//! plane's PV controller binds).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PersistentVolumeSpec, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};

use crate::objects::bound;

/// Waits until the claim `namespace/claim` is Bound and returns the PV it is bound to.
pub async fn bound_volume(
    client: &Client,
    namespace: &str,
    claim: &str,
    timeout: Duration,
) -> PersistentVolume {
    let pv = bound(client, namespace, claim, timeout)
        .await
        .spec
        .and_then(|s| s.volume_name)
        .unwrap_or_else(|| panic!("the Bound claim {namespace}/{claim} names no volume"));
    Api::<PersistentVolume>::all(client.clone())
        .get(&pv)
        .await
        .unwrap_or_else(|e| panic!("reading PV {pv}: {e}"))
}

/// A static CSI volume: the PV `pv` reserved for the claim `namespace/claim` and that claim,
/// both of `size`, `access_mode` and StorageClass `class`. Adjust the fields (e.g. the
/// `csi` source's attributes and secrets) before [`StaticVolume::create_bound`].
#[derive(Debug, Clone)]
pub struct StaticVolume {
    /// The PV's name.
    pub pv: String,
    /// The claim's namespace.
    pub namespace: String,
    /// The claim's name.
    pub claim: String,
    /// The StorageClass of both (`""`: none).
    pub class: String,
    /// The one access mode of both, e.g. `ReadWriteMany`.
    pub access_mode: String,
    /// The capacity of the PV and the request of the claim, e.g. `1Gi`.
    pub size: String,
    /// The PV's CSI source.
    pub csi: CSIPersistentVolumeSource,
}

impl StaticVolume {
    /// The volume `handle` of `driver` as the PV `pv` for the claim `namespace/claim`: 1Gi,
    /// ReadWriteMany, no StorageClass.
    pub fn new(pv: &str, namespace: &str, claim: &str, driver: &str, handle: &str) -> StaticVolume {
        StaticVolume {
            pv: pv.into(),
            namespace: namespace.into(),
            claim: claim.into(),
            class: String::new(),
            access_mode: "ReadWriteMany".into(),
            size: "1Gi".into(),
            csi: CSIPersistentVolumeSource {
                driver: driver.into(),
                volume_handle: handle.into(),
                ..Default::default()
            },
        }
    }

    /// Creates the PV (reclaim policy Retain) and the claim naming it, waits until the PV
    /// controller has bound them, and returns the bound claim.
    pub async fn create_bound(&self, client: &Client, timeout: Duration) -> PersistentVolumeClaim {
        let size = BTreeMap::from([("storage".to_owned(), Quantity(self.size.clone()))]);
        let pv = PersistentVolume {
            metadata: ObjectMeta {
                name: Some(self.pv.clone()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeSpec {
                capacity: Some(size.clone()),
                access_modes: Some(vec![self.access_mode.clone()]),
                persistent_volume_reclaim_policy: Some("Retain".into()),
                storage_class_name: Some(self.class.clone()),
                claim_ref: Some(ObjectReference {
                    namespace: Some(self.namespace.clone()),
                    name: Some(self.claim.clone()),
                    ..Default::default()
                }),
                csi: Some(self.csi.clone()),
                ..Default::default()
            }),
            ..Default::default()
        };
        Api::<PersistentVolume>::all(client.clone())
            .create(&PostParams::default(), &pv)
            .await
            .unwrap_or_else(|e| panic!("creating PV {}: {e}", self.pv));
        let claim = PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(self.claim.clone()),
                namespace: Some(self.namespace.clone()),
                ..Default::default()
            },
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec![self.access_mode.clone()]),
                storage_class_name: Some(self.class.clone()),
                volume_name: Some(self.pv.clone()),
                resources: Some(VolumeResourceRequirements {
                    requests: Some(size),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        Api::<PersistentVolumeClaim>::namespaced(client.clone(), &self.namespace)
            .create(&PostParams::default(), &claim)
            .await
            .unwrap_or_else(|e| panic!("creating claim {}/{}: {e}", self.namespace, self.claim));
        bound(client, &self.namespace, &self.claim, timeout).await
    }
}
