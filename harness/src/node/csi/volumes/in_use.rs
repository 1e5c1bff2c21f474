//! The Node's `status.volumesInUse`: the volumes pods want or have mounted on this node (see
//! [`state`](super::state)). The attach/detach controller does not detach a volume in use.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::VolumeManager;
use crate::node::error_chain;

impl VolumeManager {
    /// Keeps the Node's `status.volumesInUse` equal to the volumes in use (the whole sorted
    /// list, posted whenever it changes; failed posts are retried every second).
    pub async fn report_in_use(&self) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let mut changes = self.state.subscribe();
        let mut posted: Option<BTreeSet<String>> = None;
        loop {
            let current = changes.borrow_and_update().clone();
            if posted.as_ref() != Some(&current) {
                let list: Vec<&String> = current.iter().collect();
                let patch = json!({"status": {"volumesInUse": list}});
                match nodes
                    .patch_status(
                        &self.node_name,
                        &PatchParams::default(),
                        &Patch::Strategic(patch),
                    )
                    .await
                {
                    Ok(_) => {
                        tracing::debug!(node = %self.node_name, volumes = ?list, "volumesInUse posted");
                        posted = Some(current);
                    }
                    Err(e) => {
                        tracing::warn!(node = %self.node_name, error = %error_chain(&e), "posting volumesInUse failed; retrying");
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
}
