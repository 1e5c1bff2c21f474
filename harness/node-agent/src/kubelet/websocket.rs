//! The WebSocket channel protocol of exec and attach (`v4.channel.k8s.io` and its relatives),
//! as kubelet serves it to clients that ask for a WebSocket (kube-rs, recent kubectl): every
//! message is one channel's bytes, prefixed with the channel number (0 stdin, 1 stdout,
//! 2 stderr, 3 error, 4 resize); the `base64.` variants send text, the channel as a digit
//! and the bytes in base64; `v5` adds channel 255, whose message `[255, n]` closes channel
//! n (stdin). The error channel carries the end: a `Status` from v4 on, the bare message
//! before.

use base64::Engine;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::exec::{self, ExecOptions, Streams};
use super::http::{Response, full, text};
use pod_runtime::{Container, TerminalSize};

/// The sub-protocols served, most capable first.
const PROTOCOLS: [&str; 7] = [
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v4.base64.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
    "base64.channel.k8s.io",
];

const STDIN: u8 = 0;
const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const ERROR: u8 = 3;
const RESIZE: u8 = 4;
const CLOSE: u8 = 255;

/// Whether `request` asks for a WebSocket.
pub fn is_websocket(request: &hyper::Request<hyper::body::Incoming>) -> bool {
    request
        .headers()
        .get(http::header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// Ends the socket with a Close frame saying 1000 (normal closure): clients (client-go's
/// WebSocket executor) take a Close without a status (1005) for an error.
async fn close_normally<S>(sink: &mut S)
where
    S: futures::Sink<Message> + Unpin,
{
    use tokio_tungstenite::tungstenite::protocol::CloseFrame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
    let frame = CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    };
    let _ = sink.send(Message::Close(Some(frame))).await;
    let _ = sink.close().await;
}

/// The sub-protocol `request` offers that `supported` has, in the client's order of
/// preference; without an offer the original protocol (`channel.k8s.io`). A 400 naming
/// both lists otherwise.
fn negotiate(
    request: &hyper::Request<hyper::body::Incoming>,
    supported: &[&str],
) -> Result<String, Box<Response>> {
    let offered: Vec<String> = request
        .headers()
        .get_all(http::header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|p| p.trim().to_string()))
        .collect();
    if offered.is_empty() {
        return Ok("channel.k8s.io".to_string());
    }
    offered
        .iter()
        .find(|p| supported.contains(&p.as_str()))
        .cloned()
        .ok_or_else(|| {
            Box::new(text(
                http::StatusCode::BAD_REQUEST,
                format!("none of the offered protocols {offered:?} is supported: {supported:?}"),
            ))
        })
}

/// Answers the WebSocket upgrade with `protocol` (a 400 without a `Sec-WebSocket-Key`) and,
/// once it is done, runs `serve` on the socket; `what` names the upgrade in the log when it
/// fails.
fn upgrade<F, Fut>(
    mut request: hyper::Request<hyper::body::Incoming>,
    protocol: &str,
    what: &'static str,
    serve: F,
) -> Response
where
    F: FnOnce(WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let Some(key) = request.headers().get(http::header::SEC_WEBSOCKET_KEY) else {
        return text(http::StatusCode::BAD_REQUEST, "missing Sec-WebSocket-Key");
    };
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let upgrade = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        let upgraded = match upgrade.await {
            Ok(upgraded) => upgraded,
            Err(e) => {
                tracing::debug!(error = %e, "the {what} WebSocket upgrade failed");
                return;
            }
        };
        let socket =
            WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        serve(socket).await;
    });
    let mut response = http::Response::new(full(Bytes::new()));
    *response.status_mut() = http::StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(
        http::header::UPGRADE,
        http::HeaderValue::from_static("websocket"),
    );
    headers.insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("Upgrade"),
    );
    if let Ok(value) = http::HeaderValue::from_str(&accept) {
        headers.insert(http::header::SEC_WEBSOCKET_ACCEPT, value);
    }
    if let Ok(value) = http::HeaderValue::from_str(protocol) {
        headers.insert(http::header::SEC_WEBSOCKET_PROTOCOL, value);
    }
    response
}

/// One channel's bytes as a message: binary, the channel number first; with `base64`,
/// text, the channel as a digit and the bytes in base64.
fn encode(base64: bool, channel: u8, data: &[u8]) -> Message {
    if base64 {
        let mut text = String::from(char::from(b'0' + channel));
        text.push_str(&base64::engine::general_purpose::STANDARD.encode(data));
        Message::text(text)
    } else {
        let mut bytes = Vec::with_capacity(data.len() + 1);
        bytes.push(channel);
        bytes.extend_from_slice(data);
        Message::binary(bytes)
    }
}

