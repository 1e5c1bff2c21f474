//! Upstream's deployment, proved on the embedded cluster: the Manila CSI driver deployed with
//! the argument lists of cloud-provider-openstack's Helm chart (`fixtures/manila-csi-upstream/`:
//! default values, and topology enabled), node ID and zone taken from the OpenStack metadata
//! service (each node agent gives its pods `OS_METADATA_URL`, its own document of the fake
//! cloud), and upstream's NFS examples applied as written: dynamic provisioning, a static
//! (pre-created) share, a snapshot restored, automatic topology.
//!
//! Containers that refuse one of the chart's arguments are listed in
//! [`upstream_chart::KNOWN_REFUSALS`]; the tests assert exactly that list, so a new refusal or
//! a fixed one fails them.
//!
//! Everything a test creates is deleted at the end, and the environment's teardown proves no
//! PV, VolumeSnapshotContent, share or snapshot is left.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod upstream_chart;

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, Patch, PatchParams};
use kube_support::wait;
use openstack_client::Connector;
use openstack_client::manila::model::NewShare;
use suites::e2e::manifests::Applier;
use suites::e2e::{DEFAULT_STORAGE_CLASS, ManilaCsiEnvironment, TOPOLOGY_KEY};
use upstream_chart::{
    MOUNT, TIMEOUT, app_stand_in, apply_example, check_arguments, create_user_secret,
    delete_in_order, delete_user_secret, install, instance_ids, registrations, running_pod, sh,
    share_of, start, uninstall,
};

/// A share made as a user makes one before writing a static PV: 1 GiB of NFS, an `ip` rule
/// for everyone, active. Returns its id and the rule's id.
async fn pre_create_share(env: &ManilaCsiEnvironment) -> (String, String) {
    let secrets: HashMap<String, String> = env.driver_secret().into_iter().collect();
    let manila = Connector::new("e2e-upstream-manifests".into())
        .connect(&secrets)
        .await
        .expect("connecting to the fake cloud");
    let share = manila
        .create_share(&NewShare {
            name: "preprovisioned-nfs-share".into(),
            size: 1,
            protocol: "NFS".into(),
            share_type: "default".into(),
            ..Default::default()
        })
        .await
        .expect("creating the share");
    let id = share.id.clone();
    wait::wait_until(format!("share {id} to be available"), TIMEOUT, || {
        let manila = manila.clone();
        let id = id.clone();
        async move {
            let status = manila.share(&id).await.map_err(|e| e.to_string())?.status;
            match status.as_str() {
                "available" => Ok(Some(())),
                other => Err(format!("status {other}")),
            }
        }
    })
    .await
    .expect("the pre-created share becomes available");
    let rule = manila
        .grant_access(&id, "ip", "0.0.0.0/0", "rw")
        .await
        .expect("granting access");
    wait::wait_until(
        format!("access rule {} to be active", rule.id),
        TIMEOUT,
        || {
            let manila = manila.clone();
            let id = id.clone();
            let rule_id = rule.id.clone();
            async move {
                let rules = manila.access_rules(&id).await.map_err(|e| e.to_string())?;
                let state = rules
                    .iter()
                    .find(|r| r.id == rule_id)
                    .map(|r| r.state.clone());
                match state {
                    Some(Some(s)) if s == "active" => Ok(Some(())),
                    other => Err(format!("state {other:?}")),
                }
            }
        },
    )
    .await
    .expect("the access rule becomes active");
    (id, rule.id)
}

async fn delete_share(env: &ManilaCsiEnvironment, id: &str) {
    let secrets: HashMap<String, String> = env.driver_secret().into_iter().collect();
    let manila = Connector::new("e2e-upstream-manifests".into())
        .connect(&secrets)
        .await
        .unwrap();
    manila.delete_share(id).await.expect("deleting the share");
}

