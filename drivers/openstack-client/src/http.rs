//! HTTP plumbing shared by the Keystone and Manila clients: the reqwest client with the
//! credentials' TLS settings, and error extraction from OpenStack error bodies.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::credentials::TlsOptions;
use crate::error::{Error, Result};

/// Builds the HTTP client for one set of TLS options.
pub fn build_client(tls: &TlsOptions, user_agent: &str) -> Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .use_rustls_tls()
        .user_agent(user_agent)
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(60));
    let mut bundles = Vec::new();
    if let Some(path) = &tls.ca_file {
        let pem = std::fs::read(path).map_err(|e| {
            Error::InvalidArgument(format!(
                "secret os-certAuthorityPath: cannot read {}: {e}",
                path.display()
            ))
        })?;
        bundles.push(("os-certAuthorityPath", pem));
    }
    if let Some(pem) = &tls.ca_pem {
        bundles.push(("os-certAuthority", pem.as_bytes().to_vec()));
    }
    for (key, pem) in bundles {
        let certificates = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
            Error::InvalidArgument(format!("secret {key}: not a PEM certificate bundle: {e}"))
        })?;
        if certificates.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "secret {key}: contains no PEM certificate"
            )));
        }
        for certificate in certificates {
            builder = builder.add_root_certificate(certificate);
        }
    }
    if let (Some(cert), Some(key)) = (&tls.client_cert, &tls.client_key) {
        builder = builder.identity(client_identity(cert, key)?);
    }
    if tls.insecure {
        builder = builder.danger_accept_invalid_certs(true);
    }
    builder
        .build()
        .map_err(|e| Error::Internal(format!("cannot build the HTTP client: {e}")))
}

/// The client certificate and key of `os-clientCertPath` and `os-clientKeyPath` (PEM files).
fn client_identity(cert: &Path, key: &Path) -> Result<reqwest::Identity> {
    let read = |secret: &str, path: &Path| {
        std::fs::read(path).map_err(|e| {
            Error::InvalidArgument(format!(
                "secret {secret}: cannot read {}: {e}",
                path.display()
            ))
        })
    };
    let mut pem = read("os-clientCertPath", cert)?;
    if !pem.ends_with(b"\n") {
        pem.push(b'\n');
    }
    pem.extend(read("os-clientKeyPath", key)?);
    reqwest::Identity::from_pem(&pem).map_err(|e| {
        Error::InvalidArgument(format!(
            "secrets os-clientCertPath and os-clientKeyPath: not a PEM certificate and private key: {e}"
        ))
    })
}

/// A transport-level failure (connection refused, DNS, TLS, timeout) as [`Error::Unreachable`].
pub fn transport_error(service: &'static str, url: &str, error: &reqwest::Error) -> Error {
    // Walk the source chain: reqwest's own message is terse ("error sending request").
    let mut reason = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(inner) = source {
        reason.push_str(": ");
        reason.push_str(&inner.to_string());
        source = inner.source();
    }
    // Never echo query strings (they carry no secrets here, but keep errors short).
    let url = url.split('?').next().unwrap_or(url).to_string();
    Error::Unreachable {
        service,
        url,
        reason,
    }
}

/// Turns a non-success response into [`Error::Api`] with the message from the body.
pub async fn error_for_response(
    service: &'static str,
    method: &str,
    path: &str,
    response: reqwest::Response,
) -> Error {
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    Error::Api {
        service,
        method: method.into(),
        path: path.into(),
        status,
        message: error_message(&text),
    }
}

/// Extracts the message of `{"itemNotFound":{"code":404,"message":"…"}}`,
/// `{"error":{"message":"…"}}` and similar bodies; falls back to the (shortened) text.
fn error_message(text: &str) -> String {
    if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) {
        for value in map.values() {
            if let Some(message) = value.get("message").and_then(Value::as_str) {
                return message.to_string();
            }
        }
        if let Some(message) = map.get("message").and_then(Value::as_str) {
            return message.to_string();
        }
    }
    let text = text.trim();
    if text.is_empty() {
        "(empty body)".into()
    } else {
        text.chars().take(300).collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn messages_come_from_openstack_error_bodies() {
        assert_eq!(
            error_message(
                r#"{"itemNotFound":{"code":404,"message":"Share x could not be found."}}"#
            ),
            "Share x could not be found."
        );
        assert_eq!(
            error_message(r#"{"error":{"code":401,"message":"nope"}}"#),
            "nope"
        );
        assert_eq!(error_message(""), "(empty body)");
    }

    #[test]
    fn an_unparsable_ca_names_the_secret() {
        let tls = TlsOptions {
            ca_pem: Some("not pem".into()),
            ..TlsOptions::default()
        };
        let error = build_client(&tls, "test").unwrap_err();
        assert!(error.to_string().contains("os-certAuthority"), "{error}");
    }
}
