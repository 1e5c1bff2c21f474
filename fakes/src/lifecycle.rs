//! The life of the fakes' resources, shared by Manila, Cinder and Nova: a resource is born
//! with an id and a time stamp ([`new_id`], [`api_time`]), and an asynchronous operation on
//! it (create, delete, resize, attach, …) records a [`Pending`] outcome and when it is due.
//! No background task runs: every request first applies the outcomes that are due (each
//! service's `advance`), so time alone moves resources along. An injected fault shapes the
//! outcome ([`AsyncFault`]: never finish, or end in error); [`plan`] turns the operation's
//! delay and fault into the outcome to record, and [`Lifecycle`] starts, settles and ends the
//! copies of any resource with a status.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

/// A fresh id in the OpenStack APIs' form (UUID with dashes).
pub(crate) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Timestamps as Manila and Cinder print them (`2025-01-01T00:00:00.000000`).
pub(crate) fn api_time(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
}

/// `now` plus a delay of `ms` milliseconds, or `None` when that is beyond what an `Instant`
/// can hold (delays set in process are not range-checked: such a transition never comes).
pub(crate) fn due_after(now: Instant, ms: u64) -> Option<Instant> {
    now.checked_add(Duration::from_millis(ms))
}

/// An asynchronous outcome and when it is due.
#[derive(Debug, Clone)]
pub(crate) struct Pending<T> {
    pub due: Instant,
    pub outcome: T,
}

/// How an injected fault shapes an asynchronous operation that goes ahead.
#[derive(Debug, Clone, Default)]
pub(crate) enum AsyncFault {
    /// Complete normally.
    #[default]
    None,
    /// Never complete; optionally hang in this status.
    Stuck(Option<String>),
    /// End in the operation's error state with this user message.
    Error {
        detail_id: String,
        message: Option<String>,
    },
}

/// What an operation that went ahead records: the outcome pending (none: it never ends) and
/// the status a stuck fault hangs it in instead of the operation's transitional one.
pub(crate) type Plan<T> = (Option<Pending<T>>, Option<String>);

/// The plan of an operation due at `due` (`None`: never) with an injected `fault`: `success`
/// when due, or what `failure` makes of the fault's detail id and message; a stuck fault
/// records nothing pending and names its status.
pub(crate) fn plan<T>(
    due: Option<Instant>,
    fault: AsyncFault,
    success: T,
    failure: impl FnOnce(String, Option<String>) -> T,
) -> Plan<T> {
    match fault {
        AsyncFault::None => (
            due.map(|due| Pending {
                due,
                outcome: success,
            }),
            None,
        ),
        AsyncFault::Stuck(status) => (None, status),
        AsyncFault::Error { detail_id, message } => (
            due.map(|due| Pending {
                due,
                outcome: failure(detail_id, message),
            }),
            None,
        ),
    }
}

/// A resource with a status that asynchronous operations move along.
pub(crate) trait Lifecycle {
    /// What its pending operations end in.
    type Outcome;
    /// Its status.
    fn status_mut(&mut self) -> &mut String;
    /// Its pending outcome.
    fn pending_mut(&mut self) -> &mut Option<Pending<Self::Outcome>>;
    /// Sets its `updated_at`.
    fn touch(&mut self, at: DateTime<Utc>);

    /// Starts an operation: the resource takes `transitional` status (or the stuck fault's)
    /// and the plan's pending outcome, updated now.
    fn start(&mut self, transitional: &str, (pending, stuck): Plan<Self::Outcome>) {
        *self.status_mut() = stuck.unwrap_or_else(|| transitional.to_owned());
        *self.pending_mut() = pending;
        self.touch(Utc::now());
    }

    /// The outcome due at `now`, taken; the resource updated at `stamp`.
    fn take_due(&mut self, now: Instant, stamp: DateTime<Utc>) -> Option<Self::Outcome> {
        let pending = self.pending_mut().take_if(|p| p.due <= now)?;
        self.touch(stamp);
        Some(pending.outcome)
    }

    /// Ends the data copy a new resource waited for in its initial status: when `copied`,
    /// the plan it was created with starts; otherwise it takes `failed_status`.
    fn end_copy(
        &mut self,
        (pending, stuck): Plan<Self::Outcome>,
        copied: bool,
        failed_status: &str,
    ) {
        self.touch(Utc::now());
        if copied {
            *self.pending_mut() = pending;
            if let Some(status) = stuck {
                *self.status_mut() = status;
            }
        } else {
            *self.status_mut() = failed_status.to_owned();
        }
    }
}
