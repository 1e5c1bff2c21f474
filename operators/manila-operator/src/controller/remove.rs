//! managementState Removed: refused while any PersistentVolume of the driver exists (the
//! driver stays installed and managed, so pods can still unmount; a Degraded condition says
//! how many and what to do). Otherwise the driver's objects and Secret are deleted (an Event
//! each); StorageClasses, the VolumeSnapshotClass and volumes stay.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, ListParams};
use operator_kit::api::ClusterCSIDriver;
use operator_kit::apply::Applier;
use operator_kit::prune::ObjectKey;
use operator_kit::status::Health;

use super::manage::{driver_secret, manage, names_only_inputs};
use super::report::Report;
use super::{Context, owner_reference};
use crate::assets;
use crate::error::{Result, kube as kube_error};
use crate::identity::{self, DRIVER_NAME, IDENTITY};

/// How soon a refused removal looks at the volumes again.
const RECHECK: Duration = Duration::from_secs(10);

/// The reason of `ManilaDriverRemovalControllerDegraded` while a removal is refused.
pub(crate) const REMOVAL_REFUSED: &str = "RemovalRefused";

/// managementState Removed: refused while volumes of the driver exist; otherwise the
/// driver's objects go and StorageClasses, the VolumeSnapshotClass and volumes stay.
pub(super) async fn remove(driver: &ClusterCSIDriver, ctx: &Context) -> Report {
    let refusal = match count_driver_volumes(ctx).await {
        Ok(count) => removal_check(count),
        Err(error) => {
            // Unknown is not none: keep the driver.
            let mut report = manage(driver, ctx).await;
            report.failed(identity::DRIVER_REMOVAL, "VolumesUnknown", error);
            return report;
        }
    };
    if let Some(refused) = refusal {
        tracing::warn!("{}", refused.message);
        let mut report = manage(driver, ctx).await;
        report.health(identity::DRIVER_REMOVAL, &refused);
        report.requeue = Some(RECHECK);
        return report;
    }
    let mut report = Report::default();
    report.health(
        identity::DRIVER_REMOVAL,
        &Health::ok(
            "Removed",
            format!("no PersistentVolume of {DRIVER_NAME} exists: the driver is removed"),
        ),
    );
    let Some(owner) = owner_reference(driver) else {
        return report;
    };
    let applier = Applier::new(ctx.client.clone(), IDENTITY.field_manager, owner);
    let mut objects = match assets::render(&names_only_inputs(&ctx.config)) {
        Ok(objects) => objects,
        Err(error) => {
            report.failed(identity::STATIC_RESOURCES, "RenderFailed", error.into());
            return report;
        }
    };
    match driver_secret(&ctx.config, &BTreeMap::new()) {
        Ok(secret) => objects.push(secret),
        Err(error) => report.error = Some(error),
    }
    // Workloads first, then what they use.
    objects.reverse();
    for object in &objects {
        match applier.delete(object).await {
            Ok(true) => {
                let key = ObjectKey::of(object);
                ctx.recorder
                    .deleted(driver, &key, " (managementState Removed)")
                    .await;
            }
            Ok(false) => {}
            Err(error) => {
                report.error.get_or_insert(error.into());
            }
        }
    }
    let removed = Health::ok(
        "Removed",
        "managementState is Removed: the driver is not installed",
    );
    for prefix in [
        identity::CONTROLLER_SERVICE,
        identity::NODE_SERVICE,
        identity::NFS_NODE_SERVICE,
        identity::STATIC_RESOURCES,
    ] {
        report.health(prefix, &removed);
    }
    report
}

/// The conditions of a removal that is not (yet) done, when `count` PersistentVolumes of the
/// driver exist; `None` when the driver may go. Degraded but still Available: the driver
/// keeps working.
pub(crate) fn removal_check(count: usize) -> Option<Health> {
    if count == 0 {
        return None;
    }
    let message = format!(
        "managementState Removed refused: {count} PersistentVolume(s) of {DRIVER_NAME} \
         still exist, and pods must be able to unmount them; the driver stays installed and \
         managed. Delete the claims (and any released PersistentVolumes) of the driver to \
         remove it, or set managementState back to Managed"
    );
    Some(Health {
        available: true,
        progressing: false,
        degraded: Some(message.clone()),
        reason: REMOVAL_REFUSED.into(),
        message,
    })
}

/// How many PersistentVolumes of `volumes` the driver provides (`spec.csi.driver`).
pub(crate) fn driver_volumes(volumes: &[PersistentVolume]) -> usize {
    volumes
        .iter()
        .filter(|pv| {
            pv.spec
                .as_ref()
                .and_then(|s| s.csi.as_ref())
                .is_some_and(|csi| csi.driver == DRIVER_NAME)
        })
        .count()
}

async fn count_driver_volumes(ctx: &Context) -> Result<usize> {
    let api = Api::<PersistentVolume>::all(ctx.client.clone());
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(kube_error("listing PersistentVolumes"))?;
    Ok(driver_volumes(&list.items))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use k8s_openapi::api::core::v1::{CSIPersistentVolumeSource, PersistentVolumeSpec};

    use super::*;

    fn volume(driver: Option<&str>) -> PersistentVolume {
        PersistentVolume {
            spec: Some(PersistentVolumeSpec {
                csi: driver.map(|d| CSIPersistentVolumeSource {
                    driver: d.into(),
                    volume_handle: "share-1".into(),
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
            volume(Some(DRIVER_NAME)),
            volume(Some("cinder.csi.openstack.org")),
            volume(None),
            volume(Some(DRIVER_NAME)),
        ];
        assert_eq!(driver_volumes(&volumes), 2);
        assert_eq!(driver_volumes(&[]), 0);
    }

    #[test]
    fn removal_is_refused_while_volumes_exist_and_says_how_many() {
        assert_eq!(removal_check(0), None);
        let refused = removal_check(3).unwrap();
        assert!(refused.available, "the driver keeps working");
        assert_eq!(refused.reason, REMOVAL_REFUSED);
        let message = refused.degraded.clone().unwrap();
        assert!(message.contains("3 PersistentVolume(s)"), "{message}");
        assert!(message.contains("Delete the claims"), "{message}");
        let [available, _, degraded] = refused.conditions(identity::DRIVER_REMOVAL);
        assert_eq!(degraded.type_, "ManilaDriverRemovalControllerDegraded");
        assert_eq!(degraded.status, operator_kit::status::Status::True);
        assert_eq!(available.status, operator_kit::status::Status::True);
    }
}
