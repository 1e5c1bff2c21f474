//! The reconcile of the ClusterCSIDriver `manila.csi.openstack.org`, and the watches that
//! trigger it: the driver's own objects (a deleted or edited child is put back at once), the
//! credentials Secret and CA ConfigMap, and the operator's StorageClasses; plus a periodic
//! resync that picks up new share types.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use sidecar_common::backoff::KeyedBackoff;
use sidecar_common::events::{EventRecorder, EventType};

use crate::api::{
    CLUSTER_OPERATOR_NAME, ClusterCSIDriver, ClusterCSIDriverStatus, ClusterOperator,
    ClusterOperatorStatus, DRIVER_NAME, GenerationStatus, LogLevel, ManagementState,
    ObjectReference, OperandVersion,
};
use crate::apply::{Applied, Applier, Outcome};
use crate::assets::{self, AssetInputs};
use crate::cloud::{self, ManilaStatus};
use crate::config::OperatorConfig;
use crate::error::{Error, Result, kube as kube_error};
use crate::metrics::Metrics;
use crate::secret_sync;
use crate::status::{self, Condition, Health, Status};
use crate::storage_classes::{self, ClassChange};

/// The field manager of everything the operator applies.
pub const FIELD_MANAGER: &str = "manila-csi-driver-operator";
/// The label on every object the operator creates.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Its value.
pub const MANAGED_BY: &str = "manila-csi-driver-operator";
/// The CRD whose presence makes the operator install a VolumeSnapshotClass.
const SNAPSHOT_CLASS_CRD: &str = "volumesnapshotclasses.snapshot.storage.k8s.io";
/// How soon to look again while a rollout is in progress (watches usually come first).
const PROGRESS_POLL: Duration = Duration::from_secs(5);

/// Called with the operator's own log level when `spec.operatorLogLevel` changes.
pub type LogLevelHook = Box<dyn Fn(LogLevel) + Send + Sync>;

/// What every reconcile needs.
pub struct Context {
    /// The Kubernetes client.
    pub client: Client,
    /// The operator's configuration.
    pub config: OperatorConfig,
    /// Records an Event for every change.
    pub recorder: EventRecorder,
    /// Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// Back-off of failed reconciles.
    pub backoff: KeyedBackoff,
    /// Applies `spec.operatorLogLevel`.
    pub operator_log_level: Option<LogLevelHook>,
    /// StorageClasses already reported as skipped (one Warning each, not one per sync).
    skipped_classes: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

impl Context {
    /// A context with default back-off (1 s doubling to 2 min) and new metrics.
    pub fn new(client: Client, config: OperatorConfig, instance: &str) -> Self {
        Context {
            recorder: EventRecorder::new(client.clone(), FIELD_MANAGER, instance),
            client,
            config,
            metrics: Arc::new(Metrics::default()),
            backoff: KeyedBackoff::new(Duration::from_secs(1), Duration::from_secs(120)),
            operator_log_level: None,
            skipped_classes: Default::default(),
        }
    }
}

/// Runs the controller until `shutdown` resolves.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let client = ctx.client.clone();
    let namespace = ctx.config.namespace.as_str();
    let managed = watcher::Config::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
    let the_driver = || ObjectRef::<ClusterCSIDriver>::new(DRIVER_NAME);
    let credentials_secret = ctx.config.credentials_secret.clone();
    let ca_config_map = ctx.config.ca_config_map.clone();
    tracing::info!(namespace, "watching ClusterCSIDriver {DRIVER_NAME}");
    Controller::new(
        Api::<ClusterCSIDriver>::all(client.clone()),
        watcher::Config::default().fields(&format!("metadata.name={DRIVER_NAME}")),
    )
    .owns(
        Api::<Deployment>::namespaced(client.clone(), namespace),
        managed.clone(),
    )
    .owns(
        Api::<DaemonSet>::namespaced(client.clone(), namespace),
        managed.clone(),
    )
    .owns(
        Api::<ServiceAccount>::namespaced(client.clone(), namespace),
        managed.clone(),
    )
    .owns(
        Api::<Role>::namespaced(client.clone(), namespace),
        managed.clone(),
    )
    .owns(
        Api::<RoleBinding>::namespaced(client.clone(), namespace),
        managed.clone(),
    )
    .owns(Api::<ClusterRole>::all(client.clone()), managed.clone())
    .owns(
        Api::<ClusterRoleBinding>::all(client.clone()),
        managed.clone(),
    )
    .owns(Api::<CSIDriver>::all(client.clone()), managed.clone())
    .watches(
        Api::<Secret>::namespaced(client.clone(), namespace),
        watcher::Config::default(),
        move |secret| {
            let ours =
                secret.labels().get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY);
            (ours || secret.name_any() == credentials_secret).then(the_driver)
        },
    )
    .watches(
        Api::<ConfigMap>::namespaced(client.clone(), namespace),
        watcher::Config::default(),
        move |map| (map.name_any() == ca_config_map).then(the_driver),
    )
    .watches(
        Api::<StorageClass>::all(client.clone()),
        managed,
        move |_| Some(the_driver()),
    )
    .graceful_shutdown_on(shutdown)
    .run(reconcile, error_policy, ctx)
    .for_each(|result| async move {
        if let Err(error) = result {
            tracing::debug!(error = %error, "reconcile ended with an error");
        }
    })
    .await;
}

