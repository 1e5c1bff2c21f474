//! The OpenStack (Nova) metadata service: the instance's own `meta_data.json`, where a node
//! service learns its node id (`uuid`) and compute zone (`availability_zone`).

use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};

/// Where Nova serves an instance's own metadata document.
pub const DEFAULT_URL: &str = "http://169.254.169.254/openstack/latest/meta_data.json";

/// The fields of `meta_data.json` the drivers use.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct InstanceMetadata {
    /// The instance id: the node id.
    #[serde(default)]
    pub uuid: String,
    /// The instance's compute availability zone: the node's topology zone.
    #[serde(default)]
    pub availability_zone: String,
}

/// Reads the metadata document at `url`, giving up after `timeout`. Failures are
/// [`Error::Metadata`] naming the URL.
pub async fn fetch(url: &str, timeout: Duration) -> Result<InstanceMetadata> {
    let failed = |reason: String| Error::Metadata {
        url: url.to_string(),
        reason,
    };
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| failed(format!("cannot build an HTTP client: {e}")))?;
    let response = client
        .get(url)
        .send()
        .await
        .map_err(|e| failed(format!("unreachable: {e}")))?;
    let status = response.status();
    if !status.is_success() {
        return Err(failed(format!("answered HTTP {}", status.as_u16())));
    }
    let body = response
        .bytes()
        .await
        .map_err(|e| failed(format!("reading the answer: {e}")))?;
    serde_json::from_slice(&body).map_err(|e| failed(format!("not a metadata document: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wiremock::matchers::method;
    use wiremock::{Mock, MockServer, ResponseTemplate};

    #[tokio::test]
    async fn the_document_gives_the_id_and_zone_and_a_failure_names_the_status() -> Result<()> {
        let server = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({
                "uuid": "i-1", "availability_zone": "az-1", "name": "node"
            })))
            .mount(&server)
            .await;
        let metadata = fetch(&server.uri(), Duration::from_secs(5)).await?;
        assert_eq!(metadata.uuid, "i-1");
        assert_eq!(metadata.availability_zone, "az-1");
        let failing = MockServer::start().await;
        Mock::given(method("GET"))
            .respond_with(ResponseTemplate::new(503))
            .mount(&failing)
            .await;
        let error = fetch(&failing.uri(), Duration::from_secs(5))
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("HTTP 503"), "{error}");
        Ok(())
    }
}
