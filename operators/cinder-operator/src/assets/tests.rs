#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::collections::BTreeSet;
use std::path::PathBuf;

use super::*;

fn inputs(config: &OperatorConfig) -> AssetInputs<'_> {
    AssetInputs {
        config,
        verbosity: 4,
        config_hash: "0123456789abcdef".into(),
        topology: true,
        snapshot_crds_present: true,
    }
}

fn kind(object: &DynamicObject) -> &str {
    &object.types.as_ref().unwrap().kind
}

fn names(objects: &[DynamicObject]) -> Vec<String> {
    objects
        .iter()
        .map(|o| format!("{} {}", kind(o), o.metadata.name.as_deref().unwrap()))
        .collect()
}

fn find<'a>(objects: &'a [DynamicObject], kind_: &str, name: &str) -> &'a DynamicObject {
    objects
        .iter()
        .find(|o| kind(o) == kind_ && o.metadata.name.as_deref() == Some(name))
        .unwrap()
}

fn containers(object: &DynamicObject) -> Vec<Value> {
    object.data["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .clone()
}

fn container(object: &DynamicObject, name: &str) -> Value {
    containers(object)
        .into_iter()
        .find(|c| c["name"] == name)
        .unwrap()
}

fn args(container: &Value) -> Vec<String> {
    container["args"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

fn mounts(container: &Value) -> Vec<(String, String, Option<String>)> {
    container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().to_owned(),
                m["mountPath"].as_str().unwrap().to_owned(),
                m["mountPropagation"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[test]
fn every_object_is_rendered_in_apply_order() {
    let config = OperatorConfig::new("openshift-cluster-csi-drivers");
    let objects = render(&inputs(&config)).unwrap();
    assert_eq!(
        names(&objects),
        [
            "ServiceAccount openstack-cinder-csi-controllerplugin",
            "ClusterRole openstack-cinder-csi-provisioner",
            "ClusterRoleBinding openstack-cinder-csi-provisioner",
            "ClusterRole openstack-cinder-csi-attacher",
            "ClusterRoleBinding openstack-cinder-csi-attacher",
            "ClusterRole openstack-cinder-csi-resizer",
            "ClusterRoleBinding openstack-cinder-csi-resizer",
            "ClusterRole openstack-cinder-csi-snapshotter",
            "ClusterRoleBinding openstack-cinder-csi-snapshotter",
            "Role openstack-cinder-csi-controllerplugin",
            "RoleBinding openstack-cinder-csi-controllerplugin",
            "ServiceAccount openstack-cinder-csi-nodeplugin",
            "CSIDriver cinder.csi.openstack.org",
            "DaemonSet openstack-cinder-csi-nodeplugin",
            "Deployment openstack-cinder-csi-controllerplugin",
            "VolumeSnapshotClass standard-csi",
            "StorageClass standard-csi",
        ]
    );
    for object in &objects {
        assert_eq!(
            object.metadata.labels.as_ref().unwrap()["app.kubernetes.io/managed-by"],
            "cinder-csi-driver-operator"
        );
        let api_version = &object.types.as_ref().unwrap().api_version;
        let (_, is_namespaced) =
            operator_kit::kinds::api_resource(api_version, kind(object)).unwrap();
        assert_eq!(
            object.metadata.namespace.as_deref(),
            is_namespaced.then_some("openshift-cluster-csi-drivers"),
            "{}",
            names(std::slice::from_ref(object))[0]
        );
        // Every placeholder was filled; Kubernetes' own $(VAR) expansion stays.
        let text = serde_json::to_string(&object.data).unwrap();
        assert!(!text.contains("${"), "{text}");
    }
}

#[test]
fn the_snapshot_class_needs_the_snapshot_crds() {
    let config = OperatorConfig::new("ns");
    let mut without = inputs(&config);
    without.snapshot_crds_present = false;
    let objects = render(&without).unwrap();
    assert!(
        !names(&objects)
            .iter()
            .any(|n| n.starts_with("VolumeSnapshotClass"))
    );
    assert_eq!(objects.len(), render(&inputs(&config)).unwrap().len() - 1);
}

#[test]
fn the_csi_driver_asks_for_attach_pod_info_and_file_fs_group() {
    let config = OperatorConfig::new("ns");
    let objects = render(&inputs(&config)).unwrap();
    let driver = find(&objects, "CSIDriver", "cinder.csi.openstack.org");
    assert_eq!(driver.data["spec"]["attachRequired"], true);
    assert_eq!(driver.data["spec"]["podInfoOnMount"], true);
    assert_eq!(driver.data["spec"]["fsGroupPolicy"], "File");
}

#[test]
fn the_controller_runs_the_driver_and_every_sidecar_with_the_config_mounted() {
    let mut config = OperatorConfig::new("ns");
    config.images.attacher = "example/attacher:1".into();
    let objects = render(&inputs(&config)).unwrap();
    let deployment = find(&objects, "Deployment", CONTROLLER_DEPLOYMENT);
    let names: Vec<String> = containers(deployment)
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "csi-driver",
            "csi-provisioner",
            "csi-attacher",
            "csi-resizer",
            "csi-snapshotter",
            "csi-liveness-probe"
        ]
    );
    assert_eq!(
        container(deployment, "csi-attacher")["image"],
        "example/attacher:1"
    );
    let driver = container(deployment, "csi-driver");
    let driver_args = args(&driver);
    assert!(driver_args.contains(&"--cloud-config=/etc/cinder-csi/cloud.conf".to_owned()));
    assert!(driver_args.contains(&"--with-topology=true".to_owned()));
    assert!(driver_args.contains(&"--provide-node-service=false".to_owned()));
    assert!(driver_args.contains(&"--cluster=kubernetes".to_owned()));
    assert!(mounts(&driver).contains(&("cloud-config".into(), "/etc/cinder-csi".into(), None)));
    let volumes = &deployment.data["spec"]["template"]["spec"]["volumes"];
    assert!(
        volumes
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["name"] == "cloud-config"
                && v["secret"]["secretName"] == "openstack-cinder-config"),
        "{volumes}"
    );
    assert!(
        args(&container(deployment, "csi-provisioner"))
            .contains(&"--feature-gates=Topology=true".to_owned())
    );
}

#[test]
fn topology_off_reaches_the_driver_and_the_provisioner() {
    let config = OperatorConfig::new("ns");
    let mut off = inputs(&config);
    off.topology = false;
    let objects = render(&off).unwrap();
    let deployment = find(&objects, "Deployment", CONTROLLER_DEPLOYMENT);
    assert!(
        args(&container(deployment, "csi-provisioner"))
            .contains(&"--feature-gates=Topology=false".to_owned())
    );
    assert!(
        args(&container(deployment, "csi-driver")).contains(&"--with-topology=false".to_owned())
    );
    let node = find(&objects, "DaemonSet", NODE_DAEMON_SET);
    assert!(args(&container(node, "csi-driver")).contains(&"--with-topology=false".to_owned()));
}

#[test]
fn the_node_plugin_mounts_dev_kubelet_dirs_bidirectionally_and_the_config() {
    let config = OperatorConfig::new("ns");
    let objects = render(&inputs(&config)).unwrap();
    let node = find(&objects, "DaemonSet", NODE_DAEMON_SET);
    let driver = container(node, "csi-driver");
    assert_eq!(driver["securityContext"]["privileged"], true);
    let m = mounts(&driver);
    for wanted in [
        ("pod-mounts", "/var/lib/kubelet/pods", Some("Bidirectional")),
        (
            "kubelet-csi-dir",
            "/var/lib/kubelet/plugins/kubernetes.io/csi",
            Some("Bidirectional"),
        ),
        ("host-dev", "/dev", None),
        ("cloud-config", "/etc/cinder-csi", None),
    ] {
        let wanted = (
            wanted.0.to_owned(),
            wanted.1.to_owned(),
            wanted.2.map(str::to_owned),
        );
        assert!(m.contains(&wanted), "{wanted:?} not in {m:?}");
    }
    assert!(!m.iter().any(|(name, ..)| name == "disk-root"), "{m:?}");
    let names: Vec<String> = containers(node)
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();
    // No liveness sidecar: the embedded cluster's pods share one host network.
    assert_eq!(names, ["csi-driver", "csi-node-driver-registrar"]);
}

#[test]
fn a_disk_root_is_mounted_read_only_into_the_node_driver_only() {
    let mut config = OperatorConfig::new("ns");
    config.disk_source = DiskSource::DiskRoot(PathBuf::from("/tmp/run/disks"));
    let objects = render(&inputs(&config)).unwrap();
    let node = find(&objects, "DaemonSet", NODE_DAEMON_SET);
    let driver = container(node, "csi-driver");
    assert!(
        driver["volumeMounts"].as_array().unwrap().contains(
            &json!({"name": "disk-root", "mountPath": "/tmp/run/disks", "readOnly": true})
        )
    );
    assert!(
        !mounts(&container(node, "csi-node-driver-registrar"))
            .iter()
            .any(|(name, ..)| name == "disk-root")
    );
    assert!(node.data["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap()
        .contains(&json!({"name": "disk-root", "hostPath": {"path": "/tmp/run/disks", "type": "Directory"}})));
}

#[test]
fn the_hash_and_log_level_reach_every_pod_template() {
    let config = OperatorConfig::new("ns");
    let objects = render(&inputs(&config)).unwrap();
    for name in [CONTROLLER_DEPLOYMENT, NODE_DAEMON_SET] {
        let workload = objects
            .iter()
            .find(|o| {
                o.metadata.name.as_deref() == Some(name)
                    && matches!(kind(o), "Deployment" | "DaemonSet")
            })
            .unwrap();
        assert_eq!(
            workload.data["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH_ANNOTATION],
            "0123456789abcdef"
        );
        for c in containers(workload) {
            assert!(args(&c).contains(&"--v=4".to_owned()), "{c}");
        }
        assert!(
            container(workload, "csi-driver")["env"]
                .as_array()
                .unwrap()
                .contains(&json!({"name": "RUST_LOG", "value": "debug"}))
        );
    }
}

#[test]
fn the_storage_class_is_default_only_when_configured() {
    let mut config = OperatorConfig::new("ns");
    let class = |config: &OperatorConfig| {
        let objects = render(&inputs(config)).unwrap();
        find(&objects, "StorageClass", crate::config::STORAGE_CLASS).clone()
    };
    let plain = class(&config);
    assert_eq!(
        plain.metadata.annotations.as_ref().unwrap()["storageclass.kubernetes.io/is-default-class"],
        "false"
    );
    assert_eq!(plain.data["provisioner"], "cinder.csi.openstack.org");
    assert_eq!(plain.data["volumeBindingMode"], "WaitForFirstConsumer");
    assert_eq!(plain.data["allowVolumeExpansion"], true);
    assert_eq!(plain.data["reclaimPolicy"], "Delete");
    config.default_storage_class = true;
    assert_eq!(
        class(&config).metadata.annotations.as_ref().unwrap()["storageclass.kubernetes.io/is-default-class"],
        "true"
    );
}

/// `(apiGroup, resource, verbs)` of every rule of a role.
fn rules(role: &DynamicObject) -> BTreeSet<(String, String, Vec<String>)> {
    let mut out = BTreeSet::new();
    for rule in role.data["rules"].as_array().unwrap() {
        let strings = |key: &str| -> Vec<String> {
            rule[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap().to_owned())
                .collect()
        };
        for group in strings("apiGroups") {
            for resource in strings("resources") {
                let mut verbs = strings("verbs");
                verbs.sort();
                out.insert((group.clone(), resource, verbs));
            }
        }
    }
    out
}

fn rule(group: &str, resource: &str, verbs: &[&str]) -> (String, String, Vec<String>) {
    let mut verbs: Vec<String> = verbs.iter().map(|v| (*v).to_owned()).collect();
    verbs.sort();
    (group.into(), resource.into(), verbs)
}

#[test]
fn each_sidecar_gets_exactly_its_own_rules_bound_to_the_controller_account() {
    let config = OperatorConfig::new("ns");
    let objects = render(&inputs(&config)).unwrap();
    let attacher = find(&objects, "ClusterRole", "openstack-cinder-csi-attacher");
    assert_eq!(
        rules(attacher),
        BTreeSet::from([
            rule("", "persistentvolumes", &["get", "list", "watch", "patch"]),
            rule("", "nodes", &["get"]),
            rule("storage.k8s.io", "csinodes", &["get"]),
            rule(
                "storage.k8s.io",
                "volumeattachments",
                &["list", "watch", "patch"]
            ),
            rule("storage.k8s.io", "volumeattachments/status", &["patch"]),
            rule("", "secrets", &["get"]),
            rule("", "events", &["create"]),
        ])
    );
    let resizer = find(&objects, "ClusterRole", "openstack-cinder-csi-resizer");
    assert_eq!(
        rules(resizer),
        BTreeSet::from([
            rule("", "persistentvolumes", &["get", "patch"]),
            rule("", "persistentvolumeclaims", &["list", "watch"]),
            rule("", "persistentvolumeclaims/status", &["patch"]),
            rule("", "secrets", &["get"]),
            rule("", "events", &["create"]),
        ])
    );
    let provisioner = rules(find(
        &objects,
        "ClusterRole",
        "openstack-cinder-csi-provisioner",
    ));
    assert!(provisioner.contains(&rule(
        "",
        "persistentvolumes",
        &["get", "list", "watch", "create", "patch", "delete"]
    )));
    assert!(
        !provisioner
            .iter()
            .any(|(_, r, _)| r.starts_with("volumeattachments"))
    );
    let snapshotter = rules(find(
        &objects,
        "ClusterRole",
        "openstack-cinder-csi-snapshotter",
    ));
    assert!(!snapshotter.iter().any(|(_, r, _)| r == "persistentvolumes"));
    // Nobody lists Secrets, and nobody may do everything.
    for role in objects
        .iter()
        .filter(|o| matches!(kind(o), "ClusterRole" | "Role"))
    {
        for (_, resource, verbs) in rules(role) {
            assert!(!verbs.contains(&"*".to_owned()), "{resource}");
            if resource == "secrets" {
                assert_eq!(verbs, ["get"]);
            }
        }
    }
    for sidecar in ["provisioner", "attacher", "resizer", "snapshotter"] {
        let name = format!("openstack-cinder-csi-{sidecar}");
        let binding = find(&objects, "ClusterRoleBinding", &name);
        assert_eq!(binding.data["roleRef"]["name"], name.as_str());
        assert_eq!(
            binding.data["subjects"],
            json!([{"kind": "ServiceAccount", "name": CONTROLLER_DEPLOYMENT, "namespace": "ns"}])
        );
    }
}

#[test]
fn unknown_placeholders_are_errors_naming_the_asset() {
    let config = OperatorConfig::new("ns");
    let broken = [Asset {
        file: "current/broken.yaml",
        template: "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: ${NOPE}\n",
        when: When::Always,
    }];
    let error = render_assets(&broken, &inputs(&config)).unwrap_err();
    assert_eq!(
        error.to_string(),
        "asset current/broken.yaml: unknown placeholder ${NOPE}"
    );
}
