//! The provisioner against a real control plane (kube-apiserver + controller-manager 1.20,
//! whose PV controller annotates claims and binds the PVs), the fake cloud and the real
//! `manila-csi-plugin` (controller service only) on a unix socket.
//!
//! One control plane is booted for the whole file (nextest runs each test in its own
//! process, so the scenarios are steps of one test and run concurrently, each in its own
//! namespace and StorageClass).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, ResourceExt};
use support::{bed, namespace_with_credentials, provisioner};
use testkit::cloud::credentials_secret;
use testkit::drivers::{MANILA_DRIVER as DRIVER, ManilaController};
use testkit::objects::{bound, claim, events, namespace, storage_class, wait_events};
use testkit::task::InProcess;
use testkit::volumes::bound_volume;
use testkit::wait_for;

const WAIT: Duration = Duration::from_secs(60);
const ZONE_KEY: &str = "topology.manila.csi.openstack.org/zone";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provisioner_on_a_real_control_plane() {
    let bed = bed().await;
    let (client, cloud) = (bed.client(), &bed.cloud);
    let provisioner = provisioner(
        client.clone(),
        &bed.driver.socket,
        &["--extra-create-metadata", "--feature-gates=Topology=true"],
    )
    .await;
    assert_eq!(provisioner.driver_name(), DRIVER);
    let running = InProcess::spawn(|stopped| provisioner.run(stopped));

    tokio::join!(
        immediate_claim_binds_and_deletion_removes_the_share(&client, cloud),
        unknown_share_type_fails_with_the_cause_and_retries(&client, cloud),
        wait_for_first_consumer_uses_the_selected_nodes_topology(&client, cloud),
        secret_templates_resolve_per_claim(&client, cloud),
        leader_election_lets_one_provisioner_work(&client, cloud, bed.dir()),
    );

    running.stop().await.unwrap();
    let leftovers = cloud.leftovers();
    assert!(
        leftovers.is_empty(),
        "the fake cloud has leftovers: {leftovers:?}\ndriver log:\n{}",
        bed.driver.log()
    );
    bed.shutdown().await;
}

/// Deletes the claim and waits until its PV is gone and the fake has no share of that name.
async fn delete_claim_and_wait_share_gone(
    client: &Client,
    cloud: &fakes::FakeCloud,
    namespace: &str,
    claim: &str,
    pv: &str,
) {
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace)
        .delete(claim, &DeleteParams::default())
        .await
        .unwrap();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    wait_for(&format!("PV {pv} deleted"), WAIT, || async {
        match pvs.get_opt(pv).await.map_err(|e| e.to_string())? {
            None => Ok(Some(())),
            Some(pv) => Err(format!(
                "phase {:?}, finalizers {:?}",
                pv.status.and_then(|s| s.phase),
                pv.metadata.finalizers
            )),
        }
    })
    .await;
    wait_for(&format!("share {pv} deleted in the fake"), WAIT, || async {
        let shares = cloud.leftovers().shares;
        if shares.iter().any(|s| s.name.as_deref() == Some(pv)) {
            Err(format!("{shares:?}"))
        } else {
            Ok(Some(()))
        }
    })
    .await;
}

