//! One operation in flight at a time, its outcome shared: callers that arrive while it runs
//! wait for it and get the same result — success or error — instead of each starting (and,
//! against a hanging cloud, each timing out on) an operation of their own in turn.
//!
//! A new flight starts only once the previous one has finished, so an error is never cached:
//! the next caller after a failure tries again.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::OnceCell;

use crate::error::Result;

/// A shared flight: its outcome, once there is one.
type Flight<T> = Arc<OnceCell<Result<T>>>;

/// See the module documentation. `T` and the errors are cloned for every waiter.
#[derive(Debug)]
pub struct SingleFlight<T> {
    current: Mutex<Option<Flight<T>>>,
}

impl<T> Default for SingleFlight<T> {
    fn default() -> Self {
        SingleFlight {
            current: Mutex::new(None),
        }
    }
}

impl<T: Clone> SingleFlight<T> {
    /// Joins the flight in progress, or starts one running `work`. If the caller running
    /// `work` is cancelled, a waiter takes the work over (the flight stays one at a time).
    pub async fn run<F, Fut>(&self, work: F) -> Result<T>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let flight = self
            .current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(Flight::default)
            .clone();
        let outcome = flight.get_or_init(work).await.clone();
        // The flight is over: the next caller starts a new one (unless one already has).
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &flight)) {
            *current = None;
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::error::Error;

    /// Work that takes `delay` (a hanging cloud) and fails, counting its runs.
    async fn hanging(runs: &AtomicU32, delay: Duration) -> Result<u32> {
        runs.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(delay).await;
        Err(Error::Unreachable {
            service: "Keystone",
            url: "http://keystone".into(),
            reason: "timed out".into(),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_callers_share_one_failing_flight() {
        let flight = Arc::new(SingleFlight::<u32>::default());
        let runs = Arc::new(AtomicU32::new(0));
        let delay = Duration::from_secs(30);
        let started = tokio::time::Instant::now();
        let callers: Vec<_> = (0..8)
            .map(|_| {
                let (flight, runs) = (flight.clone(), runs.clone());
                tokio::spawn(async move { flight.run(|| hanging(&runs, delay)).await })
            })
            .collect();
        for caller in callers {
            let error = caller.await.unwrap().unwrap_err();
            assert!(error.to_string().contains("timed out"), "{error}");
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1, "one flight for all callers");
        assert_eq!(started.elapsed(), delay, "one timeout, not eight");
        // The error is not cached: the next caller flies again.
        let ok = flight.run(|| async { Ok(7) }).await.unwrap();
        assert_eq!(ok, 7);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_leader_hands_the_work_to_a_waiter() {
        let flight = Arc::new(SingleFlight::<u32>::default());
        let runs = Arc::new(AtomicU32::new(0));
        let leader = {
            let (flight, runs) = (flight.clone(), runs.clone());
            tokio::spawn(
                async move { flight.run(|| hanging(&runs, Duration::from_secs(30))).await },
            )
        };
        // Let the leader start its work, then cancel it.
        while runs.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        leader.abort();
        let value = flight.run(|| async { Ok(3) }).await.unwrap();
        assert_eq!(value, 3);
    }
}
