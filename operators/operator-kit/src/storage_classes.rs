//! An operator's StorageClasses, given the classes it wants (which classes, and their
//! parameters, are each operator's: the Manila operator's one per share type):
//! `spec.storageClassState` as openshift/api defines it, and re-creation when immutable
//! parameters change.
//!
//! `Managed` (the default) creates the wanted classes and keeps them; `Unmanaged` neither
//! creates nor updates them (the cluster admin owns them); `Removed` deletes the classes the
//! operator made (its `managed-by` label and its driver as provisioner), never anyone else's.
//! A class is never deleted otherwise: PVs of the class may still exist.
//!
//! A class's parameters are immutable. When what the operator wants differs from what a class
//! it made has (a new secret name, a parameter configured later), the class is deleted and
//! created again; PVs keep their own copy of what they need, so nothing else changes.
//! Classes the operator did not make are never touched.
//!
//! A class's `allowVolumeExpansion`, labels and annotations are mutable: where a class the
//! operator made differs from what it wants in one of them, the class is patched in place
//! (a merge patch of just those), without a re-create. Only what the operator sets is
//! compared: a label or annotation it does not set (an admin's, or the default-class
//! annotation `storageclass.kubernetes.io/is-default-class` when the operator leaves it to
//! the admin), or `allowVolumeExpansion` when it does not set it, stays as it is.

use std::collections::BTreeMap;

use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};

use crate::api::StorageClassState;
use crate::identity::OperatorIdentity;

/// The annotation that makes a class the cluster's default.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// Creating, re-creating or deleting a StorageClass failed.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The API refused a call on a class.
    #[error("{action} StorageClass {name}: {source}")]
    Kube {
        /// `creating`, `deleting`, `patching`, `reading`, `listing`.
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
    /// Patched in place: `allowVolumeExpansion`, a label or an annotation changed.
    Updated {
        /// Class name.
        name: String,
        /// What changed.
        reason: String,
    },
    /// Deleted because `storageClassState` is `Removed`.
    Deleted {
        /// Class name.
        name: String,
    },
    /// Not created, and why (the operator could not build it, or a class of that name the
    /// operator did not make exists).
    Skipped {
        /// Class name.
        name: String,
        /// Why.
        reason: String,
    },
}

