//! managementState Removed: refused while any PersistentVolume of the driver exists
//! ([`operator_kit::removal`]): the driver stays installed and managed, so pods can still
//! unmount, and `…DriverRemovalControllerDegraded` (`RemovalRefused`) says how many; looked
//! at again every [`RECHECK`]. Once none exists the driver's objects and its Secret are
//! deleted (an Event each); the StorageClass, the VolumeSnapshotClass and volumes stay.

use std::collections::BTreeMap;
use std::time::Duration;

use operator_kit::api::ClusterCSIDriver;
use operator_kit::apply::Applier;
use operator_kit::prune::ObjectKey;
use operator_kit::removal;
use operator_kit::status::Health;

use super::manage::{driver_secret, manage, names_only_inputs, split_classes};
use super::report::Report;
use super::{Context, owner_reference};
use crate::assets;
use crate::error::Error;
use crate::identity::{self, DRIVER_NAME, IDENTITY};

/// How soon a refused removal looks at the volumes again.
pub(super) const RECHECK: Duration = Duration::from_secs(10);

/// managementState Removed: refused while volumes of the driver exist; otherwise the
/// driver's objects go.
pub(super) async fn remove(driver: &ClusterCSIDriver, ctx: &Context) -> Report {
    let count = match removal::count_driver_volumes(&ctx.client, &IDENTITY).await {
        Ok(count) => count,
        Err(source) => {
            // Unknown is not none: keep the driver.
            let mut report = manage(driver, ctx).await;
            let error = Error::Kube {
                action: "listing PersistentVolumes".into(),
                source,
            };
            report.failed(identity::DRIVER_REMOVAL, "VolumesUnknown", error);
            report.requeue = Some(RECHECK);
            return report;
        }
    };
    if let Some(refused) = removal::refusal(&IDENTITY, count) {
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
        // The StorageClass stays (PVs may refer to it); so does the VolumeSnapshotClass,
        // which names-only inputs do not render.
        Ok(objects) => split_classes(objects).0,
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
        identity::STATIC_RESOURCES,
    ] {
        report.health(prefix, &removed);
    }
    report
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use operator_kit::status::Status;

    use super::*;
    use crate::config::OperatorConfig;

    #[test]
    fn a_refused_removal_is_degraded_naming_the_count_under_the_cinder_prefix() {
        let refused = removal::refusal(&IDENTITY, 2).unwrap();
        let mut report = Report::default();
        report.health(identity::DRIVER_REMOVAL, &refused);
        let degraded = report
            .condition(identity::DRIVER_REMOVAL, "Degraded")
            .unwrap();
        assert_eq!(
            degraded.type_,
            "OpenStackCinderDriverRemovalControllerDegraded"
        );
        assert_eq!(degraded.status, Status::True);
        assert_eq!(degraded.reason, "RemovalRefused");
        assert!(
            degraded
                .message
                .contains("2 PersistentVolume(s) of cinder.csi.openstack.org"),
            "{}",
            degraded.message
        );
        let available = report
            .condition(identity::DRIVER_REMOVAL, "Available")
            .unwrap();
        assert_eq!(available.status, Status::True);
        assert!(removal::refusal(&IDENTITY, 0).is_none());
    }

    #[test]
    fn a_removal_deletes_neither_the_storage_class_nor_the_snapshot_class() {
        let config = OperatorConfig::new("ns");
        let objects = split_classes(assets::render(&names_only_inputs(&config)).unwrap()).0;
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o.types.as_ref().unwrap().kind.as_str())
            .collect();
        assert!(!kinds.contains(&"StorageClass"), "{kinds:?}");
        assert!(!kinds.contains(&"VolumeSnapshotClass"), "{kinds:?}");
        assert!(kinds.contains(&"DaemonSet") && kinds.contains(&"CSIDriver"));
    }
}
