//! The kubelet API of a node agent: what the apiserver (and anyone with the right) calls on a
//! node for `kubectl logs`, `exec`, `attach` and `port-forward`, plus `/healthz` and `/pods`.
//!
//! - **Where**: HTTPS on the node's address and a port of its own (every node of an embedded
//!   cluster shares 127.0.0.1, so each agent takes a free port — or the one it is told — and
//!   advertises it in `status.daemonEndpoints.kubeletEndpoint`, which the apiserver dials).
//!   The serving certificate comes from the cluster CA (the apiserver verifies it with
//!   `--kubelet-certificate-authority`); only HTTP/1.1 is offered.
//! - **Who**: `auth`: the apiserver's client certificate, or a bearer token checked with a
//!   TokenReview; authorized with a SubjectAccessReview on `nodes/<subresource>`; anonymous
//!   requests get `401`.
//! - **What**: `GET /healthz`; `GET /pods` (the node's pods as a PodList);
//!   `GET /containerLogs/{ns}/{pod}/{container}` (`logs`); `exec` and `attach`
//!   (`exec`) over WebSocket (`websocket`) and SPDY/3.1 (`streaming`, `spdy`);
//!   `portForward` over both; `GET /stats/summary` (`stats`).
//!   `attach -i` writes to the input of a container with `stdin: true` (with `tty: true`,
//!   its terminal, which resizes follow), so `kubectl run -it` and `kubectl attach -i` work.
//! - **Not served**: `/metrics` and `/metrics/resource`, `/logs/` (the node's own logs),
//!   `/run`, `/checkpoint`.
//!
//! The handlers find pods in the node's pod store (the agent's watch) and containers in the
//! node's [`Runtime`], so they answer for pods the agent runs, adopted ones included.

mod auth;
mod error;
mod exec;
mod http;
mod logs;
mod spdy;
mod stats;
mod streaming;
mod tls;
mod websocket;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::Pod;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

pub use auth::{Attributes, Authorizer, Refusal, User};
pub use error::{Error, Result};
use http::{Query, Response, json, text};

use pod_runtime::{Container, Runtime};

/// How the kubelet API is served (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletApiConfig {
    /// The serving certificate (PEM), issued by the cluster CA for the node's address.
    pub serving_cert: PathBuf,
    /// Its private key (PEM).
    pub serving_key: PathBuf,
    /// The port; 0: a free one, chosen when the agent starts (and advertised).
    pub port: u16,
}

/// The node's pods as the agent's watch last saw them, by UID.
pub type PodStore = Arc<RwLock<HashMap<String, Arc<Pod>>>>;

/// What the handlers need.
pub(crate) struct Server {
    pub(crate) node: String,
    pub(crate) run_dir: PathBuf,
    pub(crate) runtime: Runtime,
    pub(crate) pods: PodStore,
    pub(crate) auth: Authorizer,
    pub(crate) client: kube::Client,
    pub(crate) csi: Arc<crate::csi::VolumeManager>,
}

/// Binds the API's socket (the port of `config`, or a free one) on `address`.
pub async fn bind(address: std::net::IpAddr, port: u16) -> Result<TcpListener> {
    let address = SocketAddr::new(address, port);
    TcpListener::bind(address)
        .await
        .map_err(|source| Error::Bind { address, source })
}

/// Serves the API on `listener` until the future is dropped (connections in progress, e.g. a
/// followed log, are dropped with it).
pub(crate) async fn serve(
    listener: TcpListener,
    config: &KubeletApiConfig,
    client_ca: &std::path::Path,
    server: Server,
) -> Result<std::convert::Infallible> {
    let tls = TlsAcceptor::from(tls::server_config(
        &config.serving_cert,
        &config.serving_key,
        client_ca,
    )?);
    let server = Arc::new(server);
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "accepting a kubelet API connection failed");
                continue;
            }
        };
        // Small frames (an exec's status, a terminal's echo) go out at once.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(%peer, error = %e, "setting TCP_NODELAY failed");
        }
        while connections.try_join_next().is_some() {}
        let tls = tls.clone();
        let server = server.clone();
        connections.spawn(async move {
            let stream = match tls.accept(tcp).await {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
            };
            let certificate = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .map(|c| c.to_vec());
            let certificate = Arc::new(certificate);
            let service = service_fn(move |request| {
                let server = server.clone();
                let certificate = certificate.clone();
                async move {
                    Ok::<_, Infallible>(server.handle(certificate.as_deref(), request).await)
                }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await
            {
                tracing::debug!(%peer, error = %e, "kubelet API connection ended");
            }
        });
    }
}

