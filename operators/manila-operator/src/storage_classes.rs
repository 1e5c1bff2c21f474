//! One StorageClass per Manila share type, named `csi-manila-<type, lowercased, _ → ->`, as
//! upstream's operator makes them; created at start and at every share-type sync, and never
//! deleted when a type (or Manila) disappears: PVs of the class may still exist.
//!
//! `spec.storageClassState` as openshift/api defines it: `Managed` (the default) creates and
//! keeps the classes; `Unmanaged` neither creates nor updates them (the cluster admin owns
//! them); `Removed` deletes the classes the operator made (its `managed-by` label and this
//! driver as provisioner), never anyone else's.
//!
//! A class's parameters are immutable. When what the operator wants differs from what a class
//! it made has (a new secret name, a share network configured later), the class is deleted
//! and created again; PVs keep their own copy of what they need, so nothing else changes.
//! Classes the operator did not make (no `managed-by` label) are never touched.
//!
//! The previous release ([`crate::release::Release::Previous`]) made classes without the `controller-expand`
//! secret parameters and without `allowVolumeExpansion` (it had no resizer); the current
//! release re-creates those, so that new claims can be expanded.

use std::collections::BTreeMap;

use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::{Client, ResourceExt};

use crate::api::{DRIVER_NAME, MANAGED_BY, MANAGED_BY_LABEL, StorageClassState};
use crate::cloud::ShareType;
use crate::config::OperatorConfig;

/// Creating or re-creating a StorageClass failed.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The API refused a call on a class.
    #[error("{action} StorageClass {name}: {source}")]
    Kube {
        /// `creating`, `deleting`, `reading`, `listing`.
        action: &'static str,
        /// The class.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// What the sync did to one class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClassChange {
    /// Created.
    Created {
        /// Class name.
        name: String,
    },
    /// Deleted and created again because its (immutable) parameters changed.
    Recreated {
        /// Class name.
        name: String,
        /// Which parameters changed.
        reason: String,
    },
    /// Deleted because `storageClassState` is `Removed`.
    Deleted {
        /// Class name.
        name: String,
    },
    /// Not created, and why (a DHSS=True type without a configured share network, or a
    /// class of that name the operator did not make).
    Skipped {
        /// Class name.
        name: String,
        /// Why.
        reason: String,
    },
}

/// `csi-manila-<type, lowercased, _ → ->`.
pub fn class_name(share_type: &str) -> String {
    format!("csi-manila-{}", share_type.to_lowercase().replace('_', "-"))
}

/// The class the operator wants for `share_type` (`None`: a DHSS=True type without a share
/// network, see [`ClassChange::Skipped`]), in the configured release's layout.
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
    let expands = config.release.expands_volumes();
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
            labels: Some(BTreeMap::from([(
                MANAGED_BY_LABEL.to_string(),
                MANAGED_BY.to_string(),
            )])),
            ..Default::default()
        },
        provisioner: DRIVER_NAME.into(),
        parameters: Some(parameters),
        reclaim_policy: Some("Delete".into()),
        volume_binding_mode: Some("Immediate".into()),
        allow_volume_expansion: expands.then_some(true),
        ..Default::default()
    })
}

/// The immutable fields in which `existing` differs from `wanted`, in words; empty when
/// they agree. `allowVolumeExpansion` is mutable and not compared.
pub fn differences(existing: &StorageClass, wanted: &StorageClass) -> Vec<String> {
    let mut out = Vec::new();
    if existing.provisioner != wanted.provisioner {
        out.push(format!(
            "provisioner {} → {}",
            existing.provisioner, wanted.provisioner
        ));
    }
    let default_reclaim = Some("Delete".to_string());
    let default_binding = Some("Immediate".to_string());
    if existing.reclaim_policy.clone().or(default_reclaim.clone())
        != wanted.reclaim_policy.clone().or(default_reclaim)
    {
        out.push("reclaimPolicy".into());
    }
    if existing
        .volume_binding_mode
        .clone()
        .or(default_binding.clone())
        != wanted.volume_binding_mode.clone().or(default_binding)
    {
        out.push("volumeBindingMode".into());
    }
    let empty = BTreeMap::new();
    let have = existing.parameters.as_ref().unwrap_or(&empty);
    let want = wanted.parameters.as_ref().unwrap_or(&empty);
    let mut keys: Vec<&String> = have.keys().chain(want.keys()).collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        if have.get(key) != want.get(key) {
            out.push(format!("parameter {key}"));
        }
    }
    out
}

