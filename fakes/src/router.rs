//! The one wiremock responder: routes by path prefix to Keystone, Manila or the control
//! API, and journals every cloud request.

use std::sync::{Arc, Mutex, MutexGuard, mpsc};
use std::time::{Duration, Instant};

use chrono::{SecondsFormat, Utc};
use wiremock::{Request, Respond, ResponseTemplate};

use crate::backend::CopyPause;
use crate::catalog::{CINDER_PREFIX, KEYSTONE_PREFIX, MANILA_PREFIX, NOVA_PREFIX};
use crate::journal::{JournalEntry, Service};
use crate::microversion;
use crate::reply::Reply;
use crate::state::{CloudState, PendingCopy};
use crate::{cinder, control, keystone, manila, metadata, nova};

/// Locks the state; a panic while holding the lock cannot leave it half-updated in a way
/// that matters more than stopping the fake, so poisoning is ignored.
pub(crate) fn lock(state: &Mutex<CloudState>) -> MutexGuard<'_, CloudState> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `path` below `prefix` (`""` or starting with `/`).
fn below<'a>(path: &'a str, prefix: &str) -> Option<&'a str> {
    path.strip_prefix(prefix)
        .filter(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Serves every request of one cloud.
pub(crate) struct Router {
    pub(crate) state: Arc<Mutex<CloudState>>,
}

/// How long a request waits for the data copies it started before answering: small copies
/// end well within it, so the next read sees their outcome as before; a longer copy goes on
/// in the background, its resource in its transitional status, while the API answers.
const COPY_GRACE: Duration = Duration::from_millis(500);

impl Router {
    /// Runs the copies a request asked for, outside the state lock, each on a thread of its
    /// own that reports its outcome to the state when done; waits for them up to
    /// [`COPY_GRACE`].
    fn run_copies(&self, copies: Vec<PendingCopy>, pause: Option<CopyPause>) {
        let deadline = Instant::now() + COPY_GRACE;
        let mut waiting = Vec::new();
        for job in copies {
            let (done, finished) = mpsc::channel();
            // The job is handed over through a slot, so that it can still run here when no
            // thread can be had.
            let slot = Arc::new(Mutex::new(Some(job)));
            let run = {
                let (state, pause, slot) =
                    (Arc::clone(&self.state), pause.clone(), Arc::clone(&slot));
                move || {
                    run_job(&slot, &state, pause.as_ref());
                    let _ = done.send(());
                }
            };
            let spawned = std::thread::Builder::new()
                .name("fake-manila-copy".into())
                .spawn(run);
            match spawned {
                Ok(_) => waiting.push(finished),
                Err(e) => {
                    tracing::warn!(error = %e, "no thread for a backend copy; copying in the request");
                    run_job(&slot, &self.state, pause.as_ref());
                }
            }
        }
        for finished in waiting {
            let left = deadline.saturating_duration_since(Instant::now());
            let _ = finished.recv_timeout(left);
        }
    }
}

/// Runs the copy in `slot` (if no one took it yet) and reports its outcome to the state.
fn run_job(
    slot: &Mutex<Option<PendingCopy>>,
    state: &Mutex<CloudState>,
    pause: Option<&CopyPause>,
) {
    let job = slot
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    if let Some(PendingCopy { copy, target }) = job {
        let result = copy.run(pause);
        lock(state).finish_copy(target, result);
    }
}

impl Respond for Router {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let path = req.url.path();
        let (service, reply, copies, pause) = {
            let mut state = lock(&self.state);
            if let Some(rest) = below(path, control::PREFIX) {
                return control::handle(&mut state, req, rest).into_template();
            }
            let (service, reply) = Self::serve(&mut state, req, path);
            let copies = state.take_copies();
            (service, reply, copies, state.copy_pause.clone())
        };
        if !copies.is_empty() {
            self.run_copies(copies, pause);
        }
        let mut state = lock(&self.state);
        let header = |name: &str| {
            req.headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        tracing::debug!(method = %req.method, path, status = reply.status, "served");
        state.journal.record(|seq| JournalEntry {
            seq,
            at: Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true),
            method: req.method.to_string(),
            path: path.to_owned(),
            query: req.url.query().map(str::to_owned),
            service,
            microversion: match service {
                Service::Manila => header(microversion::MANILA_HEADER),
                Service::Cinder | Service::Nova => header(microversion::GENERIC_HEADER),
                _ => None,
            },
            token: header("X-Auth-Token"),
            status: reply.status,
        });
        reply
            .header(
                "x-openstack-request-id",
                format!("req-{}", uuid::Uuid::new_v4()),
            )
            .into_template()
    }
}

impl Router {
    /// Keystone, Manila, Cinder, Nova, the metadata service, or 404.
    fn serve(state: &mut CloudState, req: &Request, path: &str) -> (Service, Reply) {
        if let Some(rest) = below(path, KEYSTONE_PREFIX) {
            let reply = keystone::handle(
                &mut state.keystone,
                &state.config,
                &state.base_url,
                &mut state.faults,
                req,
                rest,
            );
            (Service::Keystone, reply)
        } else if let Some(rest) = below(path, MANILA_PREFIX) {
            let (shared, manila, _) = state.shared();
            (Service::Manila, manila::handle(manila, shared, req, rest))
        } else if let Some(rest) = below(path, CINDER_PREFIX) {
            let (shared, _, block) = state.shared();
            (Service::Cinder, cinder::handle(block, shared, req, rest))
        } else if let Some(rest) = below(path, NOVA_PREFIX) {
            let (shared, _, block) = state.shared();
            (Service::Nova, nova::handle(block, shared, req, rest))
        } else if let Some(node) = metadata::node_of(path) {
            (
                Service::Metadata,
                metadata::serve(
                    &state.node_metadata,
                    node,
                    req.method.as_str(),
                    &state.config.account.project_id,
                ),
            )
        } else {
            (
                Service::Other,
                Reply::text(404, "404 Not Found".into(), "text/plain"),
            )
        }
    }
}
