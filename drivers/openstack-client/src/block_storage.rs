//! The block-storage cloud: the Cinder v3 and Nova v2.1 calls of a Cinder CSI controller
//! over one Keystone session. A 401 from Cinder or Nova re-authenticates once.

use std::time::Duration;

use reqwest::Method;
use serde::Deserialize;
use serde_json::Value;

use crate::credentials::Credentials;
use crate::error::{Error, Result};
use crate::http::{build_client, transport_error};
use crate::keystone::{Catalog, Session};

/// Cinder microversion: multiattach volumes (3.50) and in-use extend (3.42) included.
pub const VOLUME_MICROVERSION: &str = "volume 3.50";
/// Nova microversion: multiattach attachments (2.60).
pub const COMPUTE_MICROVERSION: &str = "2.60";

/// Which service a request goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// Cinder v3.
    Cinder,
    /// Nova v2.1.
    Nova,
}

impl Service {
    fn name(self) -> &'static str {
        match self {
            Service::Cinder => "Cinder",
            Service::Nova => "Nova",
        }
    }
}

/// The endpoints a token's catalog lists for the block-storage cloud.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockStorageEndpoints {
    /// Cinder v3 (`volumev3` or `block-storage`).
    pub cinder: String,
    /// Nova (`compute`).
    pub nova: String,
}

/// Cinder's and Nova's endpoints in `catalog` for the credentials' interface and region
/// ([`crate::keystone::EndpointPicker`]).
pub fn pick_endpoints(
    catalog: &Catalog,
    credentials: &Credentials,
) -> Result<BlockStorageEndpoints> {
    let region = credentials.region.as_deref();
    let interface = credentials.interface.as_str();
    let find = |types: &[&str]| {
        catalog.endpoint(types, interface, region).ok_or_else(|| {
            Error::NotInCatalog(format!(
                "the Keystone catalog has no {} endpoint with interface {interface}{}",
                types.join(" or "),
                region
                    .map(|r| format!(" in region {r}"))
                    .unwrap_or_default()
            ))
        })
    };
    Ok(BlockStorageEndpoints {
        cinder: find(&["volumev3", "block-storage"])?,
        nova: find(&["compute"])?,
    })
}

/// An authenticated connection to Cinder and Nova for one set of credentials.
#[derive(Debug)]
pub struct BlockStorageCloud {
    session: Session<BlockStorageEndpoints>,
}

impl BlockStorageCloud {
    /// A client for `credentials` whose requests carry `user_agent` (no request is made yet).
    pub fn connect(
        credentials: Credentials,
        user_agent: &str,
        auth_timeout: Duration,
    ) -> Result<Self> {
        let http = build_client(&credentials.tls, user_agent)?;
        Ok(BlockStorageCloud {
            session: Session::new(http, credentials, auth_timeout, pick_endpoints),
        })
    }

    /// Sends `method path` (relative to the service's endpoint) with an optional JSON body;
    /// answers the JSON body (Null when empty). Error statuses become [`Error::Api`] with the
    /// cloud's fault message.
    pub async fn request(
        &self,
        service: Service,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value> {
        let mut renewed = false;
        loop {
            let token = self.session.token().await?;
            let base = match service {
                Service::Cinder => &token.endpoints.cinder,
                Service::Nova => &token.endpoints.nova,
            };
            let url = format!("{base}{path}");
            let mut request = self
                .session
                .http()
                .request(method.clone(), &url)
                .header("X-Auth-Token", token.value.expose());
            request = match service {
                Service::Cinder => request.header("OpenStack-API-Version", VOLUME_MICROVERSION),
                Service::Nova => request
                    .header(
                        "OpenStack-API-Version",
                        format!("compute {COMPUTE_MICROVERSION}"),
                    )
                    .header("X-OpenStack-Nova-API-Version", COMPUTE_MICROVERSION),
            };
            if let Some(body) = body {
                request = request.json(body);
            }
            let response = request
                .send()
                .await
                .map_err(|e| transport_error(service.name(), &url, &e))?;
            let status = response.status();
            if status.as_u16() == 401 && !renewed {
                self.session.invalidate(&token, service.name()).await;
                renewed = true;
                continue;
            }
            let bytes = response.bytes().await.map_err(|e| Error::Unreachable {
                service: service.name(),
                url: url.clone(),
                reason: format!("reading the answer: {e}"),
            })?;
            let value: Value = if bytes.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&bytes)
                    .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
            };
            if !status.is_success() {
                return Err(Error::Api {
                    service: service.name(),
                    method: method.to_string(),
                    path: path.split('?').next().unwrap_or(path).to_string(),
                    status: status.as_u16(),
                    message: fault_message(&value),
                });
            }
            return Ok(value);
        }
    }
}

