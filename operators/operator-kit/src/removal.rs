//! `managementState: Removed` made safe: the driver is not removed while any
//! PersistentVolume of it exists (pods must still be able to unmount them), and the
//! `<Prefix>DriverRemovalController` conditions say how many and what to do. Which objects go
//! once none is left is each operator's (its rendered objects, never StorageClasses,
//! VolumeSnapshotClasses or volumes).

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::Client;
use kube::api::{Api, ListParams};

use crate::identity::OperatorIdentity;
use crate::status::Health;

/// The part of the removal's conditions: `<condition_prefix>DriverRemovalController…`.
pub const PART: &str = "DriverRemovalController";

/// The reason of `<Prefix>DriverRemovalControllerDegraded` while a removal is refused.
pub const REMOVAL_REFUSED: &str = "RemovalRefused";

/// How many of `volumes` `identity`'s driver provides (`spec.csi.driver`).
pub fn driver_volumes(identity: &OperatorIdentity, volumes: &[PersistentVolume]) -> usize {
    volumes
        .iter()
        .filter(|pv| {
            pv.spec
                .as_ref()
                .and_then(|s| s.csi.as_ref())
                .is_some_and(|csi| csi.driver == identity.driver_name)
        })
        .count()
}

/// Lists every PersistentVolume and counts those of `identity`'s driver.
pub async fn count_driver_volumes(
    client: &Client,
    identity: &OperatorIdentity,
) -> Result<usize, kube::Error> {
    let list = Api::<PersistentVolume>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    Ok(driver_volumes(identity, &list.items))
}

/// The health of a removal that is not (yet) done, when `count` PersistentVolumes of the
/// driver exist; `None` when the driver may go. Degraded but still Available: the driver
/// stays installed and keeps working.
pub fn refusal(identity: &OperatorIdentity, count: usize) -> Option<Health> {
    if count == 0 {
        return None;
    }
    let message = format!(
        "managementState Removed refused: {count} PersistentVolume(s) of {} \
         still exist, and pods must be able to unmount them; the driver stays installed and \
         managed. Delete the claims (and any released PersistentVolumes) of the driver to \
         remove it, or set managementState back to Managed",
        identity.driver_name
    );
    Some(Health {
        available: true,
        progressing: false,
        degraded: Some(message.clone()),
        reason: REMOVAL_REFUSED.into(),
        message,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolumeSpec};

    use super::*;
    use crate::identity::TEST_IDENTITY;
    use crate::status::Status;

    fn volume(driver: Option<&str>) -> PersistentVolume {
        PersistentVolume {
            spec: Some(PersistentVolumeSpec {
                csi: driver.map(|d| CSIPersistentVolumeSource {
                    driver: d.into(),
                    volume_handle: "vol-1".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn only_the_drivers_volumes_count() {
        let volumes = [
            volume(Some(TEST_IDENTITY.driver_name)),
            volume(Some("manila.csi.openstack.org")),
            volume(None),
            volume(Some(TEST_IDENTITY.driver_name)),
        ];
        assert_eq!(driver_volumes(&TEST_IDENTITY, &volumes), 2);
        assert_eq!(driver_volumes(&TEST_IDENTITY, &[]), 0);
    }

    #[test]
    fn removal_is_refused_while_volumes_exist_naming_the_count_and_driver() {
        assert_eq!(refusal(&TEST_IDENTITY, 0), None);
        let refused = refusal(&TEST_IDENTITY, 3).unwrap();
        assert!(refused.available, "the driver keeps working");
        assert_eq!(refused.reason, REMOVAL_REFUSED);
        let message = refused.degraded.clone().unwrap();
        assert!(
            message.contains("3 PersistentVolume(s) of example.csi.test"),
            "{message}"
        );
        assert!(message.contains("Delete the claims"), "{message}");
        let [available, _, degraded] = refused.conditions(&TEST_IDENTITY.condition(PART));
        assert_eq!(degraded.type_, "ExampleDriverRemovalControllerDegraded");
        assert_eq!(degraded.status, Status::True);
        assert_eq!(degraded.reason, "RemovalRefused");
        assert_eq!(available.status, Status::True);
    }
}
