//! Small HTTP pieces of the kubelet API: bodies, plain responses and query strings.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};

/// A response body: whole, or streamed (logs with `follow`).
pub type Body = BoxBody<Bytes, std::io::Error>;

/// A response.
pub type Response = http::Response<Body>;

/// A whole body.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never: Infallible| match never {})
        .boxed()
}

/// A plain-text response with `status`.
pub fn text(status: http::StatusCode, message: impl Into<String>) -> Response {
    let mut response = http::Response::new(full(message.into()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// A JSON response (200).
pub fn json(value: &impl serde::Serialize) -> Response {
    match serde_json::to_vec(value) {
        Ok(bytes) => {
            let mut response = http::Response::new(full(bytes));
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            response
        }
        Err(e) => text(http::StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// A query string's parameters, decoded, in order (a key may repeat: `command=`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query(pub Vec<(String, String)>);

impl Query {
    /// Parses `a=1&b=x%20y&command=ls`.
    pub fn parse(query: Option<&str>) -> Self {
        Query(
            query
                .unwrap_or("")
                .split('&')
                .filter(|p| !p.is_empty())
                .map(|pair| {
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    (decode(k), decode(v))
                })
                .collect(),
        )
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `key`, in order.
    pub fn all(&self, key: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// A boolean flag as Kubernetes' query decoding reads it (`1`, `true`).
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("1" | "true" | "True" | "TRUE"))
    }

    /// An integer parameter; `Err` names the parameter when it is malformed.
    pub fn int(&self, key: &str) -> Result<Option<i64>, String> {
        match self.get(key) {
            None | Some("") => Ok(None),
            Some(v) => v
                .parse()
                .map(Some)
                .map_err(|_| format!("invalid value {v:?} for {key}: not an integer")),
        }
    }
}

/// Percent-decoding with `+` as space (form encoding).
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_decode_and_repeat() {
        let q = Query::parse(Some(
            "command=sh&command=-c&command=echo%20a+b&tty=1&x=%zz&y=%4",
        ));
        assert_eq!(q.all("command"), ["sh", "-c", "echo a b"]);
        assert!(q.flag("tty"));
        assert!(!q.flag("stdin"));
        assert_eq!(q.get("x"), Some("%zz"));
        assert_eq!(q.get("y"), Some("%4"));
    }
}