/// The message of an OpenStack fault body: `{"itemNotFound": {"message": …}}` (Cinder,
/// Nova), `{"error": {"message": …}}` (Keystone), `{"message": …}`, or the text itself.
pub fn fault_message(body: &Value) -> String {
    if let Some(message) = body["message"].as_str() {
        return message.to_string();
    }
    if let Some(object) = body.as_object() {
        for (kind, inner) in object {
            if let Some(message) = inner["message"].as_str() {
                return format!("{kind}: {message}");
            }
        }
    }
    match body {
        Value::Null => "(no message)".into(),
        Value::String(text) => text.chars().take(500).collect(),
        other => other.to_string().chars().take(500).collect(),
    }
}

/// One availability zone as Cinder's and Nova's `GET /os-availability-zone` list it (both
/// answer `{"availabilityZoneInfo": [{"zoneName", "zoneState": {"available"}, …}]}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AvailabilityZone {
    /// `zoneName`.
    pub name: String,
    /// `zoneState.available` (false when absent).
    pub available: bool,
}

#[derive(Deserialize)]
struct ZoneListing {
    #[serde(rename = "availabilityZoneInfo")]
    zones: Vec<ZoneEntry>,
}

#[derive(Deserialize)]
struct ZoneEntry {
    #[serde(rename = "zoneName")]
    name: String,
    #[serde(rename = "zoneState", default)]
    state: Option<ZoneState>,
}

#[derive(Deserialize)]
struct ZoneState {
    #[serde(default)]
    available: bool,
}

/// Decodes an `os-availability-zone` answer of `service` at `path`, in the cloud's order.
pub fn decode_zones(
    service: &'static str,
    path: &str,
    value: Value,
) -> Result<Vec<AvailabilityZone>> {
    let listing: ZoneListing = decode(service, path, value)?;
    Ok(listing
        .zones
        .into_iter()
        .map(|z| AvailabilityZone {
            name: z.name,
            available: z.state.is_some_and(|s| s.available),
        })
        .collect())
}

/// Decodes `value` as `T`, naming `service` and `path` when it does not fit.
pub fn decode<T: serde::de::DeserializeOwned>(
    service: &'static str,
    path: &str,
    value: Value,
) -> Result<T> {
    serde_json::from_value(value).map_err(|e| Error::Decode {
        service,
        path: path.to_string(),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fault_messages_are_found_in_every_shape() {
        assert_eq!(
            fault_message(
                &json!({"overLimit": {"code": 413, "message": "VolumeSizeExceedsAvailableQuota"}})
            ),
            "overLimit: VolumeSizeExceedsAvailableQuota"
        );
        assert_eq!(
            fault_message(
                &json!({"error": {"code": 401, "message": "The request you have made requires authentication."}})
            ),
            "error: The request you have made requires authentication."
        );
        assert_eq!(fault_message(&json!("plain text")), "plain text");
        assert_eq!(fault_message(&Value::Null), "(no message)");
    }

    #[test]
    fn zone_listings_decode_with_their_state() -> Result<()> {
        let zones = decode_zones(
            "Nova",
            "/os-availability-zone",
            json!({"availabilityZoneInfo": [
                {"zoneName": "a", "zoneState": {"available": true}, "hosts": null},
                {"zoneName": "b", "zoneState": {"available": false}},
                {"zoneName": "c"},
            ]}),
        )?;
        let seen: Vec<(&str, bool)> = zones
            .iter()
            .map(|z| (z.name.as_str(), z.available))
            .collect();
        assert_eq!(seen, [("a", true), ("b", false), ("c", false)]);
        let wrong = decode_zones("Nova", "/os-availability-zone", json!({"zones": []}))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(wrong.contains("/os-availability-zone"), "{wrong}");
        Ok(())
    }

    #[test]
    fn catalog_lookup_prefers_volumev3_and_honours_region() -> Result<()> {
        let catalog: Catalog = serde_json::from_value(json!([
            {"type": "block-storage", "endpoints": [{"interface": "public", "region_id": "R1", "url": "http://bs/v3/p"}]},
            {"type": "volumev3", "endpoints": [
                {"interface": "internal", "region_id": "R1", "url": "http://internal"},
                {"interface": "public", "region_id": "R1", "url": "http://r1/v3/p/"}]},
            {"type": "compute", "endpoints": [{"interface": "public", "region_id": "R1", "url": "http://nova/"}]},
        ]))
        .map_err(|e| Error::Internal(e.to_string()))?;
        let mut credentials = Credentials::from_clouds_yaml_str(
            "clouds:\n  c:\n    auth:\n      auth_url: http://k/v3\n      username: u\n      password: p\n    region_name: R1\n",
            "c",
            "test",
        )?;
        let endpoints = pick_endpoints(&catalog, &credentials)?;
        assert_eq!(endpoints.cinder, "http://r1/v3/p");
        assert_eq!(endpoints.nova, "http://nova");
        credentials.region = Some("R2".into());
        let missing = pick_endpoints(&catalog, &credentials)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            missing.contains("no volumev3 or block-storage endpoint") && missing.contains("R2"),
            "{missing}"
        );
        Ok(())
    }
}