/// What a message from the client is.
enum Received {
    /// A channel's bytes.
    Channel(u8, Bytes),
    /// The client closed the socket (or it failed).
    End,
    /// Anything else (pings, messages of the other encoding), ignored.
    Ignored,
}

/// Reads `message` (see [`encode`]).
fn receive(base64: bool, message: Result<Message, WsError>) -> Received {
    match message {
        Ok(Message::Binary(bytes)) if !bytes.is_empty() && !base64 => {
            Received::Channel(bytes[0], bytes.slice(1..))
        }
        Ok(Message::Text(text)) if base64 && !text.is_empty() => {
            let raw = text.as_bytes();
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(&raw[1..])
                .unwrap_or_default();
            Received::Channel(raw[0].wrapping_sub(b'0'), Bytes::from(decoded))
        }
        Ok(Message::Close(_)) | Err(_) => Received::End,
        Ok(_) => Received::Ignored,
    }
}

/// Sends what arrives on the returned sender to `sink`, each (channel, bytes) as one
/// message; once every sender is gone, closes the socket normally.
fn spawn_writer<S>(
    mut sink: S,
    base64: bool,
) -> (mpsc::Sender<(u8, Bytes)>, tokio::task::JoinHandle<()>)
where
    S: futures::Sink<Message> + Unpin + Send + 'static,
{
    let (out_tx, mut out_rx) = mpsc::channel::<(u8, Bytes)>(16);
    let writer = tokio::spawn(async move {
        while let Some((channel, data)) = out_rx.recv().await {
            if sink.send(encode(base64, channel, &data)).await.is_err() {
                return;
            }
        }
        close_normally(&mut sink).await;
    });
    (out_tx, writer)
}

/// Answers the upgrade and, once it is done, runs the exec in `container` over it.
pub fn exec(
    request: hyper::Request<hyper::body::Incoming>,
    container: Container,
    options: ExecOptions,
) -> Response {
    let protocol = match negotiate(&request, &PROTOCOLS) {
        Ok(protocol) => protocol,
        Err(refused) => return *refused,
    };
    let chosen = protocol.clone();
    upgrade(request, &protocol, "exec", move |socket| async move {
        serve(socket, &chosen, container, options).await;
    })
}

async fn serve<S>(
    socket: WebSocketStream<S>,
    protocol: &str,
    container: Container,
    options: ExecOptions,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let base64 = protocol.contains("base64");
    let version = match protocol {
        p if p.starts_with("v5.") => 5,
        p if p.starts_with("v4.") => 4,
        p if p.starts_with("v3.") => 3,
        p if p.starts_with("v2.") => 2,
        _ => 1,
    };
    let (sink, mut source) = socket.split();
    let (out_tx, writer) = spawn_writer(sink, base64);
    let mut streams = Streams::default();
    let mut stdin_tx = None;
    if options.stdin {
        let (tx, rx) = mpsc::channel(16);
        streams.stdin = Some(rx);
        stdin_tx = Some(tx);
    }
    let mut resize_tx = None;
    if options.tty && version >= 3 {
        let (tx, rx) = mpsc::channel(4);
        streams.resize = Some(rx);
        resize_tx = Some(tx);
    }
    let mut forwarders = tokio::task::JoinSet::new();
    let mut forward = |channel: u8| {
        let (tx, mut rx) = mpsc::channel::<Bytes>(16);
        let out = out_tx.clone();
        forwarders.spawn(async move {
            while let Some(data) = rx.recv().await {
                if out.send((channel, data)).await.is_err() {
                    return;
                }
            }
        });
        tx
    };
    if options.stdout {
        streams.stdout = Some(forward(STDOUT));
    }
    if options.stderr {
        streams.stderr = Some(forward(STDERR));
    }
    let (gone_tx, gone_rx) = tokio::sync::oneshot::channel::<()>();
    let reader = tokio::spawn(async move {
        while let Some(message) = source.next().await {
            let (channel, data) = match receive(base64, message) {
                Received::Channel(channel, data) => (channel, data),
                Received::End => break,
                Received::Ignored => continue,
            };
            match channel {
                STDIN => {
                    if let Some(tx) = &stdin_tx
                        && tx.send(data).await.is_err()
                    {
                        stdin_tx = None;
                    }
                }
                RESIZE => {
                    if let (Some(tx), Ok(size)) =
                        (&resize_tx, serde_json::from_slice::<TerminalSize>(&data))
                    {
                        let _ = tx.send(size).await;
                    }
                }
                CLOSE if data.first() == Some(&STDIN) => stdin_tx = None,
                _ => {}
            }
        }
        let _ = gone_tx.send(());
    });
    let ended = exec::run(&container, &options, streams, async {
        let _ = gone_rx.await;
    })
    .await;
    // The output first, then the end.
    while forwarders.join_next().await.is_some() {}
    let report = ended.report(version, &options.command);
    if !report.is_empty() {
        let _ = out_tx.send((ERROR, report)).await;
    }
    drop(out_tx);
    reader.abort();
    let _ = writer.await;
}

