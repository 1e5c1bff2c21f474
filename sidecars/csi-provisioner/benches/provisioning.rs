//! Time for N claims (default 100, `CLAIMS=n`) to reach Bound through the provisioner, the
//! real `manila-csi-plugin` and the fake cloud (no injected delay) on a real control plane,
//! and for their deletion to finish (PVs gone, no share left in the fake).
//!
//! `cargo bench -p csi-provisioner --bench provisioning`
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use futures::future::join_all;
use harness::control_plane::ControlPlane;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, DeleteParams, ListParams};
use support::*;

const WAIT: Duration = Duration::from_secs(300);

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let count: usize = std::env::var("CLAIMS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(100);
    let cp = ControlPlane::builder()
        .start()
        .await
        .expect("control plane starts");
    let client = cp.client();
    let cloud = fake_cloud().await;
    let dir = tempfile::tempdir().unwrap();
    let driver = ManilaDriver::start(dir.path(), DRIVER);
    let running = Running::spawn(provisioner(client.clone(), &driver.socket, &[]).await);
    let ns = "bench";
    namespace(&client, ns).await;
    credentials_secret(&client, &cloud, ns, "manila-creds").await;
    let mut parameters = vec![("type", "default")];
    parameters.extend(secret_parameters("manila-creds", ns));
    storage_class(&client, "manila", DRIVER, &parameters, "Immediate").await;

    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let started = Instant::now();
    join_all((0..count).map(|i| {
        let client = client.clone();
        async move { claim(&client, ns, &format!("claim-{i}"), "manila", "1Gi", &[]).await }
    }))
    .await;
    let created = started.elapsed();
    wait_for(&format!("{count} claims Bound"), WAIT, || async {
        let list = claims
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let bound = list
            .items
            .iter()
            .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
            .count();
        if bound == count {
            Ok(Some(()))
        } else {
            Err(format!("{bound}/{count} Bound"))
        }
    })
    .await;
    let provisioned = started.elapsed();

    let started = Instant::now();
    claims
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    wait_for("every PV deleted and no share left", WAIT, || async {
        let left = pvs
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .len();
        let shares = cloud.leftovers().shares.len();
        if left == 0 && shares == 0 {
            Ok(Some(()))
        } else {
            Err(format!("{left} PVs, {shares} shares left"))
        }
    })
    .await;
    let deleted = started.elapsed();

    println!("claims:              {count}");
    println!("created (API):       {:>8.2} s", created.as_secs_f64());
    println!(
        "all Bound:           {:>8.2} s  (target <= 30 s)",
        provisioned.as_secs_f64()
    );
    println!(
        "all deleted:         {:>8.2} s  (target <= 30 s)",
        deleted.as_secs_f64()
    );
    running.stop().await.unwrap();
    drop(driver);
    cp.shutdown().await.unwrap();
}