/// The chart with default values: node plugins registered with their instance ids from the
/// metadata service (no zone: topology is off), then upstream's dynamic, snapshot and static
/// NFS examples.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chart_default_values_run_upstreams_dynamic_snapshot_and_static_examples() {
    testkit::init_tracing(
        "suites=info,cluster=info,node_agent=info,control_plane=info,pod_runtime=info",
    );
    let started = Instant::now();
    let bin = tempfile::tempdir().unwrap();
    let env = start(&app_stand_in(bin.path())).await;
    let ids = instance_ids(&env);
    create_user_secret(&env).await;
    // Upstream's static example's claim names no class, so it binds the example's PV only on
    // a cluster without a default StorageClass: the environment's default stops being one
    // while the examples run.
    set_default_class(&env, false).await;
    let release = install(&env, "default").await;

    let registered = registrations(&env).await;
    for (node, id) in &ids {
        assert_eq!(
            registered[node],
            (id.clone(), Vec::<String>::new()),
            "node {node}: the chart's node plugin registers the metadata service's instance id \
             and, without topology, no topology key"
        );
    }
    check_arguments(&env, "default").await;

    let ns = env.cluster().namespace("upstream-examples").await.unwrap();
    let namespace = ns.name().to_string();
    let no_vars = BTreeMap::new();

    // Dynamic provisioning: the web server's volume is a new share; what it writes it reads.
    let mut dynamic = Applier::new(env.client());
    apply_example(&mut dynamic, "dynamic.yaml", &namespace, &no_vars).await;
    running_pod(&env, &namespace, "new-nfs-share-pod").await;
    let share = share_of(&env, &namespace, "new-nfs-share-pvc").await;
    let shares = env.inspector().unwrap().shares().await.unwrap();
    assert!(
        shares.iter().any(|s| s.id == share),
        "the claim's share {share} is in the cloud: {shares:?}"
    );
    sh(
        &env,
        &namespace,
        "new-nfs-share-pod",
        &format!("echo dynamic > {MOUNT}/index.html"),
    )
    .await;
    assert_eq!(
        sh(
            &env,
            &namespace,
            "new-nfs-share-pod",
            &format!("cat {MOUNT}/index.html")
        )
        .await,
        "dynamic\n"
    );

    // Snapshot: the restored claim holds what the source held when snapshotted.
    let mut snapshot = Applier::new(env.client());
    apply_example(&mut snapshot, "snapshot.yaml", &namespace, &no_vars).await;
    running_pod(&env, &namespace, "new-nfs-share-snap-restore-pod").await;
    let restored = share_of(&env, &namespace, "new-nfs-share-snap-restore").await;
    assert_ne!(restored, share, "the restored claim has a share of its own");
    assert_eq!(
        sh(
            &env,
            &namespace,
            "new-nfs-share-snap-restore-pod",
            &format!("cat {MOUNT}/index.html")
        )
        .await,
        "dynamic\n",
        "the snapshot's data is restored"
    );

    // Static provisioning: a share created beforehand, with a file in it, mounted through
    // the PV the user writes with its id and access rule id.
    let (share_id, rule_id) = pre_create_share(&env).await;
    let share_dir = env.fake_cloud().unwrap().share_dir(&share_id);
    std::fs::write(share_dir.join("hello.txt"), "pre-created\n").unwrap();
    let vars = BTreeMap::from([
        ("SHARE_ID".to_string(), share_id.clone()),
        ("SHARE_ACCESS_IDS".to_string(), rule_id),
    ]);
    let mut fixed = Applier::new(env.client());
    apply_example(&mut fixed, "static.yaml", &namespace, &vars).await;
    running_pod(&env, &namespace, "existing-nfs-share-pod").await;
    assert_eq!(
        share_of(&env, &namespace, "existing-nfs-share-pvc").await,
        "preprovisioned-nfs-share",
        "the claim binds the example's PV"
    );
    assert_eq!(
        sh(
            &env,
            &namespace,
            "existing-nfs-share-pod",
            &format!("cat {MOUNT}/hello.txt")
        )
        .await,
        "pre-created\n",
        "the pod sees the pre-created share"
    );

    // Everything goes: examples newest first, the pre-created share, the release.
    delete_in_order(&env, &fixed).await;
    delete_share(&env, &share_id).await;
    delete_in_order(&env, &snapshot).await;
    delete_in_order(&env, &dynamic).await;
    ns.cleanup().await.expect("the examples' namespace goes");
    testkit::cloud::wait_no_leftovers(env.fake_cloud().unwrap(), TIMEOUT).await;
    uninstall(&env, release).await;
    delete_user_secret(&env).await;
    set_default_class(&env, true).await;
    env.teardown().await.expect("nothing is left");
    eprintln!("took {:?}", started.elapsed());
}

