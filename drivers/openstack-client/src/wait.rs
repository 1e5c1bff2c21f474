//! Waiting for a cloud resource to reach a state: polls with an exponential back-off under
//! one deadline. A policy is typed by the caller's error `E`, which says (through
//! `From<Timeout>`) how a missed deadline is reported.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::time::Duration;

use tokio::time::Instant;

/// The outcome of one poll.
#[derive(Debug)]
pub enum Progress<T> {
    /// The target state was reached.
    Done(T),
    /// Not yet; the text says what was seen (reported if the deadline passes).
    Pending(String),
}

/// A wait that ran past its deadline. Its `Display` is the workspace's usual sentence;
/// callers with their own wording read the fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeout {
    /// What was waited for.
    pub what: String,
    /// The last state seen.
    pub last_seen: String,
    /// How long the wait took.
    pub waited: Duration,
    /// The policy's deadline.
    pub deadline: Duration,
}

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "timed out after {:.1?} waiting for {}: last seen {}",
            self.waited, self.what, self.last_seen
        )
    }
}

/// How to wait: the first delay between polls grows by `factor` up to `max_delay`, and the
/// wait gives up after `deadline`.
pub struct WaitPolicy<E> {
    /// First delay between polls.
    pub first_delay: Duration,
    /// Growth factor of the delay.
    pub factor: f32,
    /// Largest delay between polls.
    pub max_delay: Duration,
    /// Give up after this long.
    pub deadline: Duration,
    error: PhantomData<fn() -> E>,
}

// Written out: derives would ask `E` for the same traits.
impl<E> Clone for WaitPolicy<E> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<E> Copy for WaitPolicy<E> {}

impl<E> PartialEq for WaitPolicy<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.first_delay, self.factor, self.max_delay, self.deadline)
            == (
                other.first_delay,
                other.factor,
                other.max_delay,
                other.deadline,
            )
    }
}

impl<E> fmt::Debug for WaitPolicy<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitPolicy")
            .field("first_delay", &self.first_delay)
            .field("factor", &self.factor)
            .field("max_delay", &self.max_delay)
            .field("deadline", &self.deadline)
            .finish()
    }
}

impl<E> Default for WaitPolicy<E> {
    /// 100 ms, doubling, capped at 3 s, under 3 minutes.
    fn default() -> Self {
        WaitPolicy::new(
            Duration::from_millis(100),
            2.0,
            Duration::from_secs(3),
            Duration::from_secs(180),
        )
    }
}

impl<E> WaitPolicy<E> {
    /// A policy with these delays and deadline.
    pub fn new(
        first_delay: Duration,
        factor: f32,
        max_delay: Duration,
        deadline: Duration,
    ) -> Self {
        WaitPolicy {
            first_delay,
            factor,
            max_delay,
            deadline,
            error: PhantomData,
        }
    }

    /// 20 ms, ×1.5, capped at 2 s, under `deadline` (a fast cloud is not slowed down).
    pub fn with_deadline(deadline: Duration) -> Self {
        WaitPolicy::new(
            Duration::from_millis(20),
            1.5,
            Duration::from_secs(2),
            deadline,
        )
    }

    /// The same policy with another largest delay.
    pub fn with_max_delay(self, max_delay: Duration) -> Self {
        WaitPolicy { max_delay, ..self }
    }

    /// The same policy with another first delay.
    pub fn with_first_delay(self, first_delay: Duration) -> Self {
        WaitPolicy {
            first_delay,
            ..self
        }
    }

    /// Polls until `poll` returns [`Progress::Done`] or an error, or the deadline passes
    /// (a [`Timeout`] naming `what` and the last state seen, turned into `E`).
    pub async fn wait<T, F, Fut>(&self, what: &str, mut poll: F) -> Result<T, E>
    where
        E: From<Timeout>,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Progress<T>, E>>,
    {
        let started = Instant::now();
        let end = started + self.deadline;
        let mut delay = self.first_delay;
        loop {
            let last_seen = match poll().await? {
                Progress::Done(value) => return Ok(value),
                Progress::Pending(seen) => seen,
            };
            let now = Instant::now();
            if now >= end {
                return Err(E::from(Timeout {
                    what: what.to_string(),
                    last_seen,
                    waited: now - started,
                    deadline: self.deadline,
                }));
            }
            tokio::time::sleep_until((now + delay).min(end)).await;
            delay = delay.mul_f32(self.factor).min(self.max_delay);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::error::Error;

    #[tokio::test(start_paused = true)]
    async fn returns_as_soon_as_done() {
        let mut polls = 0;
        let policy = WaitPolicy::<Error>::with_deadline(Duration::from_secs(5));
        let value = policy
            .wait("thing", || {
                polls += 1;
                let n = polls;
                async move {
                    Ok(if n < 3 {
                        Progress::Pending(format!("poll {n}"))
                    } else {
                        Progress::Done(n)
                    })
                }
            })
            .await
            .unwrap();
        assert_eq!(value, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn deadline_reports_the_last_state() {
        let policy = WaitPolicy::<Error>::with_deadline(Duration::from_secs(1));
        let error = policy
            .wait::<(), _, _>("share x to become available", || async {
                Ok(Progress::Pending("status creating".into()))
            })
            .await
            .unwrap_err();
        assert!(matches!(error, Error::DeadlineExceeded(_)));
        let text = error.to_string();
        assert!(
            text.contains("share x") && text.contains("status creating"),
            "{text}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_delay_doubles_up_to_the_cap() {
        let policy = WaitPolicy::<Error>::default();
        let started = Instant::now();
        let mut polls = 0;
        policy
            .wait("x", || {
                polls += 1;
                let done = polls >= 4;
                async move {
                    Ok(if done {
                        Progress::Done(())
                    } else {
                        Progress::Pending("busy".into())
                    })
                }
            })
            .await
            .unwrap();
        // 100 + 200 + 400 ms between the four polls (the timer rounds each up to its tick).
        let elapsed = started.elapsed();
        assert!(
            elapsed >= Duration::from_millis(700) && elapsed < Duration::from_millis(710),
            "{elapsed:?}"
        );
    }
}
