//! `multiVolume` (upstream `multivolume.go`): several volumes in one pod across its
//! re-creation, one volume used by several pods at once (on one node, read-only, on several
//! nodes), and a ReadWriteOnce volume refused on a second node while the first pod uses it.

use std::time::Duration;

use driver_spec::Capability;

use super::data::{check_seeded, write_seeded};
use super::provisioning::{access_mode, is_manila};
use super::{node_of, nodes};
use crate::e2e::workload::{
    PodBuilder, Workload, claim, describe_pod, pod_is_ready, pod_with_claim, wait_pod_ready,
};
use crate::registry::{DriverConfig, Needs, TestCase, TestContext, TestError, TestResult};
use crate::{ensure, ensure_eq, test_case};

const SUITE: &str = "multiVolume";

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            SUITE,
            "should access to two volumes with the same volume mode and retain data across pod recreation on the same node",
            Needs::capabilities(&[Capability::Persistence, Capability::Exec]),
            two_volumes_same_node
        ),
        test_case!(
            SUITE,
            "should access to two volumes with the same volume mode and retain data across pod recreation on different node",
            Needs::capabilities(&[Capability::Persistence, Capability::Exec]).nodes(2),
            two_volumes_other_node
        ),
        test_case!(
            SUITE,
            "should concurrently access the single volume from pods on the same node",
            Needs::capabilities(&[Capability::MultiPods, Capability::Exec]),
            concurrent_same_node
        ),
        test_case!(
            SUITE,
            "should concurrently access the single read-only volume from pods on the same node",
            Needs::capabilities(&[Capability::MultiPods, Capability::Exec]),
            concurrent_read_only_same_node
        ),
        test_case!(
            SUITE,
            "should concurrently access the single volume from pods on different node",
            Needs::capabilities(&[Capability::Rwx, Capability::Exec]).nodes(2),
            concurrent_different_nodes
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

/// Upstream's `testAccessMultipleVolumes` across a re-creation of the pod: a pod with two
/// claims writes seeded data to both; a new pod with the same claims (on `second_node`, or
/// the first pod's node) reads it back and writes again.
async fn two_volumes(ctx: &TestContext<'_>, other_node: bool) -> TestResult {
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    let size = ctx.claim_size();
    let mode = access_mode(ctx);
    for name in ["vol-1", "vol-2"] {
        w.bound_claim(&claim(name, Some(&class), &size, mode))
            .await?;
    }
    let pod = |name: &str| {
        PodBuilder::new(name, "true")
            .claim("vol-1", "/mnt/volume1")
            .claim("vol-2", "/mnt/volume2")
    };
    let first = w.ready_pod(&pod("first").build()).await?;
    let first_node =
        node_of(&first).ok_or_else(|| TestError::failed("the first pod has no node"))?;
    for (index, path) in ["/mnt/volume1/data", "/mnt/volume2/data"]
        .iter()
        .enumerate()
    {
        write_seeded(w, "first", path, 100 + index as u64).await?;
        check_seeded(w, "first", path, 100 + index as u64).await?;
    }
    w.delete_pods(&["first"]).await?;

    let second = if other_node {
        let other = ctx
            .nodes()
            .iter()
            .find(|n| n.name != first_node)
            .ok_or_else(|| TestError::skip("needs a second schedulable node"))?;
        pod("second").node(&other.name)
    } else {
        pod("second").node(&first_node)
    };
    let second = w.ready_pod(&second.build()).await?;
    let second_node = node_of(&second).unwrap_or_default();
    ensure_eq!(
        second_node == first_node,
        !other_node,
        "whether the pod came back on the same node ({first_node} then {second_node})"
    );
    for (index, path) in ["/mnt/volume1/data", "/mnt/volume2/data"]
        .iter()
        .enumerate()
    {
        check_seeded(w, "second", path, 100 + index as u64).await?;
        write_seeded(w, "second", path, 200 + index as u64).await?;
        check_seeded(w, "second", path, 200 + index as u64).await?;
    }
    w.delete_pods(&["second"]).await?;
    Ok(())
}

async fn two_volumes_same_node(ctx: &TestContext<'_>) -> TestResult {
    two_volumes(ctx, false).await
}

async fn two_volumes_other_node(ctx: &TestContext<'_>) -> TestResult {
    two_volumes(ctx, true).await
}

/// Upstream's `TestConcurrentAccessToSingleVolume`: `pods` pods on one volume at once; each
/// reads what the previous one wrote and writes its own; then the last pod is deleted and the
/// others check they still read and write.
async fn concurrent_access(w: &Workload<'_>, pods: &[PodBuilder], names: &[&str]) -> TestResult {
    for pod in pods {
        w.create_pod(&pod.clone().build()).await?;
    }
    for name in names {
        w.wait_ready(name).await?;
    }
    let path = |name: &str| format!("/mnt/volume1/{name}");
    for (index, name) in names.iter().enumerate() {
        if index > 0 {
            let previous = names[index - 1];
            check_seeded(w, name, &path(previous), index as u64).await?;
        }
        write_seeded(w, name, &path(name), index as u64 + 1).await?;
        check_seeded(w, name, &path(name), index as u64 + 1).await?;
    }
    let (last, rest) = names
        .split_last()
        .ok_or_else(|| TestError::failed("no pods"))?;
    w.delete_pods(&[last]).await?;
    for (index, name) in rest.iter().enumerate() {
        check_seeded(w, name, &path(last), names.len() as u64).await?;
        write_seeded(w, name, &path(name), 1000 + index as u64).await?;
        check_seeded(w, name, &path(name), 1000 + index as u64).await?;
    }
    w.delete_pods(rest).await?;
    Ok(())
}

async fn concurrent_same_node(ctx: &TestContext<'_>) -> TestResult {
    let node = nodes(ctx, 1)?.remove(0);
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    w.bound_claim(&claim(
        "shared",
        Some(&class),
        &ctx.claim_size(),
        access_mode(ctx),
    ))
    .await?;
    let names = ["pod-1", "pod-2", "pod-3"];
    let pods: Vec<PodBuilder> = names
        .iter()
        .map(|name| {
            PodBuilder::new(name, "true")
                .claim("shared", "/mnt/volume1")
                .node(&node)
        })
        .collect();
    concurrent_access(w, &pods, &names).await
}

async fn concurrent_different_nodes(ctx: &TestContext<'_>) -> TestResult {
    let count = ctx.nodes().len().min(3);
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
    let names: Vec<String> = (1..=count).map(|i| format!("pod-{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let pods: Vec<PodBuilder> = names
        .iter()
        .map(|name| {
            PodBuilder::new(name, "true")
                .claim("shared", "/mnt/volume1")
                .spread_in("rwx")
        })
        .collect();
    // All at once, each on a node of its own (required anti-affinity).
    for pod in &pods {
        w.create_pod(&pod.clone().build()).await?;
    }
    let mut seen = Vec::new();
    for name in &names {
        let pod = w.wait_ready(name).await?;
        seen.push(node_of(&pod).unwrap_or_default());
    }
    let mut distinct = seen.clone();
    distinct.sort();
    distinct.dedup();
    ensure_eq!(distinct.len(), names.len(), "nodes of the pods {seen:?}");
    let path = |name: &str| format!("/mnt/volume1/{name}");
    for (index, name) in names.iter().enumerate() {
        if index > 0 {
            check_seeded(w, name, &path(names[index - 1]), index as u64).await?;
        }
        write_seeded(w, name, &path(name), index as u64 + 1).await?;
    }
    // On the embedded default the bytes are in the fake cloud's share directory.
    let fake = ctx.environment().and_then(|e| e.fake_cloud());
    if let (Some(cloud), true) = (fake, is_manila(ctx)) {
        let file = cloud.share_dir(&shared.share_id).join(names[0]);
        let on_host = std::fs::read_to_string(&file)
            .map_err(|e| TestError::failed(format!("reading {}: {e}", file.display())))?;
        ensure_eq!(
            on_host,
            super::data::seeded_content(1, super::data::SEEDED_LEN),
            "pod-1's file in the share's directory"
        );
    }
    let (last, rest) = names
        .split_last()
        .ok_or_else(|| TestError::failed("no pods"))?;
    w.delete_pods(&[last]).await?;
    for name in rest {
        check_seeded(w, name, &path(last), names.len() as u64).await?;
    }
    w.delete_pods(rest).await?;
    Ok(())
}

/// Upstream's read-only variant: the data is written first; then pods on one node mount the
/// volume read-only, read it, and cannot write.
async fn concurrent_read_only_same_node(ctx: &TestContext<'_>) -> TestResult {
    let node = nodes(ctx, 1)?.remove(0);
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    w.bound_claim(&claim(
        "shared",
        Some(&class),
        &ctx.claim_size(),
        access_mode(ctx),
    ))
    .await?;
    w.ready_pod(
        &PodBuilder::new("writer", "true")
            .claim("shared", "/mnt/volume1")
            .node(&node)
            .build(),
    )
    .await?;
    write_seeded(w, "writer", "/mnt/volume1/data", 7).await?;
    w.delete_pods(&["writer"]).await?;
    let names = ["reader-1", "reader-2"];
    for name in names {
        w.create_pod(
            &PodBuilder::new(name, "true")
                .read_only_claim("shared", "/mnt/volume1")
                .node(&node)
                .build(),
        )
        .await?;
    }
    for name in names {
        w.wait_ready(name).await?;
        check_seeded(w, name, "/mnt/volume1/data", 7).await?;
        let refused = w.exec(name, &format!("echo x > /mnt/volume1/{name}")).await;
        match refused {
            Err(e) => {
                let message = e.to_string();
                ensure!(
                    message.contains("Read-only file system"),
                    "writing to the read-only volume failed, but not as read-only: {message}"
                );
            }
            Ok(_) => {
                return Err(TestError::failed(format!(
                    "{name} could write to its read-only volume"
                )));
            }
        }
    }
    w.delete_pods(&names).await?;
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
