//! The response a handler builds, turned into a wiremock `ResponseTemplate` at the edge, and
//! the error body Manila, Cinder and Nova share (`{"<fault name>": {"code", "message"}}`).

use std::time::Duration;

use serde_json::{Value, json};
use wiremock::ResponseTemplate;

/// A response under construction.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub status: u16,
    body: Option<(Vec<u8>, &'static str)>,
    headers: Vec<(String, String)>,
    pub delay: Option<Duration>,
}

impl Reply {
    /// A JSON body.
    pub(crate) fn json(status: u16, body: Value) -> Self {
        Self {
            status,
            body: Some((body.to_string().into_bytes(), "application/json")),
            headers: Vec::new(),
            delay: None,
        }
    }

    /// No body.
    pub(crate) fn empty(status: u16) -> Self {
        Self {
            status,
            body: None,
            headers: Vec::new(),
            delay: None,
        }
    }

    /// A body of another media type.
    pub(crate) fn text(status: u16, body: String, mime: &'static str) -> Self {
        Self {
            status,
            body: Some((body.into_bytes(), mime)),
            headers: Vec::new(),
            delay: None,
        }
    }

    /// Adds a header.
    pub(crate) fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_owned(), value.into()));
        self
    }

    /// The wiremock template.
    pub(crate) fn into_template(self) -> ResponseTemplate {
        let mut t = ResponseTemplate::new(self.status);
        for (name, value) in self.headers {
            t = t.append_header(name.as_str(), value.as_str());
        }
        if let Some((bytes, mime)) = self.body {
            t = t.set_body_raw(bytes, mime);
        }
        if let Some(delay) = self.delay {
            t = t.set_delay(delay);
        }
        t
    }
}

/// The error body of Manila, Cinder and Nova (`{"<name>":{"code","message"}}`, with the
/// fault names their WSGI layer gives each status).
pub(crate) fn fault(status: u16, message: impl Into<String>) -> Reply {
    let name = match status {
        400 => "badRequest",
        401 => "unauthorized",
        403 => "forbidden",
        404 => "itemNotFound",
        405 => "badMethod",
        409 => "conflictingRequest",
        413 => "overLimit",
        415 => "badMediaType",
        501 => "notImplemented",
        503 => "serviceUnavailable",
        _ => "computeFault",
    };
    Reply::json(
        status,
        json!({name: {"code": status, "message": message.into()}}),
    )
}

/// 404 for a resource.
pub(crate) fn not_found(message: impl Into<String>) -> Reply {
    fault(404, message)
}

/// 400.
pub(crate) fn bad_request(message: impl Into<String>) -> Reply {
    fault(400, message)
}
