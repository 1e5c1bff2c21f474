//! managementState Managed (and Force): one reconcile, step by step. Each step adds its
//! part's conditions to the [`Report`]; a step whose failure leaves nothing sensible to do
//! next ends the reconcile there.
//!
//! 1. the version check ([`check_version`]): an older operator leaves a newer driver alone;
//!    the driver settings ([`DriverSettings`]): a value the driver would refuse leaves the
//!    installed driver alone too;
//! 2. the cloud ([`find_share_types`]): credentials, Manila in the catalog, its share types;
//! 3. the driver Secret ([`sync_driver_secret`]), whose hash goes into the pod templates;
//! 4. the driver's objects ([`render_objects`], [`Report::apply_all`](operator_kit::report::Report::apply_all)), then what an earlier
//!    release installed and this one does not ([`prune_stale`]);
//! 5. one StorageClass per share type ([`sync_storage_classes`]);
//! 6. the workloads' health.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, ObjectMeta};
use kube_support::events::EventType;

use operator_kit::api::{
    ClusterCSIDriver, LogLevel, ManagementState, ManilaDriverConfig, StorageClassState,
};
use operator_kit::apply::Applier;
use operator_kit::downgrade::{self, VersionCheck};
use operator_kit::prune::ObjectKey;
use operator_kit::status::{Condition, Health, Status};
use operator_kit::storage_classes::ClassChange;
use operator_kit::templates::data_hash;

use super::report::Report;
use super::workloads::workload_health;
use super::{Context, installed_version, owner_reference};
use crate::assets::{self, AssetInputs};
use crate::cloud::{self, CloudInputs, ManilaStatus, ShareType};
use crate::config::OperatorConfig;
use crate::driver_config::{DriverSettings, SettingsError};
use crate::error::{Error, Result};
use crate::identity::{self, DRIVER_NAME, IDENTITY, SHARE_TYPES};
use crate::prune;
use crate::secret_sync;
use crate::storage_classes;

/// The CRD whose presence makes the operator install a VolumeSnapshotClass.
const SNAPSHOT_CLASS_CRD: &str = "volumesnapshotclasses.snapshot.storage.k8s.io";

