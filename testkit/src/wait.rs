//! One wait for tests: poll a check until it yields a value, or fail the test with what was
//! last seen.

use std::future::Future;
use std::time::Duration;

/// Polls `check` (every 100 ms) until it returns `Ok(Some(value))` and returns the value.
/// `Ok(None)` means "not yet"; `Err(state)` describes the current state. After `timeout`
/// the test fails with `what` and the last state seen.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, String>>,
{
    match kube_support::wait::wait_until(what, timeout, check).await {
        Ok(value) => value,
        Err(e) => panic!("{e}"),
    }
}

/// Waits until `check` holds; `describe` says what was seen instead.
pub async fn wait_until_true(
    what: &str,
    timeout: Duration,
    mut check: impl FnMut() -> bool,
    describe: impl Fn() -> String,
) {
    wait_for(what, timeout, || {
        let done = check();
        let state = if done { String::new() } else { describe() };
        async move { if done { Ok(Some(())) } else { Err(state) } }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_the_value_once_the_check_yields_it() {
        let mut calls = 0;
        let value = wait_for("the third call", Duration::from_secs(5), || {
            calls += 1;
            let n = calls;
            async move { Ok(if n >= 3 { Some(n) } else { None }) }
        })
        .await;
        assert_eq!(value, 3);
    }

    #[tokio::test]
    #[should_panic(expected = "waiting for nothing; last seen: still empty")]
    async fn a_timeout_names_what_was_awaited_and_the_last_state() {
        wait_for::<(), _, _>("nothing", Duration::from_millis(250), || async {
            Err("still empty".to_string())
        })
        .await;
    }
}
