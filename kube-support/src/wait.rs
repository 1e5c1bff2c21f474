//! Waiting on cluster state with a timeout, reporting what was last seen when the wait fails:
//! the one family of waits of the workspace (harness, suites, test kit, CRD installation).
//!
//! The core:
//!
//! - [`wait_for`] watches one object until a condition holds (any
//!   [`kube::runtime::wait::Condition`]: kube's own `conditions::is_pod_running()`, or a closure
//!   `|obj: Option<&K>| …`); [`wait_for_described`] is the same with a description of
//!   what is awaited.
//! - [`wait_deleted`] waits until an object is gone.
//! - [`wait_until`] polls any check (a list, a file, an exec) until it yields a value.
//!
//! Built on it, the waits more than one crate needs: [`wait_claim_bound`], [`wait_event`]
//! and [`wait_csi_drivers`].
//!
//! A failed wait is a [`WaitError`] naming what was awaited, the timeout and a summary of the
//! last observed state (the object's `status` and deletion timestamp, or the check's last
//! answer), so a test failure says *why* it waited in vain. Tests that would rather panic
//! wrap these (`testkit::wait`, `testkit::objects`).

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Event, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::CSINode;
use kube::api::{Api, ListParams};
use kube::runtime::wait::Condition;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::error_chain;

/// How often [`wait_until`] re-runs its check.
const POLL_INTERVAL: Duration = Duration::from_millis(100);
/// Longest last-seen summary kept in a [`WaitError`].
const SUMMARY_LIMIT: usize = 3000;

/// A wait that timed out (or whose watch failed for good).
#[derive(Debug, Clone, thiserror::Error)]
#[error("timed out after {timeout:?} waiting for {what}; last seen: {last_seen}")]
pub struct WaitError {
    /// What was awaited, e.g. `pod ns/web-0 Running`.
    pub what: String,
    /// How long was waited.
    pub timeout: Duration,
    /// The last observed state.
    pub last_seen: String,
}

/// Watches the object `name` of `api` until `condition` holds, and returns it as it was then
/// (`None` if the condition holds for an absent object, e.g. `is_deleted`).
pub async fn wait_for<K>(
    api: &Api<K>,
    name: &str,
    condition: impl Condition<K>,
    timeout: Duration,
) -> Result<Option<K>, WaitError>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
    K::DynamicType: Default,
{
    let what = format!("{} {name}", K::kind(&Default::default()).to_lowercase());
    wait_for_described(api, name, &what, condition, timeout).await
}

/// [`wait_for`] with a description of what is awaited for the error message.
pub async fn wait_for_described<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    condition: impl Condition<K>,
    timeout: Duration,
) -> Result<Option<K>, WaitError>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
{
    let mut last_seen = String::from("nothing yet (no answer from the apiserver)");
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = watcher(api.clone(), config).boxed();
    let watch = async {
        let mut current: Option<K> = None;
        loop {
            let event = match events.try_next().await {
                Ok(Some(event)) => event,
                Ok(None) => return None,
                Err(e) => {
                    // The watcher recovers on the next poll (relist); keep the error as state.
                    last_seen = format!("watch error: {}", error_chain(&e));
                    tokio::time::sleep(POLL_INTERVAL).await;
                    continue;
                }
            };
            match event {
                watcher::Event::Apply(obj) | watcher::Event::InitApply(obj) => {
                    current = Some(obj);
                }
                watcher::Event::Delete(_) => current = None,
                watcher::Event::Init => {
                    current = None;
                    continue;
                }
                watcher::Event::InitDone => {}
            }
            last_seen = match &current {
                Some(obj) => summarize(obj),
                None => "absent".into(),
            };
            if condition.matches_object(current.as_ref()) {
                return Some(current);
            }
        }
    };
    match tokio::time::timeout(timeout, watch).await {
        Ok(Some(found)) => Ok(found),
        Ok(None) => Err(WaitError {
            what: what.into(),
            timeout,
            last_seen: format!("the watch ended; {last_seen}"),
        }),
        Err(_) => Err(WaitError {
            what: what.into(),
            timeout,
            last_seen,
        }),
    }
}

