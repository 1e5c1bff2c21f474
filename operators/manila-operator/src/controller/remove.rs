//! managementState Removed: the driver's objects and Secret are deleted (an Event each);
//! StorageClasses, the VolumeSnapshotClass and volumes stay.

use std::collections::BTreeMap;

use kube::ResourceExt;
use kube_support::events::EventType;

use super::manage::{driver_secret, names_only_inputs};
use super::record::describe;
use super::report::Report;
use super::{Context, owner_reference};
use crate::api::{ClusterCSIDriver, FIELD_MANAGER};
use crate::apply::Applier;
use crate::assets;
use crate::status::{self, Health};

/// managementState Removed: the driver's objects go; StorageClasses, the
/// VolumeSnapshotClass and volumes stay.
pub(super) async fn remove(driver: &ClusterCSIDriver, ctx: &Context) -> Report {
    let mut report = Report::default();
    let Some(owner) = owner_reference(driver) else {
        return report;
    };
    let applier = Applier::new(ctx.client.clone(), FIELD_MANAGER, owner);
    let mut objects = match assets::render(&names_only_inputs(&ctx.config)) {
        Ok(objects) => objects,
        Err(error) => {
            report.failed(status::STATIC_RESOURCES, "RenderFailed", error.into());
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
                let kind = object
                    .types
                    .as_ref()
                    .map(|t| t.kind.clone())
                    .unwrap_or_default();
                let what = describe(&kind, object.namespace().as_deref(), &object.name_any());
                ctx.metrics.object_changed();
                ctx.recorder
                    .publish(
                        driver,
                        EventType::Normal,
                        &format!("{kind}Deleted"),
                        format!("deleted {what} (managementState Removed)"),
                    )
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
        status::CONTROLLER_SERVICE,
        status::NODE_SERVICE,
        status::NFS_NODE_SERVICE,
        status::STATIC_RESOURCES,
    ] {
        report.health(prefix, &removed);
    }
    report
}
