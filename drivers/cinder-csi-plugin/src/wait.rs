//! Waiting for a cloud resource to reach a status, polling with exponential backoff up to a
//! deadline.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, Result};

/// What one poll found.
#[derive(Debug)]
pub enum Progress<T> {
    /// The wanted state, with the value to return.
    Done(T),
    /// Not there yet; the text says where it is (for the deadline message).
    Pending(String),
}

/// How to poll: first delay, growth up to a cap, overall deadline.
#[derive(Clone, Copy, Debug)]
pub struct WaitPolicy {
    /// Delay before the second poll.
    pub first: Duration,
    /// Largest delay between polls.
    pub max: Duration,
    /// Give up after this long.
    pub deadline: Duration,
}

impl Default for WaitPolicy {
    fn default() -> Self {
        WaitPolicy {
            first: Duration::from_millis(100),
            max: Duration::from_secs(3),
            deadline: Duration::from_secs(180),
        }
    }
}

impl WaitPolicy {
    /// Polls `poll` until it is done or fails, or the deadline passes (DeadlineExceeded
    /// naming `what` and the last state seen).
    pub async fn wait<T, F, Fut>(&self, what: &str, mut poll: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Progress<T>>>,
    {
        let started = Instant::now();
        let mut delay = self.first;
        loop {
            let last = match poll().await? {
                Progress::Done(value) => return Ok(value),
                Progress::Pending(state) => state,
            };
            if started.elapsed() + delay > self.deadline {
                return Err(Error::DeadlineExceeded(format!(
                    "{what}: still {last} after {:?}",
                    self.deadline
                )));
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(self.max);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn gives_up_at_the_deadline_naming_the_last_state() {
        let policy = WaitPolicy {
            deadline: Duration::from_secs(5),
            ..WaitPolicy::default()
        };
        let error = policy
            .wait("volume v", || async {
                Ok(Progress::<()>::Pending("creating".into()))
            })
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("volume v: still creating"), "{error}");
    }

    #[tokio::test(start_paused = true)]
    async fn returns_once_done() -> Result<()> {
        let mut polls = 0;
        let value = WaitPolicy::default()
            .wait("x", || {
                polls += 1;
                let done = polls >= 3;
                async move {
                    Ok(if done {
                        Progress::Done(7)
                    } else {
                        Progress::Pending("busy".into())
                    })
                }
            })
            .await?;
        assert_eq!((value, polls), (7, 3));
        Ok(())
    }
}
