//! The instance metadata: where the node service learns its node id (`uuid`) and zone
//! (`availability_zone`) when `--nodeid` is not given, in the order `[Metadata]
//! search-order` says. Only the metadata service is read; a config drive is reported as
//! unsupported so that `search-order = metadataService` is the fix the message names.

use std::time::Duration;

pub use openstack_client::metadata::{DEFAULT_URL, InstanceMetadata};

use crate::cloud_config::MetadataSource;
use crate::error::{Error, Result};

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
            MetadataSource::MetadataService => {
                match openstack_client::metadata::fetch(url, timeout).await {
                    Ok(metadata) => return Ok(metadata),
                    Err(e) => failures.push(format!("metadataService: {e}")),
                }
            }
        }
    }
    Err(Error::NotFound(format!(
        "no instance metadata: {}",
        failures.join("; ")
    )))
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
