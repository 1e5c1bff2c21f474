//! One StorageClass per Manila share type, named `csi-manila-<type, lowercased, _ → ->`, as
//! upstream's operator makes them; created at start and at every share-type sync, and never
//! deleted when a type (or Manila) disappears: PVs of the class may still exist.
//!
//! What the classes are is this module's: a share type's name as `type`, a share network for
//! types that create share servers (`driver_handles_share_servers=True`; without one the class
//! is skipped), the driver Secret for every operation. Creating them as
//! `spec.storageClassState` asks, and re-creating one when its immutable parameters change,
//! is the library's ([`operator_kit::storage_classes`]).
//!
//! The driver settings of `spec.driverConfig.manila` ([`DriverSettings`]) reach every class:
//! `nfsShareClient` as `nfs-shareClient`, topology as `autoTopology: "true"` with
//! `WaitForFirstConsumer` binding (the share is made in the zone of the node the claim's
//! first pod is scheduled to; with `Immediate` the provisioner would pick any zone of the
//! cluster). A change of either re-creates the classes (their parameters are immutable).
//!
//! The previous release ([`crate::release::Release::Previous`]) made classes without the `controller-expand`
//! secret parameters and without `allowVolumeExpansion` (it had no resizer); the current
//! release re-creates those, so that new claims can be expanded.

use std::collections::BTreeMap;

use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;
use kube::api::ObjectMeta;
use operator_kit::api::StorageClassState;
use operator_kit::storage_classes::{self, ClassChange, SyncError, Wanted};

use crate::cloud::ShareType;
use crate::config::OperatorConfig;
use crate::driver_config::DriverSettings;
use crate::identity::IDENTITY;
use crate::release;

/// The class parameter of `spec.driverConfig.manila.nfsShareClient`.
pub const NFS_SHARE_CLIENT: &str = "nfs-shareClient";
/// The class parameter set with topology.
pub const AUTO_TOPOLOGY: &str = "autoTopology";

/// `csi-manila-<type, lowercased, _ → ->`.
pub fn class_name(share_type: &str) -> String {
    format!("csi-manila-{}", share_type.to_lowercase().replace('_', "-"))
}

/// The class the operator wants for `share_type` (`None`: a DHSS=True type without a share
/// network, see [`wanted`]), in the configured release's layout.
pub fn desired(
    share_type: &ShareType,
    share_network: Option<&str>,
    settings: &DriverSettings,
    config: &OperatorConfig,
) -> Option<StorageClass> {
    if share_type.dhss && share_network.is_none() {
        return None;
    }
    let mut parameters = BTreeMap::from([("type".to_string(), share_type.name.clone())]);
    if let Some(network) = share_network {
        parameters.insert("shareNetworkID".into(), network.to_string());
    }
    if let Some(clients) = &settings.nfs_share_client {
        parameters.insert(NFS_SHARE_CLIENT.into(), clients.clone());
    }
    if settings.topology {
        parameters.insert(AUTO_TOPOLOGY.into(), "true".into());
    }
    let binding = if settings.topology {
        "WaitForFirstConsumer"
    } else {
        "Immediate"
    };
    let expands = release::expands_volumes(config.release);
    for operation in [
        "provisioner",
        "controller-expand",
        "node-stage",
        "node-publish",
    ] {
        if operation == "controller-expand" && !expands {
            continue;
        }
        parameters.insert(
            format!("csi.storage.k8s.io/{operation}-secret-name"),
            config.driver_secret.clone(),
        );
        parameters.insert(
            format!("csi.storage.k8s.io/{operation}-secret-namespace"),
            config.namespace.clone(),
        );
    }
    Some(StorageClass {
        metadata: ObjectMeta {
            name: Some(class_name(&share_type.name)),
            labels: Some(IDENTITY.labels()),
            ..Default::default()
        },
        provisioner: IDENTITY.driver_name.into(),
        parameters: Some(parameters),
        reclaim_policy: Some("Delete".into()),
        volume_binding_mode: Some(binding.into()),
        allow_volume_expansion: expands.then_some(true),
        ..Default::default()
    })
}

