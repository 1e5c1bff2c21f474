//! The snapshot controller: two kube-runtime controllers sharing one [`Context`].
//!
//! - [`snapshot`] reconciles VolumeSnapshots (triggered by their contents and by the PVCs
//!   they snapshot or that restore from them): creates the dynamic content, binds, copies the
//!   status, manages the snapshot and PVC finalizers, and handles deletion ([`deletion`]).
//! - [`content`] reconciles VolumeSnapshotContents: their finalizer, and deleting a content
//!   with the Delete policy whose snapshot is gone.
//!
//! A snapshot the controller cannot make progress on gets `status.error` and a Warning event
//! naming the cause (see [`crate::Error`]), and is retried with exponential back-off.
//! Finalizers are added and removed with [`kube_support::finalizers`], as in the CSI
//! sidecars.

pub mod class;
pub mod content;
pub mod deletion;
pub mod snapshot;
pub mod status;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use kube_support::backoff::KeyedBackoff;
use kube_support::events::{EventRecorder, EventType};
use sidecar_common::run::{stop_flag, stopped};

use crate::Error;
use crate::api::{VolumeSnapshot, VolumeSnapshotContent};

/// The name events are reported under (upstream's controller name).
pub const CONTROLLER_NAME: &str = "snapshot-controller";

/// First retry delay after a failed reconcile; doubled per consecutive failure.
const BACKOFF_BASE: Duration = Duration::from_millis(500);
/// Longest retry delay.
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// What every reconcile needs: the client, the event recorder and the per-object back-off.
pub struct Context {
    client: Client,
    recorder: EventRecorder,
    backoff: KeyedBackoff,
}

impl Context {
    /// A context reporting events as `snapshot-controller` from `host` (e.g. the pod or
    /// node name).
    pub fn new(client: Client, host: &str) -> Self {
        Self {
            recorder: EventRecorder::new(client.clone(), CONTROLLER_NAME, host),
            client,
            backoff: KeyedBackoff::new(BACKOFF_BASE, BACKOFF_MAX),
        }
    }

    /// The API client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Records an event on `obj` (failures are logged, never fatal).
    pub async fn event<K>(&self, obj: &K, type_: EventType, reason: &str, note: String)
    where
        K: Resource<DynamicType = ()>,
    {
        self.recorder.publish(obj, type_, reason, note).await;
    }

    /// Forgets the failures of `key` after a successful reconcile.
    pub(crate) fn reset_backoff(&self, key: &str) {
        self.backoff.succeeded(key);
    }
}

pub(crate) fn backoff_key<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    format!(
        "{}/{}/{}",
        K::kind(&()),
        obj.meta().namespace.as_deref().unwrap_or_default(),
        obj.meta().name.as_deref().unwrap_or_default()
    )
}

fn error_policy<K: Resource<DynamicType = ()>>(
    obj: Arc<K>,
    error: &Error,
    ctx: Arc<Context>,
) -> Action {
    let delay = ctx.backoff.failed(&backoff_key(obj.as_ref()));
    tracing::debug!(error = %error, ?delay, "reconcile failed, retrying");
    Action::requeue(delay)
}

/// Runs both controllers until `shutdown` completes (then finishes in-flight reconciles).
pub async fn run(client: Client, shutdown: impl Future<Output = ()> + Send + Sync + 'static) {
    run_with(Arc::new(Context::new(client, CONTROLLER_NAME)), shutdown).await;
}

/// [`run`] with a given context (e.g. one naming the reporting instance).
pub async fn run_with(
    ctx: Arc<Context>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let client = ctx.client().clone();
    let snapshots: Api<VolumeSnapshot> = Api::all(client.clone());
    let contents: Api<VolumeSnapshotContent> = Api::all(client.clone());
    let pvcs: Api<PersistentVolumeClaim> = Api::all(client.clone());

    // One shutdown signal for both controllers.
    let stop = stop_flag(shutdown);

    let snapshot_controller = Controller::new(snapshots, watcher::Config::default());
    let store = snapshot_controller.store();
    let snapshot_controller = snapshot_controller
        .watches(contents.clone(), watcher::Config::default(), |content| {
            let reference = &content.spec.volume_snapshot_ref;
            match (&reference.name, &reference.namespace) {
                (Some(name), Some(namespace)) => {
                    Some(ObjectRef::<VolumeSnapshot>::new(name).within(namespace))
                }
                _ => None,
            }
        })
        .watches(pvcs, watcher::Config::default(), move |pvc| {
            snapshots_concerning(&store.state(), &pvc)
        })
        .graceful_shutdown_on(stopped(stop.clone()))
        .run(
            |vs, ctx| async move { snapshot::reconcile(vs, ctx).await },
            error_policy,
            ctx.clone(),
        )
        .for_each(|_| async {});

    let content_controller = Controller::new(contents, watcher::Config::default())
        .graceful_shutdown_on(stopped(stop))
        .run(
            |content, ctx| async move { content::reconcile(content, ctx).await },
            error_policy,
            ctx.clone(),
        )
        .for_each(|_| async {});

    futures::join!(snapshot_controller, content_controller);
}

/// The snapshots a PVC change may unblock: those taken of it, and the one it restores from.
fn snapshots_concerning(
    snapshots: &[Arc<VolumeSnapshot>],
    pvc: &PersistentVolumeClaim,
) -> Vec<ObjectRef<VolumeSnapshot>> {
    let namespace = pvc.namespace().unwrap_or_default();
    let name = pvc.name_any();
    let restored_from = pvc
        .spec
        .as_ref()
        .and_then(|s| s.data_source.as_ref())
        .filter(|ds| ds.kind == "VolumeSnapshot")
        .map(|ds| ds.name.clone());
    snapshots
        .iter()
        .filter(|vs| vs.namespace().as_deref() == Some(namespace.as_str()))
        .filter(|vs| {
            vs.source_pvc() == Some(name.as_str())
                || restored_from.as_deref() == Some(vs.name_any().as_str())
        })
        .map(|vs| ObjectRef::from_obj(vs.as_ref()))
        .collect()
}