fn error_policy(driver: Arc<ClusterCSIDriver>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.error();
    let delay = ctx.backoff.failed(&driver.name_any());
    tracing::warn!(error = %sidecar_common::error_chain(error), ?delay, "reconcile failed; retrying");
    Action::requeue(delay)
}

/// What one reconcile found and did, for the status.
#[derive(Default)]
struct Report {
    conditions: Vec<Condition>,
    ready_replicas: Option<i32>,
    generations: Vec<GenerationStatus>,
    requeue: Option<Duration>,
    error: Option<Error>,
}

impl Report {
    fn health(&mut self, prefix: &str, health: &Health) {
        self.conditions.extend(health.conditions(prefix));
    }

    fn failed(&mut self, prefix: &str, reason: &str, error: Error) {
        self.health(
            prefix,
            &Health::degraded(reason, sidecar_common::error_chain(&error)),
        );
        self.error.get_or_insert(error);
    }
}

/// One reconcile of the ClusterCSIDriver.
pub async fn reconcile(driver: Arc<ClusterCSIDriver>, ctx: Arc<Context>) -> Result<Action> {
    ctx.metrics.reconcile();
    if let (Some(hook), Some(level)) = (&ctx.operator_log_level, driver.spec.operator_log_level) {
        hook(level);
    }
    let report = match driver.spec.management_state {
        ManagementState::Unmanaged => {
            tracing::debug!("managementState Unmanaged: hands off");
            Report::default()
        }
        ManagementState::Removed => remove(&driver, &ctx).await,
        ManagementState::Managed | ManagementState::Force => manage(&driver, &ctx).await,
    };
    write_status(&driver, &ctx, &report).await?;
    match report.error {
        Some(error) => Err(error),
        None => {
            ctx.backoff.succeeded(&driver.name_any());
            let periodic = ctx
                .config
                .share_type_sync_interval
                .min(ctx.config.resync_interval);
            Ok(Action::requeue(
                report.requeue.unwrap_or(periodic).min(periodic),
            ))
        }
    }
}

fn owner_reference(driver: &ClusterCSIDriver) -> Option<OwnerReference> {
    driver.controller_owner_ref(&())
}

