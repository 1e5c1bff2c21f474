//! managementState Managed (and Force): one reconcile, step by step. Each step adds its
//! part's conditions to the [`Report`]; a failed check ends the reconcile before anything
//! is applied, so an installed driver stays as it is.
//!
//! 1. the version check ([`check_version`]): an older operator leaves a newer driver alone;
//! 2. the checks ([`checks::run`]): inputs and their translation, the cloud, the zones;
//! 3. the driver Secret ([`apply_driver_secret`]), whose hash goes into the pod templates;
//! 4. the driver's objects, rendered, the StorageClass split off ([`split_classes`]) and
//!    the rest applied ([`Report::apply_all`](operator_kit::report::Report::apply_all)), then what the operator installed before and no
//!    longer renders is pruned ([`prune_stale`]);
//! 5. the StorageClass `standard-csi` as `storageClassState` says ([`sync_storage_class`]);
//! 6. the workloads' health.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ObjectMeta};
use kube_support::events::EventType;
use operator_kit::api::{ClusterCSIDriver, LogLevel, ManagementState};
use operator_kit::apply::Applier;
use operator_kit::downgrade::{self, VersionCheck};
use operator_kit::prune::{self, ObjectKey, Scope};
use operator_kit::status::Health;
use operator_kit::storage_classes::{self, ClassChange, Wanted};
use operator_kit::templates::data_hash;

use super::checks;
use super::report::Report;
use super::workloads::workload_health;
use super::{Context, installed_version, owner_reference};
use crate::assets::{self, AssetInputs, PRUNED_KINDS};
use crate::config::OperatorConfig;
use crate::error::{Error, Result};
use crate::identity::{self, DRIVER_NAME, IDENTITY};

/// The CRD whose presence makes the operator install a VolumeSnapshotClass.
const SNAPSHOT_CLASS_CRD: &str = "volumesnapshotclasses.snapshot.storage.k8s.io";

/// managementState Managed or Force: install the driver and keep it as wanted.
pub(super) async fn manage(driver: &ClusterCSIDriver, ctx: &Context) -> Report {
    if let ControlFlow::Break(refused) = check_version(driver, ctx).await {
        return refused;
    }
    let mut report = Report::default();
    report.health(identity::OPERATOR_VERSION, &Health::ok("AsExpected", ""));
    let Some(checked) = checks::run(ctx, &mut report).await else {
        return report;
    };
    let Some(owner) = owner_reference(driver) else {
        report.error = Some(Error::Invalid(format!(
            "ClusterCSIDriver {DRIVER_NAME} has no uid: cannot own the driver's objects"
        )));
        return report;
    };
    let owner_uid = owner.uid.clone();
    let applier = Applier::new(ctx.client.clone(), IDENTITY.field_manager, owner);

    // The Secret first: the pods' hash annotation is its data's.
    let secret_data = checked.driver_config.secret_data();
    let config_hash = data_hash(&secret_data);
    apply_driver_secret(driver, ctx, &applier, &secret_data, &mut report).await;
    let inputs = AssetInputs {
        config: &ctx.config,
        verbosity: driver.spec.log_level.unwrap_or_default().verbosity(),
        config_hash,
        topology: checked.topology.enabled,
        snapshot_crds_present: snapshot_crds_present(ctx).await,
    };
    let (objects, classes) = match assets::render(&inputs) {
        Ok(objects) => split_classes(objects),
        Err(error) => {
            report.failed(identity::STATIC_RESOURCES, "RenderFailed", error.into());
            return report;
        }
    };
    match report
        .apply_all(&applier, &ctx.recorder, driver, &objects)
        .await
    {
        Err(error) => report.failed(identity::STATIC_RESOURCES, "ApplyFailed", error),
        Ok(()) => prune_stale(driver, ctx, &applier, &owner_uid, &objects, &mut report).await,
    }
    sync_storage_class(driver, ctx, classes, &mut report).await;
    workload_health(ctx, &objects, &mut report).await;
    report
}

/// Whether this operator may install over what the installed one's (`status.version`): a
/// downgrade is refused (the reconcile ends with that report) unless managementState is
/// Force, which goes ahead with a Warning Event.
async fn check_version(driver: &ClusterCSIDriver, ctx: &Context) -> ControlFlow<Report> {
    let force = driver.spec.management_state == ManagementState::Force;
    let installed = installed_version(driver);
    match downgrade::check(
        &IDENTITY,
        installed,
        &ctx.config.version,
        operator_kit::release::Release::Current,
        force,
    ) {
        VersionCheck::Proceed => ControlFlow::Continue(()),
        VersionCheck::Refuse { message } => {
            ControlFlow::Break(refuse_downgrade(ctx, installed, message).await)
        }
        VersionCheck::Forced { message } => {
            tracing::warn!("{message}");
            ctx.recorder
                .publish(driver, EventType::Warning, downgrade::FORCED, message)
                .await;
            ControlFlow::Continue(())
        }
    }
}

