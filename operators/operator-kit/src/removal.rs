//! `managementState: Removed` made safe: the driver is not removed while any
//! PersistentVolume of it exists (pods must still be able to unmount them), and the
//! `<Prefix>DriverRemovalController` conditions say how many and what to do; looked at again
//! every [`RECHECK`]. Once none is left, [`Removal::run`] deletes the driver's objects and
//! its Secret (an Event each). Which objects those are is each operator's (its rendered
//! objects, never StorageClasses, VolumeSnapshotClasses or volumes).

use std::time::Duration;

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, DynamicObject, ListParams};
use kube::{Client, Resource};

use crate::api::ClusterCSIDriver;
use crate::apply::{Applier, ApplyError};
use crate::identity::OperatorIdentity;
use crate::prune::ObjectKey;
use crate::record::Recorder;
use crate::report::Report;
use crate::status::Health;

/// The part of the removal's conditions: `<condition_prefix>DriverRemovalController…`.
pub const PART: &str = "DriverRemovalController";

/// The reason of `<Prefix>DriverRemovalControllerDegraded` while a removal is refused.
pub const REMOVAL_REFUSED: &str = "RemovalRefused";

/// How soon a refused removal looks at the volumes again.
pub const RECHECK: Duration = Duration::from_secs(10);

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

/// What a removal deletes: the driver's objects as rendered (their kinds and names suffice),
/// in the order they are applied, or why they cannot be rendered; and its Secret.
#[derive(Debug)]
pub struct DriverObjects<E> {
    /// The rendered objects (deleted last first: workloads before what they use).
    pub rendered: Result<Vec<DynamicObject>, E>,
    /// The driver's Secret (deleted first).
    pub secret: Result<DynamicObject, E>,
}

/// One operator's `managementState: Removed`.
pub struct Removal<'a, E> {
    /// The operator.
    pub identity: &'a OperatorIdentity,
    /// The Kubernetes client.
    pub client: &'a Client,
    /// Records an Event for each object deleted.
    pub recorder: &'a Recorder,
    /// The parts (condition prefixes) reported `Removed` once the driver is gone.
    pub parts: &'a [&'a str],
    /// The part (condition prefix) a failed render degrades: the static objects'.
    pub static_resources: &'a str,
    /// The operator's error when the PersistentVolumes cannot be listed.
    pub volumes_unknown: fn(kube::Error) -> E,
}

impl<E> Removal<'_, E>
where
    E: std::error::Error + From<ApplyError> + 'static,
{
    /// Refused while volumes of the driver exist (or cannot be counted: unknown is not
    /// none): the driver is kept as `keep` (the operator's Managed reconcile, run only then)
    /// keeps it, with the removal's conditions added and a look again after [`RECHECK`].
    /// Otherwise the driver's `objects` go, an Event each, and its parts report `Removed`;
    /// the first failure is the report's error.
    pub async fn run(
        &self,
        driver: &ClusterCSIDriver,
        keep: impl Future<Output = Report<E>>,
        objects: impl FnOnce() -> DriverObjects<E>,
    ) -> Report<E> {
        let part = self.identity.condition(PART);
        let count = match count_driver_volumes(self.client, self.identity).await {
            Ok(count) => count,
            Err(source) => {
                let mut report = keep.await;
                report.failed(&part, "VolumesUnknown", (self.volumes_unknown)(source));
                report.requeue = Some(RECHECK);
                return report;
            }
        };
        if let Some(refused) = refusal(self.identity, count) {
            tracing::warn!("{}", refused.message);
            let mut report = keep.await;
            report.health(&part, &refused);
            report.requeue = Some(RECHECK);
            return report;
        }
        let mut report = Report::default();
        report.health(
            &part,
            &Health::ok(
                "Removed",
                format!(
                    "no PersistentVolume of {} exists: the driver is removed",
                    self.identity.driver_name
                ),
            ),
        );
        let Some(owner) = driver.controller_owner_ref(&()) else {
            return report;
        };
        let applier = Applier::new(self.client.clone(), self.identity.field_manager, owner);
        let DriverObjects { rendered, secret } = objects();
        let mut objects = match rendered {
            Ok(objects) => objects,
            Err(error) => {
                report.failed(self.static_resources, "RenderFailed", error);
                return report;
            }
        };
        match secret {
            Ok(secret) => objects.push(secret),
            Err(error) => report.error = Some(error),
        }
        // Workloads first, then what they use.
        objects.reverse();
        for object in &objects {
            match applier.delete(object).await {
                Ok(true) => {
                    let key = ObjectKey::of(object);
                    self.recorder
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
        for prefix in self.parts {
            report.health(prefix, &removed);
        }
        report
    }
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
