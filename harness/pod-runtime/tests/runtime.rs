//! The pod runtime with real processes, namespaces and mounts (needs root, as CI runs). Mount
//! propagation and what a container's mount namespace holds: `runtime_mounts.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pod_runtime::host_mounts::ScratchDir;
use pod_runtime::{
    Container, ContainerSpec, Error, ExitStatus, ImageMap, Lifeline, Mount, Runtime, RuntimeConfig,
    Sandbox, SandboxSpec, User,
};

const WAIT: Duration = Duration::from_secs(20);

fn config(run_dir: &Path) -> RuntimeConfig {
    let mut config = RuntimeConfig::new(run_dir);
    config.helper = PathBuf::from(env!("CARGO_BIN_EXE_pod-sandbox"));
    config.lifeline = Some(Lifeline::this_process().unwrap());
    config
}

fn runtime(run_dir: &Path) -> Runtime {
    Runtime::new(config(run_dir)).unwrap()
}

/// A runtime in a temporary run directory with one sandbox.
/// Fields drop in this order, as the variables they replace did.
struct OneSandbox {
    sandbox: Sandbox,
    runtime: Runtime,
    _run: ScratchDir,
}

/// A runtime in a new temporary run directory and its sandbox `id` with `hostname`.
async fn one_sandbox(id: &str, hostname: &str) -> OneSandbox {
    let run = ScratchDir::new().unwrap();
    let runtime = runtime(run.path());
    let sandbox = runtime
        .create_sandbox(SandboxSpec::new(id, hostname))
        .await
        .unwrap();
    OneSandbox {
        sandbox,
        runtime,
        _run: run,
    }
}