async fn immediate_claim_binds_and_deletion_removes_the_share(
    client: &Client,
    cloud: &fakes::FakeCloud,
) {
    let ns = "immediate";
    let parameters = [("type", "default")];
    let parameters = namespace_with_credentials(client, cloud, ns, &parameters).await;
    storage_class(client, "manila", DRIVER, &parameters, "Immediate").await;
    claim(client, ns, "data", "manila", "1Gi", &[]).await;

    let bound = bound(client, ns, "data", WAIT).await;
    let uid = bound.uid().unwrap();
    let pv_name = format!("pvc-{uid}");
    assert_eq!(
        bound.spec.as_ref().unwrap().volume_name.as_deref(),
        Some(pv_name.as_str())
    );
    let annotations = bound.annotations();
    assert_eq!(
        annotations
            .get("volume.beta.kubernetes.io/storage-provisioner")
            .map(String::as_str),
        Some(DRIVER)
    );

    let shares = cloud.leftovers().shares;
    let share = shares
        .iter()
        .find(|s| s.name.as_deref() == Some(pv_name.as_str()));
    assert!(
        share.is_some(),
        "no share named {pv_name} in the fake: {shares:?}"
    );

    // The controller-manager adds its pv-protection finalizer and marks the PV Bound
    // asynchronously: wait for both so the snapshot below sees a settled object.
    let pvs = Api::<PersistentVolume>::all(client.clone());
    let pv = wait_for(
        "the PV Bound with its pv-protection finalizer",
        Duration::from_secs(60),
        || async {
            let pv = pvs.get(&pv_name).await.map_err(|e| e.to_string())?;
            let phase = pv.status.as_ref().and_then(|s| s.phase.clone());
            let protected = pv
                .finalizers()
                .iter()
                .any(|f| f == "kubernetes.io/pv-protection");
            if protected && phase.as_deref() == Some("Bound") {
                Ok(Some(pv))
            } else {
                Err(format!("phase {phase:?}, finalizers {:?}", pv.finalizers()))
            }
        },
    )
    .await;
    let share_id = share.unwrap().id.clone();
    let csi = pv.spec.as_ref().unwrap().csi.as_ref().unwrap();
    assert_eq!(csi.volume_handle, share_id);
    let mut finalizers = pv.finalizers().to_vec();
    finalizers.sort();
    let view = serde_json::json!({
        "name": pv.name_any(),
        "annotations": pv.metadata.annotations,
        "finalizers": finalizers,
        "spec": pv.spec,
    });
    insta::assert_yaml_snapshot!("immediate_pv", view, {
        ".name" => "pvc-[uid]",
        ".spec.claimRef.uid" => "[uid]",
        ".spec.claimRef.resourceVersion" => "[rv]",
        ".spec.csi.volumeHandle" => "[share id]",
        ".spec.csi.volumeAttributes.shareID" => "[share id]",
        ".spec.csi.volumeAttributes.shareAccessIDs" => "[access id]",
        ".spec.csi.volumeAttributes[\"storage.kubernetes.io/csiProvisionerIdentity\"]" => "[identity]",
    });

    let events = events(client, ns, "data").await;
    let reasons: Vec<&str> = events.iter().map(|(_, r, _)| r.as_str()).collect();
    assert!(
        reasons.contains(&"Provisioning") && reasons.contains(&"ProvisioningSucceeded"),
        "{events:?}"
    );

    // Cloning is not offered by the Manila driver: the claim fails with the reason.
    let clone: PersistentVolumeClaim = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "clone", "namespace": ns },
        "spec": {
            "accessModes": ["ReadWriteMany"], "storageClassName": "manila",
            "resources": { "requests": { "storage": "1Gi" } },
            "dataSource": { "kind": "PersistentVolumeClaim", "name": "data" },
        }
    }))
    .unwrap();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    claims.create(&PostParams::default(), &clone).await.unwrap();
    // A Warning ProvisioningFailed about cloning.
    wait_events(client, ns, "clone", 1, WAIT, |t, r, m| {
        t == "Warning" && r == "ProvisioningFailed" && m.contains("CLONE_VOLUME")
    })
    .await;
    claims
        .delete("clone", &DeleteParams::default())
        .await
        .unwrap();

    delete_claim_and_wait_share_gone(client, cloud, ns, "data", &pv_name).await;
}

