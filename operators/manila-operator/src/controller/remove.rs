//! managementState Removed ([`operator_kit::removal`]): refused while any PersistentVolume of
//! the driver exists (the driver stays installed and managed, so pods can still unmount; a
//! Degraded condition says how many and what to do). Otherwise the driver's objects and
//! Secret are deleted (an Event each); StorageClasses, the VolumeSnapshotClass and volumes
//! stay.

use std::collections::BTreeMap;

use operator_kit::api::ClusterCSIDriver;
use operator_kit::removal::{DriverObjects, Removal};

use super::Context;
use super::manage::{driver_secret, manage, names_only_inputs};
use super::report::Report;
use crate::assets;
use crate::config::OperatorConfig;
use crate::error::Error;
use crate::identity::{self, IDENTITY};

/// managementState Removed: refused while volumes of the driver exist; otherwise the
/// driver's objects go and StorageClasses, the VolumeSnapshotClass and volumes stay.
pub(super) async fn remove(driver: &ClusterCSIDriver, ctx: &Context) -> Report {
    let removal = Removal {
        identity: &IDENTITY,
        client: &ctx.client,
        recorder: &ctx.recorder,
        parts: &[
            identity::CONTROLLER_SERVICE,
            identity::NODE_SERVICE,
            identity::NFS_NODE_SERVICE,
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

/// What a removal deletes: every object the driver's manifests can render (the
/// VolumeSnapshotClass is not among them) and the driver's Secret.
fn removed_objects(config: &OperatorConfig) -> DriverObjects<Error> {
    DriverObjects {
        rendered: assets::render(&names_only_inputs(config)).map_err(Error::from),
        secret: driver_secret(config, &BTreeMap::new()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use operator_kit::removal;

    use super::*;

    #[test]
    fn the_removal_conditions_are_manilas_and_it_deletes_no_class() {
        assert_eq!(identity::DRIVER_REMOVAL, IDENTITY.condition(removal::PART));
        let refused = removal::refusal(&IDENTITY, 3).unwrap();
        let message = refused.degraded.clone().unwrap();
        assert!(
            message.contains("3 PersistentVolume(s) of manila.csi.openstack.org"),
            "{message}"
        );
        let config = OperatorConfig::new("ns");
        let DriverObjects { rendered, secret } = removed_objects(&config);
        let kinds: Vec<String> = rendered
            .unwrap()
            .iter()
            .map(|o| o.types.as_ref().unwrap().kind.clone())
            .collect();
        assert!(!kinds.iter().any(|k| k == "StorageClass"), "{kinds:?}");
        assert!(
            !kinds.iter().any(|k| k == "VolumeSnapshotClass"),
            "{kinds:?}"
        );
        assert!(kinds.iter().any(|k| k == "DaemonSet"), "{kinds:?}");
        assert_eq!(secret.unwrap().metadata.name, Some(config.driver_secret));
    }
}
