//! Liveness of the node plugins, when the operator is given their ports
//! ([`OperatorConfig::node_health_port`], [`OperatorConfig::nfs_node_health_port`]): a
//! livenessprobe sidecar in the Manila node plugin's and the NFS node plugin's pods, each
//! on its own port, calling Probe on the plugin's socket, and a liveness probe of the
//! plugin container against it, so that a plugin that stops answering is restarted.
//!
//! The node pods use the host network: the sidecar listens on all the node's addresses
//! (the kubelet probes the node's address), one port per DaemonSet, the same on every node.
//! Where all pods share one network (the embedded cluster) the nodes' sidecars share the
//! port (`SO_REUSEPORT`, see `harness/cluster`'s README), so the port must differ between
//! clusters that run side by side on one machine: hence no default.

use serde_json::{Value, json};

use super::{NFS_DAEMON_SET, NODE_DAEMON_SET, is_named};
use crate::config::OperatorConfig;

/// The sidecar's container name.
pub const LIVENESS_CONTAINER: &str = "csi-liveness-probe";

/// Adds the sidecar and the probe to `value` when it is a node DaemonSet whose port is
/// configured; `verbosity` is the sidecar's `--v`.
pub(super) fn add(value: &mut Value, config: &OperatorConfig, verbosity: u8) {
    let (port, plugin, socket_dir) = if is_named(value, "DaemonSet", NODE_DAEMON_SET) {
        (config.node_health_port, "csi-driver", "/csi")
    } else if is_named(value, "DaemonSet", NFS_DAEMON_SET) {
        (
            config.nfs_node_health_port,
            "nfs",
            "/var/lib/kubelet/plugins/csi-nfsplugin",
        )
    } else {
        return;
    };
    let Some(port) = port else {
        return;
    };
    let Some(containers) = value["spec"]["template"]["spec"]["containers"].as_array_mut() else {
        return;
    };
    for container in containers.iter_mut().filter(|c| c["name"] == plugin) {
        container["ports"] = json!([{"name": "healthz", "containerPort": port, "protocol": "TCP"}]);
        container["livenessProbe"] = json!({
            "httpGet": {"path": "/healthz", "port": port},
            "initialDelaySeconds": 10,
            "timeoutSeconds": 10,
            "periodSeconds": 30,
            "failureThreshold": 5,
        });
    }
    containers.push(json!({
        "name": LIVENESS_CONTAINER,
        "image": config.images.liveness_probe,
        "resources": {"requests": {"cpu": "10m", "memory": "20Mi"}},
        "args": [
            format!("--csi-address={socket_dir}/csi.sock"),
            format!("--http-endpoint=:{port}"),
            "--probe-timeout=10s",
            format!("--v={verbosity}"),
        ],
        "volumeMounts": [{"name": "plugin-dir", "mountPath": socket_dir}],
    }));
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use kube::api::DynamicObject;
    use operator_kit::api::LogLevel;

    use super::super::{AssetInputs, CONTROLLER_DEPLOYMENT, render_release};
    use super::*;
    use crate::release::Release;

    fn render_with(config: &OperatorConfig, release: Release) -> Vec<DynamicObject> {
        render_release(
            release,
            &AssetInputs {
                config,
                log_level: LogLevel::Debug,
                credentials_hash: String::new(),
                snapshot_crds_present: false,
                settings: Default::default(),
            },
        )
        .unwrap()
    }

    fn pod_spec<'a>(objects: &'a [DynamicObject], name: &str) -> &'a Value {
        let object = objects
            .iter()
            .find(|o| {
                matches!(
                    o.types.as_ref().unwrap().kind.as_str(),
                    "DaemonSet" | "Deployment"
                ) && o.metadata.name.as_deref() == Some(name)
            })
            .unwrap();
        &object.data["spec"]["template"]["spec"]
    }

    fn container<'a>(spec: &'a Value, name: &str) -> Option<&'a Value> {
        spec["containers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
    }

    #[rstest::rstest]
    fn without_ports_the_node_plugins_have_no_liveness_probe(
        #[values(Release::Current, Release::Previous)] release: Release,
    ) {
        let objects = render_with(&OperatorConfig::new("manila-csi"), release);
        for name in [NODE_DAEMON_SET, NFS_DAEMON_SET] {
            let spec = pod_spec(&objects, name);
            assert!(container(spec, LIVENESS_CONTAINER).is_none(), "{name}");
            assert!(!spec.to_string().contains("livenessProbe"), "{name}");
        }
    }

    #[rstest::rstest]
    fn each_node_plugin_is_probed_on_its_own_port(
        #[values(Release::Current, Release::Previous)] release: Release,
    ) {
        let mut config = OperatorConfig::new("manila-csi");
        config.node_health_port = Some(39809);
        config.nfs_node_health_port = Some(39810);
        config.images.liveness_probe = "l:1".into();
        let objects = render_with(&config, release);
        for (name, plugin, port, socket_dir) in [
            (NODE_DAEMON_SET, "csi-driver", 39809, "/csi"),
            (
                NFS_DAEMON_SET,
                "nfs",
                39810,
                "/var/lib/kubelet/plugins/csi-nfsplugin",
            ),
        ] {
            let spec = pod_spec(&objects, name);
            let sidecar = container(spec, LIVENESS_CONTAINER).unwrap();
            assert_eq!(sidecar["image"], "l:1");
            assert_eq!(
                sidecar["args"],
                json!([
                    format!("--csi-address={socket_dir}/csi.sock"),
                    format!("--http-endpoint=:{port}"),
                    "--probe-timeout=10s",
                    "--v=4",
                ]),
                "{name}"
            );
            // The socket the sidecar reads is where the plugin serves it: the same volume.
            let plugin = container(spec, plugin).unwrap();
            let mounted = |c: &Value| -> Option<String> {
                c["volumeMounts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|m| m["name"] == "plugin-dir")
                    .map(|m| m["mountPath"].as_str().unwrap().to_string())
            };
            assert_eq!(mounted(sidecar).as_deref(), Some(socket_dir), "{name}");
            assert!(mounted(plugin).is_some(), "{name}");
            assert_eq!(plugin["livenessProbe"]["httpGet"]["port"], port, "{name}");
            assert_eq!(plugin["ports"][0]["containerPort"], port, "{name}");
            assert_eq!(
                spec["containers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|c| c.get("livenessProbe").is_some())
                    .count(),
                1,
                "{name}"
            );
        }
        // The controller keeps its own (the controller health port), nothing added.
        let controller = pod_spec(&objects, CONTROLLER_DEPLOYMENT);
        assert!(!controller.to_string().contains("39809"));
        assert!(!controller.to_string().contains("39810"));
    }
}
