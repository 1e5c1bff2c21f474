//! The Node's `status.volumesInUse`: the volumes pods want or have mounted on this node (see
//! [`state`](super::state)). The attach/detach controller does not detach a volume in use.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;
use tokio::sync::watch;

use crate::error_chain;

/// Keeps the Node `node_name`'s `status.volumesInUse` equal to the volumes in use as
/// `changes` announces them (the whole sorted list, posted with `client` whenever it
/// changes; failed posts are retried every second). Ends when the sender goes.
pub(super) async fn report(
    client: &Client,
    node_name: &str,
    mut changes: watch::Receiver<BTreeSet<String>>,
) {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut posted: Option<BTreeSet<String>> = None;
    loop {
        let current = changes.borrow_and_update().clone();
        if posted.as_ref() != Some(&current) {
            let list: Vec<&String> = current.iter().collect();
            let patch = json!({"status": {"volumesInUse": list}});
            match nodes
                .patch_status(node_name, &PatchParams::default(), &Patch::Strategic(patch))
                .await
            {
                Ok(_) => {
                    tracing::debug!(node = %node_name, volumes = ?list, "volumesInUse posted");
                    posted = Some(current);
                }
                Err(e) => {
                    tracing::warn!(node = %node_name, error = %error_chain(&e), "posting volumesInUse failed; retrying");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            }
        }
        if changes.changed().await.is_err() {
            return;
        }
    }
}
