//! Volumes and nodes through a real attach: a ReadWriteOnce volume refused on a second node
//! while the first pod uses it (the attach/detach controller's Multi-Attach error), and a
//! Cinder multiattach block volume used read-write from two nodes at once.

use std::time::Duration;

use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{Api, ListParams};

use crate::e2e::workload::{
    PodBuilder, block_claim, claim, describe_pod, pod_is_ready, pod_with_claim, wait_pod_ready,
};
use crate::registry::{TestContext, TestError, TestResult};
use crate::storage::data::{check_seeded_block, write_seeded_block};
use crate::storage::{is_cinder, nodes_in_one_zone};
use crate::{ensure, ensure_eq};

/// A ReadWriteOnce claim used by a pod on one node: a pod on another node (of the same zone,
/// so that only the attachment keeps it off) waits in ContainerCreating with a
/// `FailedAttachVolume` "Multi-Attach error" Warning while the first keeps running; once the
/// first pod is gone the volume moves and the second pod reads the first one's data.
pub(super) async fn read_write_once(ctx: &TestContext<'_>) -> TestResult {
    let nodes = nodes_in_one_zone(ctx, 2)?;
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    w.create_claim(&claim(
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
    w.wait_bound("single").await?;
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

/// The nodes the PV `volume` is attached to, by its VolumeAttachments.
async fn attached_nodes(ctx: &TestContext<'_>, volume: &str) -> TestResult<Vec<String>> {
    let attachments: Api<VolumeAttachment> = Api::all(ctx.client());
    let mut nodes: Vec<String> = attachments
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|a| a.spec.source.persistent_volume_name.as_deref() == Some(volume))
        .filter(|a| a.status.as_ref().is_some_and(|s| s.attached))
        .map(|a| a.spec.node_name)
        .collect();
    nodes.sort();
    Ok(nodes)
}

/// A ReadWriteMany Block claim of a class asking for the Cinder volume type `multiattach`:
/// pods on two nodes use the device at once (the volume attached to both); the bytes one
/// writes, the other reads past its page cache, both ways.
pub(super) async fn multiattach_block(ctx: &TestContext<'_>) -> TestResult {
    if !is_cinder(ctx) {
        return Err(TestError::skip(format!(
            "the volume type multiattach is Cinder's; the driver is {}",
            ctx.driver().name
        )));
    }
    let nodes = nodes_in_one_zone(ctx, 2)?;
    let class = ctx
        .storage_class_with("multiattach", |class| {
            class
                .parameters
                .get_or_insert_with(Default::default)
                .insert("type".into(), "multiattach".into());
        })
        .await?;
    let w = ctx.workload();
    w.create_claim(&block_claim(
        "shared",
        Some(&class),
        &ctx.claim_size(),
        "ReadWriteMany",
    ))
    .await?;
    const DEVICE: &str = "/mnt/volume1";
    let names = ["writer", "reader"];
    for (name, node) in names.iter().zip(&nodes) {
        w.create_pod(
            &PodBuilder::new(name, "true")
                .device("shared", DEVICE)
                .node(node)
                .build(),
        )
        .await?;
    }
    for name in names {
        w.wait_ready(name).await?;
    }
    let bound = w.wait_bound("shared").await?;
    let attached = attached_nodes(ctx, bound.volume_name()).await?;
    let mut wanted = nodes.clone();
    wanted.sort();
    ensure_eq!(
        attached,
        wanted,
        "the nodes volume {} is attached to",
        bound.volume_name()
    );

    write_seeded_block(w, "writer", DEVICE, 0, 11).await?;
    check_seeded_block(w, "reader", DEVICE, 0, 11).await?;
    write_seeded_block(w, "reader", DEVICE, 1, 12).await?;
    check_seeded_block(w, "writer", DEVICE, 1, 12).await?;
    w.delete_pods(&names).await?;
    Ok(())
}
