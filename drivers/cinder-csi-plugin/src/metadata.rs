//! The instance metadata: where the node service learns its node id (`uuid`) and zone
//! (`availability_zone`) when `--nodeid` is not given, in the order `[Metadata]
//! search-order` says. Only the metadata service is read; a config drive is reported as
//! unsupported so that `search-order = metadataService` is the fix the message names.

use std::time::Duration;

use serde::Deserialize;

use crate::cloud_config::MetadataSource;
use crate::error::{Error, Result};

/// Where Nova serves an instance's metadata document.
pub const DEFAULT_URL: &str = "http://169.254.169.254/openstack/latest/meta_data.json";

/// The fields of `meta_data.json` the driver uses.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct InstanceMetadata {
    /// The instance id: the node id.
    #[serde(default)]
    pub uuid: String,
    /// The instance's availability zone.
    #[serde(default)]
    pub availability_zone: String,
}

/// Reads the metadata from the first source of `order` that answers.
pub async fn fetch(
    order: &[MetadataSource],
    url: &str,
    timeout: Duration,
) -> Result<InstanceMetadata> {
    let mut failures = Vec::new();
    for source in order {
        match source {
            MetadataSource::ConfigDrive => failures.push(
                "configDrive: reading a config drive is not supported by this driver \
                 (set [Metadata] search-order = metadataService)"
                    .to_string(),
            ),
            MetadataSource::MetadataService => match fetch_service(url, timeout).await {
                Ok(metadata) => return Ok(metadata),
                Err(e) => failures.push(format!("metadataService: {e}")),
            },
        }
    }
    Err(Error::NotFound(format!(
        "no instance metadata: {}",
        failures.join("; ")
    )))
}

async fn fetch_service(url: &str, timeout: Duration) -> Result<InstanceMetadata> {
    let failed = |reason: String| Error::Unreachable {
        service: "metadata service",
        url: url.to_string(),
        reason,
    };
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| failed(e.to_string()))?;
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| failed(e.to_string()))?;
    let status = response.status();
    if !status.is_success() {
        return Err(failed(format!("answered HTTP {}", status.as_u16())));
    }
    let body = response.bytes().await.map_err(|e| failed(e.to_string()))?;
    serde_json::from_slice(&body).map_err(|e| failed(format!("not a metadata document: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};

    #[tokio::test]
    async fn the_default_order_falls_back_from_the_config_drive_to_the_service() -> Result<()> {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
                "uuid": "i-1", "availability_zone": "az-1"
            })))
            .mount(&server)
            .await;
        let metadata = fetch(
            &[MetadataSource::ConfigDrive, MetadataSource::MetadataService],
            &server.uri(),
            Duration::from_secs(5),
        )
        .await?;
        assert_eq!(metadata.uuid, "i-1");
        assert_eq!(metadata.availability_zone, "az-1");
        Ok(())
    }

    #[tokio::test]
    async fn every_failure_is_named_when_no_source_answers() {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(503))
            .mount(&server)
            .await;
        let error = fetch(
            &[MetadataSource::ConfigDrive, MetadataSource::MetadataService],
            &server.uri(),
            Duration::from_secs(5),
        )
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(error.contains("config drive is not supported"), "{error}");
        assert!(error.contains("HTTP 503"), "{error}");
    }
}
