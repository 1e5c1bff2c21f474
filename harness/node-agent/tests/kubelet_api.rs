//! The node agents' kubelet API as a Kubernetes user meets it: `kubectl logs`, the API's
//! authentication and authorization (direct requests to a node's port), and
//! `/stats/summary`, against the run's shared embedded cluster through the real apiserver,
//! which dials the node agent's advertised port with its kubelet client certificate.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod kubelet;

use std::process::Stdio;

use cluster::{Cluster, TestNamespace};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{Api, PostParams};
use kube_support::wait::{wait_for, wait_until};
use rstest::rstest;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

use kubelet::*;

/// Waits until the log of `app` of `pod` (kubectl logs, with `extra` flags) holds `want`.
async fn wait_log(cluster: &Cluster, ns: &TestNamespace, pod: &str, extra: &[&str], want: &str) {
    wait_until(
        format!("the log of {pod} holding {want:?}"),
        WAIT,
        || async {
            let mut args = vec!["logs", "-n", ns.name(), pod, "-c", "app"];
            args.extend_from_slice(extra);
            let out = kubectl(cluster, &args).await;
            if out.stdout.contains(want) {
                Ok(Some(()))
            } else {
                Err(format!("{out:?}"))
            }
        },
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn kubectl_logs_plain_tail_and_limit() {
    let (cluster, ns) = setup("logs").await;
    run_pod(
        &ns,
        shell_pod(
            "talker",
            "for i in 1 2 3 4 5; do echo line-$i; done; exec sleep 3600",
        ),
    )
    .await;
    wait_log(&cluster, &ns, "talker", &[], "line-5").await;
    let all = kubectl(&cluster, &["logs", "-n", ns.name(), "talker"]).await;
    assert_eq!(all.code, Some(0), "{all:?}");
    assert_eq!(all.stdout, "line-1\nline-2\nline-3\nline-4\nline-5\n");
    let tail = kubectl(&cluster, &["logs", "-n", ns.name(), "talker", "--tail=2"]).await;
    assert_eq!(tail.stdout, "line-4\nline-5\n", "{tail:?}");
    let limited = kubectl(
        &cluster,
        &["logs", "-n", ns.name(), "talker", "--limit-bytes=9"],
    )
    .await;
    assert_eq!(limited.stdout, "line-1\nli", "{limited:?}");
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn kubectl_logs_follow_streams_a_line_written_later() {
    let (cluster, ns) = setup("follow").await;
    run_pod(
        &ns,
        shell_pod(
            "writer",
            "echo first; while [ ! -e /tmp/go ]; do sleep 0.1; done; echo second; exec sleep 3600",
        ),
    )
    .await;
    wait_log(&cluster, &ns, "writer", &[], "first").await;
    let mut follower = kubectl_command(&cluster, &["logs", "-f", "-n", ns.name(), "writer"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(follower.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(WAIT, lines.next_line()).await;
    assert_eq!(first.unwrap().unwrap().as_deref(), Some("first"));
    // Only now is the second line written.
    let touched = cluster
        .exec(ns.name(), "writer", "app", &["touch", "/tmp/go"])
        .await
        .unwrap();
    assert_eq!(touched.code(), 0, "{touched:?}");
    let second = tokio::time::timeout(WAIT, lines.next_line()).await;
    assert_eq!(second.unwrap().unwrap().as_deref(), Some("second"));
    follower.kill().await.unwrap();
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn kubectl_logs_previous_after_a_restart() {
    let (cluster, ns) = setup("previous").await;
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": { "name": "phoenix" },
        "spec": {
            "terminationGracePeriodSeconds": 2,
            "volumes": [{ "name": "state", "emptyDir": {} }],
            "containers": [{
                "name": "app", "image": "busybox",
                "volumeMounts": [{ "name": "state", "mountPath": "/state" }],
                "command": ["sh", "-c",
                    "n=$(cat /state/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /state/n; \
                     echo attempt-$n; if [ $n -lt 2 ]; then exit 1; fi; exec sleep 3600"]
            }]
        }
    });
    let pods: Api<Pod> = ns.api();
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod).unwrap(),
    )
    .await
    .unwrap();
    wait_for(
        &pods,
        "phoenix",
        |p: Option<&Pod>| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.first())
                .is_some_and(|c| c.restart_count >= 1 && c.ready)
        },
        WAIT,
    )
    .await
    .unwrap();
    wait_log(&cluster, &ns, "phoenix", &[], "attempt-2").await;
    let previous = kubectl(
        &cluster,
        &["logs", "-n", ns.name(), "phoenix", "--previous"],
    )
    .await;
    assert_eq!(previous.code, Some(0), "{previous:?}");
    assert_eq!(previous.stdout, "attempt-1\n");
    let current = kubectl(&cluster, &["logs", "-n", ns.name(), "phoenix"]).await;
    assert_eq!(current.stdout, "attempt-2\n", "{current:?}");
    ns.cleanup().await.unwrap();
}

/// Bad requests get the status a real cluster gives, from the apiserver (unknown pod or
/// container) or from the node (no previous attempt).
#[rstest]
#[case::unknown_pod(&["nobody"], "pods \"nobody\" not found")]
#[case::unknown_container(&["quiet", "-c", "ghost"], "container ghost is not valid for pod quiet")]
#[case::no_previous(&["quiet", "--previous"], "previous terminated container \"app\" in pod \"quiet\" not found")]
#[tokio::test]
async fn kubectl_logs_bad_input(#[case] args: &[&str], #[case] message: &str) {
    let (cluster, ns) = setup("logs-bad").await;
    run_pod(&ns, shell_pod("quiet", "exec sleep 3600")).await;
    let mut all = vec!["logs", "-n", ns.name()];
    all.extend_from_slice(args);
    let out = kubectl(&cluster, &all).await;
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(out.stderr.contains(message), "{out:?}");
    // The node still answers.
    let fine = kubectl(&cluster, &["logs", "-n", ns.name(), "quiet"]).await;
    assert_eq!(fine.code, Some(0), "{fine:?}");
    ns.cleanup().await.unwrap();
}

/// `--timestamps` stamps each line with the time it was written, `--since-time` and
/// `--since` keep the lines written since.
#[tokio::test]
async fn kubectl_logs_timestamps_and_since() {
    let (cluster, ns) = setup("logs-time").await;
    run_pod(
        &ns,
        shell_pod(
            "clock",
            "echo early; while [ ! -e /tmp/go ]; do sleep 0.1; done; echo late; exec sleep 3600",
        ),
    )
    .await;
    wait_log(&cluster, &ns, "clock", &[], "early").await;
    let stamps = |out: &Kubectl| -> Vec<(k8s_openapi::jiff::Timestamp, String)> {
        out.stdout
            .lines()
            .map(|l| {
                let (time, text) = l.split_once(' ').unwrap();
                let time = time.parse().unwrap_or_else(|e| panic!("{time:?}: {e}"));
                (time, text.to_string())
            })
            .collect()
    };
    let first = stamps(
        &kubectl(
            &cluster,
            &["logs", "-n", ns.name(), "clock", "--timestamps"],
        )
        .await,
    );
    assert_eq!(first.len(), 1, "{first:?}");
    // The apiserver passes sinceTime on in whole seconds: "late" is written after the next
    // whole second after "early".
    let boundary = k8s_openapi::jiff::Timestamp::from_second(first[0].0.as_second() + 1).unwrap();
    wait_until("the next whole second", WAIT, || async {
        if k8s_openapi::jiff::Timestamp::now() > boundary {
            Ok(Some(()))
        } else {
            Err("not yet".to_string())
        }
    })
    .await
    .unwrap();
    let go = cluster
        .exec(ns.name(), "clock", "app", &["touch", "/tmp/go"])
        .await
        .unwrap();
    assert_eq!(go.code(), 0, "{go:?}");
    wait_log(&cluster, &ns, "clock", &[], "late").await;

    let stamped = kubectl(
        &cluster,
        &["logs", "-n", ns.name(), "clock", "--timestamps"],
    )
    .await;
    assert_eq!(stamped.code, Some(0), "{stamped:?}");
    let lines = stamps(&stamped);
    assert_eq!(
        lines.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>(),
        ["early", "late"]
    );
    assert_eq!(lines[0].0, first[0].0, "a line keeps its time");
    assert!(
        lines[0].0 < boundary && boundary <= lines[1].0,
        "{lines:?} vs {boundary}"
    );

    let since = kubectl(
        &cluster,
        &[
            "logs",
            "-n",
            ns.name(),
            "clock",
            &format!("--since-time={boundary}"),
        ],
    )
    .await;
    assert_eq!(since.stdout, "late\n", "{since:?}");
    let recent = kubectl(&cluster, &["logs", "-n", ns.name(), "clock", "--since=1h"]).await;
    assert_eq!(recent.stdout, "early\nlate\n", "{recent:?}");
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn the_kubelet_api_refuses_anonymous_and_unauthorized_callers() {
    let (cluster, ns) = setup("kubelet-auth").await;
    let node = cluster.node_names()[0].clone();
    let port = kubelet_port(&cluster, &node).await;
    assert_ne!(port, 10250, "the node advertises its own port");
    let http = https_client(&cluster);
    let url = format!("https://127.0.0.1:{port}/pods");

    // No certificate, no token: 401, as kubelet without anonymous auth.
    let anonymous = http.get(&url).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    assert_eq!(anonymous.text().await.unwrap(), "Unauthorized");
    let bogus = http
        .get(&url)
        .bearer_auth("not-a-token")
        .send()
        .await
        .unwrap();
    assert_eq!(bogus.status(), 401);

    // A service account's token: authenticated, but not allowed nodes/proxy: 403.
    let accounts: Api<ServiceAccount> = ns.api();
    accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "nosy"}})).unwrap(),
        )
        .await
        .unwrap();
    let token = accounts
        .create_token_request("nosy", &PostParams::default(), &TokenRequest::default())
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let refused = http.get(&url).bearer_auth(&token).send().await.unwrap();
    assert_eq!(refused.status(), 403);
    assert_eq!(
        refused.text().await.unwrap(),
        format!(
            "Forbidden (user=system:serviceaccount:{}:nosy, verb=get, resource=nodes, subresource=proxy)",
            ns.name()
        )
    );

    // Through the apiserver, as the admin: the node's pods.
    let request = http::Request::get(format!("/api/v1/nodes/{node}/proxy/pods"))
        .body(Vec::new())
        .unwrap();
    let pods: serde_json::Value = cluster.client().request(request).await.unwrap();
    assert_eq!(pods["kind"], "PodList", "{pods}");
    ns.cleanup().await.unwrap();
}

