//! Nova v2.1: the servers volumes attach to, and the compute availability zones.
//!
//! Every call asks for compute [`crate::block_storage::COMPUTE_MICROVERSION`] (2.60, for
//! multiattach), which every release the fake emulates (2025.1 up to 2.100, 2026.1 up to
//! 2.103) serves; the attach answer is read whatever its shape, so that a Nova answering a
//! newer shape (2.89's `attachment_id`/`bdm_uuid` without `id`, or no body at all) still
//! attaches.

use reqwest::Method;
use serde_json::{Value, json};

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

    /// Attaches `volume_id` to `server_id`; answers the device Nova names (`/dev/vdb`), or
    /// `None` when its answer names none (a 202 without a body): the caller then reads the
    /// device from the volume's attachment in Cinder once it is `in-use`.
    pub async fn attach(&self, server_id: &str, volume_id: &str) -> Result<Option<String>> {
        let path = format!("/servers/{server_id}/os-volume_attachments");
        let body = json!({ "volumeAttachment": { "volumeId": volume_id } });
        let answer = self
            .request(Service::Nova, Method::POST, &path, Some(&body))
            .await?;
        Ok(device_in(&answer))
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
            Ok(answer) => Ok(device_in(&answer)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// The device in a Nova volume attachment answer, whichever the microversion's shape: only
/// `volumeAttachment.device` is read (not `id`, gone from 2.89); no body (JSON null) or no
/// device gives `None`.
fn device_in(answer: &Value) -> Option<String> {
    answer["volumeAttachment"]["device"]
        .as_str()
        .filter(|device| !device.is_empty())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::before_2_89(
        json!({"volumeAttachment": {"id": "v", "volumeId": "v", "serverId": "s", "device": "/dev/vdb"}}),
        Some("/dev/vdb")
    )]
    #[case::from_2_89(
        json!({"volumeAttachment": {"volumeId": "v", "serverId": "s", "device": "/dev/vdc",
            "tag": null, "delete_on_termination": false, "attachment_id": "a", "bdm_uuid": "b"}}),
        Some("/dev/vdc")
    )]
    #[case::accepted_without_a_body(Value::Null, None)]
    #[case::no_device(json!({"volumeAttachment": {"volumeId": "v", "device": null}}), None)]
    #[case::empty_device(json!({"volumeAttachment": {"volumeId": "v", "device": ""}}), None)]
    fn the_device_is_read_from_every_attachment_shape(
        #[case] answer: Value,
        #[case] device: Option<&str>,
    ) {
        assert_eq!(device_in(&answer).as_deref(), device);
    }
}