fn argv(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn sleeper(name: &str) -> ContainerSpec {
    ContainerSpec::new(name, ["sleep", "1000"])
}

async fn exec_ok(sandbox: &Sandbox, container: &str, command: &[&str]) -> String {
    // The latest attempt of that name.
    let container = sandbox
        .containers()
        .unwrap()
        .into_iter()
        .rfind(|c| c.name() == container)
        .unwrap();
    let out = container.exec(&argv(command)).await.unwrap();
    assert_eq!(
        out.status,
        ExitStatus::Exited(0),
        "{command:?}: stderr {:?}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Waits until `container` has logged `text`.
async fn wait_logged(container: &Container, text: &str) {
    testkit::wait_for(&format!("{text:?} in the logs"), WAIT, || {
        let logs = container.logs().map_err(|e| e.to_string());
        async move {
            let logs = logs?;
            if logs.contains(text) {
                Ok(Some(()))
            } else {
                Err(logs)
            }
        }
    })
    .await
}

/// Runs `script` (`sh -c`) in a new sandbox, waits until it logged `ready`, then stops it
/// with `grace`: how it ended, how long the stop took and what it logged.
async fn stop_when_ready(
    id: &str,
    hostname: &str,
    script: &str,
    grace: Duration,
) -> (ExitStatus, Duration, String) {
    let pod = one_sandbox(id, hostname).await;
    let app = pod
        .sandbox
        .run_container(ContainerSpec::new("app", ["sh", "-c", script]))
        .await
        .unwrap();
    wait_logged(&app, "ready").await;
    let started = Instant::now();
    let status = app.stop(grace).await.unwrap();
    let took = started.elapsed();
    let logs = app.logs().unwrap();
    pod.runtime.teardown().await.unwrap();
    (status, took, logs)
}

fn mountinfo() -> String {
    std::fs::read_to_string("/proc/self/mountinfo").unwrap()
}

#[tokio::test]
async fn two_sandboxes_share_a_host_volume_directory() {
    let run = ScratchDir::new().unwrap();
    let volume = tempfile::Builder::new()
        .prefix("runtime-")
        .tempdir()
        .unwrap();
    let runtime = runtime(run.path());
    let mut spec_a = SandboxSpec::new("pod-a", "writer-a");
    spec_a.mounts.push(Mount::bind(volume.path(), "/data"));
    let mut spec_b = SandboxSpec::new("pod-b", "writer-b");
    // A mount path that does not exist on the host.
    spec_b
        .mounts
        .push(Mount::bind(volume.path(), "/etc/shared-volume"));
    let a = runtime.create_sandbox(spec_a).await.unwrap();
    let b = runtime.create_sandbox(spec_b).await.unwrap();
    a.run_container(sleeper("app")).await.unwrap();
    b.run_container(sleeper("app")).await.unwrap();

    exec_ok(&a, "app", &["sh", "-c", "echo from-a > /data/a.txt"]).await;
    assert_eq!(
        exec_ok(&b, "app", &["cat", "/etc/shared-volume/a.txt"]).await,
        "from-a\n"
    );
    exec_ok(
        &b,
        "app",
        &["sh", "-c", "echo from-b > /etc/shared-volume/b.txt"],
    )
    .await;
    assert_eq!(
        exec_ok(&a, "app", &["cat", "/data/b.txt"]).await,
        "from-b\n"
    );
    assert_eq!(
        std::fs::read_to_string(volume.path().join("b.txt")).unwrap(),
        "from-b\n"
    );
    assert!(!Path::new("/etc/shared-volume").exists());
    runtime.teardown().await.unwrap();
}

#[tokio::test]
async fn hostname_is_the_pod_name_and_pid_1_is_the_sandbox_s() {
    let pod = one_sandbox("uid-1", "web-0").await;
    let OneSandbox { sandbox, .. } = &pod;
    sandbox.run_container(sleeper("app")).await.unwrap();
    assert_eq!(exec_ok(sandbox, "app", &["hostname"]).await, "web-0\n");
    assert_eq!(
        exec_ok(sandbox, "app", &["cat", "/etc/hostname"]).await,
        "web-0\n"
    );
    assert!(
        exec_ok(sandbox, "app", &["cat", "/etc/hosts"])
            .await
            .contains("web-0")
    );
    assert_eq!(
        exec_ok(sandbox, "app", &["sh", "-c", "echo $HOSTNAME"]).await,
        "web-0\n"
    );
    let pid1 = exec_ok(sandbox, "app", &["cat", "/proc/1/cmdline"]).await;
    assert!(pid1.contains("pause"), "PID 1 is {pid1:?}");
    sandbox.remove().await.unwrap();
    assert!(!sandbox.dir().exists());
}

#[tokio::test]
async fn writes_inside_do_not_reach_the_host_and_mounts_leave_no_trace() {
    let before = mountinfo();
    let run = ScratchDir::new().unwrap();
    let volume = tempfile::Builder::new()
        .prefix("runtime-")
        .tempdir()
        .unwrap();
    let runtime = runtime(run.path());
    let marker = format!("written-by-pod-{}", std::process::id());
    let mut spec = SandboxSpec::new("uid-2", "isolated");
    spec.mounts
        .push(Mount::read_only(volume.path(), "/etc/pod-config/sub"));
    let sandbox = runtime.create_sandbox(spec).await.unwrap();
    sandbox.run_container(sleeper("app")).await.unwrap();

    let script = format!(
        "echo x > /etc/{marker} && mkdir -p /usr/local/{marker} && echo t > /tmp/{marker} && cat /etc/{marker}"
    );
    assert_eq!(
        exec_ok(&sandbox, "app", &["sh", "-c", &script]).await,
        "x\n"
    );
    let ro = sandbox.container("app", 0).unwrap().unwrap();
    let denied = ro
        .exec(&argv(&["sh", "-c", "echo no > /etc/pod-config/sub/f"]))
        .await
        .unwrap();
    assert_ne!(
        denied.status,
        ExitStatus::Exited(0),
        "read-only volume was writable"
    );
    for path in [
        format!("/etc/{marker}"),
        format!("/usr/local/{marker}"),
        format!("/tmp/{marker}"),
        "/etc/pod-config".to_string(),
    ] {
        assert!(!Path::new(&path).exists(), "{path} reached the host");
    }
    let during = mountinfo();
    let run_dir = runtime.run_dir().display().to_string();
    assert!(
        !during.contains(&run_dir),
        "host mount table mentions {run_dir}:\n{during}"
    );

    sandbox.remove().await.unwrap();
    assert_eq!(mountinfo(), before, "host mount table changed");
}

#[tokio::test]
async fn exit_code_is_recorded() {
    let pod = one_sandbox("uid-3", "job").await;
    let OneSandbox {
        runtime, sandbox, ..
    } = &pod;
    let job = sandbox
        .run_container(ContainerSpec::new("job", ["sh", "-c", "exit 42"]))
        .await
        .unwrap();
    assert_eq!(job.wait().await.unwrap(), ExitStatus::Exited(42));
    assert_eq!(job.exit_status().unwrap(), Some(ExitStatus::Exited(42)));
    assert!(!job.is_running());
    runtime.teardown().await.unwrap();
}

#[tokio::test]
async fn sigterm_stops_a_container_within_its_grace_period() {
    let grace = Duration::from_secs(15);
    let (status, took, logs) = stop_when_ready(
        "uid-4",
        "term",
        "trap 'echo bye; exit 3' TERM; echo ready; sleep 1000 & wait",
        grace,
    )
    .await;
    assert_eq!(status, ExitStatus::Exited(3));
    assert!(took < grace);
    assert!(logs.contains("bye"));
}

#[tokio::test]
async fn sigkill_follows_the_grace_period_when_term_is_ignored() {
    let grace = Duration::from_millis(300);
    let (status, took, _) = stop_when_ready(
        "uid-5",
        "stubborn",
        "trap '' TERM; echo ready; while true; do sleep 1; done",
        grace,
    )
    .await;
    assert_eq!(status, ExitStatus::Signaled(9));
    assert!(took >= grace);
}

#[tokio::test]
async fn exec_returns_output_and_exit_code_with_the_container_env_and_workdir() {
    let pod = one_sandbox("uid-6", "execd").await;
    let OneSandbox {
        runtime, sandbox, ..
    } = &pod;
    let mut spec = sleeper("app");
    spec.env.push(("GREETING".into(), "hello there".into()));
    spec.working_dir = Some("/srv/app-home".into());
    let app = sandbox.run_container(spec).await.unwrap();
    let out = app
        .exec(&argv(&[
            "sh",
            "-c",
            "echo \"$GREETING\"; pwd; echo oops >&2; exit 7",
        ]))
        .await
        .unwrap();
    assert_eq!(out.status, ExitStatus::Exited(7));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "hello there\n/srv/app-home\n"
    );
    assert_eq!(String::from_utf8_lossy(&out.stderr), "oops\n");
    runtime.teardown().await.unwrap();
}

#[tokio::test]
async fn container_mounts_and_user_apply_to_that_container_only() {
    let volume = tempfile::Builder::new()
        .prefix("runtime-")
        .tempdir()
        .unwrap();
    std::fs::write(volume.path().join("token"), "secret-ish").unwrap();
    let pod = one_sandbox("uid-7", "users").await;
    let OneSandbox {
        runtime, sandbox, ..
    } = &pod;
    let mut spec = sleeper("app");
    spec.user = Some(User {
        uid: 65534,
        gid: 65534,
    });
    spec.mounts
        .push(Mount::read_only(volume.path(), "/var/run/secrets/x"));
    sandbox.run_container(spec).await.unwrap();
    sandbox.run_container(sleeper("other")).await.unwrap();
    assert_eq!(exec_ok(sandbox, "app", &["id", "-u"]).await, "65534\n");
    assert_eq!(
        exec_ok(sandbox, "app", &["cat", "/var/run/secrets/x/token"]).await,
        "secret-ish"
    );
    let other = sandbox.container("other", 0).unwrap().unwrap();
    let out = other
        .exec(&argv(&["cat", "/var/run/secrets/x/token"]))
        .await
        .unwrap();
    assert_ne!(
        out.status,
        ExitStatus::Exited(0),
        "the mount leaked to another container"
    );
    runtime.teardown().await.unwrap();
}

#[tokio::test]
async fn logs_capture_stdout_and_stderr() {
    let pod = one_sandbox("uid-8", "logger").await;
    let OneSandbox {
        runtime, sandbox, ..
    } = &pod;
    let app = sandbox
        .run_container(ContainerSpec::new(
            "app",
            ["sh", "-c", "echo to-stdout; echo to-stderr >&2"],
        ))
        .await
        .unwrap();
    assert!(app.wait().await.unwrap().success());
    assert_eq!(app.logs().unwrap(), "to-stdout\nto-stderr\n");
    runtime.teardown().await.unwrap();
}

#[tokio::test]
async fn adopt_after_dropping_the_runtime_finds_and_stops_the_container() {
    let run = ScratchDir::new().unwrap();
    let pid = {
        let runtime = runtime(run.path());
        let sandbox = runtime
            .create_sandbox(SandboxSpec::new("uid-9", "kept"))
            .await
            .unwrap();
        let mut second = sleeper("app");
        second.attempt = 1;
        sandbox
            .run_container(ContainerSpec::new("app", ["true"]))
            .await
            .unwrap()
            .wait()
            .await
            .unwrap();
        sandbox.run_container(second).await.unwrap().process()
    };
    let (runtime, live) = Runtime::adopt(config(run.path())).unwrap();
    assert_eq!(live.len(), 1);
    let sandbox = &live[0];
    assert_eq!((sandbox.id(), sandbox.hostname()), ("uid-9", "kept"));
    let containers = sandbox.containers().unwrap();
    let states: Vec<_> = containers
        .iter()
        .map(|c| (c.name().to_string(), c.attempt(), c.is_running()))
        .collect();
    assert_eq!(states, [("app".into(), 0, false), ("app".into(), 1, true)]);
    let app = &containers[1];
    assert_eq!(app.process(), pid);
    assert_eq!(exec_ok(sandbox, "app", &["hostname"]).await, "kept\n");
    assert_eq!(
        app.stop(Duration::from_secs(10)).await.unwrap(),
        ExitStatus::Signaled(15)
    );
    runtime.teardown().await.unwrap();
    assert!(!sandbox.is_running());
}

#[tokio::test]
async fn a_bad_command_gives_an_error_naming_it() {
    let pod = one_sandbox("uid-10", "bad").await;
    let OneSandbox {
        runtime, sandbox, ..
    } = &pod;
    let err = sandbox
        .run_container(ContainerSpec::new("app", ["/no/such/program", "arg"]))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::CannotExecute { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("/no/such/program") && message.contains("No such file"),
        "{message}"
    );

    let app = sandbox.run_container(sleeper("good")).await.unwrap();
    let err = app.exec(&argv(&["no-such-tool"])).await.unwrap_err();
    assert!(err.to_string().contains("no-such-tool"), "{err}");
    runtime.teardown().await.unwrap();
}

#[tokio::test]
async fn stopping_a_sandbox_kills_all_its_processes() {
    let pod = one_sandbox("uid-11", "doomed").await;
    let OneSandbox { sandbox, .. } = &pod;
    let app = sandbox.run_container(sleeper("app")).await.unwrap();
    sandbox.stop().await.unwrap();
    assert_eq!(app.wait().await.unwrap(), ExitStatus::Signaled(9));
    assert!(!sandbox.is_running());
    let err = sandbox.run_container(sleeper("late")).await.unwrap_err();
    assert!(matches!(err, Error::NotRunning { .. }), "{err:?}");
}

#[tokio::test]
async fn a_broken_lifeline_ends_the_sandbox() {
    let run = ScratchDir::new().unwrap();
    let (lifeline, holder) = Lifeline::pair().unwrap();
    let mut config = config(run.path());
    config.lifeline = Some(lifeline);
    let runtime = Runtime::new(config).unwrap();
    let sandbox = runtime
        .create_sandbox(SandboxSpec::new("uid-12", "tied"))
        .await
        .unwrap();
    let app = sandbox.run_container(sleeper("app")).await.unwrap();
    drop(holder);
    assert_eq!(app.wait().await.unwrap(), ExitStatus::Signaled(9));
    sandbox.pause_process().exited().await.unwrap();
    assert!(!sandbox.is_running());
}

#[tokio::test]
async fn a_taken_sandbox_id_is_refused() {
    let pod = one_sandbox("uid-13", "one").await;
    let OneSandbox { runtime, .. } = &pod;
    let err = runtime
        .create_sandbox(SandboxSpec::new("uid-13", "two"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("uid-13"), "{err}");
    runtime.teardown().await.unwrap();
}

#[tokio::test]
async fn an_image_binary_under_the_host_s_tmp_runs_as_a_container() {
    // The sandbox's /tmp is private: only the binary's own mount makes it visible.
    let workspace = tempfile::Builder::new()
        .prefix("clone-")
        .tempdir_in("/tmp")
        .unwrap();
    let binary = workspace.path().join("target/debug/greeter");
    std::fs::create_dir_all(binary.parent().unwrap()).unwrap();
    std::fs::copy("/bin/echo", &binary).unwrap();
    let mut images = ImageMap::new();
    images.insert("example.org/greeter", &binary);
    let image = "example.org/greeter:v1";
    let argv = images
        .resolve("app", image, &[], &argv(&["hello"]))
        .unwrap();
    let pod = one_sandbox("uid-image", "image").await;
    let OneSandbox {
        runtime, sandbox, ..
    } = &pod;

    let err = sandbox
        .run_container(ContainerSpec::new("unmounted", argv.clone()))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::CannotExecute { .. }), "{err:?}");

    let mut spec = ContainerSpec::new("app", argv.clone());
    spec.mounts.extend(images.binary_mount(image, &argv));
    assert_eq!(spec.mounts.len(), 1);
    let app = sandbox.run_container(spec).await.unwrap();
    assert!(app.wait().await.unwrap().success());
    assert_eq!(app.logs().unwrap(), "hello\n");
    runtime.teardown().await.unwrap();
}

/// Streamed exec sessions: stdin to stdout through pipes; a terminal with its size; a
/// session dropped before its command ends takes the command's whole process group with it
/// (the kubelet API's exec when the client goes away).
#[tokio::test]
async fn exec_sessions_stream_and_leave_no_process_when_dropped() {
    use pod_runtime::TerminalSize;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let pod = one_sandbox("uid-session", "sessions").await;
    let OneSandbox {
        runtime, sandbox, ..
    } = &pod;
    let app = sandbox.run_container(sleeper("app")).await.unwrap();

    let mut piped = app
        .exec_session(&argv(&["tr", "a-z", "A-Z"]), None)
        .await
        .unwrap();
    let mut stdin = piped.take_stdin().unwrap();
    let mut stdout = piped.take_stdout().unwrap();
    stdin.write_all(b"shout\n").await.unwrap();
    drop(stdin);
    let mut out = String::new();
    stdout.read_to_string(&mut out).await.unwrap();
    assert_eq!(out, "SHOUT\n");
    assert_eq!(piped.wait().await.unwrap(), ExitStatus::Exited(0));

    let size = TerminalSize {
        width: 77,
        height: 21,
    };
    let mut tty = app
        .exec_session(&argv(&["sh", "-c", "tty; stty size"]), Some(size))
        .await
        .unwrap();
    assert!(tty.take_stderr().is_none(), "a terminal has no stderr");
    let mut screen = tty.take_stdout().unwrap();
    let mut out = Vec::new();
    screen.read_to_end(&mut out).await.unwrap();
    let out = String::from_utf8_lossy(&out);
    assert!(
        out.contains("/dev/pts/") && out.contains("21 77"),
        "{out:?}"
    );
    assert_eq!(tty.wait().await.unwrap(), ExitStatus::Exited(0));

    // A command with a child of its own, dropped while both run.
    let marker = format!("sleep 7{}", std::process::id() % 10_000);
    let dropped = app
        .exec_session(&argv(&["sh", "-c", &format!("{marker} & wait")]), None)
        .await
        .unwrap();
    let running = |want: bool| {
        let marker = marker.clone();
        async move {
            let found = std::process::Command::new("pgrep")
                .args(["-f", &format!("^{marker}$")])
                .output()
                .unwrap();
            if found.stdout.is_empty() != want {
                Ok(Some(()))
            } else {
                Err(format!("running: {}", !found.stdout.is_empty()))
            }
        }
    };
    testkit::wait_for("the session's command running", WAIT, || running(true)).await;
    drop(dropped);
    testkit::wait_for("the session's command gone", WAIT, || running(false)).await;
    runtime.teardown().await.unwrap();
}

/// A container with `stdin`: what attached clients write reaches it, one client after the
/// other; with `stdin_once`, the end of the first client's input is the container's end of
/// file, and there is nothing to attach to afterwards. A container without `stdin` has no
/// input to attach to.
#[tokio::test]
async fn attached_input_reaches_the_container_and_stdin_once_closes_it() {
    use tokio::io::AsyncWriteExt;
    let pod = one_sandbox("uid-input", "input").await;
    let OneSandbox {
        runtime, sandbox, ..
    } = &pod;
    let script = "while read line; do echo got-$line; done; echo input-closed";
    let mut kept = ContainerSpec::new("kept", ["sh", "-c", script]);
    kept.stdin = true;
    let kept = sandbox.run_container(kept).await.unwrap();
    for word in ["one", "two"] {
        let mut input = kept.attach_input().await.unwrap().unwrap_or_else(|| {
            panic!(
                "no input; monitor: {:?}; dir: {:?}",
                std::fs::read_to_string(kept.dir().join("monitor.log")),
                std::fs::read_dir(kept.dir()).unwrap().collect::<Vec<_>>()
            )
        });
        input
            .write_all(format!("{word}\n").as_bytes())
            .await
            .unwrap();
        input.shutdown().await.unwrap();
        drop(input);
        wait_logged(&kept, &format!("got-{word}\n")).await;
    }
    assert!(kept.is_running(), "the input stays open without stdin_once");

    let mut once = ContainerSpec::new("once", ["sh", "-c", script]);
    once.stdin = true;
    once.stdin_once = true;
    let once = sandbox.run_container(once).await.unwrap();
    let mut input = once.attach_input().await.unwrap().expect("an input");
    input.write_all(b"only\n").await.unwrap();
    input.shutdown().await.unwrap();
    let status = tokio::time::timeout(WAIT, once.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, ExitStatus::Exited(0));
    assert_eq!(once.logs().unwrap(), "got-only\ninput-closed\n");
    assert!(
        once.attach_input().await.unwrap().is_none(),
        "closed for good"
    );

    let without = sandbox.run_container(sleeper("without")).await.unwrap();
    assert!(without.attach_input().await.unwrap().is_none());
    runtime.teardown().await.unwrap();
}

/// A container with `tty`: its streams are a terminal, whose size follows resizes; its
/// input is the terminal's (echoed, as a terminal does); closing a `stdin_once` input sends
/// the end-of-file character, which ends a shell.
#[tokio::test]
async fn a_container_with_a_tty_reads_its_terminal_and_follows_resizes() {
    use pod_runtime::TerminalSize;
    use tokio::io::AsyncWriteExt;
    let pod = one_sandbox("uid-tty", "tty").await;
    let OneSandbox {
        runtime, sandbox, ..
    } = &pod;
    let mut spec = ContainerSpec::new("shell", ["sh"]);
    spec.stdin = true;
    spec.stdin_once = true;
    spec.tty = true;
    let shell = sandbox.run_container(spec).await.unwrap();
    shell
        .resize_terminal(TerminalSize {
            width: 91,
            height: 37,
        })
        .unwrap();
    let mut input = shell.attach_input().await.unwrap().expect("an input");
    input.write_all(b"tty; stty size\n").await.unwrap();
    wait_logged(&shell, "37 91").await;
    assert!(
        shell.logs().unwrap().contains("/dev/pts/"),
        "{:?}",
        shell.logs()
    );
    input.shutdown().await.unwrap();
    let status = tokio::time::timeout(WAIT, shell.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, ExitStatus::Exited(0), "{:?}", shell.logs());
    runtime.teardown().await.unwrap();
}