/// Brings the classes to what `state` asks: Managed creates missing classes and re-creates
/// changed ones (never deleting one otherwise), Unmanaged touches nothing, Removed deletes
/// the classes the operator made.
pub async fn sync(
    client: &Client,
    share_types: &[ShareType],
    share_networks: &BTreeMap<String, String>,
    state: StorageClassState,
    config: &OperatorConfig,
) -> Result<Vec<ClassChange>, SyncError> {
    let api: Api<StorageClass> = Api::all(client.clone());
    match state {
        StorageClassState::Managed => manage(&api, share_types, share_networks, config).await,
        StorageClassState::Unmanaged => Ok(Vec::new()),
        StorageClassState::Removed => remove_ours(&api).await,
    }
}

/// Whether the operator made `class`: its `managed-by` label, and this driver as provisioner
/// (a class a user labelled by hand for another driver is not ours to delete).
pub fn made_by_operator(class: &StorageClass) -> bool {
    let labelled = class
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .is_some_and(|v| v == MANAGED_BY);
    labelled && class.provisioner == DRIVER_NAME
}

/// storageClassState Removed: deletes every class the operator made (PVs keep their own
/// copy of what they need; the classes come back when the state is Managed again).
async fn remove_ours(api: &Api<StorageClass>) -> Result<Vec<ClassChange>, SyncError> {
    let selector = format!("{MANAGED_BY_LABEL}={MANAGED_BY}");
    let classes = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|source| SyncError::Kube {
            action: "listing",
            name: selector.clone(),
            source,
        })?;
    let mut changes = Vec::new();
    for class in classes.items.iter().filter(|c| made_by_operator(c)) {
        let name = class.name_any();
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => changes.push(ClassChange::Deleted { name }),
            // Deleted meanwhile: nothing to report.
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(source) => {
                return Err(SyncError::Kube {
                    action: "deleting",
                    name,
                    source,
                });
            }
        }
    }
    Ok(changes)
}

/// storageClassState Managed: creates missing classes and re-creates changed ones.
async fn manage(
    api: &Api<StorageClass>,
    share_types: &[ShareType],
    share_networks: &BTreeMap<String, String>,
    config: &OperatorConfig,
) -> Result<Vec<ClassChange>, SyncError> {
    let mut changes = Vec::new();
    for share_type in share_types {
        let name = class_name(&share_type.name);
        let network = share_networks.get(&share_type.name).map(String::as_str);
        let Some(wanted) = desired(share_type, network, config) else {
            changes.push(ClassChange::Skipped {
                name,
                reason: format!(
                    "share type {} creates share servers (driver_handles_share_servers=True) and needs a share network: set spec.driverConfig.manila.shareNetworkIDs.{} in the ClusterCSIDriver",
                    share_type.name, share_type.name
                ),
            });
            continue;
        };
        let existing = api.get_opt(&name).await.map_err(|source| SyncError::Kube {
            action: "reading",
            name: name.clone(),
            source,
        })?;
        match existing {
            None => {
                create(api, &wanted, &name).await?;
                changes.push(ClassChange::Created { name });
            }
            Some(existing) => {
                let ours = made_by_operator(&existing);
                let differences = differences(&existing, &wanted);
                if differences.is_empty() {
                    continue;
                }
                if !ours {
                    changes.push(ClassChange::Skipped {
                        name,
                        reason: format!(
                            "a StorageClass of that name exists that the operator did not create (it differs in {}); it is left alone",
                            differences.join(", ")
                        ),
                    });
                    continue;
                }
                api.delete(&name, &DeleteParams::default())
                    .await
                    .map_err(|source| SyncError::Kube {
                        action: "deleting",
                        name: name.clone(),
                        source,
                    })?;
                create(api, &wanted, &name).await?;
                changes.push(ClassChange::Recreated {
                    name,
                    reason: differences.join(", "),
                });
            }
        }
    }
    Ok(changes)
}

async fn create(
    api: &Api<StorageClass>,
    class: &StorageClass,
    name: &str,
) -> Result<(), SyncError> {
    match api.create(&PostParams::default(), class).await {
        Ok(_) => Ok(()),
        // Deleted a moment ago and not gone yet, or made concurrently: the next sync
        // compares again.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(source) => Err(SyncError::Kube {
            action: "creating",
            name: name.to_string(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn share_type(name: &str, dhss: bool) -> ShareType {
        ShareType {
            name: name.into(),
            id: format!("id-{name}"),
            dhss,
        }
    }

    #[test]
    fn only_classes_the_operator_made_for_this_driver_are_its_own() {
        let config = OperatorConfig::new("manila-csi");
        let ours = desired(&share_type("default", false), None, &config).unwrap();
        assert!(made_by_operator(&ours));

        let mut unlabelled = ours.clone();
        unlabelled.metadata.labels = None;
        assert!(
            !made_by_operator(&unlabelled),
            "a user's class of the same driver"
        );

        let mut other_driver = ours.clone();
        other_driver.provisioner = "cinder.csi.openstack.org".into();
        assert!(
            !made_by_operator(&other_driver),
            "labelled by hand for another driver"
        );
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
