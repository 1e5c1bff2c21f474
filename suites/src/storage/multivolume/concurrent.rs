//! Upstream's `TestConcurrentAccessToSingleVolume`: one volume used by several pods at once,
//! on one node (read-write, in either mode, and read-only) and on several nodes (RWX).

use super::Mode;
use crate::e2e::workload::{PodBuilder, Workload, claim};
use crate::registry::{TestContext, TestError, TestResult};
use crate::storage::data::{SEEDED_LEN, check_seeded, seeded_content, write_seeded};
use crate::storage::provisioning::{access_mode, is_manila};
use crate::storage::{bind_claim, node_of, nodes};
use crate::{ensure, ensure_eq};

/// Where the pods use the volume.
const PATH: &str = "/mnt/volume1";

/// `pods` (named `names`) on one volume of `mode` at once; each reads what the previous one
/// wrote and writes its own (slot `index`); then the last pod is deleted and the others
/// check they still read and write.
async fn concurrent_access(
    w: &Workload<'_>,
    mode: Mode,
    pods: &[PodBuilder],
    names: &[&str],
) -> TestResult {
    for pod in pods {
        w.create_pod(&pod.clone().build()).await?;
    }
    for name in names {
        w.wait_ready(name).await?;
    }
    let count = names.len() as u64;
    for (index, name) in names.iter().enumerate() {
        let slot = index as u64;
        if index > 0 {
            mode.check(w, name, PATH, slot - 1, slot).await?;
        }
        mode.write(w, name, PATH, slot, slot + 1).await?;
        mode.check(w, name, PATH, slot, slot + 1).await?;
    }
    let (last, rest) = names
        .split_last()
        .ok_or_else(|| TestError::failed("no pods"))?;
    w.delete_pods(&[last]).await?;
    for (index, name) in rest.iter().enumerate() {
        // Each in a slot of its own beyond the first round's.
        let slot = count + index as u64;
        mode.check(w, name, PATH, count - 1, count).await?;
        mode.write(w, name, PATH, slot, 1000 + slot).await?;
        mode.check(w, name, PATH, slot, 1000 + slot).await?;
    }
    w.delete_pods(rest).await?;
    Ok(())
}

/// Three pods on one node sharing one claim of `mode`.
async fn on_one_node(ctx: &TestContext<'_>, mode: Mode) -> TestResult {
    let node = nodes(ctx, 1)?.remove(0);
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    bind_claim(
        ctx,
        &mode.claim("shared", &class, &ctx.claim_size(), access_mode(ctx)),
        Some(&node),
    )
    .await?;
    let names = ["pod-1", "pod-2", "pod-3"];
    let pods: Vec<PodBuilder> = names
        .iter()
        .map(|name| {
            mode.give(PodBuilder::new(name, "true"), "shared", PATH)
                .node(&node)
        })
        .collect();
    concurrent_access(w, mode, &pods, &names).await
}

pub(super) async fn same_node(ctx: &TestContext<'_>) -> TestResult {
    on_one_node(ctx, Mode::Filesystem).await
}

pub(super) async fn same_node_block(ctx: &TestContext<'_>) -> TestResult {
    on_one_node(ctx, Mode::Block).await
}

pub(super) async fn different_nodes(ctx: &TestContext<'_>) -> TestResult {
    let count = ctx.nodes().len().min(3);
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    let shared = bind_claim(
        ctx,
        &claim("shared", Some(&class), &ctx.claim_size(), "ReadWriteMany"),
        None,
    )
    .await?;
    let names: Vec<String> = (1..=count).map(|i| format!("pod-{i}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let pods: Vec<PodBuilder> = names
        .iter()
        .map(|name| {
            PodBuilder::new(name, "true")
                .claim("shared", PATH)
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
    let path = |name: &str| format!("{PATH}/{name}");
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
            seeded_content(1, SEEDED_LEN),
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
pub(super) async fn read_only_same_node(ctx: &TestContext<'_>) -> TestResult {
    let node = nodes(ctx, 1)?.remove(0);
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    w.create_claim(&claim(
        "shared",
        Some(&class),
        &ctx.claim_size(),
        access_mode(ctx),
    ))
    .await?;
    w.ready_pod(
        &PodBuilder::new("writer", "true")
            .claim("shared", PATH)
            .node(&node)
            .build(),
    )
    .await?;
    w.wait_bound("shared").await?;
    write_seeded(w, "writer", &format!("{PATH}/data"), 7).await?;
    w.delete_pods(&["writer"]).await?;
    let names = ["reader-1", "reader-2"];
    for name in names {
        w.create_pod(
            &PodBuilder::new(name, "true")
                .read_only_claim("shared", PATH)
                .node(&node)
                .build(),
        )
        .await?;
    }
    for name in names {
        w.wait_ready(name).await?;
        check_seeded(w, name, &format!("{PATH}/data"), 7).await?;
        let refused = w.exec(name, &format!("echo x > {PATH}/{name}")).await;
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