/// Marks the environment's default StorageClass as the cluster's default, or not.
async fn set_default_class(env: &ManilaCsiEnvironment, default: bool) {
    let classes: Api<StorageClass> = Api::all(env.client());
    let patch = serde_json::json!({"metadata": {"annotations": {
        "storageclass.kubernetes.io/is-default-class": default.to_string(),
    }}});
    classes
        .patch(
            DEFAULT_STORAGE_CLASS,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .expect("patching the default StorageClass");
}

/// The chart with topology enabled: node plugins registered with their instance ids and the
/// topology key, each Node labelled with the zone the metadata service gives; then upstream's
/// automatic topology example, whose share must be in the zone of the pod's node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chart_with_topology_registers_zones_from_the_metadata_service() {
    testkit::init_tracing(
        "suites=info,cluster=info,node_agent=info,control_plane=info,pod_runtime=info",
    );
    let started = Instant::now();
    let bin = tempfile::tempdir().unwrap();
    let env = start(&app_stand_in(bin.path())).await;
    let ids = instance_ids(&env);
    create_user_secret(&env).await;
    let release = install(&env, "topology").await;

    let registered = registrations(&env).await;
    let nodes: Api<Node> = Api::all(env.client());
    for (node, id) in &ids {
        assert_eq!(
            registered[node],
            (id.clone(), vec![TOPOLOGY_KEY.to_string()]),
            "node {node}: instance id from the metadata service, the driver's topology key"
        );
        let zone = env.zone_of(node).unwrap();
        let labels = nodes.get(node).await.unwrap().metadata.labels.unwrap();
        assert_eq!(
            labels.get(TOPOLOGY_KEY),
            Some(&zone),
            "node {node}: the driver's zone is the metadata service's availability_zone"
        );
    }
    let refused = check_arguments(&env, "topology").await;

    let ns = env.cluster().namespace("upstream-topology").await.unwrap();
    let namespace = ns.name().to_string();
    assert!(
        refused.is_empty(),
        "the chart's containers refused arguments: {refused:?}"
    );
    let mut example = Applier::new(env.client());
    apply_example(&mut example, "topology.yaml", &namespace, &BTreeMap::new()).await;
    let pod = running_pod(&env, &namespace, "new-nfs-share-pod").await;
    let node = pod.spec.unwrap().node_name.unwrap();
    let zone = env.zone_of(&node).unwrap();
    assert_eq!(zone, "zone-1", "the example's pod selects zone-1");
    let share_id = share_of(&env, &namespace, "new-nfs-share-pvc").await;
    let share = env
        .inspector()
        .unwrap()
        .share(&share_id)
        .await
        .unwrap()
        .expect("the claim's share exists");
    assert_eq!(
        share.availability_zone.as_deref(),
        Some(zone.as_str()),
        "the share is in the zone of the pod's node"
    );
    sh(
        &env,
        &namespace,
        "new-nfs-share-pod",
        &format!("echo zoned > {MOUNT}/f"),
    )
    .await;
    assert_eq!(
        sh(
            &env,
            &namespace,
            "new-nfs-share-pod",
            &format!("cat {MOUNT}/f")
        )
        .await,
        "zoned\n"
    );
    delete_in_order(&env, &example).await;
    ns.cleanup().await.expect("the example's namespace goes");
    testkit::cloud::wait_no_leftovers(env.fake_cloud().unwrap(), TIMEOUT).await;
    uninstall(&env, release).await;
    delete_user_secret(&env).await;
    env.teardown().await.expect("nothing is left");
    eprintln!("took {:?}", started.elapsed());
}
