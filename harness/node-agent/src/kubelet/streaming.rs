//! exec and port-forward over SPDY/3.1 (`spdy`), as kubelet serves them to
//! kubectl and client-go (through the apiserver, which passes the upgraded connection on).
//!
//! - **exec** (`v4.channel.k8s.io`, `v3.channel.k8s.io`, `v2.channel.k8s.io`,
//!   `channel.k8s.io`): the client opens one stream per channel, named by its `streamtype`
//!   header (`error`, `stdin`, `stdout`, `stderr`, `resize`); the server waits for those the
//!   request asked for, runs the command (`exec::run`) and ends stdout and stderr before
//!   it writes the end to the error stream (a `Status` from v4 on).
//! - **port-forward** (`portforward.k8s.io`): each forwarded connection is a pair of streams
//!   with the same `requestid` header, `streamtype` `error` and `data`, and the `port`
//!   header; the data stream is joined to a TCP connection to the pod's port (pods share the
//!   node's network here, so the pod IP's port), and a failure is written to the error
//!   stream as kubelet words it.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use hyper_util::rt::TokioIo;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

use super::exec::{self, ExecOptions, Streams};
use super::http::{Response, full, text};
use super::spdy::{IncomingStream, REFUSED_STREAM, Session, Writer};
use pod_runtime::{Container, TerminalSize};

/// How long the client has to open the streams of an exec.
const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);

const EXEC_PROTOCOLS: [&str; 4] = [
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
];
const PORT_FORWARD_PROTOCOL: &str = "portforward.k8s.io";

/// Whether `request` asks for a SPDY/3.1 upgrade.
pub fn is_spdy(request: &hyper::Request<hyper::body::Incoming>) -> bool {
    request
        .headers()
        .get(http::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("spdy/3.1"))
}

/// The protocol the client and `supported` (in preference order) agree on.
fn negotiate(
    request: &hyper::Request<hyper::body::Incoming>,
    supported: &[&'static str],
) -> Result<&'static str, String> {
    let offered: Vec<String> = request
        .headers()
        .get_all("x-stream-protocol-version")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|p| p.trim().to_string()))
        .collect();
    supported
        .iter()
        .find(|p| offered.iter().any(|o| o == *p))
        .copied()
        .ok_or_else(|| {
            format!(
                "unable to upgrade: unable to negotiate protocol: client supports {offered:?}, server supports {supported:?}"
            )
        })
}

/// Answers the upgrade with `protocol` and runs `serve` on the session once upgraded.
fn upgrade<F, Fut>(
    mut request: hyper::Request<hyper::body::Incoming>,
    protocol: &'static str,
    serve: F,
) -> Response
where
    F: FnOnce(Session) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let upgrade = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        let upgraded = match upgrade.await {
            Ok(upgraded) => upgraded,
            Err(e) => {
                tracing::debug!(error = %e, "a SPDY upgrade failed");
                return;
            }
        };
        match Session::start(TokioIo::new(upgraded)) {
            Ok(session) => serve(session).await,
            Err(e) => tracing::debug!(error = %e, "starting a SPDY session failed"),
        }
    });
    let mut response = http::Response::new(full(Bytes::new()));
    *response.status_mut() = http::StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("Upgrade"),
    );
    headers.insert(
        http::header::UPGRADE,
        http::HeaderValue::from_static("SPDY/3.1"),
    );
    headers.insert(
        "X-Stream-Protocol-Version",
        http::HeaderValue::from_static(protocol),
    );
    response
}

/// exec over SPDY (see the module docs).
pub fn exec(
    request: hyper::Request<hyper::body::Incoming>,
    container: Container,
    options: ExecOptions,
) -> Response {
    let protocol = match negotiate(&request, &EXEC_PROTOCOLS) {
        Ok(protocol) => protocol,
        Err(message) => return text(http::StatusCode::FORBIDDEN, message),
    };
    let version = match protocol {
        "v4.channel.k8s.io" => 4,
        "v3.channel.k8s.io" => 3,
        "v2.channel.k8s.io" => 2,
        _ => 1,
    };
    upgrade(request, protocol, move |session| {
        serve_exec(session, version, container, options)
    })
}

