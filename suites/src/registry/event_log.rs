//! [`EventLog`]: every Event the cluster held during a run, kept from a watch, for the look
//! for secrets at the run's end (`conformance::secret_scan`).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Event;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};

/// The text of every Event the cluster held during the run, kept from a watch: a test's
/// namespace, and its Events with it, is gone long before the run ends.
#[derive(Debug)]
pub struct EventLog {
    /// `(where, text)` of every distinct Event message and reason seen.
    seen: Arc<Mutex<BTreeSet<(String, String)>>>,
    watch: tokio::task::JoinHandle<()>,
}

impl EventLog {
    /// Starts watching the Events of every namespace.
    pub fn start(client: kube::Client) -> Self {
        let seen: Arc<Mutex<BTreeSet<(String, String)>>> = Arc::default();
        let events: Api<Event> = Api::all(client);
        let kept = seen.clone();
        let watch = tokio::spawn(async move {
            let mut stream = std::pin::pin!(
                watcher::watcher(events, watcher::Config::default())
                    .default_backoff()
                    .applied_objects()
            );
            while let Some(next) = stream.next().await {
                let Ok(event) = next else {
                    continue;
                };
                let place = format!(
                    "Event {}/{}",
                    event.metadata.namespace.as_deref().unwrap_or(""),
                    event.metadata.name.as_deref().unwrap_or("")
                );
                let text = format!(
                    "{}\n{}",
                    event.reason.as_deref().unwrap_or(""),
                    event.message.as_deref().unwrap_or("")
                );
                if let Ok(mut seen) = kept.lock() {
                    seen.insert((place, text));
                }
            }
        });
        EventLog { seen, watch }
    }

    /// Every distinct `(where, text)` seen so far.
    pub fn seen(&self) -> BTreeSet<(String, String)> {
        match self.seen.lock() {
            Ok(seen) => seen.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

impl Drop for EventLog {
    fn drop(&mut self) {
        self.watch.abort();
    }
}
