//! Events about pods, recorded as kubelet records them: core/v1 Events with source
//! `kubelet` on this host, built and posted by kube-support's [`EventRecorder`] (the one
//! event recorder of the workspace). What is kubelet's own here: the reference to a pod or
//! one of its containers (`spec.containers{name}`), and recording in the background, so it
//! never blocks or fails the pod worker.

use k8s_openapi::api::core::v1::{ObjectReference, Pod};
use kube::Client;
use kube_support::events::EventRecorder;

pub use kube_support::events::EventType;

/// The component events are attributed to.
pub const COMPONENT: &str = "kubelet";

/// Records events for one node.
#[derive(Debug, Clone)]
pub struct Recorder {
    events: EventRecorder,
}

impl Recorder {
    /// A recorder for events reported by `node_name`'s kubelet.
    pub fn new(client: Client, node_name: impl Into<String>) -> Self {
        Recorder {
            events: EventRecorder::new(client, COMPONENT, node_name),
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
        let involved = pod_reference(pod, container);
        let events = self.events.clone();
        let reason = reason.to_string();
        let message = message.into();
        tokio::spawn(async move {
            events.publish_for(involved, type_, &reason, message).await;
        });
    }
}

/// The reference kubelet's events carry: the pod, with the container's field path.
fn pod_reference(pod: &Pod, container: Option<&str>) -> ObjectReference {
    let meta = &pod.metadata;
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(meta.name.clone().unwrap_or_default()),
        namespace: Some(meta.namespace.clone().unwrap_or_else(|| "default".into())),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        field_path: container.map(|c| container_field_path(pod, c)),
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use k8s_openapi::api::core::v1::{Container, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    #[test]
    fn events_name_the_pod_and_the_container_by_its_list() {
        let container = |name: &str| Container {
            name: name.into(),
            ..Container::default()
        };
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("web".into()),
                uid: Some("u-1".into()),
                resource_version: Some("7".into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                init_containers: Some(vec![container("setup")]),
                containers: vec![container("main")],
                ..PodSpec::default()
            }),
            ..Pod::default()
        };
        let reference = pod_reference(&pod, None);
        assert_eq!(
            (
                reference.kind.as_deref(),
                reference.namespace.as_deref(),
                reference.name.as_deref(),
                reference.uid.as_deref(),
                reference.field_path
            ),
            (Some("Pod"), Some("default"), Some("web"), Some("u-1"), None)
        );
        assert_eq!(
            pod_reference(&pod, Some("setup")).field_path.as_deref(),
            Some("spec.initContainers{setup}")
        );
        assert_eq!(
            pod_reference(&pod, Some("main")).field_path.as_deref(),
            Some("spec.containers{main}")
        );
    }
}
