//! A sanity case: its name, and the async function that checks one behaviour. Checks
//! return [`Verdict`]s instead of panicking, so the runner can clean up and go on.

use std::future::Future;
use std::pin::Pin;

use tonic::{Code, Response, Status};

use super::context::CaseContext;

/// Why a case did not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The plugin misbehaved: what was expected and what happened.
    Fail(String),
    /// The case does not apply to this plugin (capability not advertised, …).
    Skip(String),
}

/// What a case (or a step of one) returns.
pub type CaseResult<T = ()> = Result<T, Verdict>;

/// A boxed case future borrowing its context.
pub type CaseFuture<'a> = Pin<Box<dyn Future<Output = CaseResult> + 'a>>;

/// The entry point of a case.
pub type CaseFn = for<'a> fn(&'a mut CaseContext) -> CaseFuture<'a>;

/// One case of the suite. Its full name is `"<group> <describe> <it>"`, as csi-sanity
/// (Ginkgo) prints it, so `--focus`/`--skip` expressions carry over.
#[derive(Clone, Copy)]
pub struct Case {
    /// The top-level group, e.g. `Controller Service [Controller Server]`.
    pub group: &'static str,
    /// The RPC or area, e.g. `CreateVolume` (may be empty).
    pub describe: &'static str,
    /// The behaviour, e.g. `should fail when no name is provided`.
    pub it: &'static str,
    /// The check.
    pub run: CaseFn,
}

impl Case {
    /// `"<group> <describe> <it>"`.
    pub fn name(&self) -> String {
        [self.group, self.describe, self.it]
            .iter()
            .filter(|part| !part.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ")
    }
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

/// Declares a [`Case`] from an `async fn(&mut CaseContext) -> CaseResult`.
macro_rules! case {
    ($group:expr, $describe:expr, $it:expr, $body:path) => {{
        fn run(
            cx: &mut $crate::sanity::context::CaseContext,
        ) -> $crate::sanity::case::CaseFuture<'_> {
            Box::pin($body(cx))
        }
        $crate::sanity::case::Case {
            group: $group,
            describe: $describe,
            it: $it,
            run,
        }
    }};
}
pub(crate) use case;

/// Fails with `message` unless `condition` holds.
pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> CaseResult {
    if condition {
        Ok(())
    } else {
        Err(Verdict::Fail(message()))
    }
}

/// Skips with `reason` unless `condition` holds.
pub fn require(condition: bool, reason: &str) -> CaseResult {
    if condition {
        Ok(())
    } else {
        Err(Verdict::Skip(reason.to_owned()))
    }
}

/// `status` as `Code: message`.
pub fn describe_status(status: &Status) -> String {
    format!("{:?}: {}", status.code(), status.message())
}

/// The response of a call that must succeed; `what` names the call in the failure.
pub fn expect_ok<T>(result: Result<Response<T>, Status>, what: &str) -> CaseResult<T> {
    result
        .map(Response::into_inner)
        .map_err(|status| Verdict::Fail(format!("{what} failed: {}", describe_status(&status))))
}

/// Checks that a call failed with `code`.
pub fn expect_code<T>(result: Result<T, Status>, code: Code, what: &str) -> CaseResult {
    match result {
        Ok(_) => Err(Verdict::Fail(format!(
            "{what}: expected error {code:?}, but the call succeeded"
        ))),
        Err(status) if status.code() == code => Ok(()),
        Err(status) => Err(Verdict::Fail(format!(
            "{what}: expected error {code:?}, got {}",
            describe_status(&status)
        ))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn expectations_say_what_was_expected_and_seen() {
        let ok: Result<Response<u8>, Status> = Ok(Response::new(1));
        assert_eq!(expect_ok(ok, "Probe").unwrap(), 1);
        let err: Result<Response<u8>, Status> = Err(Status::not_found("no such share"));
        assert_eq!(
            expect_ok(err, "CreateVolume").unwrap_err(),
            Verdict::Fail("CreateVolume failed: NotFound: no such share".into())
        );
        let err: Result<(), Status> = Err(Status::internal("boom"));
        assert_eq!(
            expect_code(err, Code::InvalidArgument, "DeleteVolume without id").unwrap_err(),
            Verdict::Fail(
                "DeleteVolume without id: expected error InvalidArgument, got Internal: boom"
                    .into()
            )
        );
        assert!(expect_code(Ok::<(), Status>(()), Code::NotFound, "x").is_err());
        assert!(expect_code(Err::<(), _>(Status::not_found("")), Code::NotFound, "x").is_ok());
    }
}
