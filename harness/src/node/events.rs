//! Events about pods, recorded as kubelet records them (core/v1 Events with source
//! `kubelet` on this host). Recording never blocks or fails the caller.

use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use kube::Client;
use kube::api::{Api, PostParams};

/// The component events are attributed to.
pub const COMPONENT: &str = "kubelet";

/// Whether an event reports something normal or a problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// `Normal`.
    Normal,
    /// `Warning`.
    Warning,
}

/// Records events for one node.
#[derive(Clone)]
pub struct Recorder {
    client: Client,
    node_name: String,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("node_name", &self.node_name)
            .finish_non_exhaustive()
    }
}

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

impl Recorder {
    /// A recorder for events reported by `node_name`'s kubelet.
    pub fn new(client: Client, node_name: impl Into<String>) -> Self {
        Recorder {
            client,
            node_name: node_name.into(),
        }
    }

    /// Records an event about `pod` (or one of its containers) in the background.
    pub fn pod(
        &self,
        pod: &Pod,
        container: Option<&str>,
        type_: EventType,
        reason: &str,
        message: impl Into<String>,
    ) {
        let meta = &pod.metadata;
        let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
        let pod_name = meta.name.clone().unwrap_or_default();
        let involved = ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod_name.clone()),
            namespace: Some(namespace.clone()),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            field_path: container.map(|c| container_field_path(pod, c)),
        };
        self.record(namespace, pod_name, involved, type_, reason, message.into());
    }

    fn record(
        &self,
        namespace: String,
        object_name: String,
        involved: ObjectReference,
        type_: EventType,
        reason: &str,
        message: String,
    ) {
        let now = k8s_openapi::jiff::Timestamp::now();
        let seq = SEQUENCE.fetch_add(1, Ordering::Relaxed);
        // kubelet names events `<object>.<hex nanoseconds>`; the sequence keeps names unique.
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
            message: Some(message),
            type_: Some(
                match type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .into(),
            ),
            source: Some(EventSource {
                component: Some(COMPONENT.into()),
                host: Some(self.node_name.clone()),
            }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            event_time: None::<MicroTime>,
            count: Some(1),
            reporting_component: Some(COMPONENT.into()),
            reporting_instance: Some(self.node_name.clone()),
            ..Event::default()
        };
        let events: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        tracing::debug!(reason, object = %object_name, "event");
        tokio::spawn(async move {
            if let Err(e) = events.create(&PostParams::default(), &event).await {
                tracing::debug!(error = %e, "recording an event failed");
            }
        });
    }
}

/// `spec.containers{name}` or `spec.initContainers{name}`.
fn container_field_path(pod: &Pod, container: &str) -> String {
    let is_init = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.name == container));
    if is_init {
        format!("spec.initContainers{{{container}}}")
    } else {
        format!("spec.containers{{{container}}}")
    }
}