/// Waits until the object `name` of `api` no longer exists.
pub async fn wait_deleted<K>(api: &Api<K>, name: &str, timeout: Duration) -> Result<(), WaitError>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
    K::DynamicType: Default,
{
    let what = format!(
        "{} {name} to be deleted",
        K::kind(&Default::default()).to_lowercase()
    );
    wait_for_described(api, name, &what, |obj: Option<&K>| obj.is_none(), timeout)
        .await
        .map(|_| ())
}

/// Runs `check` every 100 ms until it returns `Ok(Some(value))`. `Ok(None)` means "not yet",
/// `Err(state)` describes the current state; the last of these ends up in the error.
pub async fn wait_until<T, F, Fut>(
    what: impl Into<String>,
    timeout: Duration,
    mut check: F,
) -> Result<T, WaitError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, String>>,
{
    let what = what.into();
    let mut last_seen = String::from("not checked yet");
    let poll = async {
        loop {
            match check().await {
                Ok(Some(value)) => return value,
                Ok(None) => last_seen = "not yet".into(),
                Err(state) => last_seen = state,
            }
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    };
    match tokio::time::timeout(timeout, poll).await {
        Ok(value) => Ok(value),
        Err(_) => Err(WaitError {
            what,
            timeout,
            last_seen: truncate(last_seen),
        }),
    }
}

/// Waits until the claim `name` of `api` is Bound and returns it.
pub async fn wait_claim_bound(
    api: &Api<PersistentVolumeClaim>,
    name: &str,
    timeout: Duration,
) -> Result<PersistentVolumeClaim, WaitError> {
    let what = format!("PVC {name} Bound");
    let found = wait_for_described(
        api,
        name,
        &what,
        |claim: Option<&PersistentVolumeClaim>| {
            claim
                .and_then(|c| c.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                == Some("Bound")
        },
        timeout,
    )
    .await?;
    // The condition only holds for a claim that is there.
    found.ok_or_else(|| WaitError {
        what,
        timeout,
        last_seen: "absent".into(),
    })
}

/// Waits for an Event about the object `name` (any kind) in `namespace` with `reason` whose
/// message contains `contains` (`""`: any message), and returns it. On timeout the error
/// lists the events seen about the object.
pub async fn wait_event(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    reason: &str,
    contains: &str,
    timeout: Duration,
) -> Result<Event, WaitError> {
    let events: Api<Event> = Api::namespaced(client.clone(), namespace);
    let about = ListParams::default().fields(&format!("involvedObject.name={name}"));
    let what = format!("a {reason} event about {namespace}/{name} containing {contains:?}");
    wait_until(what, timeout, || {
        let (events, about) = (events.clone(), about.clone());
        async move {
            let list = events.list(&about).await.map_err(|e| {
                format!("listing events of {namespace}/{name}: {}", error_chain(&e))
            })?;
            find_event(&list.items, reason, contains).map(|event| Some(event.clone()))
        }
    })
    .await
}

/// The first of `events` with `reason` whose message contains `contains` (an event without a
/// message has the empty one), else what the events were (`events: <reason> <message> | …`).
fn find_event<'a>(events: &'a [Event], reason: &str, contains: &str) -> Result<&'a Event, String> {
    let wanted = |e: &&Event| {
        e.reason.as_deref() == Some(reason)
            && e.message.as_deref().unwrap_or_default().contains(contains)
    };
    if let Some(event) = events.iter().find(wanted) {
        return Ok(event);
    }
    let seen: Vec<String> = events
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e.reason.as_deref().unwrap_or("?"),
                e.message.as_deref().unwrap_or("")
            )
        })
        .collect();
    Err(format!("events: {}", seen.join(" | ")))
}