/// A downgrade refused: nothing is applied or pruned; the installed driver's workloads are
/// still reported on and the status keeps the installed version.
async fn refuse_downgrade(ctx: &Context, installed: Option<&str>, message: String) -> Report {
    tracing::warn!("{message}");
    let mut report = Report {
        driver_version: installed.map(str::to_string),
        ..Report::default()
    };
    report.health(
        identity::OPERATOR_VERSION,
        &Health {
            available: true,
            progressing: false,
            degraded: Some(message.clone()),
            reason: downgrade::REFUSED.into(),
            message,
        },
    );
    match assets::render(&names_only_inputs(&ctx.config)) {
        Ok(objects) => workload_health(ctx, &objects, &mut report).await,
        Err(error) => report.failed(identity::STATIC_RESOURCES, "RenderFailed", error.into()),
    }
    report
}

/// Inputs for rendering the driver's objects only to know which they are (kinds and names).
pub(super) fn names_only_inputs(config: &OperatorConfig) -> AssetInputs<'_> {
    AssetInputs {
        config,
        verbosity: LogLevel::Normal.verbosity(),
        config_hash: String::new(),
        topology: false,
        snapshot_crds_present: false,
    }
}

/// The rendered objects without the StorageClasses, and those as classes for
/// [`storage_classes::sync`] (which honours `storageClassState`).
pub(super) fn split_classes(objects: Vec<DynamicObject>) -> (Vec<DynamicObject>, Vec<Wanted>) {
    let mut rest = Vec::new();
    let mut classes = Vec::new();
    for object in objects {
        let is_class = object
            .types
            .as_ref()
            .is_some_and(|t| t.kind == "StorageClass");
        if !is_class {
            rest.push(object);
            continue;
        }
        let name = object.metadata.name.clone().unwrap_or_default();
        let wanted = serde_json::to_value(&object)
            .and_then(serde_json::from_value::<StorageClass>)
            .map(|class| Wanted::Class(Box::new(class)))
            .unwrap_or_else(|e| Wanted::Skip {
                name,
                reason: format!("the rendered StorageClass is not one: {e}"),
            });
        classes.push(wanted);
    }
    (rest, classes)
}

/// Applies the driver Secret (the translated cloud.conf and the CA bundle).
async fn apply_driver_secret(
    driver: &ClusterCSIDriver,
    ctx: &Context,
    applier: &Applier,
    data: &BTreeMap<String, String>,
    report: &mut Report,
) {
    let result = match driver_secret(&ctx.config, data) {
        Ok(secret) => applier.apply(&secret).await.map_err(Error::from),
        Err(error) => Err(error),
    };
    match result {
        Ok(applied) => ctx.recorder.applied(driver, &applied).await,
        Err(error) => report.failed(identity::CONFIG, "SyncFailed", error),
    }
}

/// Whether the VolumeSnapshotClass CRD exists; when that cannot be read, assume not.
async fn snapshot_crds_present(ctx: &Context) -> bool {
    match Api::<CustomResourceDefinition>::all(ctx.client.clone())
        .get_opt(SNAPSHOT_CLASS_CRD)
        .await
    {
        Ok(found) => found.is_some(),
        Err(error) => {
            tracing::warn!(%error, "cannot tell whether the snapshot CRDs exist; assuming not");
            false
        }
    }
}

/// Once everything wanted is in place: deletes what the operator installed before and no
/// longer renders, with an Event each.
async fn prune_stale(
    driver: &ClusterCSIDriver,
    ctx: &Context,
    applier: &Applier,
    owner_uid: &str,
    objects: &[DynamicObject],
    report: &mut Report,
) {
    let mut wanted: BTreeSet<ObjectKey> = objects.iter().map(ObjectKey::of).collect();
    wanted.insert(driver_secret_key(&ctx.config));
    let scope = Scope {
        identity: &IDENTITY,
        namespace: &ctx.config.namespace,
        owner_uid,
        kinds: PRUNED_KINDS,
    };
    match prune::prune(&ctx.client, applier, &scope, &wanted).await {
        Ok(deleted) => {
            for key in &deleted {
                ctx.recorder
                    .deleted(driver, key, ": the operator no longer installs it")
                    .await;
            }
            report.health(identity::STATIC_RESOURCES, &Health::ok("AsExpected", ""));
        }
        Err(error) => report.failed(identity::STATIC_RESOURCES, "PruneFailed", error.into()),
    }
}

/// The StorageClass `standard-csi`, as `storageClassState` allows.
async fn sync_storage_class(
    driver: &ClusterCSIDriver,
    ctx: &Context,
    classes: Vec<Wanted>,
    report: &mut Report,
) {
    let state = driver.spec.storage_class_state.unwrap_or_default();
    match storage_classes::sync(&ctx.client, &IDENTITY, &classes, state).await {
        Ok(changes) => {
            ctx.recorder.class_changes(driver, &changes).await;
            report.health(
                identity::STORAGE_CLASSES,
                &Health::ok("AsExpected", class_message(state, &changes)),
            );
        }
        Err(error) => report.failed(identity::STORAGE_CLASSES, "SyncFailed", error.into()),
    }
}

