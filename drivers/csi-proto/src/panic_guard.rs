//! A guard around each gRPC service of a CSI driver: a panic while serving a call (a bug) is
//! answered with `Internal` naming the method, instead of resetting the caller's stream (which
//! callers see as `Cancelled` or `Unknown`, with nothing in the message pointing at the
//! driver). Both drivers of the workspace wrap their services in it.
//!
//! The guard wraps a generated `*Server` (a tower `Service` with a gRPC name), so every RPC
//! of the service is covered, including those the driver answers without a handler. It
//! catches panics while the call starts and while its future is polled; the process, its
//! other calls and the connection carry on.

use std::any::Any;
use std::convert::Infallible;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

use tonic::Status;
use tonic::body::Body;
use tonic::codegen::{Service, http};
use tonic::server::NamedService;

/// `inner`, with panics answered as `Internal`.
#[derive(Clone, Debug)]
pub struct PanicGuard<S> {
    inner: S,
}

impl<S> PanicGuard<S> {
    /// Guards `inner`.
    pub fn new(inner: S) -> Self {
        PanicGuard { inner }
    }
}

impl<S: NamedService> NamedService for PanicGuard<S> {
    const NAME: &'static str = S::NAME;
}

type Answer = Result<http::Response<Body>, Infallible>;

impl<S> Service<http::Request<Body>> for PanicGuard<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Answer> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let method = request.uri().path().to_owned();
        match catch_unwind(AssertUnwindSafe(|| self.inner.call(request))) {
            Ok(future) => Box::pin(Guarded {
                future: Box::pin(future),
                method,
            }),
            Err(payload) => Box::pin(std::future::ready(Ok(internal(&method, payload.as_ref())))),
        }
    }
}

/// A call's future, polled under `catch_unwind`.
struct Guarded<F> {
    future: Pin<Box<F>>,
    method: String,
}

impl<F> Future for Guarded<F>
where
    F: Future<Output = Answer>,
{
    type Output = Answer;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Answer> {
        // `Guarded` is Unpin (a boxed future and a string): plain field access is fine.
        let this = &mut *self;
        match catch_unwind(AssertUnwindSafe(|| this.future.as_mut().poll(cx))) {
            Ok(poll) => poll,
            // Ready: the panicked future is never polled again.
            Err(payload) => Poll::Ready(Ok(internal(&this.method, payload.as_ref()))),
        }
    }
}

/// The `Internal` answer for a panic in `method` (`/csi.v1.Controller/CreateVolume`).
fn internal(method: &str, payload: &(dyn Any + Send)) -> http::Response<Body> {
    let what = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)");
    tracing::error!(
        method,
        panic = what,
        "a bug: the driver panicked serving a call"
    );
    Status::internal(format!(
        "the driver panicked serving {method} (a bug, please report it): {what}"
    ))
    .into_http()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A service whose handler panics when polled.
    #[derive(Clone)]
    struct Panics;

    impl NamedService for Panics {
        const NAME: &'static str = "csi.v1.Node";
    }

    impl Service<http::Request<Body>> for Panics {
        type Response = http::Response<Body>;
        type Error = Infallible;
        type Future = Pin<Box<dyn Future<Output = Answer> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<Body>) -> Self::Future {
            Box::pin(async { panic!("index out of bounds") })
        }
    }

    #[tokio::test]
    async fn a_panicking_handler_answers_internal_naming_the_method() -> Result<(), String> {
        let mut guard = PanicGuard::new(Panics);
        let request = http::Request::builder()
            .uri("/csi.v1.Node/NodeStageVolume")
            .body(Body::empty())
            .map_err(|e| e.to_string())?;
        let response = match guard.call(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let status = Status::from_header_map(response.headers()).ok_or("no grpc-status")?;
        assert_eq!(status.code(), tonic::Code::Internal);
        assert!(
            status.message().contains("NodeStageVolume"),
            "{}",
            status.message()
        );
        assert!(
            status.message().contains("index out of bounds"),
            "{}",
            status.message()
        );
        Ok(())
    }
}
