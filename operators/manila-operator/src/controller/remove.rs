//! managementState Removed: refused while any PersistentVolume of the driver exists
//! ([`operator_kit::removal`]: the driver stays installed and managed, so pods can still
//! unmount; a Degraded condition says how many and what to do). Otherwise the driver's objects and Secret are deleted (an Event
//! each); StorageClasses, the VolumeSnapshotClass and volumes stay.

use std::collections::BTreeMap;
use std::time::Duration;

use operator_kit::api::ClusterCSIDriver;
use operator_kit::apply::Applier;
use operator_kit::prune::ObjectKey;
use operator_kit::removal;
use operator_kit::status::Health;

use super::manage::{driver_secret, manage, names_only_inputs};
use super::report::Report;
use super::{Context, owner_reference};
use crate::assets;
use crate::error::{Result, kube as kube_error};
use crate::identity::{self, DRIVER_NAME, IDENTITY};

/// How soon a refused removal looks at the volumes again.
const RECHECK: Duration = Duration::from_secs(10);

/// managementState Removed: refused while volumes of the driver exist; otherwise the
/// driver's objects go and StorageClasses, the VolumeSnapshotClass and volumes stay.
pub(super) async fn remove(driver: &ClusterCSIDriver, ctx: &Context) -> Report {
    let refusal = match count_driver_volumes(ctx).await {
        Ok(count) => removal::refusal(&IDENTITY, count),
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

async fn count_driver_volumes(ctx: &Context) -> Result<usize> {
    removal::count_driver_volumes(&ctx.client, &IDENTITY)
        .await
        .map_err(kube_error("listing PersistentVolumes"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn removal_is_refused_while_volumes_exist_and_says_how_many() {
        assert_eq!(removal::refusal(&IDENTITY, 0), None);
        let refused = removal::refusal(&IDENTITY, 3).unwrap();
        assert!(refused.available, "the driver keeps working");
        assert_eq!(refused.reason, removal::REMOVAL_REFUSED);
        let message = refused.degraded.clone().unwrap();
        assert!(
            message.contains("3 PersistentVolume(s) of manila.csi.openstack.org"),
            "{message}"
        );
        assert!(message.contains("Delete the claims"), "{message}");
        let [available, _, degraded] = refused.conditions(identity::DRIVER_REMOVAL);
        assert_eq!(degraded.type_, "ManilaDriverRemovalControllerDegraded");
        assert_eq!(degraded.status, operator_kit::status::Status::True);
        assert_eq!(available.status, operator_kit::status::Status::True);
        assert_eq!(identity::DRIVER_REMOVAL, IDENTITY.condition(removal::PART));
    }
}
