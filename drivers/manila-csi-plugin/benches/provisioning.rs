//! CreateVolume / DeleteVolume latency against the fake cloud (no injected delay), and 100
//! concurrent CreateVolume calls with distinct names. Prints figures; asserts nothing.
//!
//! `cargo bench -p manila-csi-plugin --bench provisioning` (options: `--iterations N`).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashMap;
use std::time::{Duration, Instant};

use clap::Parser;
use csi_proto::v1::controller_client::ControllerClient;
use csi_proto::v1::volume_capability::access_mode::Mode;
use csi_proto::v1::volume_capability::{AccessMode, AccessType, MountVolume};
use csi_proto::v1::{self, VolumeCapability};
use fakes::{CloudConfig, FakeCloud, SecretKind};
use manila_csi_plugin::config::Config;
use manila_csi_plugin::driver::{self, Driver};
use tonic::transport::Channel;

const GIB: i64 = 1 << 30;

fn request(name: &str, secrets: &HashMap<String, String>) -> v1::CreateVolumeRequest {
    v1::CreateVolumeRequest {
        name: name.into(),
        capacity_range: Some(v1::CapacityRange {
            required_bytes: GIB,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![VolumeCapability {
            access_mode: Some(AccessMode {
                mode: Mode::MultiNodeMultiWriter as i32,
            }),
            access_type: Some(AccessType::Mount(MountVolume::default())),
        }],
        secrets: secrets.clone(),
        ..Default::default()
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn report(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    println!(
        "{what:<14} n={:<4} p50={:>8.2?} p99={:>8.2?} max={:>8.2?}",
        samples.len(),
        percentile(&samples, 0.50),
        percentile(&samples, 0.99),
        samples.last().copied().unwrap_or_default()
    );
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes `--bench`; accept and ignore unknown arguments.
    let args: Vec<String> = std::env::args().collect();
    let iterations = args
        .windows(2)
        .find(|w| w[0] == "--iterations")
        .and_then(|w| w[1].parse().ok())
        .unwrap_or(200usize);

    let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
    let secrets: HashMap<String, String> = cloud.secret(SecretKind::Password).into_iter().collect();
    let dir = tempfile::Builder::new()
        .prefix("provisioning-")
        .tempdir()
        .unwrap();
    let endpoint = format!("unix://{}", dir.path().join("csi.sock").display());
    let config = Config::try_parse_from([
        "manila-csi-plugin",
        &format!("--endpoint={endpoint}"),
        "--share-protocol-selector=NFS",
        "--provide-node-service=false",
    ])
    .unwrap();
    let listener = Driver::bind(&config.endpoint).await.unwrap();
    let driver = driver::build(&config).await.unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(driver.serve(listener, async {
        let _ = stopped.await;
    }));
    let channel = csi_proto::connect(&endpoint.parse().unwrap())
        .await
        .unwrap();
    let mut client = ControllerClient::new(channel.clone());

    // Warm-up: authentication, version discovery, connection set-up.
    let warm = client
        .create_volume(request("warm-up", &secrets))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    delete(&mut client, &warm.volume_id, &secrets).await;

    let mut creates = Vec::with_capacity(iterations);
    let mut deletes = Vec::with_capacity(iterations);
    for i in 0..iterations {
        let started = Instant::now();
        let volume = client
            .create_volume(request(&format!("seq-{i}"), &secrets))
            .await
            .unwrap()
            .into_inner()
            .volume
            .unwrap();
        creates.push(started.elapsed());
        let started = Instant::now();
        delete(&mut client, &volume.volume_id, &secrets).await;
        deletes.push(started.elapsed());
    }
    println!("manila-csi-plugin provisioning benchmark (fake cloud, no injected delay)");
    report("CreateVolume", creates);
    report("DeleteVolume", deletes);

    for round in 0..3 {
        let started = Instant::now();
        let tasks: Vec<_> = (0..100)
            .map(|i| {
                let mut client = ControllerClient::new(channel.clone());
                let request = request(&format!("burst-{round}-{i}"), &secrets);
                tokio::spawn(async move {
                    let started = Instant::now();
                    let volume = client
                        .create_volume(request)
                        .await
                        .unwrap()
                        .into_inner()
                        .volume
                        .unwrap();
                    (volume.volume_id, started.elapsed())
                })
            })
            .collect();
        let mut ids = Vec::new();
        let mut latencies = Vec::new();
        for task in tasks {
            let (id, latency) = task.await.unwrap();
            ids.push(id);
            latencies.push(latency);
        }
        let total = started.elapsed();
        println!(
            "100 concurrent CreateVolume (round {round}): all done in {total:.2?} (target <= 2 s: {})",
            if total <= Duration::from_secs(2) {
                "met"
            } else {
                "MISSED"
            }
        );
        report("  per call", latencies);
        for id in ids {
            delete(&mut client, &id, &secrets).await;
        }
    }
    let leftovers = cloud.leftovers();
    println!(
        "leftovers after the benchmark: {}",
        if leftovers.is_empty() {
            "none".to_string()
        } else {
            format!("{leftovers:?}")
        }
    );
    let _ = stop.send(());
    let _ = server.await;
}

async fn delete(
    client: &mut ControllerClient<Channel>,
    id: &str,
    secrets: &HashMap<String, String>,
) {
    client
        .delete_volume(v1::DeleteVolumeRequest {
            volume_id: id.into(),
            secrets: secrets.clone(),
        })
        .await
        .unwrap();
}