/// One class an operator wants: the class, or why it cannot be made.
#[derive(Clone, Debug, PartialEq)]
pub enum Wanted {
    /// Make and keep this class.
    Class(Box<StorageClass>),
    /// The class `name` is not made ([`ClassChange::Skipped`] with `reason`).
    Skip {
        /// Class name.
        name: String,
        /// Why.
        reason: String,
    },
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

/// What changes in place on a class the operator made ([`mutable_change`]).
#[derive(Clone, Debug, PartialEq)]
pub struct MutableChange {
    /// The merge patch: the changed fields only.
    pub patch: serde_json::Value,
    /// What changes, in words (`allowVolumeExpansion (unset) → true`, `label a x → y`, …).
    pub words: Vec<String>,
}

/// Where `existing` differs from `wanted` in a field it may change in place:
/// `allowVolumeExpansion` (when `wanted` sets it) and each label and annotation `wanted`
/// sets; `None` when they agree. Labels, annotations and fields `wanted` does not set are not
/// compared (they stay as an admin set them).
pub fn mutable_change(existing: &StorageClass, wanted: &StorageClass) -> Option<MutableChange> {
    let unset = || "(unset)".to_string();
    let mut patch = serde_json::Map::new();
    let mut metadata = serde_json::Map::new();
    let mut words = Vec::new();
    if let Some(want) = wanted.allow_volume_expansion
        && existing.allow_volume_expansion != Some(want)
    {
        patch.insert("allowVolumeExpansion".into(), want.into());
        let have = existing
            .allow_volume_expansion
            .map_or_else(unset, |v| v.to_string());
        words.push(format!("allowVolumeExpansion {have} → {want}"));
    }
    let empty = BTreeMap::new();
    for (field, what, have, want) in [
        (
            "labels",
            "label",
            &existing.metadata.labels,
            &wanted.metadata.labels,
        ),
        (
            "annotations",
            "annotation",
            &existing.metadata.annotations,
            &wanted.metadata.annotations,
        ),
    ] {
        let have = have.as_ref().unwrap_or(&empty);
        let mut changed = serde_json::Map::new();
        for (key, value) in want.as_ref().unwrap_or(&empty) {
            if have.get(key) == Some(value) {
                continue;
            }
            let old = have.get(key).cloned().unwrap_or_else(unset);
            words.push(format!("{what} {key} {old} → {value}"));
            changed.insert(key.clone(), value.clone().into());
        }
        if !changed.is_empty() {
            metadata.insert(field.into(), changed.into());
        }
    }
    if !metadata.is_empty() {
        patch.insert("metadata".into(), metadata.into());
    }
    (!words.is_empty()).then(|| MutableChange {
        patch: patch.into(),
        words,
    })
}

/// Whether `identity`'s operator made `class`: its `managed-by` label, and its driver as
/// provisioner (a class a user labelled by hand for another driver is not ours to delete).
pub fn made_by(identity: &OperatorIdentity, class: &StorageClass) -> bool {
    identity.is_managed(class.metadata.labels.as_ref()) && class.provisioner == identity.driver_name
}

/// Brings the classes to what `state` asks: Managed creates the `wanted` classes and
/// re-creates changed ones (never deleting one otherwise), Unmanaged touches nothing,
/// Removed deletes the classes `identity`'s operator made.
pub async fn sync(
    client: &Client,
    identity: &OperatorIdentity,
    wanted: &[Wanted],
    state: StorageClassState,
) -> Result<Vec<ClassChange>, SyncError> {
    let api: Api<StorageClass> = Api::all(client.clone());
    match state {
        StorageClassState::Managed => manage(&api, identity, wanted).await,
        StorageClassState::Unmanaged => Ok(Vec::new()),
        StorageClassState::Removed => remove_ours(&api, identity).await,
    }
}

/// storageClassState Removed: deletes every class the operator made (PVs keep their own
/// copy of what they need; the classes come back when the state is Managed again).
async fn remove_ours(
    api: &Api<StorageClass>,
    identity: &OperatorIdentity,
) -> Result<Vec<ClassChange>, SyncError> {
    let selector = identity.managed_by_selector();
    let classes = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|source| SyncError::Kube {
            action: "listing",
            name: selector.clone(),
            source,
        })?;
    let mut changes = Vec::new();
    for class in classes.items.iter().filter(|c| made_by(identity, c)) {
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
    identity: &OperatorIdentity,
    wanted: &[Wanted],
) -> Result<Vec<ClassChange>, SyncError> {
    let mut changes = Vec::new();
    for class in wanted {
        let wanted = match class {
            Wanted::Class(class) => class,
            Wanted::Skip { name, reason } => {
                changes.push(ClassChange::Skipped {
                    name: name.clone(),
                    reason: reason.clone(),
                });
                continue;
            }
        };
        let name = wanted.name_any();
        let existing = api.get_opt(&name).await.map_err(|source| SyncError::Kube {
            action: "reading",
            name: name.clone(),
            source,
        })?;
        let Some(existing) = existing else {
            create(api, wanted, &name).await?;
            changes.push(ClassChange::Created { name });
            continue;
        };
        let differences = differences(&existing, wanted);
        if differences.is_empty() {
            if made_by(identity, &existing)
                && let Some(change) = patch_in_place(api, &existing, wanted, &name).await?
            {
                changes.push(change);
            }
            continue;
        }
        if !made_by(identity, &existing) {
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
        create(api, wanted, &name).await?;
        changes.push(ClassChange::Recreated {
            name,
            reason: differences.join(", "),
        });
    }
    Ok(changes)
}

/// Patches the mutable fields ([`mutable_change`]) of a class the operator made where they
/// differ from what the operator wants: no re-create.
async fn patch_in_place(
    api: &Api<StorageClass>,
    existing: &StorageClass,
    wanted: &StorageClass,
    name: &str,
) -> Result<Option<ClassChange>, SyncError> {
    let Some(change) = mutable_change(existing, wanted) else {
        return Ok(None);
    };
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&change.patch))
        .await
    {
        Ok(_) => Ok(Some(ClassChange::Updated {
            name: name.to_string(),
            reason: change.words.join(", "),
        })),
        // Deleted meanwhile: the next sync creates it as wanted.
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(source) => Err(SyncError::Kube {
            action: "patching",
            name: name.to_string(),
            source,
        }),
    }
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
    use kube::api::ObjectMeta;

    use super::*;
    use crate::identity::TEST_IDENTITY;

