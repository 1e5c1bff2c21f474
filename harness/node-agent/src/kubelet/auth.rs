//! Who is calling and whether they may, as kubelet decides with webhook authentication and
//! authorization (anonymous requests refused):
//!
//! - **Authentication**: a client certificate verified against the cluster CA (the TLS layer
//!   checked it) names the user (CN) and groups (O), as the apiserver's own kubelet client
//!   certificate does; otherwise an `Authorization: Bearer` token is checked with a
//!   TokenReview. Neither: `401 Unauthorized`.
//! - **Authorization**: a SubjectAccessReview for the verb of the HTTP method on
//!   `nodes/<subresource>` of this node (`stats`, `log`, `metrics`, `spec`, else `proxy`);
//!   refused: `403 Forbidden (user=…, verb=…, resource=nodes, subresource=…)`.
//!
//! Both answers are cached as kubelet's webhooks cache them (token reviews 2 minutes;
//! allowed 5 minutes, denied 30 seconds), so an exec does not cost two API round trips.
//! Tokens are only ever kept as a digest and never logged.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use kube_support::error::error_chain;

const TOKEN_TTL: Duration = Duration::from_secs(120);
const ALLOWED_TTL: Duration = Duration::from_secs(300);
const DENIED_TTL: Duration = Duration::from_secs(30);

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct User {
    /// The user name.
    pub name: String,
    /// Its groups.
    pub groups: Vec<String>,
    /// Its UID (from a token review), if any.
    pub uid: Option<String>,
}

/// What a request asks to do, in authorization terms.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Attributes {
    /// The verb (`get`, `create`, …).
    pub verb: String,
    /// The `nodes` subresource.
    pub subresource: String,
}

impl Attributes {
    /// kubelet's attributes for a request: the verb from the method, the subresource from
    /// the path.
    pub fn of(method: &http::Method, path: &str) -> Self {
        let verb = match *method {
            http::Method::POST => "create",
            http::Method::PUT => "update",
            http::Method::PATCH => "patch",
            http::Method::DELETE => "delete",
            _ => "get",
        };
        let under = |prefix: &str| path == prefix || path.starts_with(&format!("{prefix}/"));
        let subresource = if under("/stats") {
            "stats"
        } else if under("/metrics") {
            "metrics"
        } else if under("/logs") {
            "log"
        } else if under("/spec") {
            "spec"
        } else {
            "proxy"
        };
        Attributes {
            verb: verb.into(),
            subresource: subresource.into(),
        }
    }
}

/// The refusal of a request: its HTTP status and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// 401 or 403.
    pub status: http::StatusCode,
    /// kubelet's message.
    pub message: String,
}

/// Entries valid until an instant.
type Cache<K, V> = Mutex<HashMap<K, (V, Instant)>>;

