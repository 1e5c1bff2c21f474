//! Events as the upstream sidecars record them: core/v1 Events whose `source.component`
//! is the sidecar (e.g. `manila.csi.openstack.org_csi-provisioner_<host>`), about an
//! `involvedObject`, with a reason, a message and a type. Recording never fails the
//! caller: errors are logged. kubelet-style events are the same with the component
//! `kubelet` and the node as host (`EventRecorder::new(client, "kubelet", node)`), recorded
//! without waiting by [`EventRecorder::publish_in_background`].

use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, PostParams};
use kube::{Client, Resource};

/// `Normal` or `Warning`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Something expected happened.
    Normal,
    /// Something went wrong.
    Warning,
}

impl EventType {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// Records events for one component on one host.
#[derive(Clone)]
pub struct EventRecorder {
    client: Client,
    component: String,
    host: String,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("component", &self.component)
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

impl EventRecorder {
    /// A recorder whose events name `component` (and `host`) as their source.
    pub fn new(client: Client, component: impl Into<String>, host: impl Into<String>) -> Self {
        EventRecorder {
            client,
            component: component.into(),
            host: host.into(),
        }
    }

    /// Records an event about `object` (any Kubernetes object).
    pub async fn publish<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        type_: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        self.publish_for(object.object_ref(&()), type_, reason, message)
            .await;
    }

    /// [`EventRecorder::publish_for`] in a spawned task, for callers that must not wait for
    /// the API server (kubelet-style: a pod's worker records and goes on). Needs a Tokio
    /// runtime.
    pub fn publish_in_background(
        &self,
        involved: ObjectReference,
        type_: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        let recorder = self.clone();
        let reason = reason.to_string();
        let message = message.into();
        tokio::spawn(async move {
            recorder
                .publish_for(involved, type_, &reason, message)
                .await;
        });
    }

    /// The `source.component` (and `reportingComponent`) of the events.
    pub fn component(&self) -> &str {
        &self.component
    }

    /// The `source.host` (and `reportingInstance`) of the events.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Records an event about the object `involved` refers to; cluster-scoped objects get
    /// their events in `default`, as client-go does.
    pub async fn publish_for(
        &self,
        involved: ObjectReference,
        type_: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        let message = message.into();
        let namespace = involved
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let object_name = involved.name.clone().unwrap_or_default();
        let now = k8s_openapi::jiff::Timestamp::now();
        let seq = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        // client-go names events `<object>.<hex nanoseconds>`; the sequence keeps them unique.
        let name = format!(
            "{object_name}.{:x}{seq:x}",
            now.as_nanosecond().unsigned_abs()
        );
        let event = Event {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            involved_object: involved,
            reason: Some(reason.into()),
            message: Some(message.clone()),
            type_: Some(type_.as_str().into()),
            source: Some(EventSource {
                component: Some(self.component.clone()),
                host: Some(self.host.clone()),
            }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            reporting_component: Some(self.component.clone()),
            reporting_instance: Some(self.host.clone()),
            ..Event::default()
        };
        tracing::debug!(reason, object = %object_name, %message, "event");
        let events: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        if let Err(error) = events.create(&PostParams::default(), &event).await {
            tracing::warn!(reason, object = %object_name, %error, "recording an event failed");
        }
    }
}
