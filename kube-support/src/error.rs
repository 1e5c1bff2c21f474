//! What the workspace's error enums share: an error with its causes as one line
//! ([`error_chain`]), for logs and for messages handed to Kubernetes (events, status
//! fields, pod status), and the `(action, path)` context of a failed file-system call
//! ([`IoContext`]).

use std::path::PathBuf;

/// An error with its causes, `a: b: c`. A cause whose text the message already contains is
/// not repeated (some messages print their cause), and an API error ends the chain with its
/// message and code, without the raw status.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let describe = |e: &(dyn std::error::Error + 'static)| match e.downcast_ref::<kube::Error>() {
        Some(kube::Error::Api(status)) => format!("{} ({})", status.message, status.code),
        _ => e.to_string(),
    };
    let mut text = describe(e);
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = describe(cause);
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        if matches!(
            cause.downcast_ref::<kube::Error>(),
            Some(kube::Error::Api(_))
        ) {
            break;
        }
        source = cause.source();
    }
    text
}

/// An error enum with an `Io { action, path, source }` variant: implement
/// [`from_io`](IoContext::from_io) and get [`io`](IoContext::io) for `map_err`.
pub trait IoContext: Sized {
    /// The error for `action` on `path` failing with `source`.
    fn from_io(action: &'static str, path: PathBuf, source: std::io::Error) -> Self;

    /// A closure for `map_err`: `.map_err(Error::io("reading", &path))`.
    fn io(action: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::from_io(action, path, source)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("starting x")]
        Quiet(#[source] std::io::Error),
        #[error("starting y: {0}")]
        Loud(#[source] std::io::Error),
    }

    #[test]
    fn causes_are_joined_once() {
        let quiet = Outer::Quiet(std::io::Error::other("disk full"));
        assert_eq!(error_chain(&quiet), "starting x: disk full");
        let loud = Outer::Loud(std::io::Error::other("disk full"));
        assert_eq!(error_chain(&loud), "starting y: disk full");
    }

    #[derive(Debug, PartialEq)]
    struct Failed(&'static str, PathBuf, std::io::ErrorKind);

    impl IoContext for Failed {
        fn from_io(action: &'static str, path: PathBuf, source: std::io::Error) -> Self {
            Failed(action, path, source.kind())
        }
    }

    #[test]
    fn io_context_keeps_action_and_path() {
        let e =
            std::fs::read("/nonexistent/file").map_err(Failed::io("reading", "/nonexistent/file"));
        assert_eq!(
            e.unwrap_err(),
            Failed(
                "reading",
                "/nonexistent/file".into(),
                std::io::ErrorKind::NotFound
            )
        );
    }
}
