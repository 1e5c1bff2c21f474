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
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, DeleteParams, ListParams};
use support::{bed, namespace_with_credentials, provisioner};
use testkit::drivers::MANILA_DRIVER as DRIVER;
use testkit::objects::{claim, storage_class};
use testkit::provisioning::{wait_claims_bound, wait_volumes_and_shares_gone};
use testkit::task::InProcess;

const WAIT: Duration = Duration::from_secs(300);

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let count: usize = std::env::var("CLAIMS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(100);
    let bed = bed().await;
    let (client, cloud) = (bed.client(), &bed.cloud);
    let provisioner = provisioner(client.clone(), &bed.driver.socket, &[]).await;
    let running = InProcess::spawn(|stopped| provisioner.run(stopped));
    let ns = "bench";
    let parameters = namespace_with_credentials(&client, cloud, ns, &[("type", "default")]).await;
    storage_class(&client, "manila", DRIVER, &parameters, "Immediate").await;

    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let started = Instant::now();
    join_all((0..count).map(|i| {
        let client = client.clone();
        async move { claim(&client, ns, &format!("claim-{i}"), "manila", "1Gi", &[]).await }
    }))
    .await;
    let created = started.elapsed();
    wait_claims_bound(&claims, count, WAIT).await;
    let provisioned = started.elapsed();

    let started = Instant::now();
    claims
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
    wait_volumes_and_shares_gone(&client, cloud, WAIT).await;
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
    bed.shutdown().await;
}
