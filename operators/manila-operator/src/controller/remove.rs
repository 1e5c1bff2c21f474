//! managementState Removed: the driver's objects and Secret are deleted (an Event each);
//! StorageClasses, the VolumeSnapshotClass and volumes stay.

use std::collections::BTreeMap;

use operator_kit::api::ClusterCSIDriver;
use operator_kit::apply::Applier;
use operator_kit::prune::ObjectKey;
use operator_kit::status::Health;

use super::manage::{driver_secret, names_only_inputs};
use super::report::Report;
use super::{Context, owner_reference};
use crate::assets;
use crate::identity::{self, IDENTITY};

/// managementState Removed: the driver's objects go; StorageClasses, the
/// VolumeSnapshotClass and volumes stay.
pub(super) async fn remove(driver: &ClusterCSIDriver, ctx: &Context) -> Report {
    let mut report = Report::default();
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