async fn serve_exec(mut session: Session, version: u8, container: Container, options: ExecOptions) {
    let writer = session.writer();
    let mut expected = vec!["error"];
    if options.stdin {
        expected.push("stdin");
    }
    if options.stdout {
        expected.push("stdout");
    }
    if options.stderr {
        expected.push("stderr");
    }
    if options.tty && version >= 3 {
        expected.push("resize");
    }
    let mut opened: HashMap<String, IncomingStream> = HashMap::new();
    let waited = tokio::time::timeout(STREAM_CREATION_TIMEOUT, async {
        while opened.len() < expected.len() {
            let Some(stream) = session.streams.recv().await else {
                return false;
            };
            let kind = stream.header("streamtype").unwrap_or("").to_string();
            if expected.contains(&kind.as_str()) && !opened.contains_key(&kind) {
                opened.insert(kind, stream);
            } else {
                writer.reset(stream.id, REFUSED_STREAM).await;
            }
        }
        true
    })
    .await;
    if waited != Ok(true) {
        tracing::debug!(?expected, opened = ?opened.keys().collect::<Vec<_>>(), "an exec's streams did not all arrive");
        session.close().await;
        return;
    }
    let Some(error) = opened.remove("error") else {
        return;
    };
    let mut streams = Streams::default();
    let mut forwarders = tokio::task::JoinSet::new();
    if let Some(stdin) = opened.remove("stdin") {
        streams.stdin = Some(stdin.data);
    }
    for (kind, slot) in [
        ("stdout", &mut streams.stdout),
        ("stderr", &mut streams.stderr),
    ] {
        if let Some(stream) = opened.remove(kind) {
            let (tx, mut rx) = mpsc::channel::<Bytes>(16);
            *slot = Some(tx);
            let writer = writer.clone();
            forwarders.spawn(async move {
                while let Some(data) = rx.recv().await {
                    if !writer.data(stream.id, data).await {
                        return;
                    }
                }
                writer.finish(stream.id).await;
            });
        }
    }
    if let Some(mut resize) = opened.remove("resize") {
        let (tx, rx) = mpsc::channel::<TerminalSize>(4);
        streams.resize = Some(rx);
        forwarders.spawn(async move {
            let mut pending = Vec::new();
            while let Some(data) = resize.data.recv().await {
                pending.extend_from_slice(&data);
                // A stream of JSON objects, possibly split across frames.
                let mut sizes =
                    serde_json::Deserializer::from_slice(&pending).into_iter::<TerminalSize>();
                let mut used = 0;
                while let Some(Ok(size)) = sizes.next() {
                    used = sizes.byte_offset();
                    if tx.send(size).await.is_err() {
                        return;
                    }
                }
                pending.drain(..used);
            }
        });
    }
    let streams_rx = &mut session.streams;
    let ended = exec::run(&container, &options, streams, async {
        // The client went away: the session's stream queue ends.
        while streams_rx.recv().await.is_some() {}
    })
    .await;
    // Output first (ended by FIN), then the end on the error stream.
    while forwarders.try_join_next().is_some() {}
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while let Some(done) = forwarders.join_next().await {
            let _ = done;
        }
    })
    .await;
    forwarders.abort_all();
    let report = ended.report(version, &options.command);
    if !report.is_empty() {
        writer.data(error.id, report).await;
    }
    writer.finish(error.id).await;
    drop(writer);
    session.close().await;
}

/// port-forward over SPDY (see the module docs) to the ports of the pod at `pod_ip`.
pub fn port_forward(
    request: hyper::Request<hyper::body::Incoming>,
    pod_ip: std::net::IpAddr,
    pod: String,
    uid: String,
) -> Response {
    let protocol = match negotiate(&request, &[PORT_FORWARD_PROTOCOL]) {
        Ok(protocol) => protocol,
        Err(message) => return text(http::StatusCode::FORBIDDEN, message),
    };
    upgrade(request, protocol, move |session| {
        serve_port_forward(session, pod_ip, pod, uid)
    })
}

async fn serve_port_forward(
    mut session: Session,
    pod_ip: std::net::IpAddr,
    pod: String,
    uid: String,
) {
    let writer = session.writer();
    // By request id: the error stream, once opened.
    let mut errors: HashMap<String, u32> = HashMap::new();
    let mut connections = tokio::task::JoinSet::new();
    while let Some(stream) = session.streams.recv().await {
        while connections.try_join_next().is_some() {}
        let request_id = stream.header("requestid").unwrap_or("").to_string();
        match stream.header("streamtype") {
            Some("error") => {
                errors.insert(request_id, stream.id);
            }
            Some("data") => {
                let error = errors.remove(&request_id);
                let port = stream.header("port").and_then(|p| p.parse::<u16>().ok());
                let writer = writer.clone();
                let (pod, uid) = (pod.clone(), uid.clone());
                connections.spawn(async move {
                    forward(writer, stream, error, pod_ip, port, &pod, &uid).await;
                });
            }
            _ => writer.reset(stream.id, REFUSED_STREAM).await,
        }
    }
    connections.abort_all();
    drop(writer);
    session.close().await;
}

/// Joins one data stream to a TCP connection to `port` of the pod.
async fn forward(
    writer: Writer,
    mut stream: IncomingStream,
    error: Option<u32>,
    pod_ip: std::net::IpAddr,
    port: Option<u16>,
    pod: &str,
    uid: &str,
) {
    let fail = async |message: String| {
        if let Some(error) = error {
            writer.data(error, Bytes::from(message)).await;
            writer.finish(error).await;
        }
        writer.finish(stream.id).await;
    };
    let Some(port) = port.filter(|p| *p > 0) else {
        fail(format!(
            "error forwarding port to pod {pod}, uid {uid}: invalid port {:?}",
            stream.header("port").unwrap_or("")
        ))
        .await;
        return;
    };
    let tcp = match tokio::net::TcpStream::connect((pod_ip, port)).await {
        Ok(tcp) => tcp,
        Err(e) => {
            fail(format!(
                "error forwarding port {port} to pod {pod}, uid {uid}: failed to connect to {pod_ip}:{port}: {e}"
            ))
            .await;
            return;
        }
    };
    let (mut from_pod, mut to_pod) = tcp.into_split();
    let id = stream.id;
    let inbound = async {
        while let Some(data) = stream.data.recv().await {
            if to_pod.write_all(&data).await.is_err() {
                break;
            }
        }
        let _ = to_pod.shutdown().await;
    };
    let outbound = async {
        exec::copy_chunks(&mut from_pod, |chunk| {
            let writer = writer.clone();
            async move { writer.data(id, chunk).await }
        })
        .await;
        writer.finish(id).await;
    };
    tokio::join!(inbound, outbound);
    if let Some(error) = error {
        writer.finish(error).await;
    }
}