/// Authenticates and authorizes requests for one node (see the module docs).
pub struct Authorizer {
    client: kube::Client,
    node: String,
    /// Token reviews by the token's SHA-256.
    tokens: Cache<[u8; 32], Option<User>>,
    decisions: Cache<(User, Attributes), bool>,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl Authorizer {
    /// Checks requests to `node` with reviews sent through `client` (the node's identity:
    /// nodes may create TokenReviews and SubjectAccessReviews).
    pub fn new(client: kube::Client, node: &str) -> Self {
        Authorizer {
            client,
            node: node.into(),
            tokens: Mutex::new(HashMap::new()),
            decisions: Mutex::new(HashMap::new()),
        }
    }

    /// The user of a request: its verified client certificate (DER) or its bearer token.
    pub async fn authenticate(
        &self,
        certificate: Option<&[u8]>,
        authorization: Option<&str>,
    ) -> Result<User, Refusal> {
        if let Some(der) = certificate
            && let Some(user) = certificate_user(der)
        {
            return Ok(user);
        }
        let token = authorization
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty());
        let Some(token) = token else {
            return Err(unauthorized());
        };
        let digest: [u8; 32] = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .try_into()
            .map_err(|_| unauthorized())?;
        if let Some(known) = cached(&self.tokens, &digest) {
            return known.ok_or_else(unauthorized);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                ..TokenReviewSpec::default()
            },
            ..TokenReview::default()
        };
        let reviews: Api<TokenReview> = Api::all(self.client.clone());
        let answer = reviews
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| {
                tracing::warn!(node = %self.node, error = %error_chain(&e), "token review failed");
                unauthorized()
            })?;
        let user = answer
            .status
            .filter(|s| s.authenticated == Some(true))
            .and_then(|s| s.user)
            .and_then(|u| {
                Some(User {
                    name: u.username?,
                    groups: u.groups.unwrap_or_default(),
                    uid: u.uid,
                })
            });
        remember(&self.tokens, digest, user.clone(), TOKEN_TTL);
        user.ok_or_else(unauthorized)
    }

    /// Whether `user` may do what `attributes` say on this node.
    pub async fn authorize(&self, user: &User, attributes: &Attributes) -> Result<(), Refusal> {
        let key = (user.clone(), attributes.clone());
        let allowed = match cached(&self.decisions, &key) {
            Some(allowed) => allowed,
            None => {
                let allowed = self.review(user, attributes).await;
                let ttl = if allowed { ALLOWED_TTL } else { DENIED_TTL };
                remember(&self.decisions, key, allowed, ttl);
                allowed
            }
        };
        if allowed {
            return Ok(());
        }
        Err(Refusal {
            status: http::StatusCode::FORBIDDEN,
            message: format!(
                "Forbidden (user={}, verb={}, resource=nodes, subresource={})",
                user.name, attributes.verb, attributes.subresource
            ),
        })
    }

    async fn review(&self, user: &User, attributes: &Attributes) -> bool {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                groups: Some(user.groups.clone()),
                uid: user.uid.clone(),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(attributes.verb.clone()),
                    resource: Some("nodes".into()),
                    subresource: Some(attributes.subresource.clone()),
                    name: Some(self.node.clone()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let reviews: Api<SubjectAccessReview> = Api::all(self.client.clone());
        match reviews.create(&PostParams::default(), &review).await {
            Ok(answer) => answer.status.is_some_and(|s| s.allowed),
            Err(e) => {
                tracing::warn!(node = %self.node, user = %user.name, error = %error_chain(&e), "subject access review failed");
                false
            }
        }
    }
}

fn unauthorized() -> Refusal {
    Refusal {
        status: http::StatusCode::UNAUTHORIZED,
        message: "Unauthorized".into(),
    }
}

fn cached<K: std::hash::Hash + Eq, V: Clone>(cache: &Cache<K, V>, key: &K) -> Option<V> {
    let cache = cache.lock().ok()?;
    cache
        .get(key)
        .filter(|(_, until)| *until > Instant::now())
        .map(|(v, _)| v.clone())
}

fn remember<K: std::hash::Hash + Eq, V>(cache: &Cache<K, V>, key: K, value: V, ttl: Duration) {
    if let Ok(mut cache) = cache.lock() {
        let now = Instant::now();
        cache.retain(|_, (_, until)| *until > now);
        cache.insert(key, (value, now + ttl));
    }
}

/// The user a (verified) client certificate names: CN, and the O values as groups, plus
/// `system:authenticated` as the apiserver adds it.
fn certificate_user(der: &[u8]) -> Option<User> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    let mut groups: Vec<String> = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    groups.push("system:authenticated".into());
    Some(User {
        name,
        groups,
        uid: None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case("GET", "/containerLogs/ns/p/c", "get", "proxy")]
    #[case("POST", "/exec/ns/p/c", "create", "proxy")]
    #[case("GET", "/stats/summary", "get", "stats")]
    #[case("GET", "/statsx", "get", "proxy")]
    #[case("GET", "/logs/", "get", "log")]
    #[case("GET", "/healthz", "get", "proxy")]
    fn attributes_follow_kubelet(
        #[case] method: &str,
        #[case] path: &str,
        #[case] verb: &str,
        #[case] subresource: &str,
    ) {
        let method = http::Method::from_bytes(method.as_bytes()).unwrap();
        assert_eq!(
            Attributes::of(&method, path),
            Attributes {
                verb: verb.into(),
                subresource: subresource.into()
            }
        );
    }

    #[test]
    fn a_certificate_names_user_and_groups() {
        let ca = control_plane::ClusterCa::generate("test-ca").unwrap();
        let pair = ca
            .client_cert(&control_plane::ClientIdentity {
                user: "kube-apiserver-kubelet-client".into(),
                group: Some("system:masters".into()),
            })
            .unwrap();
        let der = CertificateDer::from_pem_slice(pair.cert_pem.as_bytes()).unwrap();
        let user = certificate_user(&der).unwrap();
        assert_eq!(user.name, "kube-apiserver-kubelet-client");
        assert_eq!(user.groups, ["system:masters", "system:authenticated"]);
    }

    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
}
