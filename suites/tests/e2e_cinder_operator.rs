//! The Cinder CSI driver operator on the embedded cluster with the fake cloud over TLS (its
//! own CA, given to the operator in the ConfigMap `cloud-provider-config`): from the operator
//! manifests to a ClusterOperator Available, with the zones matched; an ext4 volume and a raw
//! block volume of the operator's class `standard-csi`; rotated credentials restarting the
//! driver pods; managementState Removed refused while volumes exist; configuration errors and
//! legacy keys named; a wrong CA named as a certificate problem; deleted children put back;
//! two operator replicas with one leader, the other taking over; compute zones that differ
//! from the volume zones turning topology off.
//!
//! One environment (2 nodes: node-1 in zone-a, node-2 in zone-b; 2 operator replicas) runs
//! the scenarios one after the other, each workload in its own namespace; the teardown
//! proves that no PV, VolumeAttachment, volume, attachment or loop device is left, nor any
//! object of the operator.
//!
//! A second, short test boots its own cluster for the upgrade N-1 → N under writers on an
//! attached raw block volume and an ext4 volume (`cinder_operator_steps::upgrade`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[allow(dead_code)]
mod cinder_checks;
mod cinder_operator_steps;

use std::time::{Duration, Instant};

use cinder_checks::{assert_attached_only_to, read_block, write_block};
use cinder_operator_steps::{
    HEAL, LOGS, WAIT, driver_hashes, lease_holder, patch_config_map, pod_uids, set_spec,
    wait_pods_replaced, wait_recreated,
};
use fakes::ServerSeed;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode, StorageClass};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube_support::wait;
use suites::e2e::cinder::{
    CA_BUNDLE_KEY, CINDER_CONTROLLER_DEPLOYMENT, CINDER_CONTROLLER_SELECTOR,
    CINDER_CREDENTIALS_SECRET, CINDER_DRIVER_NAME, CINDER_DRIVER_SECRET, CINDER_NODE_DAEMON_SET,
    CINDER_NODE_PLUGIN_SELECTOR, CINDER_OPERATOR_CLASS, CINDER_OPERATOR_SELECTOR,
    CINDER_TOPOLOGY_KEY, CLOUDS_YAML_KEY, CONFIG_KEY, CinderCsiEnvironment,
    CinderEnvironmentOptions, CinderInstall, CinderOperatorOptions, condition_of,
};
use suites::e2e::describe_conditions;
use suites::e2e::workload::{PodBuilder, Workload, block_claim, claim};

