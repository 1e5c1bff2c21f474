//! Nova v2.1: the servers volumes attach to, and the compute availability zones.

use reqwest::Method;
use serde_json::json;

use crate::block_storage::{AvailabilityZone, BlockStorageCloud, Service, decode_zones};
use crate::error::Result;

impl BlockStorageCloud {
    /// The compute availability zones (`GET /os-availability-zone`), in Nova's order.
    pub async fn compute_availability_zones(&self) -> Result<Vec<AvailabilityZone>> {
        let path = "/os-availability-zone";
        let body = self.request(Service::Nova, Method::GET, path, None).await?;
        decode_zones("Nova", path, body)
    }

    /// Whether server `id` exists (`GET /servers/{id}`).
    pub async fn server_exists(&self, id: &str) -> Result<bool> {
        match self
            .request(Service::Nova, Method::GET, &format!("/servers/{id}"), None)
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.is_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Attaches `volume_id` to `server_id`; answers the device Nova names (`/dev/vdb`).
    pub async fn attach(&self, server_id: &str, volume_id: &str) -> Result<Option<String>> {
        let path = format!("/servers/{server_id}/os-volume_attachments");
        let body = json!({ "volumeAttachment": { "volumeId": volume_id } });
        let answer = self
            .request(Service::Nova, Method::POST, &path, Some(&body))
            .await?;
        Ok(answer["volumeAttachment"]["device"]
            .as_str()
            .map(str::to_string))
    }

    /// Detaches `volume_id` from `server_id`; a missing attachment is no error.
    pub async fn detach(&self, server_id: &str, volume_id: &str) -> Result<()> {
        let path = format!("/servers/{server_id}/os-volume_attachments/{volume_id}");
        match self
            .request(Service::Nova, Method::DELETE, &path, None)
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The device of an existing attachment, if any.
    pub async fn attachment_device(
        &self,
        server_id: &str,
        volume_id: &str,
    ) -> Result<Option<String>> {
        let path = format!("/servers/{server_id}/os-volume_attachments/{volume_id}");
        match self.request(Service::Nova, Method::GET, &path, None).await {
            Ok(answer) => Ok(answer["volumeAttachment"]["device"]
                .as_str()
                .map(str::to_string)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }
}
