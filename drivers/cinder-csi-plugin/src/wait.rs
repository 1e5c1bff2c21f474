//! Waiting for a cloud resource to reach a status: the shared back-off
//! ([`openstack_client::wait`]) reporting a missed deadline as this driver's
//! [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded).

pub use openstack_client::wait::Progress;

/// How to poll, failing with this driver's error. The default polls from 100 ms, doubling
/// up to 3 s, for 3 minutes.
pub type WaitPolicy = openstack_client::wait::WaitPolicy<crate::Error>;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::error::Result;

    #[tokio::test(start_paused = true)]
    async fn gives_up_at_the_deadline_naming_the_last_state() {
        let policy = WaitPolicy::new(
            Duration::from_millis(100),
            2.0,
            Duration::from_secs(3),
            Duration::from_secs(5),
        );
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