/// The StorageClass condition's message: what the state did.
pub(super) fn class_message(
    state: operator_kit::api::StorageClassState,
    changes: &[ClassChange],
) -> String {
    use operator_kit::api::StorageClassState;
    let skipped: Vec<String> = changes
        .iter()
        .filter_map(|c| match c {
            ClassChange::Skipped { name, reason } => Some(format!("{name}: {reason}")),
            _ => None,
        })
        .collect();
    if !skipped.is_empty() {
        return format!("skipped: {}", skipped.join("; "));
    }
    match state {
        StorageClassState::Managed => {
            format!("StorageClass {} is managed", crate::config::STORAGE_CLASS)
        }
        StorageClassState::Unmanaged => format!(
            "storageClassState is Unmanaged: StorageClass {} is neither created nor updated",
            crate::config::STORAGE_CLASS
        ),
        StorageClassState::Removed => format!(
            "storageClassState is Removed: the operator's StorageClass {} is deleted",
            crate::config::STORAGE_CLASS
        ),
    }
}

/// The driver Secret's key, for the prune's wanted set.
pub(super) fn driver_secret_key(config: &OperatorConfig) -> ObjectKey {
    ObjectKey {
        api_version: "v1".into(),
        kind: "Secret".into(),
        namespace: Some(config.namespace.clone()),
        name: config.driver_secret.clone(),
    }
}

/// The driver Secret as an object to apply.
pub(super) fn driver_secret(
    config: &OperatorConfig,
    data: &BTreeMap<String, String>,
) -> Result<DynamicObject> {
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(config.driver_secret.clone()),
            namespace: Some(config.namespace.clone()),
            labels: Some(IDENTITY.labels()),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        data: Some(
            data.iter()
                .map(|(k, v)| (k.clone(), k8s_openapi::ByteString(v.clone().into_bytes())))
                .collect(),
        ),
        ..Default::default()
    };
    let invalid = |e: serde_json::Error| {
        Error::Invalid(format!(
            "building Secret {}/{}: {e}",
            config.namespace, config.driver_secret
        ))
    };
    let mut value = serde_json::to_value(&secret).map_err(invalid)?;
    value["apiVersion"] = serde_json::json!("v1");
    value["kind"] = serde_json::json!("Secret");
    serde_json::from_value(value).map_err(invalid)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use operator_kit::api::StorageClassState;

    use super::*;

    #[test]
    fn the_storage_class_goes_to_the_class_sync_as_one_the_operator_made() {
        let config = OperatorConfig::new("ns");
        let mut inputs = names_only_inputs(&config);
        inputs.snapshot_crds_present = true;
        let (objects, classes) = split_classes(assets::render(&inputs).unwrap());
        assert!(
            objects
                .iter()
                .all(|o| o.types.as_ref().unwrap().kind != "StorageClass")
        );
        assert!(
            objects
                .iter()
                .any(|o| o.types.as_ref().unwrap().kind == "VolumeSnapshotClass"),
            "the snapshot class is applied like the other objects"
        );
        let [Wanted::Class(class)] = classes.as_slice() else {
            panic!("{classes:?}");
        };
        assert_eq!(class.metadata.name.as_deref(), Some("standard-csi"));
        assert!(storage_classes::made_by(&IDENTITY, class));
        assert_eq!(
            class.volume_binding_mode.as_deref(),
            Some("WaitForFirstConsumer")
        );
        assert_eq!(class.allow_volume_expansion, Some(true));
    }

    #[test]
    fn the_class_message_says_what_the_state_did() {
        assert_eq!(
            class_message(StorageClassState::Managed, &[]),
            "StorageClass standard-csi is managed"
        );
        assert!(
            class_message(StorageClassState::Unmanaged, &[])
                .contains("neither created nor updated")
        );
        let skipped = [ClassChange::Skipped {
            name: "standard-csi".into(),
            reason: "a StorageClass of that name exists that the operator did not create".into(),
        }];
        assert!(
            class_message(StorageClassState::Managed, &skipped)
                .starts_with("skipped: standard-csi: ")
        );
    }

    #[test]
    fn the_driver_secret_is_labelled_in_the_namespace_and_kept_by_the_prune() {
        let config = OperatorConfig::new("ns");
        let data = BTreeMap::from([("cloud.conf".to_string(), "[Global]\n".to_string())]);
        let secret = driver_secret(&config, &data).unwrap();
        assert_eq!(ObjectKey::of(&secret), driver_secret_key(&config));
        assert!(IDENTITY.is_managed(secret.metadata.labels.as_ref()));
        assert!(PRUNED_KINDS.contains(&"Secret"));
    }
}