/// `/stats/summary` through the apiserver (as metrics and volume-stats checks read it): the
/// node's file system, CPU and memory, the pod's and its container's, and its emptyDir
/// volume with the bytes written into it.
#[tokio::test]
async fn stats_summary_reports_pods_and_their_volumes() {
    let (cluster, ns) = setup("stats").await;
    let pod = run_pod(
        &ns,
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": { "name": "filler" },
            "spec": {
                "terminationGracePeriodSeconds": 2,
                "volumes": [{ "name": "scratch", "emptyDir": {} }],
                "containers": [{
                    "name": "app", "image": "busybox",
                    "volumeMounts": [{ "name": "scratch", "mountPath": "/scratch" }],
                    "command": ["sh", "-c",
                        "head -c 1048576 /dev/urandom > /scratch/blob && touch /scratch/done && exec sleep 3600"]
                }]
            }
        }),
    )
    .await;
    let node = pod.spec.unwrap().node_name.unwrap();
    let path = format!("/api/v1/nodes/{node}/proxy/stats/summary");
    let volume = wait_until("the emptyDir's usage in the summary", WAIT, || async {
        let request = http::Request::get(&path).body(Vec::new()).unwrap();
        let summary: serde_json::Value = cluster
            .client()
            .request(request)
            .await
            .map_err(|e| e.to_string())?;
        if summary["node"]["nodeName"] != node.as_str()
            || summary["node"]["fs"]["capacityBytes"].as_u64().unwrap_or(0) == 0
        {
            return Err(format!("node: {}", summary["node"]));
        }
        let pods = summary["pods"].as_array().cloned().unwrap_or_default();
        let Some(ours) = pods
            .iter()
            .find(|p| p["podRef"]["name"] == "filler" && p["podRef"]["namespace"] == ns.name())
        else {
            return Err(format!("no pod filler in {pods:?}"));
        };
        // Memory and CPU from /proc: the node's, the pod's and its container's processes.
        let positive = |v: &serde_json::Value| v.as_u64().unwrap_or(0) > 0;
        let container = ours["containers"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["name"] == "app"))
            .cloned()
            .unwrap_or_default();
        if !positive(&summary["node"]["memory"]["workingSetBytes"])
            || !positive(&summary["node"]["cpu"]["usageCoreNanoSeconds"])
            || !positive(&ours["memory"]["rssBytes"])
            || !positive(&container["memory"]["rssBytes"])
            || container["cpu"]["usageCoreNanoSeconds"].as_u64().is_none()
        {
            return Err(format!("node: {}, pod: {ours}", summary["node"]));
        }
        let volume = ours["volume"]
            .as_array()
            .and_then(|v| v.iter().find(|v| v["name"] == "scratch"))
            .cloned();
        match volume {
            Some(v) if v["usedBytes"].as_u64().unwrap_or(0) >= 1_048_576 => Ok(Some(v)),
            other => Err(format!("volume: {other:?}")),
        }
    })
    .await
    .unwrap();
    assert!(volume["capacityBytes"].as_u64().unwrap() > 0, "{volume}");
    assert!(volume["inodesUsed"].as_u64().unwrap() >= 3, "{volume}");
    ns.cleanup().await.unwrap();
}
