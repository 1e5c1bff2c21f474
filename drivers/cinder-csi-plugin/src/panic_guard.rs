//! A guard around each gRPC service: a panic while serving a call (a bug) answers
//! `Internal` naming the method, instead of resetting the caller's stream. The same idea as
//! the Manila driver's guard, kept as a small own copy so the two drivers stay independent.

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

type Reply = Result<http::Response<Body>, Infallible>;

impl<S> Service<http::Request<Body>> for PanicGuard<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Reply> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let method = request.uri().path().to_owned();
        match catch_unwind(AssertUnwindSafe(|| self.inner.call(request))) {
            Ok(future) => {
                let mut future = Box::pin(future);
                Box::pin(std::future::poll_fn(move |cx| {
                    match catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(cx))) {
                        Ok(poll) => poll,
                        Err(payload) => Poll::Ready(Ok(internal(&method, payload.as_ref()))),
                    }
                }))
            }
            Err(payload) => Box::pin(std::future::ready(Ok(internal(&method, payload.as_ref())))),
        }
    }
}

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