const TOPOLOGY_AVAILABLE: &str = "OpenStackCinderTopologyControllerAvailable";
const CONFIG_DEGRADED: &str = "OpenStackCinderConfigControllerDegraded";
const CLOUD_DEGRADED: &str = "OpenStackCinderCloudControllerDegraded";
const REMOVAL_DEGRADED: &str = "OpenStackCinderDriverRemovalControllerDegraded";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cinder_operator_installs_the_driver_names_its_problems_and_heals() {
    testkit::init_tracing(LOGS);
    let env = CinderCsiEnvironment::start(CinderEnvironmentOptions {
        nodes: 2,
        cloud_tls: true,
        install: CinderInstall::Operator(CinderOperatorOptions {
            replicas: 2,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .expect("the Cinder operator installs the driver");
    tracing::info!(timings = ?env.timings(), "operator manifests applied → Available");
    assert!(env.cloud().auth_url().starts_with("https://"));
    let mut phases = Vec::new();
    let mut phase = |name: &'static str, started: Instant| {
        phases.push((name, started.elapsed()));
    };

    let started = Instant::now();
    the_driver_is_installed_with_topology_on_matching_zones(&env).await;
    let leader = exactly_one_replica_leads(&env).await;
    phase("installed, zones, leader", started);

    let started = Instant::now();
    rotated_credentials_restart_the_driver_pods(&env).await;
    phase("credential rotation", started);

    let started = Instant::now();
    let volumes = an_ext4_volume_and_a_raw_block_volume_work(&env).await;
    phase("ext4 and block volumes", started);

    let started = Instant::now();
    removed_is_refused_while_volumes_exist(&env).await;
    volumes.cleanup().await.unwrap();
    phase("Removed refused", started);

    let started = Instant::now();
    configuration_errors_and_legacy_keys_are_named(&env).await;
    phase("configuration errors", started);

    let started = Instant::now();
    a_wrong_ca_is_a_certificate_problem(&env).await;
    phase("wrong CA", started);

    let started = Instant::now();
    deleted_children_are_put_back_within_seconds(&env).await;
    phase("deleted children", started);

    let started = Instant::now();
    the_other_replica_takes_over_when_the_leader_goes(&env, &leader).await;
    phase("leader takeover", started);

    let started = Instant::now();
    compute_zones_without_volumes_turn_topology_off(&env).await;
    phase("zones differ", started);

    tracing::info!(?phases, "scenario timings");
    env.teardown().await.expect("nothing is left");
}

/// The ClusterOperator is Available; the driver's objects are there as the operator names
/// them; the zones of Nova and Cinder match, so topology is on: the condition names the
/// zones and every node's CSINode reports the driver's topology key.
async fn the_driver_is_installed_with_topology_on_matching_zones(env: &CinderCsiEnvironment) {
    env.wait_operator_available(WAIT).await.unwrap();
    let driver = env
        .wait_driver_condition(
            TOPOLOGY_AVAILABLE,
            "True",
            Some("ZonesMatch"),
            &["zone-a", "zone-b"],
            WAIT,
        )
        .await
        .unwrap();
    tracing::info!(conditions = %describe_conditions(&driver), "the ClusterCSIDriver");

    let client = env.client();
    let csidriver = Api::<CSIDriver>::all(client.clone())
        .get(CINDER_DRIVER_NAME)
        .await
        .unwrap();
    assert_eq!(csidriver.spec.attach_required, Some(true));
    assert_eq!(csidriver.spec.pod_info_on_mount, Some(true));
    assert_eq!(csidriver.spec.fs_group_policy.as_deref(), Some("File"));
    let class = Api::<StorageClass>::all(client.clone())
        .get(CINDER_OPERATOR_CLASS)
        .await
        .unwrap();
    assert_eq!(class.provisioner, CINDER_DRIVER_NAME);
    assert_eq!(
        class.volume_binding_mode.as_deref(),
        Some("WaitForFirstConsumer")
    );
    assert_eq!(class.allow_volume_expansion, Some(true));
    let secrets: Api<Secret> = Api::namespaced(client.clone(), env.namespace());
    let driver_secret = secrets.get(CINDER_DRIVER_SECRET).await.unwrap();
    let keys: Vec<String> = driver_secret.data.unwrap_or_default().into_keys().collect();
    assert!(
        keys.iter().any(|k| k == "cloud.conf") && keys.iter().any(|k| k == CA_BUNDLE_KEY),
        "the driver Secret holds cloud.conf and the CA: {keys:?}"
    );

    let csinodes: Api<CSINode> = Api::all(client);
    for node in env.cluster().node_names() {
        let csinode = csinodes.get(&node).await.unwrap();
        let entry = csinode
            .spec
            .drivers
            .iter()
            .find(|d| d.name == CINDER_DRIVER_NAME)
            .unwrap_or_else(|| panic!("{node}'s CSINode lacks the driver: {csinode:?}"));
        assert_eq!(Some(entry.node_id.as_str()), env.server_of(&node), "{node}");
        assert_eq!(
            entry.topology_keys.as_deref(),
            Some(&[CINDER_TOPOLOGY_KEY.to_string()][..]),
            "{node}: topology on"
        );
    }
}

/// Two operator pods; the Lease names one of them, whose log says it leads, while the other
/// waits. Returns the leader's pod name.
async fn exactly_one_replica_leads(env: &CinderCsiEnvironment) -> String {
    let holder = lease_holder(env).await;
    let pods: Api<Pod> = Api::namespaced(env.client(), env.namespace());
    let operators = pods
        .list(&ListParams::default().labels(CINDER_OPERATOR_SELECTOR))
        .await
        .unwrap()
        .items;
    assert_eq!(operators.len(), 2);
    let mut leaders = Vec::new();
    for pod in &operators {
        let name = pod.metadata.name.clone().unwrap();
        let log = env
            .cluster()
            .logs(env.namespace(), &name, "operator", false)
            .await
            .unwrap();
        if log.contains("became leader") {
            leaders.push(name);
        } else {
            assert!(
                log.contains("waiting for the leader lease"),
                "{name}: {log}"
            );
        }
    }
    assert_eq!(leaders.len(), 1, "exactly one replica acts: {leaders:?}");
    assert!(holder.starts_with(&leaders[0]), "{holder} vs {leaders:?}");
    leaders.remove(0)
}

/// Application credentials instead of the password in clouds.yaml: the driver's cloud.conf
/// follows, the config hash of both pod templates changes, and every driver pod is replaced
/// (new uids) by one with the new hash.
async fn rotated_credentials_restart_the_driver_pods(env: &CinderCsiEnvironment) {
    let (controller_hash, node_hash) = driver_hashes(env).await;
    assert!(!controller_hash.is_empty() && !node_hash.is_empty());
    let old_controllers = pod_uids(env, CINDER_CONTROLLER_SELECTOR).await;
    let old_nodes = pod_uids(env, CINDER_NODE_PLUGIN_SELECTOR).await;

    let cloud = env.cloud();
    let credential = cloud.account().application_credential.clone().unwrap();
    let clouds_yaml = format!(
        "clouds:\n  openstack:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: {}\n      application_credential_id: {}\n      application_credential_secret: {}\n    region_name: RegionOne\n",
        cloud.auth_url(),
        credential.id,
        credential.secret.expose()
    );
    let secrets: Api<Secret> = Api::namespaced(env.client(), env.namespace());
    secrets
        .patch(
            CINDER_CREDENTIALS_SECRET,
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({ "stringData": { CLOUDS_YAML_KEY: clouds_yaml } })),
        )
        .await
        .unwrap();

    // The driver's cloud.conf carries the application credential (checked by key names
    // only: the values are secrets).
    wait::wait_until(
        "the driver's cloud.conf to use the application credential",
        WAIT,
        || {
            let secrets = secrets.clone();
            async move {
                let secret = secrets
                    .get(CINDER_DRIVER_SECRET)
                    .await
                    .map_err(|e| e.to_string())?;
                let conf = secret
                    .data
                    .unwrap_or_default()
                    .get("cloud.conf")
                    .map(|b| String::from_utf8_lossy(&b.0).into_owned())
                    .unwrap_or_default();
                let keys: Vec<&str> = conf
                    .lines()
                    .filter_map(|l| l.split_once('=').map(|(k, _)| k.trim()))
                    .collect();
                if keys.contains(&"application-credential-id") && !keys.contains(&"password") {
                    Ok(Some(()))
                } else {
                    Err(format!("cloud.conf keys {keys:?}"))
                }
            }
        },
    )
    .await
    .unwrap();
    let (new_controller_hash, new_node_hash) =
        wait::wait_until("both pod templates to carry a new hash", WAIT, || async {
            let (c, n) = driver_hashes(env).await;
            if c != controller_hash && n != node_hash {
                Ok(Some((c, n)))
            } else {
                Err(format!("controller {c}, node {n}"))
            }
        })
        .await
        .unwrap();
    assert_eq!(new_controller_hash, new_node_hash, "one hash of the config");
    wait_pods_replaced(
        env,
        CINDER_CONTROLLER_SELECTOR,
        &old_controllers,
        1,
        &new_controller_hash,
    )
    .await;
    wait_pods_replaced(
        env,
        CINDER_NODE_PLUGIN_SELECTOR,
        &old_nodes,
        env.cluster().node_names().len(),
        &new_node_hash,
    )
    .await;
    env.wait_operator_available(Duration::from_secs(120))
        .await
        .unwrap();
    kube_support::wait::wait_csi_drivers(
        &env.client(),
        &env.cluster().node_names(),
        &[CINDER_DRIVER_NAME],
        WAIT,
    )
    .await
    .unwrap();
}

/// On the operator's class (with the rotated credentials): an ext4 file system on a
/// ReadWriteOnce claim, attached to the pod's node, written and read; a `volumeMode: Block`
/// claim giving the pod the raw device. The claims stay (their PVs with them) for the next
/// scenario; the pods go.
async fn an_ext4_volume_and_a_raw_block_volume_work(env: &CinderCsiEnvironment) -> Workload<'_> {
    let w = Workload::create(env, "cinderop-volumes").await.unwrap();
    w.create_claim(&claim(
        "data",
        Some(CINDER_OPERATOR_CLASS),
        "1Gi",
        "ReadWriteOnce",
    ))
    .await
    .unwrap();
    w.ready_pod(
        &PodBuilder::new(
            "writer",
            "echo written-through-the-operator > /data/f && sync",
        )
        .claim("data", "/data")
        .node("node-1")
        .build(),
    )
    .await
    .unwrap();
    let mounts = w
        .exec("writer", "grep ' /data ' /proc/mounts")
        .await
        .unwrap();
    assert!(
        mounts.starts_with("/dev/loop") && mounts.contains(" ext4 "),
        "{mounts}"
    );
    assert_eq!(
        w.exec("writer", "cat /data/f").await.unwrap(),
        "written-through-the-operator\n"
    );
    let bound = w.wait_bound("data").await.unwrap();
    assert_attached_only_to(env, &bound.share_id, "node-1");

    w.create_claim(&block_claim(
        "raw",
        Some(CINDER_OPERATOR_CLASS),
        "1Gi",
        "ReadWriteOnce",
    ))
    .await
    .unwrap();
    w.ready_pod(
        &PodBuilder::new("raw-writer", &write_block("/dev/xvda", "operator-block"))
            .device("raw", "/dev/xvda")
            .node("node-2")
            .build(),
    )
    .await
    .unwrap();
    assert_eq!(
        w.exec(
            "raw-writer",
            "test -b /dev/xvda && blockdev --getsize64 /dev/xvda"
        )
        .await
        .unwrap(),
        "1073741824\n"
    );
    assert_eq!(
        w.exec("raw-writer", &read_block("/dev/xvda", 14))
            .await
            .unwrap(),
        "operator-block"
    );
    let raw = w.wait_bound("raw").await.unwrap();
    assert_attached_only_to(env, &raw.share_id, "node-2");
    let zone = env
        .cloud()
        .block_volume(&raw.share_id)
        .unwrap()
        .availability_zone;
    assert_eq!(Some(zone), env.zone_of("node-2"), "made in the pod's zone");

    w.delete_pods(&["writer", "raw-writer"]).await.unwrap();
    w
}

/// managementState Removed while PVs of the driver exist: refused with a condition saying
/// why, the node plugins stay (pods must still unmount); Managed again clears it.
async fn removed_is_refused_while_volumes_exist(env: &CinderCsiEnvironment) {
    set_spec(env, serde_json::json!({ "managementState": "Removed" })).await;
    let driver = env
        .wait_driver_condition(
            REMOVAL_DEGRADED,
            "True",
            Some("RemovalRefused"),
            &["PersistentVolume"],
            WAIT,
        )
        .await
        .unwrap();
    tracing::info!(message = %condition_of(&driver, REMOVAL_DEGRADED).2, "Removed refused");
    let daemon_sets: Api<DaemonSet> = Api::namespaced(env.client(), env.namespace());
    assert!(
        daemon_sets
            .get_opt(CINDER_NODE_DAEMON_SET)
            .await
            .unwrap()
            .is_some(),
        "the node plugins stay"
    );
    let deployments: Api<Deployment> = Api::namespaced(env.client(), env.namespace());
    assert!(
        deployments
            .get_opt(CINDER_CONTROLLER_DEPLOYMENT)
            .await
            .unwrap()
            .is_some()
    );
    set_spec(env, serde_json::json!({ "managementState": "Managed" })).await;
    env.wait_cluster_csi_driver("not refusing a removal", WAIT, |o| {
        condition_of(o, REMOVAL_DEGRADED).0 != "True"
    })
    .await
    .unwrap();
    env.wait_operator_available(WAIT).await.unwrap();
}

/// The user's `config` with a credential key, then with a legacy key: Degraded, naming the
/// ConfigMap and the key, and nothing deleted; removing it recovers, with the driver's pods
/// untouched (the same config hash).
async fn configuration_errors_and_legacy_keys_are_named(env: &CinderCsiEnvironment) {
    let hashes = driver_hashes(env).await;
    for (config, key) in [
        ("[Global]\nusername = someone\n", "username"),
        (
            "[Global]\nsecret-name = openstack-credentials\n",
            "secret-name",
        ),
    ] {
        patch_config_map(env, serde_json::json!({ CONFIG_KEY: config })).await;
        let driver = env
            .wait_driver_condition(
                CONFIG_DEGRADED,
                "True",
                Some("InvalidConfig"),
                &[key, "cloud-provider-config"],
                WAIT,
            )
            .await
            .unwrap();
        tracing::info!(message = %condition_of(&driver, CONFIG_DEGRADED).2, "{key} refused");
        let deployments: Api<Deployment> = Api::namespaced(env.client(), env.namespace());
        assert!(
            deployments
                .get_opt(CINDER_CONTROLLER_DEPLOYMENT)
                .await
                .unwrap()
                .is_some(),
            "a configuration error deletes nothing"
        );
    }
    patch_config_map(env, serde_json::json!({ CONFIG_KEY: null })).await;
    env.wait_driver_condition(CONFIG_DEGRADED, "False", None, &[], WAIT)
        .await
        .unwrap();
    env.wait_operator_available(WAIT).await.unwrap();
    assert_eq!(
        driver_hashes(env).await,
        hashes,
        "the driver kept its config"
    );
}

/// A CA bundle that did not sign the cloud's certificate: the cloud check fails with
/// `CertificateProblem` naming the URL, the ClusterOperator is Degraded and the driver
/// stays; the right one recovers.
async fn a_wrong_ca_is_a_certificate_problem(env: &CinderCsiEnvironment) {
    let good = env.cloud().ca_pem().expect("a TLS cloud has a CA");
    patch_config_map(
        env,
        serde_json::json!({ CA_BUNDLE_KEY: fakes::tls::unrelated_ca_pem().unwrap() }),
    )
    .await;
    let driver = env
        .wait_driver_condition(
            CLOUD_DEGRADED,
            "True",
            Some("CertificateProblem"),
            &["https://"],
            WAIT,
        )
        .await
        .unwrap();
    tracing::info!(message = %condition_of(&driver, CLOUD_DEGRADED).2, "wrong CA");
    env.wait_cluster_operator("Degraded", WAIT, |o| {
        condition_of(o, "Degraded").0 == "True"
    })
    .await
    .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(env.client(), env.namespace());
    assert!(
        deployments
            .get_opt(CINDER_CONTROLLER_DEPLOYMENT)
            .await
            .unwrap()
            .is_some(),
        "a cloud problem deletes nothing"
    );
    patch_config_map(env, serde_json::json!({ CA_BUNDLE_KEY: good })).await;
    env.wait_driver_condition(CLOUD_DEGRADED, "False", None, &[], WAIT)
        .await
        .unwrap();
    env.wait_operator_available(WAIT).await.unwrap();
}

/// The controller Deployment and the CSIDriver, deleted, are back (new objects) within
/// seconds.
async fn deleted_children_are_put_back_within_seconds(env: &CinderCsiEnvironment) {
    let deployments: Api<Deployment> = Api::namespaced(env.client(), env.namespace());
    let old = deployments
        .get(CINDER_CONTROLLER_DEPLOYMENT)
        .await
        .unwrap()
        .metadata
        .uid;
    deployments
        .delete(CINDER_CONTROLLER_DEPLOYMENT, &DeleteParams::default())
        .await
        .unwrap();
    let took = wait_recreated(&deployments, CINDER_CONTROLLER_DEPLOYMENT, old).await;
    tracing::info!(?took, "controller Deployment re-created");

    let csidrivers: Api<CSIDriver> = Api::all(env.client());
    let old = csidrivers
        .get(CINDER_DRIVER_NAME)
        .await
        .unwrap()
        .metadata
        .uid;
    csidrivers
        .delete(CINDER_DRIVER_NAME, &DeleteParams::default())
        .await
        .unwrap();
    let took = wait_recreated(&csidrivers, CINDER_DRIVER_NAME, old).await;
    tracing::info!(?took, "CSIDriver re-created");
    assert!(took < HEAL);
    env.wait_pod_ready(CINDER_CONTROLLER_SELECTOR, WAIT)
        .await
        .unwrap();
    env.wait_operator_available(Duration::from_secs(120))
        .await
        .unwrap();
}

/// The leader pod deleted: the Lease passes to another replica, which heals a deleted
/// StorageClass.
async fn the_other_replica_takes_over_when_the_leader_goes(
    env: &CinderCsiEnvironment,
    leader: &str,
) {
    let holder = lease_holder(env).await;
    assert!(holder.starts_with(leader), "{holder} vs {leader}");
    let pods: Api<Pod> = Api::namespaced(env.client(), env.namespace());
    pods.delete(leader, &DeleteParams::default()).await.unwrap();
    let new_holder = wait::wait_until(
        "another replica to hold the Lease",
        Duration::from_secs(120),
        || async {
            let now = lease_holder(env).await;
            if now != holder {
                Ok(Some(now))
            } else {
                Err(format!("holder {now:?}"))
            }
        },
    )
    .await
    .unwrap();
    tracing::info!(%holder, %new_holder, "leadership moved");
    let classes: Api<StorageClass> = Api::all(env.client());
    let old = classes
        .get(CINDER_OPERATOR_CLASS)
        .await
        .unwrap()
        .metadata
        .uid;
    classes
        .delete(CINDER_OPERATOR_CLASS, &DeleteParams::default())
        .await
        .unwrap();
    wait_recreated(&classes, CINDER_OPERATOR_CLASS, old).await;
}

/// A compute zone without volumes (a new Nova server in zone-c): topology goes off,
/// the condition names the zones and the node plugins run without topology.
async fn compute_zones_without_volumes_turn_topology_off(env: &CinderCsiEnvironment) {
    env.cloud()
        .add_server(&ServerSeed {
            name: "compute-only".into(),
            availability_zone: "zone-c".into(),
            id: None,
            disk_dir: None,
        })
        .unwrap();
    // The operator checks the cloud on any change of its inputs (or at its resync): a change
    // of its own log level is one.
    set_spec(env, serde_json::json!({ "operatorLogLevel": "Debug" })).await;
    let driver = env
        .wait_driver_condition(
            TOPOLOGY_AVAILABLE,
            "True",
            Some("ZonesDiffer"),
            &["zone-c"],
            WAIT,
        )
        .await
        .unwrap();
    tracing::info!(message = %condition_of(&driver, TOPOLOGY_AVAILABLE).2, "zones differ");
    let daemon_sets: Api<DaemonSet> = Api::namespaced(env.client(), env.namespace());
    wait::wait_until("the node plugins without topology", WAIT, || {
        let daemon_sets = daemon_sets.clone();
        async move {
            let daemon_set = daemon_sets
                .get(CINDER_NODE_DAEMON_SET)
                .await
                .map_err(|e| e.to_string())?;
            let args: Vec<String> = daemon_set
                .spec
                .map(|s| s.template)
                .and_then(|t| t.spec)
                .map(|s| s.containers)
                .unwrap_or_default()
                .into_iter()
                .flat_map(|c| c.args.unwrap_or_default())
                .filter(|a| a.starts_with("--with-topology"))
                .collect();
            if args == ["--with-topology=false"] {
                Ok(Some(()))
            } else {
                Err(format!("{args:?}"))
            }
        }
    })
    .await
    .unwrap();
    env.wait_operator_available(Duration::from_secs(120))
        .await
        .unwrap();
}

/// A second cluster: the operator installed as release N-1, upgraded to N while pods write
/// to an attached raw block volume and an ext4 volume (`cinder_operator_steps::upgrade`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cinder_operator_upgrades_from_n_minus_1_under_writers() {
    testkit::init_tracing(LOGS);
    cinder_operator_steps::upgrade::run().await;
}
