//! ControllerExpandVolume: extend a share and wait for it.

use std::collections::HashMap;

use super::{Controller, gib_to_bytes, not_found_unless_share_id, size_in_gib};
use crate::error::{Error, Result};

impl Controller {
    /// ControllerExpandVolume. Returns the new capacity in bytes; a share already at least
    /// as large is left alone. Shrinking is never done.
    #[tracing::instrument(skip_all, fields(volume_id = %volume_id))]
    pub async fn expand_volume(
        &self,
        volume_id: &str,
        required_bytes: i64,
        limit_bytes: i64,
        secrets: &HashMap<String, String>,
    ) -> Result<i64> {
        if volume_id.is_empty() {
            return Err(Error::InvalidArgument("volume_id: required".into()));
        }
        let size = size_in_gib(required_bytes, limit_bytes)?;
        not_found_unless_share_id(volume_id)?;
        let _guard = self.inflight.begin(volume_id, "volume id")?;
        let client = self.connect(secrets).await?;
        let share = client.share(volume_id).await?;
        let current = if share.size >= size {
            share.size
        } else {
            if share.status != "available" {
                return Err(Error::FailedPrecondition(format!(
                    "share {volume_id} is in status {}, it can only be extended when available",
                    share.status
                )));
            }
            client.extend_share(volume_id, size).await?;
            let share = self
                .wait_for_share(&client, volume_id, "available", &["extending"])
                .await?;
            tracing::info!(from = share.size, to = size, "share extended");
            share.size
        };
        gib_to_bytes(&format!("share {volume_id}"), current)
    }
}