/// The classes of `share_types`: each one's [`desired`] class, or a skip naming the share
/// network to configure.
pub fn wanted(
    share_types: &[ShareType],
    share_networks: &BTreeMap<String, String>,
    settings: &DriverSettings,
    config: &OperatorConfig,
) -> Vec<Wanted> {
    share_types
        .iter()
        .map(|share_type| {
            let network = share_networks.get(&share_type.name).map(String::as_str);
            match desired(share_type, network, settings, config) {
                Some(class) => Wanted::Class(Box::new(class)),
                None => Wanted::Skip {
                    name: class_name(&share_type.name),
                    reason: format!(
                        "share type {} creates share servers (driver_handles_share_servers=True) and needs a share network: set spec.driverConfig.manila.shareNetworkIDs.{} in the ClusterCSIDriver",
                        share_type.name, share_type.name
                    ),
                },
            }
        })
        .collect()
}

/// Brings the share types' classes to what `state` asks ([`storage_classes::sync`]).
pub async fn sync(
    client: &Client,
    share_types: &[ShareType],
    share_networks: &BTreeMap<String, String>,
    settings: &DriverSettings,
    state: StorageClassState,
    config: &OperatorConfig,
) -> Result<Vec<ClassChange>, SyncError> {
    let wanted = wanted(share_types, share_networks, settings, config);
    storage_classes::sync(client, &IDENTITY, &wanted, state).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use operator_kit::storage_classes::{differences, made_by};

    use super::*;

    fn share_type(name: &str, dhss: bool) -> ShareType {
        ShareType {
            name: name.into(),
            id: format!("id-{name}"),
            dhss,
        }
    }

    #[test]
    fn the_classes_it_wants_are_its_own_for_removal_and_re_creation() {
        // What counts as the operator's own (label and provisioner) is the library's and
        // tested there; Manila's classes must carry both.
        let config = OperatorConfig::new("manila-csi");
        let ours = desired(
            &share_type("default", false),
            None,
            &DriverSettings::default(),
            &config,
        )
        .unwrap();
        assert!(made_by(&IDENTITY, &ours));
        assert_eq!(ours.provisioner, "manila.csi.openstack.org");
    }

    #[test]
    fn a_dhss_type_without_a_share_network_is_skipped_naming_the_setting() {
        let config = OperatorConfig::new("manila-csi");
        let wanted = wanted(
            &[share_type("tenant", true), share_type("default", false)],
            &BTreeMap::new(),
            &DriverSettings::default(),
            &config,
        );
        let Wanted::Skip { name, reason } = &wanted[0] else {
            panic!("not skipped: {:?}", wanted[0]);
        };
        assert_eq!(name, "csi-manila-tenant");
        assert!(
            reason.contains("spec.driverConfig.manila.shareNetworkIDs.tenant"),
            "{reason}"
        );
        assert!(matches!(&wanted[1], Wanted::Class(_)));
    }

    #[test]
    fn names_are_lowercased_with_dashes() {
        assert_eq!(class_name("default"), "csi-manila-default");
        assert_eq!(class_name("Gold_Fast"), "csi-manila-gold-fast");
    }

    #[test]
    fn a_class_names_the_type_and_the_driver_secret_for_every_operation() {
        let config = OperatorConfig::new("manila-csi");
        let class = desired(
            &share_type("default", false),
            None,
            &DriverSettings::default(),
            &config,
        )
        .unwrap();
        insta::assert_yaml_snapshot!(class);
    }

    #[test]
    fn a_dhss_type_needs_a_share_network() {
        let config = OperatorConfig::new("manila-csi");
        assert!(
            desired(
                &share_type("tenant", true),
                None,
                &DriverSettings::default(),
                &config
            )
            .is_none()
        );
        let class = desired(
            &share_type("tenant", true),
            Some("net-1"),
            &DriverSettings::default(),
            &config,
        )
        .unwrap();
        assert_eq!(
            class
                .parameters
                .unwrap()
                .get("shareNetworkID")
                .map(String::as_str),
            Some("net-1")
        );
    }

    #[test]
    fn differences_name_changed_parameters_only() {
        let config = OperatorConfig::new("manila-csi");
        let wanted = desired(
            &share_type("tenant", true),
            Some("net-2"),
            &DriverSettings::default(),
            &config,
        )
        .unwrap();
        let mut existing = desired(
            &share_type("tenant", true),
            Some("net-1"),
            &DriverSettings::default(),
            &config,
        )
        .unwrap();
        assert_eq!(
            differences(&existing, &wanted),
            vec!["parameter shareNetworkID"]
        );
        existing.allow_volume_expansion = Some(false);
        existing.parameters = wanted.parameters.clone();
        assert!(differences(&existing, &wanted).is_empty());
    }

    #[test]
    fn the_driver_settings_reach_every_class_and_a_change_re_creates_it() {
        let config = OperatorConfig::new("manila-csi");
        let settings = DriverSettings {
            topology: true,
            nfs_share_client: Some("10.0.0.0/8,192.168.1.5".into()),
            match_export_location_address: Some("10.0.0.0/8".into()),
        };
        let plain = desired(
            &share_type("default", false),
            None,
            &DriverSettings::default(),
            &config,
        )
        .unwrap();
        let parameters = plain.parameters.clone().unwrap();
        assert!(!parameters.contains_key(NFS_SHARE_CLIENT), "{parameters:?}");
        assert!(!parameters.contains_key(AUTO_TOPOLOGY), "{parameters:?}");
        assert_eq!(plain.volume_binding_mode.as_deref(), Some("Immediate"));
        for share_type in [share_type("default", false), share_type("tenant", true)] {
            let class = desired(&share_type, Some("net-1"), &settings, &config).unwrap();
            let parameters = class.parameters.clone().unwrap();
            assert_eq!(
                parameters.get(NFS_SHARE_CLIENT).map(String::as_str),
                Some("10.0.0.0/8,192.168.1.5")
            );
            assert_eq!(
                parameters.get(AUTO_TOPOLOGY).map(String::as_str),
                Some("true")
            );
            assert_eq!(
                class.volume_binding_mode.as_deref(),
                Some("WaitForFirstConsumer")
            );
        }
        // The runtime configuration is the node plugins', not the classes'.
        let without_match = DriverSettings {
            match_export_location_address: None,
            ..settings.clone()
        };
        let with = desired(&share_type("default", false), None, &settings, &config).unwrap();
        let without =
            desired(&share_type("default", false), None, &without_match, &config).unwrap();
        assert!(differences(&with, &without).is_empty());
        // What the library compares to re-create a class (and says in the Event): turning
        // the settings on, changing the clients, and turning them off again.
        assert_eq!(
            differences(&plain, &with),
            vec![
                "volumeBindingMode",
                "parameter autoTopology",
                "parameter nfs-shareClient"
            ]
        );
        let other_clients = DriverSettings {
            nfs_share_client: Some("10.0.0.0/8".into()),
            ..settings.clone()
        };
        let changed =
            desired(&share_type("default", false), None, &other_clients, &config).unwrap();
        assert_eq!(
            differences(&with, &changed),
            vec!["parameter nfs-shareClient"]
        );
        assert_eq!(
            differences(&with, &plain),
            vec![
                "volumeBindingMode",
                "parameter autoTopology",
                "parameter nfs-shareClient"
            ]
        );
    }

    #[test]
    fn the_previous_release_makes_classes_without_expansion_which_the_current_one_recreates() {
        use crate::release::Release;
        let mut config = OperatorConfig::new("manila-csi");
        let current = desired(
            &share_type("default", false),
            None,
            &DriverSettings::default(),
            &config,
        )
        .unwrap();
        config.set_release(Release::Previous);
        let previous = desired(
            &share_type("default", false),
            None,
            &DriverSettings::default(),
            &config,
        )
        .unwrap();
        assert_eq!(previous.allow_volume_expansion, None);
        assert_eq!(current.allow_volume_expansion, Some(true));
        let keys = |class: &StorageClass| -> Vec<String> {
            class.parameters.clone().unwrap().into_keys().collect()
        };
        assert!(
            !keys(&previous)
                .iter()
                .any(|k| k.contains("controller-expand")),
            "{:?}",
            keys(&previous)
        );
        // What the current release's Event says when it re-creates such a class.
        assert_eq!(
            differences(&previous, &current),
            vec![
                "parameter csi.storage.k8s.io/controller-expand-secret-name",
                "parameter csi.storage.k8s.io/controller-expand-secret-namespace",
            ]
        );
    }
}
