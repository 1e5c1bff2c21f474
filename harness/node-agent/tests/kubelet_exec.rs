//! `kubectl exec` and `kubectl attach` through the apiserver to the node agents' kubelet
//! API (SPDY from the control plane's kubectl v1.20, WebSocket from a recent one on PATH),
//! and the harness's own `Cluster::exec`, on the run's shared embedded cluster.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod kubelet;

use std::process::Stdio;

use cluster::TestNamespace;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube_support::wait::{wait_for, wait_until};
use rstest::rstest;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

use kubelet::*;

/// `Cluster::exec` goes through the apiserver (WebSocket, `v4.channel.k8s.io`) to the node's
/// kubelet API: output on both streams and the exit code.
#[tokio::test]
async fn cluster_exec_goes_through_the_apiserver_with_streams_and_exit_code() {
    let (cluster, ns) = setup("ws-exec").await;
    run_pod(&ns, shell_pod("target", "exec sleep 3600")).await;
    let out = cluster
        .exec(
            ns.name(),
            "target",
            "app",
            &["sh", "-c", "echo out; echo err >&2; exit 3"],
        )
        .await
        .unwrap();
    assert_eq!(out.code(), 3, "{out:?}");
    assert_eq!(out.stdout, b"out\n");
    assert_eq!(out.stderr, b"err\n");
    let hostname = cluster
        .exec(ns.name(), "target", "app", &["hostname"])
        .await
        .unwrap();
    assert_eq!(
        (hostname.code(), hostname.stdout.as_slice()),
        (0, &b"target\n"[..])
    );
    ns.cleanup().await.unwrap();
}