async fn unknown_share_type_fails_with_the_cause_and_retries(
    client: &Client,
    cloud: &fakes::FakeCloud,
) {
    let ns = "bad-type";
    let parameters = [("type", "no-such-type")];
    let parameters = namespace_with_credentials(client, cloud, ns, &parameters).await;
    storage_class(client, "manila-bogus", DRIVER, &parameters, "Immediate").await;
    claim(client, ns, "doomed", "manila-bogus", "1Gi", &[]).await;
    // Two Warning ProvisioningFailed events naming the share type: it is retried.
    let failures = wait_events(client, ns, "doomed", 2, WAIT, |t, r, m| {
        t == "Warning" && r == "ProvisioningFailed" && m.contains("no-such-type")
    })
    .await;
    assert!(
        failures[0].2.starts_with(
            "failed to provision volume with StorageClass \"manila-bogus\": rpc error: code = "
        ),
        "{failures:?}"
    );
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
}

async fn topology_node(client: &Client, name: &str, zone: &str) {
    let node: Node = serde_json::from_value(serde_json::json!({
        "metadata": { "name": name, "labels": { ZONE_KEY: zone, "kubernetes.io/hostname": name } },
    }))
    .unwrap();
    Api::<Node>::all(client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
    let csinode: CSINode = serde_json::from_value(serde_json::json!({
        "metadata": { "name": name },
        "spec": { "drivers": [ { "name": DRIVER, "nodeID": name, "topologyKeys": [ZONE_KEY] } ] },
    }))
    .unwrap();
    Api::<CSINode>::all(client.clone())
        .create(&PostParams::default(), &csinode)
        .await
        .unwrap();
}

async fn wait_for_first_consumer_uses_the_selected_nodes_topology(
    client: &Client,
    cloud: &fakes::FakeCloud,
) {
    let ns = "wffc";
    let parameters = [("type", "default"), ("autoTopology", "true")];
    let parameters = namespace_with_credentials(client, cloud, ns, &parameters).await;
    storage_class(
        client,
        "manila-wffc",
        DRIVER,
        &parameters,
        "WaitForFirstConsumer",
    )
    .await;
    topology_node(client, "node-a", "nova").await;
    topology_node(client, "node-b", "zone-b").await;
    claim(
        client,
        ns,
        "zonal",
        "manila-wffc",
        "1Gi",
        &[("volume.kubernetes.io/selected-node", "node-b")],
    )
    .await;

    let pv = bound_volume(client, ns, "zonal", WAIT).await;
    let pv_name = pv.name_any();
    // The driver put the share in the selected node's zone (the first preferred segment),
    // and the PV's node affinity says so.
    let affinity = serde_json::to_value(pv.spec.unwrap().node_affinity).unwrap();
    assert_eq!(
        affinity,
        serde_json::json!({"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE_KEY, "operator": "In", "values": ["zone-b"]}]}
        ]}})
    );
    delete_claim_and_wait_share_gone(client, cloud, ns, "zonal", &pv_name).await;
}

async fn secret_templates_resolve_per_claim(client: &Client, cloud: &fakes::FakeCloud) {
    let ns = "templated";
    namespace(client, ns).await;
    credentials_secret(client, cloud, ns, "app-creds").await;
    let parameters = [
        ("type", "default"),
        (
            "csi.storage.k8s.io/provisioner-secret-name",
            "${pvc.name}-creds",
        ),
        (
            "csi.storage.k8s.io/provisioner-secret-namespace",
            "${pvc.namespace}",
        ),
        (
            "csi.storage.k8s.io/node-publish-secret-name",
            "${pvc.annotations['example.com/secret']}",
        ),
        (
            "csi.storage.k8s.io/node-publish-secret-namespace",
            "${pvc.namespace}",
        ),
    ];
    storage_class(client, "manila-templated", DRIVER, &parameters, "Immediate").await;
    claim(
        client,
        ns,
        "app",
        "manila-templated",
        "1Gi",
        &[("example.com/secret", "app-creds")],
    )
    .await;
    claim(
        client,
        ns,
        "other",
        "manila-templated",
        "1Gi",
        &[("example.com/secret", "x")],
    )
    .await;

    let pv = bound_volume(client, ns, "app", WAIT).await;
    let pv_name = pv.name_any();
    let csi = pv.spec.as_ref().unwrap().csi.clone().unwrap();
    let publish = csi.node_publish_secret_ref.unwrap();
    assert_eq!(
        (publish.name.as_deref(), publish.namespace.as_deref()),
        (Some("app-creds"), Some(ns))
    );
    assert_eq!(
        pv.annotations()
            .get("volume.kubernetes.io/provisioner-deletion-secret-name")
            .map(String::as_str),
        Some("app-creds")
    );
    // "other-creds" does not exist: the failure names the Secret.
    wait_events(client, ns, "other", 1, WAIT, |_, r, m| {
        r == "ProvisioningFailed" && m.contains("templated/other-creds")
    })
    .await;
    Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
        .delete("other", &DeleteParams::default())
        .await
        .unwrap();
    delete_claim_and_wait_share_gone(client, cloud, ns, "app", &pv_name).await;
}