async fn manage(driver: &ClusterCSIDriver, ctx: &Context) -> Report {
    let mut report = Report::default();
    let inputs = match cloud::read_inputs(&ctx.client, &ctx.config).await {
        Ok(inputs) => inputs,
        Err(error) => {
            report.failed(status::CREDENTIALS, "InvalidCredentials", error.into());
            return report;
        }
    };
    let share_types = match cloud::probe_manila(&inputs).await {
        Ok(ManilaStatus::Available(types)) => types,
        Ok(ManilaStatus::Disabled { reason, message }) => {
            let installed = driver_installed(ctx).await;
            let message = if installed {
                format!("{message}; the installed driver is kept so volumes can still be unmounted")
            } else {
                format!("{message}; the driver is not installed")
            };
            report.conditions.push(Condition::new(
                status::MANILA_DISABLED,
                Status::True,
                reason.as_str(),
                message,
            ));
            report.health(status::CREDENTIALS, &Health::ok("AsExpected", ""));
            return report;
        }
        Err(error) => {
            report.failed(status::CREDENTIALS, "InvalidCredentials", error.into());
            return report;
        }
    };
    ctx.metrics.share_types_seen(share_types.len());
    report.conditions.push(Condition::new(
        status::MANILA_DISABLED,
        Status::False,
        "AsExpected",
        format!("Manila offers {} share type(s)", share_types.len()),
    ));
    let Some(owner) = owner_reference(driver) else {
        report.error = Some(Error::Invalid(format!(
            "ClusterCSIDriver {DRIVER_NAME} has no uid: cannot own the driver's objects"
        )));
        return report;
    };
    let applier = Applier::new(ctx.client.clone(), FIELD_MANAGER, owner);

    // Credentials first: the pods' hash annotation depends on them.
    let secret_data = secret_sync::driver_secret_data(&inputs);
    let credentials_hash = secret_sync::data_hash(&secret_data);
    match driver_secret(&ctx.config, &secret_data) {
        Ok(secret) => match applier.apply(&secret).await {
            Ok(applied) => {
                record_applied(driver, ctx, &applied).await;
                report.health(status::CREDENTIALS, &Health::ok("AsExpected", ""));
            }
            Err(error) => report.failed(status::CREDENTIALS, "SyncFailed", error.into()),
        },
        Err(error) => report.failed(status::CREDENTIALS, "SyncFailed", error),
    }

    let snapshot_crds_present = match Api::<CustomResourceDefinition>::all(ctx.client.clone())
        .get_opt(SNAPSHOT_CLASS_CRD)
        .await
    {
        Ok(found) => found.is_some(),
        Err(error) => {
            tracing::warn!(error = %error, "cannot tell whether the snapshot CRDs exist; assuming not");
            false
        }
    };
    let inputs = AssetInputs {
        config: &ctx.config,
        log_level: driver.spec.log_level.unwrap_or_default(),
        credentials_hash,
        snapshot_crds_present,
    };
    let objects = match assets::render(&inputs) {
        Ok(objects) => objects,
        Err(error) => {
            report.failed(status::STATIC_RESOURCES, "RenderFailed", error.into());
            return report;
        }
    };
    let mut static_failure = None;
    for object in &objects {
        match applier.apply(object).await {
            Ok(applied) => {
                record_applied(driver, ctx, &applied).await;
                if let Some(generation) = applied.generation
                    && matches!(applied.kind.as_str(), "Deployment" | "DaemonSet")
                {
                    report.generations.push(GenerationStatus {
                        group: "apps".into(),
                        resource: format!("{}s", applied.kind.to_ascii_lowercase()),
                        namespace: applied.namespace.clone().unwrap_or_default(),
                        name: applied.name.clone(),
                        last_generation: generation,
                    });
                }
            }
            Err(error) => {
                static_failure.get_or_insert(Error::from(error));
            }
        }
    }
    match static_failure {
        Some(error) => report.failed(status::STATIC_RESOURCES, "ApplyFailed", error),
        None => report.health(status::STATIC_RESOURCES, &Health::ok("AsExpected", "")),
    }

    let share_networks = driver
        .spec
        .driver_config
        .as_ref()
        .and_then(|c| c.manila.as_ref())
        .map(|m| m.share_network_ids.clone())
        .unwrap_or_default();
    let class_state = driver.spec.storage_class_state.unwrap_or_default();
    match storage_classes::sync(
        &ctx.client,
        &share_types,
        &share_networks,
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
            for change in new_changes(ctx, &changes) {
                record_class_change(driver, ctx, change).await;
            }
            let message = format!("{} share type(s)", share_types.len());
            let mut health = Health::ok("AsExpected", message);
            if !skipped.is_empty() {
                // Not degraded: the other classes work; the message says what to configure.
                health.message = format!("skipped: {}", skipped.join("; "));
            }
            report.health(status::STORAGE_CLASSES, &health);
        }
        Err(error) => report.failed(status::STORAGE_CLASSES, "SyncFailed", error.into()),
    }

    workload_health(ctx, &objects, &mut report).await;
    report
}

