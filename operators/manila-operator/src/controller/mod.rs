//! The reconcile of the ClusterCSIDriver `manila.csi.openstack.org`, and the watches that
//! trigger it: the driver's own objects (a deleted or edited child is put back at once, also
//! its Secret and the runtime configuration's ConfigMap), the credentials Secret and CA
//! ConfigMap, and the operator's StorageClasses; plus a periodic
//! resync that picks up new share types.
//!
//! Children: `manage` (managementState Managed/Force, step by step) and `remove` (Removed)
//! produce a `Report`; `workloads` reads the workloads' health into it; the report becomes
//! the ClusterCSIDriver's and the ClusterOperator's status
//! ([`Report::write_status`](operator_kit::report::Report::write_status)).

mod manage;
mod remove;
mod report;
mod workloads;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DynamicObject};
use kube::runtime::controller::Action;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use kube_support::backoff::KeyedBackoff;
use operator_kit::api::{ClusterCSIDriver, ManagementState};
use operator_kit::kinds::api_resource;
use operator_kit::metrics::Metrics;
use operator_kit::operator_status::Reporter;
use operator_kit::record::Recorder;
use operator_kit::startup::LogLevelHook;

use crate::config::OperatorConfig;
use crate::error::{Error, Result};
use crate::identity::{self, DRIVER_NAME, IDENTITY};
use crate::prune::BUDGET_KIND;
use manage::manage;
use remove::remove;
use report::Report;

/// What every reconcile needs.
pub struct Context {
    /// The Kubernetes client.
    pub client: Client,
    /// The operator's configuration.
    pub config: OperatorConfig,
    /// Records an Event for every change (and counts it in the metrics).
    pub recorder: Recorder,
    /// Prometheus metrics.
    pub metrics: Arc<Metrics>,
    /// Back-off of failed reconciles.
    pub backoff: KeyedBackoff,
    /// Applies `spec.operatorLogLevel`.
    pub operator_log_level: Option<LogLevelHook>,
}

impl Context {
    /// A context with default back-off (1 s doubling to 2 min) and new metrics.
    pub fn new(client: Client, config: OperatorConfig, instance: &str) -> Self {
        let metrics = Arc::new(identity::metrics());
        Context {
            recorder: Recorder::new(client.clone(), &IDENTITY, instance, metrics.clone()),
            client,
            config,
            metrics,
            backoff: KeyedBackoff::new(Duration::from_secs(1), Duration::from_secs(120)),
            operator_log_level: None,
        }
    }
}

/// Runs the controller until `shutdown` resolves.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    let client = ctx.client.clone();
    let namespace = ctx.config.namespace.as_str();
    tracing::info!(namespace, "watching ClusterCSIDriver {DRIVER_NAME}");
    let mut controller = operator_kit::watches::driver_controller(&client, &IDENTITY, namespace);
    // The controller's PodDisruptionBudget, at the version the cluster serves (policy/v1,
    // or v1beta1 before Kubernetes 1.21): a typed policy/v1 watch would fail there.
    if let Some((budgets, _)) = api_resource(ctx.config.pdb_api_version, BUDGET_KIND) {
        controller = controller.owns_with(
            Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &budgets),
            budgets,
            watcher::Config::default().labels(&IDENTITY.managed_by_selector()),
        );
    }
    operator_kit::watches::inputs(
        controller,
        &client,
        &IDENTITY,
        namespace,
        ctx.config.credentials_secret.clone(),
        ctx.config.ca_config_map.clone(),
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

/// One reconcile of the ClusterCSIDriver.
pub async fn reconcile(driver: Arc<ClusterCSIDriver>, ctx: Arc<Context>) -> Result<Action> {
    ctx.metrics.reconcile();
    if let (Some(hook), Some(level)) = (&ctx.operator_log_level, driver.spec.operator_log_level) {
        hook(level);
    }
    let mut report = match driver.spec.management_state {
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
    if driver.spec.management_state != ManagementState::Removed {
        // A refused removal is over once the state is no longer Removed.
        report.health(
            identity::DRIVER_REMOVAL,
            &operator_kit::status::Health::ok("AsExpected", ""),
        );
    }
    let reporter = Reporter {
        identity: &IDENTITY,
        version: &ctx.config.version,
        namespace: &ctx.config.namespace,
    };
    report
        .write_status(&ctx.client, &ctx.recorder, reporter, &driver)
        .await?;
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
