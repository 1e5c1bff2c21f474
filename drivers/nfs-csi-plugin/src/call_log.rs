//! A tower layer that logs every gRPC call: method, outcome and duration. Probe calls
//! (made every few seconds by liveness probes) are logged at debug level only.
//!
//! Requests are never logged: they may carry secrets and mount options.

use std::{
    pin::Pin,
    task::{Context, Poll},
    time::Instant,
};

use tonic::codegen::http;
use tower::{Layer, Service};

/// Adds [`CallLog`] to a tonic server (`Server::builder().layer(CallLogLayer)`).
#[derive(Debug, Clone, Copy, Default)]
pub struct CallLogLayer;

impl<S> Layer<S> for CallLogLayer {
    type Service = CallLog<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CallLog { inner }
    }
}

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct CallLog<S> {
    inner: S,
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for CallLog<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
    S::Error: std::fmt::Display,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        let method = request.uri().path().to_owned();
        let started = Instant::now();
        let call = self.inner.call(request);
        Box::pin(async move {
            let result = call.await;
            let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
            let quiet = method.ends_with("/Probe");
            match &result {
                Ok(response) => {
                    // Errors come back as trailers-only responses: the status is in the
                    // headers. A successful unary call has no grpc-status header yet.
                    let headers = response.headers();
                    let code = headers
                        .get("grpc-status")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse::<i32>().ok())
                        .map_or(tonic::Code::Ok, tonic::Code::from_i32);
                    let message = headers
                        .get("grpc-message")
                        .map(|v| percent_decode(v.as_bytes()))
                        .unwrap_or_default();
                    match (code, quiet) {
                        (tonic::Code::Ok, true) => {
                            tracing::debug!(%method, elapsed_ms, "gRPC call OK");
                        }
                        (tonic::Code::Ok, false) => {
                            tracing::info!(%method, elapsed_ms, "gRPC call OK");
                        }
                        (code, true) => {
                            tracing::debug!(%method, ?code, grpc_message = %message, elapsed_ms, "gRPC call failed");
                        }
                        (code, false) => {
                            tracing::warn!(%method, ?code, grpc_message = %message, elapsed_ms, "gRPC call failed");
                        }
                    }
                }
                Err(error) => tracing::warn!(%method, %error, elapsed_ms, "gRPC call broke"),
            }
            result
        })
    }
}

/// Decodes the percent-encoding gRPC uses for `grpc-message`.
fn percent_decode(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .filter(|_| bytes[i] == b'%')
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_messages_are_percent_decoded() {
        assert_eq!(
            percent_decode(b"target_path%20is%20required"),
            "target_path is required"
        );
        assert_eq!(percent_decode(b"100%"), "100%");
        assert_eq!(percent_decode(b"caf%C3%A9"), "café");
    }
}