/// The conditions of the Deployment and DaemonSets among `objects`, from their status.
async fn workload_health(ctx: &Context, objects: &[DynamicObject], report: &mut Report) {
    let namespace = ctx.config.namespace.as_str();
    for object in objects {
        let kind = object.types.as_ref().map(|t| t.kind.as_str()).unwrap_or("");
        let name = object.name_any();
        let (prefix, health) = match kind {
            "Deployment" => {
                let api = Api::<Deployment>::namespaced(ctx.client.clone(), namespace);
                let health = match api.get_opt(&name).await {
                    Ok(Some(deployment)) => {
                        report.ready_replicas = Some(
                            deployment
                                .status
                                .as_ref()
                                .and_then(|s| s.ready_replicas)
                                .unwrap_or(0),
                        );
                        deployment_health(&deployment)
                    }
                    Ok(None) => Health::degraded(
                        "NotFound",
                        format!("Deployment {namespace}/{name} is gone"),
                    ),
                    Err(error) => Health::degraded(
                        "ReadFailed",
                        format!("Deployment {namespace}/{name}: {error}"),
                    ),
                };
                (status::CONTROLLER_SERVICE, health)
            }
            "DaemonSet" => {
                let api = Api::<DaemonSet>::namespaced(ctx.client.clone(), namespace);
                let health = match api.get_opt(&name).await {
                    Ok(Some(daemon_set)) => daemon_set_health(&daemon_set),
                    Ok(None) => Health::degraded(
                        "NotFound",
                        format!("DaemonSet {namespace}/{name} is gone"),
                    ),
                    Err(error) => Health::degraded(
                        "ReadFailed",
                        format!("DaemonSet {namespace}/{name}: {error}"),
                    ),
                };
                let prefix = if name.contains("nfs") {
                    status::NFS_NODE_SERVICE
                } else {
                    status::NODE_SERVICE
                };
                (prefix, health)
            }
            _ => continue,
        };
        if health.progressing {
            report.requeue = Some(PROGRESS_POLL);
        }
        report.health(prefix, &health);
    }
}

/// Available when every replica is ready and up to date; progressing while a rollout runs.
pub fn deployment_health(deployment: &Deployment) -> Health {
    let name = deployment.name_any();
    let wanted = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let status = deployment.status.clone().unwrap_or_default();
    let observed =
        status.observed_generation.unwrap_or(0) >= deployment.metadata.generation.unwrap_or(0);
    let ready = status.ready_replicas.unwrap_or(0);
    let updated = status.updated_replicas.unwrap_or(0);
    let available = status.available_replicas.unwrap_or(0);
    let done = observed && updated >= wanted && ready >= wanted && available >= wanted;
    Health {
        available: available >= wanted.min(1),
        progressing: !done,
        degraded: None,
        reason: if done {
            "AsExpected".into()
        } else {
            "Deploying".into()
        },
        message: format!("Deployment {name}: {ready}/{wanted} ready, {updated} up to date"),
    }
}

/// Available when the pods run on every node they should; progressing while they roll out.
pub fn daemon_set_health(daemon_set: &DaemonSet) -> Health {
    let name = daemon_set.name_any();
    let status = daemon_set.status.clone().unwrap_or_default();
    let observed =
        status.observed_generation.unwrap_or(0) >= daemon_set.metadata.generation.unwrap_or(0);
    let desired = status.desired_number_scheduled;
    let available = status.number_available.unwrap_or(0);
    let updated = status.updated_number_scheduled.unwrap_or(0);
    let done = observed && available >= desired && updated >= desired;
    Health {
        available: available >= desired && (observed || available > 0),
        progressing: !done,
        degraded: None,
        reason: if done {
            "AsExpected".into()
        } else {
            "Deploying".into()
        },
        message: format!("DaemonSet {name}: {available}/{desired} available, {updated} up to date"),
    }
}

/// Whether the driver was installed before (its controller Deployment exists).
async fn driver_installed(ctx: &Context) -> bool {
    let api = Api::<Deployment>::namespaced(ctx.client.clone(), &ctx.config.namespace);
    let managed =
        kube::api::ListParams::default().labels(&format!("{MANAGED_BY_LABEL}={MANAGED_BY}"));
    match api.list_metadata(&managed).await {
        Ok(list) => !list.items.is_empty(),
        Err(error) => {
            tracing::warn!(error = %error, "cannot list the driver's Deployments");
            true
        }
    }
}

