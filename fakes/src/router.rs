//! The one wiremock responder: routes by path prefix to Keystone, Manila or the control
//! API, and journals every cloud request.

use std::sync::{Arc, Mutex, MutexGuard};

use chrono::{SecondsFormat, Utc};
use wiremock::{Request, Respond, ResponseTemplate};

use crate::catalog::{KEYSTONE_PREFIX, MANILA_PREFIX};
use crate::journal::{JournalEntry, Service};
use crate::manila::microversion;
use crate::reply::Reply;
use crate::state::CloudState;
use crate::{control, keystone, manila, metadata};

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

impl Respond for Router {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let mut state = lock(&self.state);
        let path = req.url.path();
        if let Some(rest) = below(path, control::PREFIX) {
            return control::handle(&mut state, req, rest).into_template();
        }
        let (service, reply) = if let Some(rest) = below(path, KEYSTONE_PREFIX) {
            (Service::Keystone, keystone::handle(&mut state, req, rest))
        } else if let Some(rest) = below(path, MANILA_PREFIX) {
            (Service::Manila, manila::handle(&mut state, req, rest))
        } else if let Some(node) = metadata::node_of(path) {
            (
                Service::Other,
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
        };
        let header = |name: &str| {
            req.headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        state.journal_seq += 1;
        let seq = state.journal_seq;
        tracing::debug!(method = %req.method, path, status = reply.status, "served");
        if state.journal.len() >= crate::state::JOURNAL_LIMIT {
            state.journal.pop_front();
        }
        state.journal.push_back(JournalEntry {
            seq,
            at: Utc::now().to_rfc3339_opts(SecondsFormat::Micros, true),
            method: req.method.to_string(),
            path: path.to_owned(),
            query: req.url.query().map(str::to_owned),
            service,
            microversion: header(microversion::MANILA_HEADER)
                .or_else(|| header(microversion::GENERIC_HEADER)),
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
