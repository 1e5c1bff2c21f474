//! Throughput of the fake: share create → available → delete → gone cycles per second with
//! no injected delay, over real HTTP, from several concurrent clients.
//!
//! Run: `cargo bench -p fakes --bench throughput` (env `CYCLES`, `CLIENTS` to change the load).

use std::time::Instant;

use anyhow::{Context, ensure};
use fakes::{CloudConfig, FakeCloud};
use serde_json::{Value, json};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn token(http: &reqwest::Client, cloud: &FakeCloud) -> anyhow::Result<String> {
    let a = cloud.account();
    let r = http
        .post(format!("{}/auth/tokens", cloud.auth_url()))
        .json(&json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "id": a.user_id, "password": a.password.expose()}}},
            "scope": {"project": {"id": a.project_id}}}}))
        .send()
        .await?;
    ensure!(r.status() == 201, "auth answered {}", r.status());
    Ok(r.headers()["x-subject-token"].to_str()?.to_owned())
}

/// One create → available → delete → gone cycle.
async fn cycle(http: &reqwest::Client, url: &str, token: &str, i: usize) -> anyhow::Result<()> {
    let call = |m: reqwest::Method, path: String| {
        http.request(m, format!("{url}{path}"))
            .header("X-Auth-Token", token)
            .header("X-OpenStack-Manila-API-Version", "2.84")
    };
    let r: Value = call(reqwest::Method::POST, "/shares".into())
        .json(&json!({"share": {"name": format!("bench-{i}"), "size": 1, "share_proto": "NFS"}}))
        .send()
        .await?
        .json()
        .await?;
    let id = r["share"]["id"].as_str().context("no share id")?.to_owned();
    loop {
        let r: Value = call(reqwest::Method::GET, format!("/shares/{id}"))
            .send()
            .await?
            .json()
            .await?;
        if r["share"]["status"] == "available" {
            break;
        }
    }
    let r = call(reqwest::Method::DELETE, format!("/shares/{id}"))
        .send()
        .await?;
    ensure!(r.status() == 202, "delete answered {}", r.status());
    loop {
        let r = call(reqwest::Method::GET, format!("/shares/{id}"))
            .send()
            .await?;
        if r.status() == 404 {
            return Ok(());
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cycles = env("CYCLES", 4000);
    let clients = env("CLIENTS", 8);
    let cloud = FakeCloud::start(CloudConfig::default()).await?;
    let http = reqwest::Client::new();
    let token = token(&http, &cloud).await?;
    let url = cloud.manila_url();
    // Warm up connections.
    for i in 0..clients {
        cycle(&http, &url, &token, i).await?;
    }
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let (http, url, token) = (http.clone(), url.clone(), token.clone());
            tokio::spawn(async move {
                for i in (c..cycles).step_by(clients) {
                    cycle(&http, &url, &token, i).await?;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for t in tasks {
        t.await??;
    }
    let secs = start.elapsed().as_secs_f64();
    ensure!(
        cloud.leftovers().is_empty(),
        "shares left after the benchmark"
    );
    println!(
        "fake Manila throughput: {cycles} create→available→delete cycles in {secs:.2}s with {clients} clients = {:.0} cycles/s ({:.0} requests/s)",
        cycles as f64 / secs,
        cycles as f64 * 4.0 / secs
    );
    Ok(())
}