/// managementState Removed: the driver's objects go; StorageClasses, the
/// VolumeSnapshotClass and volumes stay.
async fn remove(driver: &ClusterCSIDriver, ctx: &Context) -> Report {
    let mut report = Report::default();
    let Some(owner) = owner_reference(driver) else {
        return report;
    };
    let applier = Applier::new(ctx.client.clone(), FIELD_MANAGER, owner);
    let inputs = AssetInputs {
        config: &ctx.config,
        log_level: LogLevel::Normal,
        credentials_hash: String::new(),
        snapshot_crds_present: false,
    };
    let mut objects = match assets::render(&inputs) {
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

/// The driver's flat Secret as an object to apply.
fn driver_secret(
    config: &OperatorConfig,
    data: &BTreeMap<String, String>,
) -> Result<DynamicObject> {
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(config.driver_secret.clone()),
            namespace: Some(config.namespace.clone()),
            labels: Some(BTreeMap::from([(
                MANAGED_BY_LABEL.to_string(),
                MANAGED_BY.to_string(),
            )])),
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

fn describe(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(namespace) => format!("{kind} {namespace}/{name}"),
        None => format!("{kind} {name}"),
    }
}

async fn record_applied(driver: &ClusterCSIDriver, ctx: &Context, applied: &Applied) {
    let verb = match applied.outcome {
        Outcome::Created => "Created",
        Outcome::Updated => "Updated",
        Outcome::Unchanged => return,
    };
    ctx.metrics.object_changed();
    let what = describe(&applied.kind, applied.namespace.as_deref(), &applied.name);
    tracing::info!("{} {what}", verb.to_ascii_lowercase());
    ctx.recorder
        .publish(
            driver,
            EventType::Normal,
            &format!("{}{verb}", applied.kind),
            format!("{} {what}", verb.to_ascii_lowercase()),
        )
        .await;
}

/// The changes worth an Event: all but a skip already reported (a skip no longer seen is
/// forgotten, so it is reported again if it comes back).
fn new_changes<'a>(ctx: &Context, changes: &'a [ClassChange]) -> Vec<&'a ClassChange> {
    let mut reported = ctx
        .skipped_classes
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let skipped: std::collections::BTreeSet<String> = changes
        .iter()
        .filter_map(|c| match c {
            ClassChange::Skipped { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect();
    let fresh = changes
        .iter()
        .filter(|c| match c {
            ClassChange::Skipped { name, .. } => !reported.contains(name),
            _ => true,
        })
        .collect();
    *reported = skipped;
    fresh
}

async fn record_class_change(driver: &ClusterCSIDriver, ctx: &Context, change: &ClassChange) {
    let (type_, reason, message) = match change {
        ClassChange::Created { name } => (
            EventType::Normal,
            "StorageClassCreated",
            format!("created StorageClass {name}"),
        ),
        ClassChange::Recreated { name, reason } => (
            EventType::Normal,
            "StorageClassRecreated",
            format!("re-created StorageClass {name} (its parameters are immutable): {reason}"),
        ),
        ClassChange::Skipped { name, reason } => (
            EventType::Warning,
            "StorageClassSkipped",
            format!("StorageClass {name} not created: {reason}"),
        ),
    };
    if !matches!(change, ClassChange::Skipped { .. }) {
        ctx.metrics.object_changed();
    }
    tracing::info!("{message}");
    ctx.recorder.publish(driver, type_, reason, message).await;
}

/// Writes the ClusterCSIDriver's status (when it changed) and the ClusterOperator's.
async fn write_status(driver: &ClusterCSIDriver, ctx: &Context, report: &Report) -> Result<()> {
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let current = driver.status.clone().unwrap_or_default();
    let mut next = current.clone();
    let before = current.conditions.clone();
    status::merge(&mut next.conditions, &report.conditions, &now);
    next.observed_generation = driver.metadata.generation;
    next.version = Some(ctx.config.version.clone());
    if let Some(ready) = report.ready_replicas {
        next.ready_replicas = ready;
    }
    if !report.generations.is_empty() {
        next.generations = report.generations.clone();
    }
    if next != current {
        record_transitions(driver, ctx, &before, &next.conditions).await;
        let api = Api::<ClusterCSIDriver>::all(ctx.client.clone());
        let patch = serde_json::json!({ "status": next });
        api.patch_status(DRIVER_NAME, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(kube_error(format!(
                "writing the status of ClusterCSIDriver {DRIVER_NAME}"
            )))?;
    }
    write_cluster_operator(ctx, &next, &now).await
}

/// Warning events when Manila becomes disabled or a sub-controller becomes degraded.
async fn record_transitions(
    driver: &ClusterCSIDriver,
    ctx: &Context,
    before: &[crate::api::OperatorCondition],
    after: &[crate::api::OperatorCondition],
) {
    for condition in after {
        let was_true = before
            .iter()
            .any(|c| c.type_ == condition.type_ && c.status == "True");
        let interesting =
            condition.type_ == status::MANILA_DISABLED || condition.type_.ends_with("Degraded");
        if interesting && condition.status == "True" && !was_true {
            let reason = condition
                .reason
                .clone()
                .unwrap_or_else(|| condition.type_.clone());
            let message = format!(
                "{}: {}",
                condition.type_,
                condition.message.clone().unwrap_or_default()
            );
            ctx.recorder
                .publish(driver, EventType::Warning, &reason, message)
                .await;
        }
    }
}

/// Creates the ClusterOperator if needed and sets its aggregate conditions, versions and
/// related objects.
async fn write_cluster_operator(
    ctx: &Context,
    driver_status: &ClusterCSIDriverStatus,
    now: &Time,
) -> Result<()> {
    let api = Api::<ClusterOperator>::all(ctx.client.clone());
    let existing = api
        .get_opt(CLUSTER_OPERATOR_NAME)
        .await
        .map_err(kube_error(format!(
            "reading ClusterOperator {CLUSTER_OPERATOR_NAME}"
        )))?;
    let existing = match existing {
        Some(existing) => existing,
        None => {
            let object = ClusterOperator::new(CLUSTER_OPERATOR_NAME, Default::default());
            api.patch(
                CLUSTER_OPERATOR_NAME,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&object),
            )
            .await
            .map_err(kube_error(format!(
                "creating ClusterOperator {CLUSTER_OPERATOR_NAME}"
            )))?
        }
    };
    let current = existing.status.clone().unwrap_or_default();
    let mut next = ClusterOperatorStatus {
        conditions: current.conditions.clone(),
        versions: vec![
            OperandVersion {
                name: "operator".into(),
                version: ctx.config.version.clone(),
            },
            OperandVersion {
                name: "manila-csi-driver".into(),
                version: ctx.config.version.clone(),
            },
        ],
        related_objects: related_objects(&ctx.config),
    };
    status::merge(
        &mut next.conditions,
        &status::aggregate(&driver_status.conditions),
        now,
    );
    if next != current {
        let patch = serde_json::json!({ "status": next });
        api.patch_status(
            CLUSTER_OPERATOR_NAME,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(kube_error(format!(
            "writing the status of ClusterOperator {CLUSTER_OPERATOR_NAME}"
        )))?;
    }
    Ok(())
}

fn related_objects(config: &OperatorConfig) -> Vec<ObjectReference> {
    vec![
        ObjectReference {
            group: "operator.openshift.io".into(),
            resource: "clustercsidrivers".into(),
            namespace: None,
            name: DRIVER_NAME.into(),
        },
        ObjectReference {
            group: String::new(),
            resource: "namespaces".into(),
            namespace: None,
            name: config.namespace.clone(),
        },
        ObjectReference {
            group: "storage.k8s.io".into(),
            resource: "csidrivers".into(),
            namespace: None,
            name: DRIVER_NAME.into(),
        },
    ]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use k8s_openapi::api::apps::v1::{DaemonSetStatus, DeploymentSpec, DeploymentStatus};

    #[test]
    fn a_deployment_is_available_with_one_ready_replica_and_done_when_all_are_updated() {
        let mut deployment = Deployment {
            spec: Some(DeploymentSpec {
                replicas: Some(1),
                ..Default::default()
            }),
            status: Some(DeploymentStatus {
                observed_generation: Some(2),
                ready_replicas: Some(1),
                updated_replicas: Some(1),
                available_replicas: Some(1),
                ..Default::default()
            }),
            ..Default::default()
        };
        deployment.metadata.generation = Some(2);
        let health = deployment_health(&deployment);
        assert!(health.available && !health.progressing, "{health:?}");

        deployment.metadata.generation = Some(3);
        let health = deployment_health(&deployment);
        assert!(health.available && health.progressing, "{health:?}");
    }

    #[test]
    fn a_daemon_set_rolling_out_is_progressing() {
        let mut daemon_set = DaemonSet {
            status: Some(DaemonSetStatus {
                observed_generation: Some(1),
                desired_number_scheduled: 2,
                number_available: Some(1),
                updated_number_scheduled: Some(2),
                ..Default::default()
            }),
            ..Default::default()
        };
        daemon_set.metadata.generation = Some(1);
        let health = daemon_set_health(&daemon_set);
        assert!(!health.available && health.progressing, "{health:?}");
        assert!(
            health.message.contains("1/2 available"),
            "{}",
            health.message
        );
    }
}
