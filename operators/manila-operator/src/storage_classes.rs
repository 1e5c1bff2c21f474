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
use crate::identity::IDENTITY;
use crate::release;

/// `csi-manila-<type, lowercased, _ → ->`.
pub fn class_name(share_type: &str) -> String {
    format!("csi-manila-{}", share_type.to_lowercase().replace('_', "-"))
}

/// The class the operator wants for `share_type` (`None`: a DHSS=True type without a share
/// network, see [`wanted`]), in the configured release's layout.
pub fn desired(
    share_type: &ShareType,
    share_network: Option<&str>,
    config: &OperatorConfig,
) -> Option<StorageClass> {
    if share_type.dhss && share_network.is_none() {
        return None;
    }
    let mut parameters = BTreeMap::from([("type".to_string(), share_type.name.clone())]);
    if let Some(network) = share_network {
        parameters.insert("shareNetworkID".into(), network.to_string());
    }
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
        volume_binding_mode: Some("Immediate".into()),
        allow_volume_expansion: expands.then_some(true),
        ..Default::default()
    })
}

/// The classes of `share_types`: each one's [`desired`] class, or a skip naming the share
/// network to configure.
pub fn wanted(
    share_types: &[ShareType],
    share_networks: &BTreeMap<String, String>,
    config: &OperatorConfig,
) -> Vec<Wanted> {
    share_types
        .iter()
        .map(|share_type| {
            let network = share_networks.get(&share_type.name).map(String::as_str);
            match desired(share_type, network, config) {
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
    state: StorageClassState,
    config: &OperatorConfig,
) -> Result<Vec<ClassChange>, SyncError> {
    let wanted = wanted(share_types, share_networks, config);
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
        let ours = desired(&share_type("default", false), None, &config).unwrap();
        assert!(made_by(&IDENTITY, &ours));
        assert_eq!(ours.provisioner, "manila.csi.openstack.org");
    }

    #[test]
    fn a_dhss_type_without_a_share_network_is_skipped_naming_the_setting() {
        let config = OperatorConfig::new("manila-csi");
        let wanted = wanted(
            &[share_type("tenant", true), share_type("default", false)],
            &BTreeMap::new(),
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
        let class = desired(&share_type("default", false), None, &config).unwrap();
        insta::assert_yaml_snapshot!(class);
    }

    #[test]
    fn a_dhss_type_needs_a_share_network() {
        let config = OperatorConfig::new("manila-csi");
        assert!(desired(&share_type("tenant", true), None, &config).is_none());
        let class = desired(&share_type("tenant", true), Some("net-1"), &config).unwrap();
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
        let wanted = desired(&share_type("tenant", true), Some("net-2"), &config).unwrap();
        let mut existing = desired(&share_type("tenant", true), Some("net-1"), &config).unwrap();
        assert_eq!(
            differences(&existing, &wanted),
            vec!["parameter shareNetworkID"]
        );
        existing.allow_volume_expansion = Some(false);
        existing.parameters = wanted.parameters.clone();
        assert!(differences(&existing, &wanted).is_empty());
    }

    #[test]
    fn the_previous_release_makes_classes_without_expansion_which_the_current_one_recreates() {
        use crate::release::Release;
        let mut config = OperatorConfig::new("manila-csi");
        let current = desired(&share_type("default", false), None, &config).unwrap();
        config.set_release(Release::Previous);
        let previous = desired(&share_type("default", false), None, &config).unwrap();
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
