//! Waiting for a cloud resource to reach a state: polls with an exponential backoff that
//! starts at tens of milliseconds (so a fast cloud is not slowed down) under one deadline.

use std::future::Future;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use tokio::time::Instant;

use crate::error::{Error, Result};

/// The outcome of one poll.
#[derive(Debug)]
pub enum Progress<T> {
    /// The target state was reached.
    Done(T),
    /// Not yet; the text says what was seen (reported if the deadline passes).
    Pending(String),
}

/// How to wait.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WaitPolicy {
    /// First delay between polls.
    pub first_delay: Duration,
    /// Growth factor of the delay.
    pub factor: f32,
    /// Largest delay between polls.
    pub max_delay: Duration,
    /// Give up after this long.
    pub deadline: Duration,
}

impl WaitPolicy {
    /// 20 ms, ×1.5, capped at 2 s, under `deadline`.
    pub fn with_deadline(deadline: Duration) -> Self {
        WaitPolicy {
            first_delay: Duration::from_millis(20),
            factor: 1.5,
            max_delay: Duration::from_secs(2),
            deadline,
        }
    }

    /// Polls until `poll` returns [`Progress::Done`] or an error, or the deadline passes
    /// ([`Error::DeadlineExceeded`] naming `what` and the last state seen).
    pub async fn wait<T, F, Fut>(&self, what: &str, mut poll: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Progress<T>>>,
    {
        let started = Instant::now();
        let end = started + self.deadline;
        let mut delays = ExponentialBuilder::default()
            .with_min_delay(self.first_delay)
            .with_factor(self.factor)
            .with_max_delay(self.max_delay)
            .without_max_times()
            .build();
        loop {
            let last_seen = match poll().await? {
                Progress::Done(value) => return Ok(value),
                Progress::Pending(seen) => seen,
            };
            let now = Instant::now();
            let delay = delays.next().unwrap_or(self.max_delay);
            if now >= end {
                return Err(Error::DeadlineExceeded(format!(
                    "timed out after {:.1?} waiting for {what}: last seen {last_seen}",
                    now - started
                )));
            }
            tokio::time::sleep_until((now + delay).min(end)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn returns_as_soon_as_done() {
        let mut polls = 0;
        let policy = WaitPolicy::with_deadline(Duration::from_secs(5));
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
        let policy = WaitPolicy::with_deadline(Duration::from_secs(1));
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
}
