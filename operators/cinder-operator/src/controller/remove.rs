//! managementState Removed ([`operator_kit::removal`]): refused while any PersistentVolume of
//! the driver exists: the driver stays installed and managed, so pods can still unmount, and
//! `…DriverRemovalControllerDegraded` (`RemovalRefused`) says how many; looked at again
//! every [`RECHECK`](operator_kit::removal::RECHECK). Once none exists the driver's objects
//! and its Secret are deleted (an Event each); the StorageClass, the VolumeSnapshotClass and
//! volumes stay.

use std::collections::BTreeMap;

use operator_kit::api::ClusterCSIDriver;
use operator_kit::removal::{DriverObjects, Removal};

use super::Context;
use super::manage::{driver_secret, manage, names_only_inputs, split_classes};
use super::report::Report;
use crate::assets;
use crate::config::OperatorConfig;
use crate::error::Error;
use crate::identity::{self, IDENTITY};

/// managementState Removed: refused while volumes of the driver exist; otherwise the
/// driver's objects go.
pub(super) async fn remove(driver: &ClusterCSIDriver, ctx: &Context) -> Report {
    let removal = Removal {
        identity: &IDENTITY,
        client: &ctx.client,
        recorder: &ctx.recorder,
        parts: &[
            identity::CONTROLLER_SERVICE,
            identity::NODE_SERVICE,
            identity::STATIC_RESOURCES,
        ],
        static_resources: identity::STATIC_RESOURCES,
        volumes_unknown: |source| Error::Kube {
            action: "listing PersistentVolumes".into(),
            source,
        },
    };
    removal
        .run(driver, manage(driver, ctx), || removed_objects(&ctx.config))
        .await
}

/// What a removal deletes: the driver's objects without the StorageClass (PVs may refer to
/// it) and the VolumeSnapshotClass (names-only inputs do not render it), and its Secret.
fn removed_objects(config: &OperatorConfig) -> DriverObjects<Error> {
    DriverObjects {
        rendered: assets::render(&names_only_inputs(config))
            .map(|objects| split_classes(objects).0)
            .map_err(Error::from),
        secret: driver_secret(config, &BTreeMap::new()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use operator_kit::removal;
    use operator_kit::status::Status;

    use super::*;

    #[test]
    fn a_refused_removal_is_degraded_naming_the_count_under_the_cinder_prefix() {
        assert_eq!(identity::DRIVER_REMOVAL, IDENTITY.condition(removal::PART));
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
        let DriverObjects { rendered, secret } = removed_objects(&config);
        let objects = rendered.unwrap();
        let kinds: Vec<&str> = objects
            .iter()
            .map(|o| o.types.as_ref().unwrap().kind.as_str())
            .collect();
        assert!(!kinds.contains(&"StorageClass"), "{kinds:?}");
        assert!(!kinds.contains(&"VolumeSnapshotClass"), "{kinds:?}");
        assert!(kinds.contains(&"DaemonSet") && kinds.contains(&"CSIDriver"));
        assert_eq!(secret.unwrap().metadata.name, Some(config.driver_secret));
    }
}
