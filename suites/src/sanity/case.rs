//! A sanity case: its name, and the async function that checks one behaviour. Checks
//! return [`Verdict`](super::verdict::Verdict)s instead of panicking, so the runner can clean
//! up and go on.

use std::future::Future;
use std::pin::Pin;

use super::context::CaseContext;
use super::verdict::CaseResult;

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
