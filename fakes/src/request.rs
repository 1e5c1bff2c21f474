//! One request to a service API (Manila, Cinder, Nova) as its handlers see it: [`Ctx`], the
//! request with its microversion, caller, clock and what the handlers may use of the rest of
//! the cloud ([`Shared`]: the settings, the cloud's URL, the fault rules, the tokens).
//!
//! A handler gets its own service's state and a `Ctx`, never the whole cloud, so that a
//! service depends on this shared plumbing and not on the state that composes the services.
//! The version type is the service's (`Microversion` for Manila, `(major, minor)` for Cinder
//! and Nova); each service adds the methods that read it (`at_least`, its links and body
//! rules) in an `impl` of its own.

use std::time::{Duration, Instant};

use serde_json::Value;
use wiremock::Request;

use crate::config::CloudConfig;
use crate::faults::{FaultAction, FaultTable, Operation};
use crate::keystone::KeystoneState;
use crate::lifecycle::AsyncFault;
use crate::reply::{Reply, bad_request, fault};

/// What a service shares with the rest of one cloud, borrowed from the cloud's state for one
/// request.
pub(crate) struct Shared<'a> {
    /// The settings: the seed as changed at run time.
    pub config: &'a CloudConfig,
    /// `http://127.0.0.1:<port>`, without trailing slash.
    pub base_url: &'a str,
    /// The fault rules, consumed as they fire.
    pub faults: &'a mut FaultTable,
    /// The tokens Keystone issued, to check the caller's.
    pub keystone: &'a KeystoneState,
}

/// The answer of a service the catalog does not list (Manila or Cinder switched off).
pub(crate) fn absent() -> Reply {
    Reply::text(404, "404 Not Found".into(), "text/plain")
}

impl Shared<'_> {
    /// The error a fault rule on `operation` (a version document) answers instead, if any.
    pub(crate) fn version_fault(&mut self, operation: Operation) -> Option<Reply> {
        match self.faults.take(operation, &[]) {
            Some(FaultAction::HttpError { status, message }) => Some(fault(
                status,
                message.unwrap_or_else(|| "Injected fault.".into()),
            )),
            _ => None,
        }
    }

    /// Admits a request for `path` (trailing slashes trimmed) below the versioned root
    /// `root` (`/v2/`, …): the path's segments, without a leading project id (URLs may
    /// still carry it), and whether the caller is an administrator; 404 outside the root,
    /// Keystone's 401 without a valid token.
    pub(crate) fn admit<'p>(
        &self,
        req: &Request,
        path: &'p str,
        root: &str,
    ) -> Result<(Vec<&'p str>, bool), Reply> {
        let Some(path) = path.strip_prefix(root) else {
            return Err(fault(404, "The resource could not be found."));
        };
        let token = self.keystone.authenticate(self.base_url, &req.headers)?;
        let mut segments: Vec<&str> = path.split('/').collect();
        if segments.first() == Some(&self.config.account.project_id.as_str()) {
            segments.remove(0);
        }
        Ok((segments, token.admin))
    }
}

/// One request being served, past authentication and version negotiation.
pub(crate) struct Ctx<'a, V> {
    pub req: &'a Request,
    pub version: V,
    /// The caller's token makes it an administrator.
    pub admin: bool,
    /// When the request arrived: outcomes due by then are applied, new ones due after it.
    pub now: Instant,
    /// The query parameters, in order.
    pub query: Vec<(String, String)>,
    /// An injected latency to answer after.
    pub latency: Option<Duration>,
    pub config: &'a CloudConfig,
    pub base_url: &'a str,
    faults: &'a mut FaultTable,
}

impl<'a, V> Ctx<'a, V> {
    /// The context of `req`, asking for `version`, by an administrator or not.
    pub(crate) fn new(req: &'a Request, version: V, admin: bool, shared: Shared<'a>) -> Self {
        Self {
            req,
            version,
            admin,
            now: Instant::now(),
            query: req
                .url
                .query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
            latency: None,
            config: shared.config,
            base_url: shared.base_url,
            faults: shared.faults,
        }
    }

    /// A query parameter.
    pub(crate) fn query(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON body, or 400 for a malformed one.
    pub(crate) fn body(&self) -> Result<Value, Reply> {
        serde_json::from_slice(&self.req.body).map_err(|_| bad_request("Malformed request body"))
    }

    /// Consumes a fault rule for `operation` about `resources`: an HTTP error ends the
    /// request, latency is remembered for the reply, stuck/error shape the async outcome.
    pub(crate) fn fault(
        &mut self,
        operation: Operation,
        resources: &[String],
    ) -> Result<AsyncFault, Reply> {
        match self.faults.take(operation, resources) {
            None => Ok(AsyncFault::None),
            Some(FaultAction::HttpError { status, message }) => Err(fault(
                status,
                message.unwrap_or_else(|| format!("Injected fault on {operation:?}.")),
            )),
            Some(FaultAction::Latency { ms }) => {
                self.latency = Some(Duration::from_millis(ms));
                Ok(AsyncFault::None)
            }
            Some(FaultAction::Stuck { status }) => Ok(AsyncFault::Stuck(status)),
            Some(FaultAction::Error { detail_id, message }) => {
                Ok(AsyncFault::Error { detail_id, message })
            }
        }
    }

    /// The project every resource belongs to.
    pub(crate) fn project_id(&self) -> &str {
        &self.config.account.project_id
    }
}
