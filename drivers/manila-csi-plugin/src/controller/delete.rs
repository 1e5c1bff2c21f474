//! DeleteVolume: idempotent share deletion.

use std::collections::HashMap;

use super::Controller;
use crate::error::{Error, Result};

impl Controller {
    /// DeleteVolume. A share that does not exist is success; otherwise returns once Manila
    /// has removed the share.
    #[tracing::instrument(skip_all, fields(volume_id = %volume_id))]
    pub async fn delete_volume(
        &self,
        volume_id: &str,
        secrets: &HashMap<String, String>,
    ) -> Result<()> {
        if volume_id.is_empty() {
            return Err(Error::InvalidArgument("volume_id: required".into()));
        }
        let _guard = self.inflight.begin(volume_id, "volume id")?;
        let client = self.connect(secrets).await?;
        if !client.delete_share(volume_id).await? {
            tracing::debug!("share already gone");
            return Ok(());
        }
        self.wait_for_share_gone(&client, volume_id).await?;
        tracing::info!("share deleted");
        Ok(())
    }
}