async fn leader_election_lets_one_provisioner_work(
    client: &Client,
    cloud: &fakes::FakeCloud,
    dir: &std::path::Path,
) {
    const LE_DRIVER: &str = "le.manila.csi.openstack.org";
    let ns = "leader";
    let parameters = [("type", "default")];
    let parameters = namespace_with_credentials(client, cloud, ns, &parameters).await;
    storage_class(client, "manila-le", LE_DRIVER, &parameters, "Immediate").await;
    let driver = ManilaController::start(dir, LE_DRIVER, &["--with-topology"]);
    let flags = [
        "--leader-election",
        "--leader-election-namespace=leader",
        "--leader-election-lease-duration=4s",
        "--leader-election-renew-deadline=2s",
    ];
    let first = provisioner(client.clone(), &driver.socket, &flags).await;
    let second = provisioner(client.clone(), &driver.socket, &flags).await;
    let ids = [
        first.leader_identity().unwrap().to_string(),
        second.leader_identity().unwrap().to_string(),
    ];
    let mut running = [first, second].map(|p| Some(InProcess::spawn(|stopped| p.run(stopped))));

    let leases: Api<Lease> = Api::namespaced(client.clone(), ns);
    let holder = |exclude: Option<String>| {
        let leases = leases.clone();
        let ids = ids.clone();
        async move {
            wait_for("a leader holding the Lease", WAIT, || async {
                let lease = leases
                    .get_opt("le-manila-csi-openstack-org")
                    .await
                    .map_err(|e| e.to_string())?;
                let holder = lease.and_then(|l| l.spec).and_then(|s| s.holder_identity);
                match holder {
                    Some(h) if ids.contains(&h) && Some(&h) != exclude.as_ref() => Ok(Some(h)),
                    other => Err(format!("holder {other:?}")),
                }
            })
            .await
        }
    };
    let leader = holder(None).await;
    claim(client, ns, "one", "manila-le", "1Gi", &[]).await;
    let one = bound(client, ns, "one", WAIT).await;
    let provisioning = events(client, ns, "one")
        .await
        .into_iter()
        .filter(|(_, r, _)| r == "Provisioning")
        .count();
    assert_eq!(provisioning, 1, "only the leader provisions");

    // The leader stops (releasing the Lease); the other takes over and provisions.
    let leader_index = ids.iter().position(|i| *i == leader).unwrap();
    running[leader_index].take().unwrap().stop().await.unwrap();
    let successor = holder(Some(leader.clone())).await;
    assert_ne!(successor, leader);
    claim(client, ns, "two", "manila-le", "1Gi", &[]).await;
    let two = bound(client, ns, "two", WAIT).await;

    for (name, claim) in [("one", one), ("two", two)] {
        delete_claim_and_wait_share_gone(
            client,
            cloud,
            ns,
            name,
            &claim.spec.unwrap().volume_name.unwrap(),
        )
        .await;
    }
    for r in running.iter_mut() {
        if let Some(r) = r.take() {
            r.stop().await.unwrap();
        }
    }
}
