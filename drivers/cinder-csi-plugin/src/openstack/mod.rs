//! The cloud: Keystone authentication and the Cinder v3 and Nova v2.1 calls the controller
//! makes, over one reqwest client. A 401 from Cinder or Nova re-authenticates once.

pub mod cinder;
pub mod keystone;
pub mod nova;

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;
use tokio::sync::Mutex;

use crate::cloud_config::Global;
use crate::error::{Error, Result};
use keystone::Session;

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

/// An authenticated connection to the cloud of `[Global]`.
#[derive(Debug)]
pub struct Cloud {
    http: reqwest::Client,
    global: Global,
    session: Mutex<Option<Session>>,
}

impl Cloud {
    /// A client for `global` (no request is made yet).
    pub fn new(global: Global) -> Result<Self> {
        let mut builder = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .user_agent(concat!("cinder-csi-plugin/", env!("CARGO_PKG_VERSION")));
        if global.tls_insecure {
            builder = builder.danger_accept_invalid_certs(true);
        }
        if let Some(ca_file) = &global.ca_file {
            let pem = std::fs::read(ca_file).map_err(|e| Error::Config {
                file: ca_file.display().to_string(),
                reason: format!("[Global] ca-file cannot be read: {e}"),
            })?;
            let certificates =
                reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| Error::Config {
                    file: ca_file.display().to_string(),
                    reason: format!("[Global] ca-file is not PEM: {e}"),
                })?;
            for certificate in certificates {
                builder = builder.add_root_certificate(certificate);
            }
        }
        let http = builder
            .build()
            .map_err(|e| Error::Internal(format!("cannot build the HTTP client: {e}")))?;
        Ok(Cloud {
            http,
            global,
            session: Mutex::new(None),
        })
    }

    async fn session(&self, renew: bool) -> Result<Session> {
        let mut slot = self.session.lock().await;
        if !renew && let Some(session) = slot.as_ref() {
            return Ok(session.clone());
        }
        let session = keystone::authenticate(&self.http, &self.global).await?;
        *slot = Some(session.clone());
        Ok(session)
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
            let session = self.session(renewed).await?;
            let base = match service {
                Service::Cinder => &session.cinder_url,
                Service::Nova => &session.nova_url,
            };
            let url = format!("{base}{path}");
            let mut request = self
                .http
                .request(method.clone(), &url)
                .header("X-Auth-Token", session.token.expose());
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
            let response = request.send().await.map_err(|e| Error::Unreachable {
                service: service.name(),
                url: url.clone(),
                reason: e.to_string(),
            })?;
            let status = response.status();
            if status.as_u16() == 401 && !renewed {
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
}
