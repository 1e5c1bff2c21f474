//! The reconcile of the ClusterCSIDriver `manila.csi.openstack.org`, and the watches that
//! trigger it: the driver's own objects (a deleted or edited child is put back at once), the
//! credentials Secret and CA ConfigMap, and the operator's StorageClasses; plus a periodic
//! resync that picks up new share types.

use std::collections::{BTreeMap, BTreeSet};
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
use kube_support::backoff::KeyedBackoff;
use kube_support::events::{EventRecorder, EventType};

use crate::api::{
    CLUSTER_OPERATOR_NAME, ClusterCSIDriver, ClusterCSIDriverStatus, ClusterOperator,
    ClusterOperatorStatus, DRIVER_NAME, GenerationStatus, LogLevel, ManagementState,
    ObjectReference, OperandVersion,
};
use crate::apply::{Applied, Applier, Outcome};
use crate::assets::{self, AssetInputs};
use crate::cloud::{self, ManilaStatus};
use crate::config::OperatorConfig;
use crate::downgrade::{self, VersionCheck};
use crate::error::{Error, Result, kube as kube_error};
use crate::metrics::Metrics;
use crate::prune::{self, ObjectKey};
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
    tracing::warn!(error = %kube_support::error::error_chain(error), ?delay, "reconcile failed; retrying");
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
    /// The version of the installed driver, when it is not this operator's (a refused
    /// downgrade, or Unmanaged: the operator installed nothing).
    driver_version: Option<String>,
}

impl Report {
    fn health(&mut self, prefix: &str, health: &Health) {
        self.conditions.extend(health.conditions(prefix));
    }

    fn failed(&mut self, prefix: &str, reason: &str, error: Error) {
        self.health(
            prefix,
            &Health::degraded(reason, kube_support::error::error_chain(&error)),
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
            Report {
                driver_version: installed_version(&driver).map(str::to_string),
                ..Report::default()
            }
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

/// The version of the operator that last installed the driver (`status.version`).
fn installed_version(driver: &ClusterCSIDriver) -> Option<&str> {
    driver.status.as_ref().and_then(|s| s.version.as_deref())
}

fn owner_reference(driver: &ClusterCSIDriver) -> Option<OwnerReference> {
    driver.controller_owner_ref(&())
}

mod manage;
mod record;
mod workloads;

use manage::{manage, remove};
use record::{
    describe, new_changes, record_applied, record_class_change, record_pruned, write_status,
};
use workloads::workload_health;
pub use workloads::{daemon_set_health, deployment_health};
