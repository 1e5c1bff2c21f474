//! `kubectl port-forward` (SPDY) and kube-rs's port-forward (WebSocket) through the
//! apiserver to a pod's port, on the run's shared embedded cluster.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod kubelet;

use std::process::Stdio;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube_support::wait::wait_until;
use tokio::io::{AsyncBufReadExt, BufReader};

use kubelet::*;

/// Pod `web`: an HTTP server on `port` whose `/index.html` says `text`.
fn web_pod(port: u16, text: &str) -> serde_json::Value {
    shell_pod(
        "web",
        &format!(
            "mkdir -p /tmp/www && echo {text} > /tmp/www/index.html && \
             exec /usr/bin/python3 -m http.server {port} --bind 0.0.0.0 --directory /tmp/www"
        ),
    )
}

/// `kubectl port-forward` to an HTTP server in a pod, two connections over one forward:
/// with the control plane's kubectl (SPDY), and with a kubectl 1.30+ on PATH when there is
/// one (it asks for the WebSocket tunnel first, then falls back as it must with this
/// apiserver).
#[rstest::rstest]
#[case::control_plane_kubectl(false)]
#[case::recent_kubectl_on_path(true)]
#[tokio::test]
async fn kubectl_port_forward_reaches_an_http_server_in_a_pod(#[case] recent: bool) {
    let kubectl = if recent {
        let Some(kubectl) = recent_kubectl() else {
            return;
        };
        kubectl
    } else {
        kubectl_binary()
    };
    let (cluster, ns) = setup("port-forward").await;
    let port = free_port();
    run_pod(&ns, web_pod(port, "served-by-web")).await;
    let mut forwarder = kubectl_command_of(
        &kubectl,
        &cluster,
        &[
            "port-forward",
            "-n",
            ns.name(),
            "pod/web",
            &format!(":{port}"),
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(forwarder.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap_or_default();
    // "Forwarding from 127.0.0.1:41234 -> 8080"
    let local: u16 = line
        .split_whitespace()
        .nth(2)
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected kubectl output {line:?}"));
    let http = reqwest::Client::new();
    let body = wait_until("the pod's server through the forward", WAIT, || async {
        match http
            .get(format!("http://127.0.0.1:{local}/index.html"))
            .send()
            .await
        {
            Ok(r) if r.status().is_success() => {
                Ok(Some(r.text().await.map_err(|e| e.to_string())?))
            }
            Ok(r) => Err(format!("status {}", r.status())),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
    .unwrap();
    assert_eq!(body, "served-by-web\n");
    // A second connection over the same forward.
    let again = http
        .get(format!("http://127.0.0.1:{local}/index.html"))
        .send()
        .await
        .unwrap();
    assert_eq!(again.text().await.unwrap(), "served-by-web\n");
    forwarder.kill().await.unwrap();
    ns.cleanup().await.unwrap();
}

/// port-forward over WebSocket (kube-rs, `v4.channel.k8s.io`) through the apiserver: an
/// HTTP request to the pod's server and its answer.
#[tokio::test]
async fn websocket_port_forward_reaches_an_http_server_in_a_pod() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_cluster, ns) = setup("ws-forward").await;
    let port = free_port();
    run_pod(&ns, web_pod(port, "served-over-ws")).await;
    let pods: Api<Pod> = ns.api();
    let answer = wait_until(
        "the pod's server through a WebSocket forward",
        WAIT,
        || async {
            let mut forwarder = pods
                .portforward("web", &[port])
                .await
                .map_err(|e| e.to_string())?;
            let mut stream = forwarder.take_stream(port).ok_or("no stream")?;
            stream
                .write_all(b"GET /index.html HTTP/1.0\r\nHost: web\r\n\r\n")
                .await
                .map_err(|e| e.to_string())?;
            let mut answer = Vec::new();
            stream
                .read_to_end(&mut answer)
                .await
                .map_err(|e| e.to_string())?;
            drop(stream);
            let _ = forwarder.join().await;
            let answer = String::from_utf8_lossy(&answer).into_owned();
            if answer.starts_with("HTTP/1.0 200") {
                Ok(Some(answer))
            } else {
                Err(format!("answer {answer:?}"))
            }
        },
    )
    .await
    .unwrap();
    assert!(answer.ends_with("served-over-ws\n"), "{answer}");
    ns.cleanup().await.unwrap();
}