#[rstest]
#[case::success("exit 0", 0)]
#[case::failure("exit 3", 3)]
#[case::killed("kill -9 $$", 137)]
#[tokio::test]
async fn kubectl_exec_reports_the_exit_code(#[case] script: &str, #[case] code: i32) {
    let (cluster, ns) = setup("exec-code").await;
    run_pod(&ns, shell_pod("target", "exec sleep 3600")).await;
    let out = kubectl(
        &cluster,
        &[
            "exec",
            "-n",
            ns.name(),
            "target",
            "--",
            "sh",
            "-c",
            &format!("echo before; {script}"),
        ],
    )
    .await;
    assert_eq!(out.code, Some(code), "{out:?}");
    assert_eq!(out.stdout, "before\n", "{out:?}");
    if code != 0 {
        assert!(
            out.stderr
                .contains(&format!("command terminated with exit code {code}")),
            "{out:?}"
        );
    }
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn kubectl_exec_streams_stdin_stdout_and_stderr() {
    let (cluster, ns) = setup("exec-stdin").await;
    run_pod(&ns, shell_pod("target", "exec sleep 3600")).await;
    let out = kubectl_with_input(
        &cluster,
        &[
            "exec",
            "-i",
            "-n",
            ns.name(),
            "target",
            "--",
            "sh",
            "-c",
            "tr a-z A-Z; echo oops >&2",
        ],
        b"hello\nworld\n",
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(out.stdout, "HELLO\nWORLD\n");
    assert_eq!(out.stderr, "oops\n");
    ns.cleanup().await.unwrap();
}

/// With `-t` on a terminal (kubectl runs under `script`, which gives it one), the command
/// has a terminal of kubectl's size.
#[tokio::test]
async fn kubectl_exec_with_a_tty() {
    let (cluster, ns) = setup("exec-tty").await;
    run_pod(&ns, shell_pod("target", "exec sleep 3600")).await;
    let command = format!(
        "stty cols 91 rows 37; {} --kubeconfig {} exec -it -n {} target -- sh -c 'tty; stty size'",
        kubectl_binary().display(),
        cluster.kubeconfig().display(),
        ns.name()
    );
    let out = tokio::time::timeout(
        WAIT,
        tokio::process::Command::new("script")
            .args(["-qec", &command, "/dev/null"])
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.contains("/dev/pts/"), "no terminal: {stdout:?}");
    assert!(stdout.contains("37 91"), "the terminal's size: {stdout:?}");
    ns.cleanup().await.unwrap();
}

/// A stream closed before its command ends (kubectl killed) takes the command with it:
/// nothing is left running in the container.
#[tokio::test]
async fn a_closed_exec_stream_leaves_no_process() {
    let (cluster, ns) = setup("exec-closed").await;
    run_pod(&ns, shell_pod("target", "exec sleep 3600")).await;
    let marker = format!("sleep 4{}", std::process::id() % 100_000);
    let mut client = kubectl_command(
        &cluster,
        &[
            "exec",
            "-i",
            "-n",
            ns.name(),
            "target",
            "--",
            "sh",
            "-c",
            &format!("{marker}; echo never"),
        ],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    let running = |want: bool| {
        let marker = marker.clone();
        async move {
            let found = std::process::Command::new("pgrep")
                .args(["-f", &format!("^{marker}$")])
                .output()
                .unwrap();
            let running = !found.stdout.is_empty();
            if running == want {
                Ok(Some(()))
            } else {
                Err(format!("running: {running}"))
            }
        }
    };
    wait_until("the exec'd command running", WAIT, || running(true))
        .await
        .unwrap();
    client.kill().await.unwrap();
    wait_until("the exec'd command gone", WAIT, || running(false))
        .await
        .unwrap();
    // The node serves the next exec as before.
    let out = kubectl(
        &cluster,
        &["exec", "-n", ns.name(), "target", "--", "echo", "still"],
    )
    .await;
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (Some(0), "still\n"),
        "{out:?}"
    );
    ns.cleanup().await.unwrap();
}

#[tokio::test]
async fn kubectl_exec_bad_input() {
    let (cluster, ns) = setup("exec-bad").await;
    run_pod(&ns, shell_pod("target", "exec sleep 3600")).await;
    let missing = kubectl(
        &cluster,
        &["exec", "-n", ns.name(), "target", "--", "no-such-command"],
    )
    .await;
    assert_ne!(missing.code, Some(0), "{missing:?}");
    assert!(missing.stderr.contains("no-such-command"), "{missing:?}");
    let ghost = kubectl(
        &cluster,
        &[
            "exec",
            "-n",
            ns.name(),
            "target",
            "-c",
            "ghost",
            "--",
            "true",
        ],
    )
    .await;
    assert_eq!(ghost.code, Some(1), "{ghost:?}");
    assert!(
        ghost
            .stderr
            .contains("container ghost is not valid for pod target"),
        "{ghost:?}"
    );

    // A container waiting to be restarted is not running.
    let pods: Api<Pod> = ns.api();
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(shell_pod("crasher", "exit 1")).unwrap(),
    )
    .await
    .unwrap();
    wait_for(
        &pods,
        "crasher",
        |p: Option<&Pod>| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.first())
                .and_then(|c| c.state.as_ref())
                .and_then(|s| s.waiting.as_ref())
                .is_some_and(|w| w.reason.as_deref() == Some("CrashLoopBackOff"))
        },
        WAIT,
    )
    .await
    .unwrap();
    let stopped = kubectl(
        &cluster,
        &["exec", "-n", ns.name(), "crasher", "--", "true"],
    )
    .await;
    assert_eq!(stopped.code, Some(1), "{stopped:?}");
    assert!(
        stopped.stderr.contains("container not running (\"app\")"),
        "{stopped:?}"
    );
    ns.cleanup().await.unwrap();
}

