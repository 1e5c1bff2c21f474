//! How a case (or a step of one) ends: a [`Verdict`] (a failure or a skip, with what was
//! expected and seen) instead of a panic, and the checks that produce one.

use tonic::{Code, Response, Status};

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