/// The port-forward sub-protocols served over WebSocket.
const PORT_FORWARD_PROTOCOLS: [&str; 4] = [
    "v4.channel.k8s.io",
    "v4.base64.channel.k8s.io",
    "channel.k8s.io",
    "base64.channel.k8s.io",
];

/// port-forward over WebSocket, as kubelet serves it: the ports are in the query
/// (`ports=80,8080`); port i has data channel 2i and error channel 2i+1, each opened by the
/// server with the port (2 bytes, little-endian). Each port gets one TCP connection to the
/// pod, made at once; the forward ends when the client closes the WebSocket.
pub fn port_forward(
    request: hyper::Request<hyper::body::Incoming>,
    pod_ip: std::net::IpAddr,
    ports: Vec<u16>,
) -> Response {
    let protocol = match negotiate(&request, &PORT_FORWARD_PROTOCOLS) {
        Ok(protocol) => protocol,
        Err(refused) => return *refused,
    };
    if ports.is_empty() {
        return text(
            http::StatusCode::BAD_REQUEST,
            "query parameter \"port\" is required",
        );
    }
    let base64 = protocol.contains("base64");
    upgrade(request, &protocol, "port-forward", move |socket| {
        serve_port_forward(socket, base64, pod_ip, ports)
    })
}

async fn serve_port_forward<S>(
    socket: WebSocketStream<S>,
    base64: bool,
    pod_ip: std::net::IpAddr,
    ports: Vec<u16>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use tokio::io::AsyncWriteExt;
    let (sink, mut source) = socket.split();
    let (out_tx, writer) = spawn_writer(sink, base64);
    let mut to_pods = Vec::new();
    let mut forwards = tokio::task::JoinSet::new();
    for (i, port) in ports.iter().copied().enumerate() {
        let (data, error) = ((2 * i) as u8, (2 * i + 1) as u8);
        let prefix = Bytes::copy_from_slice(&port.to_le_bytes());
        let _ = out_tx.send((data, prefix.clone())).await;
        let _ = out_tx.send((error, prefix)).await;
        let (tx, mut rx) = mpsc::channel::<Bytes>(16);
        to_pods.push(Some(tx));
        let out = out_tx.clone();
        forwards.spawn(async move {
            let tcp = match tokio::net::TcpStream::connect((pod_ip, port)).await {
                Ok(tcp) => tcp,
                Err(e) => {
                    let message = format!(
                        "error forwarding port {port} to pod: failed to connect to {pod_ip}:{port}: {e}"
                    );
                    let _ = out.send((error, Bytes::from(message))).await;
                    return;
                }
            };
            let (mut from_pod, mut to_pod) = tcp.into_split();
            let inbound = async {
                while let Some(bytes) = rx.recv().await {
                    if to_pod.write_all(&bytes).await.is_err() {
                        break;
                    }
                }
                let _ = to_pod.shutdown().await;
            };
            let outbound = exec::copy_chunks(&mut from_pod, |chunk| {
                let out = out.clone();
                async move { out.send((data, chunk)).await.is_ok() }
            });
            // Over when the pod's side ends (the client's side may still be open: it learns
            // the end from the socket's close).
            tokio::select! {
                () = outbound => {}
                () = async { inbound.await; std::future::pending::<()>().await } => {}
            }
        });
    }
    drop(out_tx);
    loop {
        // As kubelet: once every port's forward has ended, the socket closes.
        let message = tokio::select! {
            message = source.next() => message,
            done = forwards.join_next() => {
                if done.is_none() || forwards.is_empty() {
                    break;
                }
                continue;
            }
        };
        let Some(message) = message else {
            break;
        };
        let (channel, data) = match receive(base64, message) {
            Received::Channel(channel, data) => (channel, data),
            Received::End => break,
            Received::Ignored => continue,
        };
        let index = usize::from(channel / 2);
        if channel % 2 == 0
            && !data.is_empty()
            && let Some(slot) = to_pods.get_mut(index)
            && let Some(tx) = slot
            && tx.send(data).await.is_err()
        {
            *slot = None;
        }
    }
    // The client is done: the pods' connections end, then the socket.
    to_pods.clear();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), async {
        while forwards.join_next().await.is_some() {}
    })
    .await;
    forwards.abort_all();
    let _ = writer.await;
}