/// A kubectl of 1.30 or later on PATH execs over WebSocket (`v5.channel.k8s.io`, passed
/// through by the apiserver): exit code and stdin as over SPDY. Without such a kubectl the
/// test says so and checks nothing.
#[tokio::test]
async fn a_websocket_kubectl_execs_with_exit_code_and_stdin() {
    let Some(kubectl) = recent_kubectl() else {
        return;
    };
    let (cluster, ns) = setup("ws-kubectl").await;
    run_pod(&ns, shell_pod("target", "exec sleep 3600")).await;
    let run = |args: Vec<String>, input: &'static [u8]| {
        let kubeconfig = cluster.kubeconfig().to_path_buf();
        let kubectl = kubectl.clone();
        async move {
            use tokio::io::AsyncWriteExt;
            let mut child = tokio::process::Command::new(kubectl)
                .arg("--kubeconfig")
                .arg(kubeconfig)
                .args(args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(input).await.unwrap();
            drop(stdin);
            tokio::time::timeout(WAIT, child.wait_with_output())
                .await
                .unwrap()
                .unwrap()
        }
    };
    let args = |extra: &[&str]| -> Vec<String> {
        ["exec", "-n", ns.name(), "target"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    };
    let failed = run(args(&["--", "sh", "-c", "echo out; exit 4"]), b"").await;
    assert_eq!(failed.status.code(), Some(4), "{failed:?}");
    assert_eq!(String::from_utf8_lossy(&failed.stdout), "out\n");
    let echoed = run(args(&["-i", "--", "cat"]), b"through v5\n").await;
    assert_eq!(echoed.status.code(), Some(0), "{echoed:?}");
    assert_eq!(String::from_utf8_lossy(&echoed.stdout), "through v5\n");
    ns.cleanup().await.unwrap();
}

/// `kubectl attach` streams the container's output from now on and ends when it exits.
#[tokio::test]
async fn kubectl_attach_follows_the_output_until_the_container_ends() {
    let (cluster, ns) = setup("attach").await;
    let mut pod = shell_pod(
        "ticker",
        "i=0; while [ ! -e /tmp/stop ]; do echo tick-$i; i=$((i+1)); sleep 0.2; done; echo bye",
    );
    pod["spec"]["restartPolicy"] = json!("Never");
    run_pod(&ns, pod).await;
    let mut attached = kubectl_command(&cluster, &["attach", "-n", ns.name(), "ticker"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(attached.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(WAIT, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap_or_default();
    assert!(first.starts_with("tick-"), "{first:?}");
    let stop = cluster
        .exec(ns.name(), "ticker", "app", &["touch", "/tmp/stop"])
        .await
        .unwrap();
    assert_eq!(stop.code(), 0, "{stop:?}");
    let mut rest = Vec::new();
    while let Ok(Ok(Some(line))) = tokio::time::timeout(WAIT, lines.next_line()).await {
        rest.push(line);
    }
    assert_eq!(rest.last().map(String::as_str), Some("bye"), "{rest:?}");
    let status = tokio::time::timeout(WAIT, attached.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");
    ns.cleanup().await.unwrap();
}

/// A busybox pod `name` whose container `app` runs `script` with `sh -c` and keeps its
/// standard input open for attaching (`stdin`, `stdinOnce`), and ends for good.
fn pod_with_input(name: &str, script: &str) -> serde_json::Value {
    let mut pod = shell_pod(name, script);
    pod["spec"]["restartPolicy"] = json!("Never");
    pod["spec"]["containers"][0]["stdin"] = json!(true);
    pod["spec"]["containers"][0]["stdinOnce"] = json!(true);
    pod
}

/// Waits until pod `name` has `Succeeded`.
async fn wait_succeeded(ns: &TestNamespace, name: &str) {
    let pods: Api<Pod> = ns.api();
    let phase = wait_for(
        &pods,
        name,
        |pod: Option<&Pod>| {
            pod.and_then(|p| p.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                == Some("Succeeded")
        },
        WAIT,
    )
    .await;
    assert!(phase.is_ok(), "{name}: {phase:?}");
}

/// Reads the terminal `stdout` into `screen` until it shows `want`.
async fn read_until(
    screen: &mut String,
    stdout: &mut (impl tokio::io::AsyncRead + Unpin),
    want: &str,
) {
    use tokio::io::AsyncReadExt;
    let mut buf = [0u8; 4096];
    while !screen.contains(want) {
        let n = tokio::time::timeout(WAIT, stdout.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("no {want:?} on the terminal: {screen:?}"))
            .unwrap();
        assert!(n > 0, "the terminal ended before {want:?}: {screen:?}");
        screen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

/// `kubectl attach -i` to a container with `stdin` and `stdinOnce`: its input reaches the
/// container, and the end of kubectl's input closes the container's, which then ends (so
/// the attach ends with it, exit code 0).
#[tokio::test]
async fn kubectl_attach_i_writes_to_the_container_s_input() {
    let (cluster, ns) = setup("attach-input").await;
    run_pod(
        &ns,
        pod_with_input(
            "reader",
            "while read line; do echo got-$line; done; echo input-closed",
        ),
    )
    .await;
    let out = kubectl_with_input(
        &cluster,
        &["attach", "-i", "-n", ns.name(), "reader"],
        b"one\ntwo\n",
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stdout.ends_with("got-one\ngot-two\ninput-closed\n"),
        "{out:?}"
    );
    wait_succeeded(&ns, "reader").await;
    ns.cleanup().await.unwrap();
}

/// An interactive shell with a terminal (`kubectl run -it`'s pod: `stdin`, `stdinOnce`,
/// `tty`), attached with kube-rs over WebSocket: the terminal takes the client's size, what
/// is typed runs, `exit` ends the container and the attach.
#[tokio::test]
async fn attach_with_a_tty_drives_an_interactive_shell() {
    use futures::SinkExt;
    use kube::api::{AttachParams, TerminalSize};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_cluster, ns) = setup("attach-tty").await;
    let mut pod = pod_with_input("shell", "exec sh -i");
    pod["spec"]["containers"][0]["tty"] = json!(true);
    run_pod(&ns, pod).await;
    let pods: Api<Pod> = ns.api();
    let mut attached = pods
        .attach("shell", &AttachParams::interactive_tty().container("app"))
        .await
        .unwrap();
    let mut sizes = attached.terminal_size().unwrap();
    sizes
        .send(TerminalSize {
            width: 91,
            height: 37,
        })
        .await
        .unwrap();
    let mut stdin = attached.stdin().unwrap();
    let mut stdout = attached.stdout().unwrap();
    let mut screen = String::new();
    stdin
        .write_all(b"tty; echo marker-$((6*7))\n")
        .await
        .unwrap();
    read_until(&mut screen, &mut stdout, "marker-42").await;
    assert!(screen.contains("/dev/pts/"), "{screen:?}");
    // The resize travels apart from the input: ask again until the terminal has it.
    let mut sized = false;
    for attempt in 1000..1200 {
        let ask = format!("echo size-$(stty size | tr ' ' x) end-$(({attempt}+1))\n");
        stdin.write_all(ask.as_bytes()).await.unwrap();
        read_until(&mut screen, &mut stdout, &format!("end-{}", attempt + 1)).await;
        if screen.contains("size-37x91") {
            sized = true;
            break;
        }
    }
    assert!(
        sized,
        "the terminal never took the client's size: {screen:?}"
    );
    stdin.write_all(b"exit\n").await.unwrap();
    let mut rest = Vec::new();
    tokio::time::timeout(WAIT, stdout.read_to_end(&mut rest))
        .await
        .expect("the attach ends with the shell")
        .unwrap();
    wait_succeeded(&ns, "shell").await;
    ns.cleanup().await.unwrap();
}

/// `kubectl run -it --rm` as a user types it (kubectl under `script`, which gives it a
/// terminal of 100×30): the pod's shell gets the typed commands on a terminal of that size,
/// `exit` ends it, and kubectl deletes the pod.
#[tokio::test]
async fn kubectl_run_it_rm_gives_an_interactive_shell() {
    use tokio::io::AsyncWriteExt;
    let (cluster, ns) = setup("run-it").await;
    let command = format!(
        "stty cols 100 rows 30; {} --kubeconfig {} run -it --rm --restart=Never --image=busybox -n {} shell -- sh",
        kubectl_binary().display(),
        cluster.kubeconfig().display(),
        ns.name()
    );
    let mut user = tokio::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut typed = user.stdin.take().unwrap();
    typed
        .write_all(b"echo hi-$((40+2))\nstty size\nexit\n")
        .await
        .unwrap();
    drop(typed);
    let out = tokio::time::timeout(WAIT, user.wait_with_output())
        .await
        .expect("kubectl run -it ends with the shell")
        .unwrap();
    let screen = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(screen.contains("hi-42"), "{screen:?}");
    assert!(screen.contains("30 100"), "the terminal's size: {screen:?}");
    assert!(screen.contains("pod \"shell\" deleted"), "{screen:?}");
    let pods: Api<Pod> = ns.api();
    let gone = wait_for(&pods, "shell", |pod: Option<&Pod>| pod.is_none(), WAIT).await;
    assert!(gone.is_ok(), "{gone:?}");
    ns.cleanup().await.unwrap();
}
