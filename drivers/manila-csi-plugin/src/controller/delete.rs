//! DeleteVolume: idempotent share deletion.

use std::collections::HashMap;

use super::Controller;
use crate::error::{Error, Result};
use openstack_client::Credentials;
use openstack_client::manila::is_manila_id;

impl Controller {
    /// DeleteVolume. A share that does not exist is success; otherwise returns once Manila
    /// has removed the share. An id that is not a Manila share id (a UUID) cannot name an
    /// existing share, so, as the CSI spec asks for a volume that does not exist, it is
    /// success too; it is never sent to the cloud.
    #[tracing::instrument(skip_all, fields(volume_id = %volume_id))]
    pub async fn delete_volume(
        &self,
        volume_id: &str,
        secrets: &HashMap<String, String>,
    ) -> Result<()> {
        if volume_id.is_empty() {
            return Err(Error::InvalidArgument("volume_id: required".into()));
        }
        Credentials::try_from(secrets)?;
        if !is_manila_id(volume_id) {
            tracing::info!("not a Manila share id: no such volume, nothing to delete");
            return Ok(());
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