    fn class(parameters: &[(&str, &str)]) -> StorageClass {
        StorageClass {
            metadata: ObjectMeta {
                name: Some("example-gold".into()),
                labels: Some(TEST_IDENTITY.labels()),
                ..Default::default()
            },
            provisioner: TEST_IDENTITY.driver_name.into(),
            parameters: Some(
                parameters
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn only_classes_the_operator_made_for_its_driver_are_its_own() {
        let ours = class(&[]);
        assert!(made_by(&TEST_IDENTITY, &ours));

        let mut unlabelled = ours.clone();
        unlabelled.metadata.labels = None;
        assert!(!made_by(&TEST_IDENTITY, &unlabelled), "a user's class");

        let mut other_driver = ours.clone();
        other_driver.provisioner = "manila.csi.openstack.org".into();
        assert!(
            !made_by(&TEST_IDENTITY, &other_driver),
            "labelled by hand for another driver"
        );
    }

    fn with_default(mut class: StorageClass, value: Option<&str>) -> StorageClass {
        class.metadata.annotations = value.map(|v| {
            [(DEFAULT_CLASS_ANNOTATION.to_string(), v.to_string())]
                .into_iter()
                .collect()
        });
        class
    }

    #[test]
    fn a_switched_default_class_setting_is_a_mutable_change() {
        let base = class(&[("type", "gold")]);
        let wanted = with_default(base.clone(), Some("true"));
        let existing = with_default(base.clone(), Some("false"));
        assert!(
            differences(&existing, &wanted).is_empty(),
            "not a reason to re-create"
        );
        let change = mutable_change(&existing, &wanted).unwrap();
        assert_eq!(
            change.words,
            [format!(
                "annotation {DEFAULT_CLASS_ANNOTATION} false → true"
            )]
        );
        assert_eq!(
            change.patch,
            serde_json::json!({"metadata": {"annotations": {DEFAULT_CLASS_ANNOTATION: "true"}}})
        );
        assert_eq!(
            mutable_change(&wanted, &existing).unwrap().words,
            [format!(
                "annotation {DEFAULT_CLASS_ANNOTATION} true → false"
            )],
            "switched off again"
        );
        assert_eq!(
            mutable_change(&base, &wanted).unwrap().words,
            [format!(
                "annotation {DEFAULT_CLASS_ANNOTATION} (unset) → true"
            )],
            "a class without the annotation"
        );
        assert_eq!(mutable_change(&wanted, &wanted), None, "agree");
        assert_eq!(
            mutable_change(&existing, &base),
            None,
            "the operator does not set it: an admin's value stays"
        );
    }

    #[test]
    fn expansion_labels_and_annotations_change_in_place_and_an_admins_stay() {
        let mut wanted = class(&[("type", "gold")]);
        wanted.allow_volume_expansion = Some(true);
        wanted
            .metadata
            .labels
            .get_or_insert_default()
            .insert("tier".into(), "gold".into());
        wanted.metadata.annotations = Some(BTreeMap::from([("note".into(), "new".into())]));
        let mut existing = class(&[("type", "gold")]);
        existing
            .metadata
            .labels
            .get_or_insert_default()
            .insert("admin".into(), "mine".into());
        existing.metadata.annotations = Some(BTreeMap::from([
            ("note".into(), "old".into()),
            ("admin-note".into(), "kept".into()),
        ]));
        assert!(differences(&existing, &wanted).is_empty(), "no re-create");
        let change = mutable_change(&existing, &wanted).unwrap();
        assert_eq!(
            change.words,
            [
                "allowVolumeExpansion (unset) → true",
                "label tier (unset) → gold",
                "annotation note old → new",
            ]
        );
        // Only what changes: the managed-by label agrees, the admin's keys are not named.
        assert_eq!(
            change.patch,
            serde_json::json!({
                "allowVolumeExpansion": true,
                "metadata": {"labels": {"tier": "gold"}, "annotations": {"note": "new"}},
            })
        );
        existing.allow_volume_expansion = Some(false);
        assert_eq!(
            mutable_change(&existing, &wanted).unwrap().words[0],
            "allowVolumeExpansion false → true"
        );
        // Agreeing: nothing to patch; an expansion the operator does not set stays.
        let mut agreed = existing.clone();
        agreed.allow_volume_expansion = Some(true);
        agreed.metadata.labels = wanted.metadata.labels.clone();
        agreed.metadata.annotations = wanted.metadata.annotations.clone();
        assert_eq!(mutable_change(&agreed, &wanted), None);
        wanted.allow_volume_expansion = None;
        agreed.allow_volume_expansion = Some(false);
        assert_eq!(mutable_change(&agreed, &wanted), None);
    }

    #[test]
    fn differences_name_changed_immutable_fields_only() {
        let wanted = class(&[("type", "gold"), ("network", "net-2")]);
        let mut existing = class(&[("type", "gold"), ("network", "net-1"), ("old", "x")]);
        assert_eq!(
            differences(&existing, &wanted),
            vec!["parameter network", "parameter old"]
        );
        existing.parameters = wanted.parameters.clone();
        existing.allow_volume_expansion = Some(false);
        existing.reclaim_policy = Some("Delete".into());
        assert!(
            differences(&existing, &wanted).is_empty(),
            "defaults and mutable fields"
        );
        existing.volume_binding_mode = Some("WaitForFirstConsumer".into());
        existing.provisioner = "other".into();
        assert_eq!(
            differences(&existing, &wanted),
            vec!["provisioner other → example.csi.test", "volumeBindingMode"]
        );
    }
}
