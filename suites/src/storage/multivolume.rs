//! `multiVolume`: one volume used by pods on several nodes (ReadWriteMany), and a
//! ReadWriteOnce volume refused on a second node while the first pod uses it.

use std::time::Duration;

use harness::driver_spec::Capability;

use super::provisioning::{access_mode, is_manila};
use super::{node_of, nodes};
use crate::conformance::{DriverConfig, Needs, TestCase, TestContext, TestResult};
use crate::e2e::workload::{claim, describe_pod, pod_is_ready, pod_with_claim, wait_pod_ready};
use crate::{ensure, ensure_eq, test_case};

const SUITE: &str = "multiVolume";

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            SUITE,
            "should let pods on two nodes read and write one ReadWriteMany volume and see each other's files",
            Needs::capabilities(&[Capability::Rwx, Capability::Exec]).nodes(2),
            read_write_many
        ),
        test_case!(
            SUITE,
            "should let two pods on one node use one volume at the same time",
            Needs::capabilities(&[Capability::MultiPods, Capability::Exec]),
            two_pods_one_node
        ),
        test_case!(
            SUITE,
            "should refuse a ReadWriteOnce volume on a second node (Multi-Attach) until the first pod is gone",
            Needs::capabilities(&[Capability::Exec])
                .nodes(2)
                .driver(DriverConfig::AttachRequired),
            read_write_once
        ),
    ]
}

async fn read_write_many(ctx: &TestContext<'_>) -> TestResult {
    let nodes = nodes(ctx, 2)?;
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    let shared = w
        .bound_claim(&claim(
            "shared",
            Some(&class),
            &ctx.claim_size(),
            "ReadWriteMany",
        ))
        .await?;
    w.ready_pod(&pod_with_claim(
        "a",
        "shared",
        Some(&nodes[0]),
        "echo from-a > /data/a.txt",
    ))
    .await?;
    // Pod b starts once a has written, reads it and answers.
    let script = "cat /data/a.txt > /data/b-read.txt && echo from-b > /data/b.txt";
    let b = w
        .ready_pod(&pod_with_claim("b", "shared", Some(&nodes[1]), script))
        .await?;
    let a = w.pods.get("a").await?;
    ensure!(
        node_of(&a) != node_of(&b),
        "the pods share a node: {} / {}",
        describe_pod(&a),
        describe_pod(&b)
    );
    ensure_eq!(
        w.exec("b", "cat /data/b-read.txt").await?,
        "from-a\n",
        "what b read of a's file"
    );
    ensure_eq!(
        w.exec("a", "cat /data/b.txt").await?,
        "from-b\n",
        "what a reads of b's file"
    );
    w.exec("a", "echo again-a >> /data/a.txt").await?;
    ensure_eq!(
        w.exec("b", "cat /data/a.txt").await?,
        "from-a\nagain-a\n",
        "a's file as b sees it after a appended"
    );
    // On the embedded default the bytes are in the fake cloud's share directory.
    let fake = ctx.environment().and_then(|e| e.fake_cloud());
    if let (Some(cloud), true) = (fake, is_manila(ctx)) {
        let path = cloud.share_dir(&shared.share_id).join("b.txt");
        let on_host = std::fs::read_to_string(&path).map_err(|e| {
            crate::conformance::TestError::failed(format!("reading {}: {e}", path.display()))
        })?;
        ensure_eq!(on_host, "from-b\n", "b's file in the share's directory");
    }
    w.delete_pods(&["a", "b"]).await?;
    Ok(())
}

async fn two_pods_one_node(ctx: &TestContext<'_>) -> TestResult {
    let nodes = nodes(ctx, 1)?;
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    w.bound_claim(&claim(
        "shared",
        Some(&class),
        &ctx.claim_size(),
        access_mode(ctx),
    ))
    .await?;
    let node = Some(nodes[0].as_str());
    w.ready_pod(&pod_with_claim(
        "one",
        "shared",
        node,
        "echo one > /data/one",
    ))
    .await?;
    w.ready_pod(&pod_with_claim(
        "two",
        "shared",
        node,
        "echo two > /data/two",
    ))
    .await?;
    ensure_eq!(
        w.exec("one", "cat /data/two").await?,
        "two\n",
        "what one reads of two's file"
    );
    ensure_eq!(
        w.exec("two", "cat /data/one").await?,
        "one\n",
        "what two reads of one's file"
    );
    // The last pod deleted, the other still has the volume and its data.
    w.delete_pods(&["one"]).await?;
    ensure_eq!(
        w.exec("two", "cat /data/one /data/two").await?,
        "one\ntwo\n",
        "the data after one is gone"
    );
    w.delete_pods(&["two"]).await?;
    Ok(())
}

async fn read_write_once(ctx: &TestContext<'_>) -> TestResult {
    let nodes = nodes(ctx, 2)?;
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    w.bound_claim(&claim(
        "single",
        Some(&class),
        &ctx.claim_size(),
        "ReadWriteOnce",
    ))
    .await?;
    w.ready_pod(&pod_with_claim(
        "first",
        "single",
        Some(&nodes[0]),
        "echo first > /data/owner",
    ))
    .await?;
    w.create_pod(&pod_with_claim(
        "second",
        "single",
        Some(&nodes[1]),
        "cat /data/owner > /data/seen",
    ))
    .await?;
    let event = w
        .wait_event("second", "FailedAttachVolume", "Multi-Attach error")
        .await?;
    ensure_eq!(event.type_.as_deref(), Some("Warning"), "the event's type");
    // The second pod waits in ContainerCreating while the first keeps running.
    let second = w.pods.get("second").await?;
    let status = second.status.clone().unwrap_or_default();
    ensure_eq!(
        status.phase.as_deref(),
        Some("Pending"),
        "the second pod's phase ({})",
        describe_pod(&second)
    );
    let waiting: Vec<String> = status
        .container_statuses
        .unwrap_or_default()
        .iter()
        .filter_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone())
        .collect();
    ensure_eq!(
        waiting,
        ["ContainerCreating"],
        "the second pod's containers ({})",
        describe_pod(&second)
    );
    let first = w.pods.get("first").await?;
    ensure!(
        pod_is_ready(&first),
        "the first pod is not Ready: {}",
        describe_pod(&first)
    );

    // Once the first pod is gone the volume moves, and the second pod sees the data.
    w.delete_pods(&["first"]).await?;
    let moved = wait_pod_ready(&w.pods, "second", Duration::from_secs(240)).await;
    w.check("second pod Ready after the first is gone", moved)
        .await?;
    ensure_eq!(
        w.exec("second", "cat /data/seen").await?,
        "first\n",
        "what the second pod read"
    );
    w.delete_pods(&["second"]).await?;
    Ok(())
}