impl Server {
    async fn handle(
        &self,
        certificate: Option<&[u8]>,
        request: hyper::Request<Incoming>,
    ) -> Response {
        let path = request.uri().path().to_string();
        let authorization = request
            .headers()
            .get(::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let user = match self.auth.authenticate(certificate, authorization).await {
            Ok(user) => user,
            Err(refusal) => return text(refusal.status, refusal.message),
        };
        let attributes = Attributes::of(request.method(), &path);
        if let Err(refusal) = self.auth.authorize(&user, &attributes).await {
            tracing::info!(node = %self.node, user = %user.name, path = %path, "kubelet API request refused");
            return text(refusal.status, refusal.message);
        }
        let query = Query::parse(request.uri().query());
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let method = request.method().clone();
        match (method, segments.as_slice()) {
            (::http::Method::GET, ["healthz"]) => text(::http::StatusCode::OK, "ok"),
            (::http::Method::GET, ["pods"] | ["pods", ""]) => self.pod_list(),
            (::http::Method::GET, ["stats", "summary"]) => json(&self.summary().await),
            (::http::Method::GET, ["containerLogs", namespace, pod, container]) => {
                self.container_logs(namespace, pod, container, &query)
            }
            (
                ::http::Method::GET | ::http::Method::POST,
                [verb @ ("exec" | "attach"), namespace, pod, rest @ ..],
            ) if matches!(rest.len(), 1 | 2) => {
                let attach = *verb == "attach";
                let (uid, container) = match rest {
                    [uid, container] => (Some(*uid), *container),
                    [container] => (None, *container),
                    _ => unreachable_route(),
                };
                let (namespace, pod, container) = (
                    namespace.to_string(),
                    pod.to_string(),
                    container.to_string(),
                );
                let uid = uid.map(str::to_string);
                self.exec(
                    request,
                    &namespace,
                    &pod,
                    uid.as_deref(),
                    &container,
                    &query,
                    attach,
                )
            }
            (
                ::http::Method::GET | ::http::Method::POST,
                ["portForward", namespace, pod, rest @ ..],
            ) if rest.len() <= 1 => {
                let uid = rest.first().map(|u| u.to_string());
                let (namespace, pod) = (namespace.to_string(), pod.to_string());
                self.port_forward(request, &namespace, &pod, uid.as_deref())
            }
            _ => text(::http::StatusCode::NOT_FOUND, "404 page not found\n"),
        }
    }

    fn pod_list(&self) -> Response {
        let mut items: Vec<Pod> = self
            .pods
            .read()
            .map(|pods| pods.values().map(|p| (**p).clone()).collect())
            .unwrap_or_default();
        items.sort_by(|a, b| {
            (&a.metadata.namespace, &a.metadata.name)
                .cmp(&(&b.metadata.namespace, &b.metadata.name))
        });
        json(&serde_json::json!({
            "kind": "PodList",
            "apiVersion": "v1",
            "metadata": {},
            "items": items,
        }))
    }

    /// The pod `namespace/name` (of UID `uid`, when given) on this node.
    fn pod(&self, namespace: &str, name: &str, uid: Option<&str>) -> Option<Arc<Pod>> {
        let pods = self.pods.read().ok()?;
        pods.values()
            .filter(|p| {
                p.metadata.namespace.as_deref() == Some(namespace)
                    && p.metadata.name.as_deref() == Some(name)
                    && uid.is_none_or(|u| p.metadata.uid.as_deref() == Some(u))
            })
            .max_by_key(|p| p.metadata.deletion_timestamp.is_none())
            .cloned()
    }

    /// The started attempts of `container` of `pod`, oldest first.
    fn attempts(&self, pod: &Pod, container: &str) -> std::result::Result<Vec<Container>, String> {
        let uid = pod.metadata.uid.as_deref().unwrap_or("");
        let sandbox = self
            .runtime
            .sandbox(uid)
            .map_err(|e| kube_support::error::error_chain(&e))?;
        let Some(sandbox) = sandbox else {
            return Ok(Vec::new());
        };
        Ok(sandbox
            .containers()
            .map_err(|e| kube_support::error::error_chain(&e))?
            .into_iter()
            .filter(|c| c.name() == container)
            .collect())
    }

    /// The running attempt of `container` of pod `namespace/name` (of UID `uid` if given),
    /// or the response refusing the request as kubelet does.
    fn running_container(
        &self,
        namespace: &str,
        pod_name: &str,
        uid: Option<&str>,
        container: &str,
    ) -> std::result::Result<Container, (::http::StatusCode, String)> {
        let Some(pod) = self.pod(namespace, pod_name, uid) else {
            return Err((::http::StatusCode::NOT_FOUND, "pod does not exist".into()));
        };
        if !has_container(&pod, container) {
            return Err((
                ::http::StatusCode::INTERNAL_SERVER_ERROR,
                format!("container not found ({container:?})"),
            ));
        }
        let attempts = self
            .attempts(&pod, container)
            .map_err(|message| (::http::StatusCode::INTERNAL_SERVER_ERROR, message))?;
        match attempts.last() {
            Some(current) if current.is_running() => Ok(current.clone()),
            Some(_) => Err((
                ::http::StatusCode::INTERNAL_SERVER_ERROR,
                format!("container not running ({container:?})"),
            )),
            None => Err((
                ::http::StatusCode::INTERNAL_SERVER_ERROR,
                format!("container not found ({container:?})"),
            )),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn exec(
        &self,
        request: hyper::Request<Incoming>,
        namespace: &str,
        pod: &str,
        uid: Option<&str>,
        container: &str,
        query: &Query,
        attach: bool,
    ) -> Response {
        let options = match exec::ExecOptions::parse(query, attach) {
            Ok(options) => options,
            Err(message) => return text(::http::StatusCode::BAD_REQUEST, message),
        };
        let container = match self.running_container(namespace, pod, uid, container) {
            Ok(container) => container,
            Err((status, message)) => return text(status, message),
        };
        if websocket::is_websocket(&request) {
            return websocket::exec(request, container, options);
        }
        if streaming::is_spdy(&request) {
            return streaming::exec(request, container, options);
        }
        text(::http::StatusCode::BAD_REQUEST, "Upgrade request required")
    }

    fn port_forward(
        &self,
        request: hyper::Request<Incoming>,
        namespace: &str,
        pod_name: &str,
        uid: Option<&str>,
    ) -> Response {
        let Some(pod) = self.pod(namespace, pod_name, uid) else {
            return text(::http::StatusCode::NOT_FOUND, "pod does not exist");
        };
        let pod_ip = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.as_deref())
            .and_then(|ip| ip.parse().ok())
            .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if streaming::is_spdy(&request) {
            return streaming::port_forward(request, pod_ip, pod_name.to_string(), uid);
        }
        if websocket::is_websocket(&request) {
            let query = Query::parse(request.uri().query());
            let mut ports = Vec::new();
            for value in query.all("ports").iter().chain(query.all("port").iter()) {
                for port in value.split(',').filter(|p| !p.is_empty()) {
                    match port.trim().parse::<u16>() {
                        Ok(port) if port > 0 => ports.push(port),
                        _ => {
                            return text(
                                ::http::StatusCode::BAD_REQUEST,
                                format!("invalid port {port:?}"),
                            );
                        }
                    }
                }
            }
            return websocket::port_forward(request, pod_ip, ports);
        }
        text(::http::StatusCode::BAD_REQUEST, "Upgrade request required")
    }

    fn container_logs(
        &self,
        namespace: &str,
        pod_name: &str,
        container: &str,
        query: &Query,
    ) -> Response {
        let options = match logs::LogOptions::parse(query) {
            Ok(options) => options,
            Err(message) => return text(::http::StatusCode::BAD_REQUEST, message),
        };
        let Some(pod) = self.pod(namespace, pod_name, None) else {
            return text(
                ::http::StatusCode::NOT_FOUND,
                format!("pod {pod_name:?} does not exist\n"),
            );
        };
        if !has_container(&pod, container) {
            return text(
                ::http::StatusCode::NOT_FOUND,
                format!("container {container:?} not found in pod {pod_name:?}\n"),
            );
        }
        let attempts = match self.attempts(&pod, container) {
            Ok(attempts) => attempts,
            Err(message) => return text(::http::StatusCode::INTERNAL_SERVER_ERROR, message),
        };
        match logs::pick(&pod, container, &attempts, options.previous) {
            Ok(attempt) => logs::serve(attempt.clone(), &options),
            Err(message) => text(::http::StatusCode::BAD_REQUEST, message),
        }
    }
}

/// The tuple patterns above cover every case their guard lets through.
fn unreachable_route() -> (Option<&'static str>, &'static str) {
    (None, "")
}

/// Whether `pod` has a container (or init container) `name`.
fn has_container(pod: &Pod, name: &str) -> bool {
    crate::pod_containers(pod).any(|c| c.name == name)
}