/// managementState Managed or Force: install the driver and keep it as wanted.
pub(super) async fn manage(driver: &ClusterCSIDriver, ctx: &Context) -> Report {
    if let ControlFlow::Break(refused) = check_version(driver, ctx).await {
        return refused;
    }
    let settings = match DriverSettings::from_spec(manila_config(driver)) {
        Ok(settings) => settings,
        Err(error) => return refuse_settings(driver, ctx, error).await,
    };
    let mut report = Report::default();
    report.health(identity::OPERATOR_VERSION, &Health::ok("AsExpected", ""));
    let inputs = match cloud::read_inputs(&ctx.client, &ctx.config).await {
        Ok(inputs) => inputs,
        Err(error) => {
            report.failed(identity::CREDENTIALS, "InvalidCredentials", error.into());
            return report;
        }
    };
    let Some(share_types) = find_share_types(ctx, &inputs, &mut report).await else {
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

    // Credentials first: the pods' hash annotation depends on them.
    let credentials_hash = sync_driver_secret(driver, ctx, &applier, &inputs, &mut report).await;
    let Some(objects) = render_objects(driver, ctx, credentials_hash, &settings, &mut report).await
    else {
        return report;
    };
    match report
        .apply_all(&applier, &ctx.recorder, driver, &objects)
        .await
    {
        Err(error) => report.failed(identity::STATIC_RESOURCES, "ApplyFailed", error),
        Ok(()) => prune_stale(driver, ctx, &applier, &owner_uid, &objects, &mut report).await,
    }
    sync_storage_classes(driver, ctx, &share_types, &settings, &mut report).await;
    workload_health(ctx, &objects, &mut report).await;
    report
}

/// Whether this operator may install its release over what the installed one's
/// (`status.version`): a downgrade is refused (the reconcile ends with that report) unless
/// managementState is Force, which goes ahead with a Warning Event.
async fn check_version(driver: &ClusterCSIDriver, ctx: &Context) -> ControlFlow<Report> {
    let force = driver.spec.management_state == ManagementState::Force;
    let installed = installed_version(driver);
    match downgrade::check(
        &IDENTITY,
        installed,
        &ctx.config.version,
        ctx.config.release,
        force,
    ) {
        VersionCheck::Proceed => {}
        VersionCheck::Refuse { message } => {
            return ControlFlow::Break(refuse_downgrade(ctx, installed, message).await);
        }
        VersionCheck::Forced { message } => {
            // Once: the status then reports this operator's version.
            tracing::warn!("{message}");
            ctx.recorder
                .publish(driver, EventType::Warning, downgrade::FORCED, message)
                .await;
        }
    }
    ControlFlow::Continue(())
}

/// Manila's share types, or `None` when the reconcile stops here: the credentials cannot be
/// used (Degraded), or Manila is disabled (not Degraded; an installed driver is kept).
async fn find_share_types(
    ctx: &Context,
    inputs: &CloudInputs,
    report: &mut Report,
) -> Option<Vec<ShareType>> {
    let share_types = match cloud::probe_manila(inputs).await {
        Ok(ManilaStatus::Available(types)) => types,
        Ok(ManilaStatus::Disabled { reason, message }) => {
            let installed = driver_installed(ctx).await;
            let message = if installed {
                format!("{message}; the installed driver is kept so volumes can still be unmounted")
            } else {
                format!("{message}; the driver is not installed")
            };
            report.conditions.push(Condition::new(
                identity::MANILA_DISABLED,
                Status::True,
                reason.as_str(),
                message,
            ));
            report.health(identity::CREDENTIALS, &Health::ok("AsExpected", ""));
            return None;
        }
        Err(error) => {
            report.failed(identity::CREDENTIALS, "InvalidCredentials", error.into());
            return None;
        }
    };
    ctx.metrics.set(&SHARE_TYPES, share_types.len() as u64);
    report.conditions.push(Condition::new(
        identity::MANILA_DISABLED,
        Status::False,
        "AsExpected",
        format!("Manila offers {} share type(s)", share_types.len()),
    ));
    Some(share_types)
}

/// Applies the driver's flat Secret and returns the hash of its data (for the pod
/// templates, also when applying failed).
async fn sync_driver_secret(
    driver: &ClusterCSIDriver,
    ctx: &Context,
    applier: &Applier,
    inputs: &CloudInputs,
    report: &mut Report,
) -> String {
    let secret_data = secret_sync::driver_secret_data(inputs, ctx.config.release);
    let credentials_hash = data_hash(&secret_data);
    match driver_secret(&ctx.config, &secret_data) {
        Ok(secret) => match applier.apply(&secret).await {
            Ok(applied) => {
                ctx.recorder.applied(driver, &applied).await;
                report.health(identity::CREDENTIALS, &Health::ok("AsExpected", ""));
            }
            Err(error) => report.failed(identity::CREDENTIALS, "SyncFailed", error.into()),
        },
        Err(error) => report.failed(identity::CREDENTIALS, "SyncFailed", error),
    }
    credentials_hash
}

/// The driver's objects of the configured release, or `None` (Degraded) when the embedded
/// manifests cannot be rendered.
async fn render_objects(
    driver: &ClusterCSIDriver,
    ctx: &Context,
    credentials_hash: String,
    settings: &DriverSettings,
    report: &mut Report,
) -> Option<Vec<DynamicObject>> {
    let inputs = AssetInputs {
        config: &ctx.config,
        log_level: driver.spec.log_level.unwrap_or_default(),
        credentials_hash,
        snapshot_crds_present: snapshot_crds_present(ctx).await,
        settings: settings.clone(),
    };
    match assets::render(&inputs) {
        Ok(objects) => Some(objects),
        Err(error) => {
            report.failed(identity::STATIC_RESOURCES, "RenderFailed", error.into());
            None
        }
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
            tracing::warn!(error = %error, "cannot tell whether the snapshot CRDs exist; assuming not");
            false
        }
    }
}

/// Once everything wanted is in place: deletes what an earlier release (or configuration)
/// installed and this one does not, e.g. N-1's shared sidecar role, with an Event each.
async fn prune_stale(
    driver: &ClusterCSIDriver,
    ctx: &Context,
    applier: &Applier,
    owner_uid: &str,
    objects: &[DynamicObject],
    report: &mut Report,
) {
    let mut wanted: BTreeSet<ObjectKey> = objects.iter().map(ObjectKey::of).collect();
    wanted.insert(ObjectKey {
        api_version: "v1".into(),
        kind: "Secret".into(),
        namespace: Some(ctx.config.namespace.clone()),
        name: ctx.config.driver_secret.clone(),
    });
    match prune::prune(
        &ctx.client,
        applier,
        &ctx.config.namespace,
        owner_uid,
        &wanted,
        ctx.config.pdb_api_version,
    )
    .await
    {
        Ok(deleted) => {
            let why = format!(
                ": the operator's release {} ({}) no longer installs it",
                ctx.config.release, ctx.config.version
            );
            for key in &deleted {
                ctx.recorder.deleted(driver, key, &why).await;
            }
            report.health(identity::STATIC_RESOURCES, &Health::ok("AsExpected", ""));
        }
        Err(error) => report.failed(identity::STATIC_RESOURCES, "PruneFailed", error.into()),
    }
}

