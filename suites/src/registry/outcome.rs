//! How a test ends: [`TestError`] is either a failure (with the message the report shows) or a
//! skip (with the reason, as upstream's e2e framework states it).

use std::fmt;

/// A test's result.
pub type TestResult<T = ()> = Result<T, TestError>;

/// Why a test did not pass.
///
/// Any error type converts into [`TestError::Failed`] with its whole chain of causes, so test
/// bodies use `?` on the e2e helpers, kube calls and the cloud client alike. It deliberately
/// does not implement [`std::error::Error`] (that conversion would then conflict with
/// `From<T> for T`), like `anyhow::Error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TestError {
    /// The behaviour was not as expected; the message says what was expected and seen.
    Failed(String),
    /// The test does not apply to this driver or cluster; the reason says why.
    Skipped(String),
}

impl TestError {
    /// A failure with `message`.
    pub fn failed(message: impl Into<String>) -> Self {
        TestError::Failed(message.into())
    }

    /// A skip with `reason`.
    pub fn skip(reason: impl Into<String>) -> Self {
        TestError::Skipped(reason.into())
    }

    /// The same failure with `context` in front (skips stay as they are).
    pub fn context(self, context: impl fmt::Display) -> Self {
        match self {
            TestError::Failed(message) => TestError::Failed(format!("{context}: {message}")),
            skipped => skipped,
        }
    }
}

impl fmt::Display for TestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TestError::Failed(message) => write!(f, "{message}"),
            TestError::Skipped(reason) => write!(f, "skipped: {reason}"),
        }
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for TestError {
    fn from(error: E) -> Self {
        TestError::Failed(kube_support::error::error_chain(&error))
    }
}

/// Fails the test with a formatted message unless `condition` holds.
///
/// ```
/// # use suites::ensure;
/// # use suites::registry::TestResult;
/// fn check(size: u64) -> TestResult {
///     ensure!(size == 1, "the share is {size} GiB, want 1");
///     Ok(())
/// }
/// assert!(check(2).is_err());
/// ```
#[macro_export]
macro_rules! ensure {
    ($condition:expr, $($message:tt)+) => {
        if !$condition {
            return Err($crate::registry::TestError::Failed(format!($($message)+)));
        }
    };
}

/// Fails the test unless `left == right`, showing both and what they are.
#[macro_export]
macro_rules! ensure_eq {
    ($left:expr, $right:expr, $($what:tt)+) => {
        // A match keeps temporaries of the operands alive for the comparison.
        match (&$left, &$right) {
            (left, right) => {
                if left != right {
                    return Err($crate::registry::TestError::Failed(format!(
                        "{}: got {:?}, want {:?}",
                        format!($($what)+),
                        left,
                        right
                    )));
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn errors_become_failures_with_their_causes() {
        let error: TestError = Outer(std::io::Error::other("inner")).into();
        assert_eq!(error, TestError::Failed("outer: inner".into()));
    }

    #[test]
    fn context_prefixes_failures_only() {
        assert_eq!(
            TestError::failed("x").context("step"),
            TestError::Failed("step: x".into())
        );
        assert_eq!(
            TestError::skip("why").context("step"),
            TestError::Skipped("why".into())
        );
    }

    fn compare(a: u32, b: u32) -> TestResult {
        ensure_eq!(a, b, "the count of {}", "things");
        Ok(())
    }

    #[test]
    fn ensure_eq_names_both_sides() {
        assert_eq!(
            compare(1, 2),
            Err(TestError::Failed(
                "the count of things: got 1, want 2".into()
            ))
        );
        assert_eq!(compare(2, 2), Ok(()));
    }
}