/// Waits until the CSINode of every one of `nodes` lists every driver of `drivers` (that is,
/// each driver registered through the node's plugin registration) and returns those
/// CSINodes, in the order of `nodes`.
pub async fn wait_csi_drivers(
    client: &kube::Client,
    nodes: &[String],
    drivers: &[&str],
    timeout: Duration,
) -> Result<Vec<CSINode>, WaitError> {
    let csinodes: Api<CSINode> = Api::all(client.clone());
    let what = format!("every node's CSINode to list {}", drivers.join(", "));
    wait_until(what, timeout, || {
        let csinodes = csinodes.clone();
        async move {
            let mut found = Vec::new();
            let mut missing = Vec::new();
            for node in nodes {
                let Some(csinode) = csinodes.get_opt(node).await.map_err(|e| error_chain(&e))?
                else {
                    missing.push(format!("{node}: no CSINode yet"));
                    continue;
                };
                let names: Vec<&str> = csinode
                    .spec
                    .drivers
                    .iter()
                    .map(|d| d.name.as_str())
                    .collect();
                if drivers.iter().all(|d| names.contains(d)) {
                    found.push(csinode);
                } else {
                    missing.push(format!("{node}: drivers {names:?}"));
                }
            }
            if missing.is_empty() {
                Ok(Some(found))
            } else {
                Err(missing.join(", "))
            }
        }
    })
    .await
}

/// A one-line summary of an object for error messages: its name, deletion timestamp and
/// `status` (as JSON, truncated).
pub fn summarize<K: Resource + Serialize>(obj: &K) -> String {
    let status = serde_json::to_value(obj)
        .ok()
        .and_then(|v| v.get("status").cloned())
        .map(|s| s.to_string())
        .unwrap_or_else(|| "<no status>".into());
    let deleting = match obj.meta().deletion_timestamp.as_ref() {
        Some(t) => format!(" (deleting since {})", t.0),
        None => String::new(),
    };
    truncate(format!("{}{deleting}: {status}", obj.name_any()))
}

fn truncate(mut s: String) -> String {
    if s.len() > SUMMARY_LIMIT {
        let mut end = SUMMARY_LIMIT;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use k8s_openapi::api::core::v1::{Pod, PodStatus};

    #[test]
    fn summary_names_the_object_and_its_status() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("web-0".into());
        pod.status = Some(PodStatus {
            phase: Some("Pending".into()),
            ..Default::default()
        });
        assert_eq!(summarize(&pod), r#"web-0: {"phase":"Pending"}"#);
    }

    #[test]
    fn long_summaries_are_truncated_on_a_char_boundary() {
        let s = truncate("é".repeat(SUMMARY_LIMIT));
        assert!(s.len() <= SUMMARY_LIMIT + '…'.len_utf8());
        assert!(s.ends_with('…'));
    }

    fn event(reason: &str, message: Option<&str>) -> Event {
        Event {
            reason: Some(reason.into()),
            message: message.map(Into::into),
            ..Default::default()
        }
    }

    #[test]
    fn events_match_by_reason_and_message_text_and_a_miss_lists_what_was_seen() {
        let events = [
            event("Scheduled", Some("assigned to node-1")),
            event(
                "FailedMount",
                Some("MountVolume.SetUp failed: missing secret"),
            ),
            event("Pulled", None),
        ];
        let found = find_event(&events, "FailedMount", "missing").unwrap();
        assert_eq!(
            found.message.as_deref(),
            Some("MountVolume.SetUp failed: missing secret")
        );
        assert_eq!(
            find_event(&events, "Pulled", "").unwrap().reason.as_deref(),
            Some("Pulled")
        );
        assert_eq!(
            find_event(&events, "FailedMount", "quota").unwrap_err(),
            "events: Scheduled assigned to node-1 | FailedMount MountVolume.SetUp failed: \
             missing secret | Pulled "
        );
    }

    #[tokio::test]
    async fn wait_until_reports_the_last_state() {
        let mut n = 0;
        let err = wait_until("three", Duration::from_millis(350), || {
            n += 1;
            let state = format!("n = {n}");
            async move { Err::<Option<()>, _>(state) }
        })
        .await
        .unwrap_err();
        assert_eq!(err.what, "three");
        assert!(err.last_seen.starts_with("n = "), "{err}");
        assert!(err.to_string().contains("timed out after 350ms"), "{err}");
    }

    #[tokio::test]
    async fn wait_until_returns_the_value() {
        let mut n = 0;
        let v = wait_until("second try", Duration::from_secs(5), || {
            n += 1;
            let done = n >= 2;
            async move { Ok(done.then_some(n)) }
        })
        .await
        .unwrap();
        assert_eq!(v, 2);
    }
}