/// One StorageClass per share type, as `storageClassState` allows; a class skipped for want
/// of a share network is named in the condition (not Degraded: the others work).
async fn sync_storage_classes(
    driver: &ClusterCSIDriver,
    ctx: &Context,
    share_types: &[ShareType],
    settings: &DriverSettings,
    report: &mut Report,
) {
    let share_networks = manila_config(driver)
        .map(|m| m.share_network_ids.clone())
        .unwrap_or_default();
    let class_state = driver.spec.storage_class_state.unwrap_or_default();
    match storage_classes::sync(
        &ctx.client,
        share_types,
        &share_networks,
        settings,
        class_state,
        &ctx.config,
    )
    .await
    {
        Ok(changes) => {
            let skipped: Vec<String> = changes
                .iter()
                .filter_map(|c| match c {
                    ClassChange::Skipped { name, reason } => Some(format!("{name}: {reason}")),
                    _ => None,
                })
                .collect();
            ctx.recorder.class_changes(driver, &changes).await;
            let message = class_state_message(class_state, share_types.len(), &changes);
            let mut health = Health::ok("AsExpected", message);
            if !skipped.is_empty() {
                // Not degraded: the other classes work; the message says what to configure.
                health.message = format!("skipped: {}", skipped.join("; "));
            }
            report.health(identity::STORAGE_CLASSES, &health);
        }
        Err(error) => report.failed(identity::STORAGE_CLASSES, "SyncFailed", error.into()),
    }
}

/// The StorageClasses condition's message: what the state did with the classes.
fn class_state_message(
    state: StorageClassState,
    share_types: usize,
    changes: &[ClassChange],
) -> String {
    match state {
        StorageClassState::Managed => format!("{share_types} share type(s)"),
        StorageClassState::Unmanaged => format!(
            "storageClassState is Unmanaged: the StorageClasses of {share_types} share type(s) are neither created nor updated"
        ),
        StorageClassState::Removed => {
            let deleted = changes
                .iter()
                .filter(|c| matches!(c, ClassChange::Deleted { .. }))
                .count();
            format!(
                "storageClassState is Removed: the operator's StorageClasses are deleted ({deleted} this time)"
            )
        }
    }
}

/// A downgrade refused: nothing is applied, pruned or synced; the installed driver's
/// workloads are still reported on, the status keeps the installed version, and the
/// version condition is Degraded (its first report is a Warning Event) but the driver stays
/// Available as long as its workloads are.
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
    // The workloads have the same names in every release.
    match assets::render(&names_only_inputs(&ctx.config)) {
        Ok(objects) => workload_health(ctx, &objects, &mut report).await,
        Err(error) => report.failed(identity::STATIC_RESOURCES, "RenderFailed", error.into()),
    }
    report
}

/// Settings that do not pass the checks: nothing is applied, pruned or synced; the
/// installed driver's workloads are still reported on and the status keeps the installed
/// version. The static resources' condition is Degraded naming the field (its first report
/// is a Warning Event), while the driver stays Available as long as its workloads are.
async fn refuse_settings(driver: &ClusterCSIDriver, ctx: &Context, error: SettingsError) -> Report {
    tracing::warn!("{error}");
    let mut report = Report {
        driver_version: installed_version(driver).map(str::to_string),
        ..Report::default()
    };
    report.health(identity::OPERATOR_VERSION, &Health::ok("AsExpected", ""));
    report.health(identity::STATIC_RESOURCES, &error.health());
    match assets::render(&names_only_inputs(&ctx.config)) {
        Ok(objects) => workload_health(ctx, &objects, &mut report).await,
        Err(error) => report.failed(identity::STATIC_RESOURCES, "RenderFailed", error.into()),
    }
    report
}

/// `spec.driverConfig.manila`, when set.
fn manila_config(driver: &ClusterCSIDriver) -> Option<&ManilaDriverConfig> {
    driver
        .spec
        .driver_config
        .as_ref()
        .and_then(|c| c.manila.as_ref())
}

/// Inputs for rendering the driver's objects only to know which they are (their kinds and
/// names): default verbosity, no hash, no snapshot class, and settings that render every
/// object a setting can add (the runtime configuration's ConfigMap), so that Removed
/// deletes it too.
pub(super) fn names_only_inputs(config: &OperatorConfig) -> AssetInputs<'_> {
    AssetInputs {
        config,
        log_level: LogLevel::Normal,
        credentials_hash: String::new(),
        snapshot_crds_present: false,
        settings: DriverSettings {
            match_export_location_address: Some("0.0.0.0/0".into()),
            ..DriverSettings::default()
        },
    }
}

/// Whether the driver was installed before (its controller Deployment exists).
async fn driver_installed(ctx: &Context) -> bool {
    let api = Api::<Deployment>::namespaced(ctx.client.clone(), &ctx.config.namespace);
    let managed = ListParams::default().labels(&IDENTITY.managed_by_selector());
    match api.list_metadata(&managed).await {
        Ok(list) => !list.items.is_empty(),
        Err(error) => {
            tracing::warn!(error = %error, "cannot list the driver's Deployments");
            true
        }
    }
}

/// The driver's flat Secret as an object to apply.
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
    let mut value = serde_json::to_value(&secret).map_err(|e| {
        Error::Invalid(format!(
            "building Secret {}/{}: {e}",
            config.namespace, config.driver_secret
        ))
    })?;
    value["apiVersion"] = serde_json::json!("v1");
    value["kind"] = serde_json::json!("Secret");
    serde_json::from_value(value).map_err(|e| {
        Error::Invalid(format!(
            "building Secret {}/{}: {e}",
            config.namespace, config.driver_secret
        ))
    })
}
