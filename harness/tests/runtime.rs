//! The pod runtime with real processes, namespaces and mounts (needs root, as CI runs).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use harness::runtime::host_mounts::{is_mount_point, make_shared, unmount_all_under};
use harness::runtime::{
    ContainerSpec, Error, ExitStatus, ImageMap, Lifeline, Mount, Propagation, Runtime,
    RuntimeConfig, Sandbox, SandboxSpec, User,
};
use nix::mount::MsFlags;

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

/// Polls `condition` until it holds; panics with the last seen value after [`WAIT`].
async fn wait_for<T: std::fmt::Debug>(what: &str, mut probe: impl FnMut() -> (bool, T)) {
    let deadline = Instant::now() + WAIT;
    loop {
        let (done, seen) = probe();
        if done {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; last seen: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn mountinfo() -> String {
    std::fs::read_to_string("/proc/self/mountinfo").unwrap()
}

#[tokio::test]
async fn two_sandboxes_share_a_host_volume_directory() {
    let run = tempfile::tempdir().unwrap();
    let volume = tempfile::tempdir().unwrap();
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
    let run = tempfile::tempdir().unwrap();
    let runtime = runtime(run.path());
    let sandbox = runtime
        .create_sandbox(SandboxSpec::new("uid-1", "web-0"))
        .await
        .unwrap();
    sandbox.run_container(sleeper("app")).await.unwrap();
    assert_eq!(exec_ok(&sandbox, "app", &["hostname"]).await, "web-0\n");
    assert_eq!(
        exec_ok(&sandbox, "app", &["cat", "/etc/hostname"]).await,
        "web-0\n"
    );
    assert!(
        exec_ok(&sandbox, "app", &["cat", "/etc/hosts"])
            .await
            .contains("web-0")
    );
    assert_eq!(
        exec_ok(&sandbox, "app", &["sh", "-c", "echo $HOSTNAME"]).await,
        "web-0\n"
    );
    let pid1 = exec_ok(&sandbox, "app", &["cat", "/proc/1/cmdline"]).await;
    assert!(pid1.contains("pause"), "PID 1 is {pid1:?}");
    sandbox.remove().await.unwrap();
    assert!(!sandbox.dir().exists());
}

#[tokio::test]
async fn writes_inside_do_not_reach_the_host_and_mounts_leave_no_trace() {
    let before = mountinfo();
    let run = tempfile::tempdir().unwrap();
    let volume = tempfile::tempdir().unwrap();
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
    let run = tempfile::tempdir().unwrap();
    let runtime = runtime(run.path());
    let sandbox = runtime
        .create_sandbox(SandboxSpec::new("uid-3", "job"))
        .await
        .unwrap();
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
    let run = tempfile::tempdir().unwrap();
    let runtime = runtime(run.path());
    let sandbox = runtime
        .create_sandbox(SandboxSpec::new("uid-4", "term"))
        .await
        .unwrap();
    let app = sandbox
        .run_container(ContainerSpec::new(
            "app",
            [
                "sh",
                "-c",
                "trap 'echo bye; exit 3' TERM; echo ready; sleep 1000 & wait",
            ],
        ))
        .await
        .unwrap();
    wait_for("the TERM trap", || {
        let logs = app.logs().unwrap();
        (logs.contains("ready"), logs)
    })
    .await;
    let grace = Duration::from_secs(15);
    let started = Instant::now();
    assert_eq!(app.stop(grace).await.unwrap(), ExitStatus::Exited(3));
    assert!(started.elapsed() < grace);
    assert!(app.logs().unwrap().contains("bye"));
    runtime.teardown().await.unwrap();
}

#[tokio::test]
async fn sigkill_follows_the_grace_period_when_term_is_ignored() {
    let run = tempfile::tempdir().unwrap();
    let runtime = runtime(run.path());
    let sandbox = runtime
        .create_sandbox(SandboxSpec::new("uid-5", "stubborn"))
        .await
        .unwrap();
    let app = sandbox
        .run_container(ContainerSpec::new(
            "app",
            [
                "sh",
                "-c",
                "trap '' TERM; echo ready; while true; do sleep 1; done",
            ],
        ))
        .await
        .unwrap();
    wait_for("the ignored TERM", || {
        let logs = app.logs().unwrap();
        (logs.contains("ready"), logs)
    })
    .await;
    let grace = Duration::from_millis(300);
    let started = Instant::now();
    assert_eq!(app.stop(grace).await.unwrap(), ExitStatus::Signaled(9));
    assert!(started.elapsed() >= grace);
    runtime.teardown().await.unwrap();
}

#[tokio::test]
async fn exec_returns_output_and_exit_code_with_the_container_env_and_workdir() {
    let run = tempfile::tempdir().unwrap();
    let runtime = runtime(run.path());
    let sandbox = runtime
        .create_sandbox(SandboxSpec::new("uid-6", "execd"))
        .await
        .unwrap();
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
    let run = tempfile::tempdir().unwrap();
    let volume = tempfile::tempdir().unwrap();
    std::fs::write(volume.path().join("token"), "secret-ish").unwrap();
    let runtime = runtime(run.path());
    let sandbox = runtime
        .create_sandbox(SandboxSpec::new("uid-7", "users"))
        .await
        .unwrap();
    let mut spec = sleeper("app");
    spec.user = Some(User {
        uid: 65534,
        gid: 65534,
    });
    spec.mounts
        .push(Mount::read_only(volume.path(), "/var/run/secrets/x"));
    sandbox.run_container(spec).await.unwrap();
    sandbox.run_container(sleeper("other")).await.unwrap();
    assert_eq!(exec_ok(&sandbox, "app", &["id", "-u"]).await, "65534\n");
    assert_eq!(
        exec_ok(&sandbox, "app", &["cat", "/var/run/secrets/x/token"]).await,
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
    let run = tempfile::tempdir().unwrap();
    let runtime = runtime(run.path());
    let sandbox = runtime
        .create_sandbox(SandboxSpec::new("uid-8", "logger"))
        .await
        .unwrap();
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
    let run = tempfile::tempdir().unwrap();
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
    let run = tempfile::tempdir().unwrap();
    let runtime = runtime(run.path());
    let sandbox = runtime
        .create_sandbox(SandboxSpec::new("uid-10", "bad"))
        .await
        .unwrap();
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
    let run = tempfile::tempdir().unwrap();
    let runtime = runtime(run.path());
    let sandbox = runtime
        .create_sandbox(SandboxSpec::new("uid-11", "doomed"))
        .await
        .unwrap();
    let app = sandbox.run_container(sleeper("app")).await.unwrap();
    sandbox.stop().await.unwrap();
    assert_eq!(app.wait().await.unwrap(), ExitStatus::Signaled(9));
    assert!(!sandbox.is_running());
    let err = sandbox.run_container(sleeper("late")).await.unwrap_err();
    assert!(matches!(err, Error::NotRunning { .. }), "{err:?}");
}

#[tokio::test]
async fn a_broken_lifeline_ends_the_sandbox() {
    let run = tempfile::tempdir().unwrap();
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
    let run = tempfile::tempdir().unwrap();
    let runtime = runtime(run.path());
    runtime
        .create_sandbox(SandboxSpec::new("uid-13", "one"))
        .await
        .unwrap();
    let err = runtime
        .create_sandbox(SandboxSpec::new("uid-13", "two"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("uid-13"), "{err}");
    runtime.teardown().await.unwrap();
}

// Mount propagation. These tests mount on the "host", so each first moves its thread (and so
// the sandboxes it creates) into a mount namespace of its own: the real host's mount table
// never changes, whatever runs in parallel. Inside, a scratch directory is a private mount
// point, so the outcome does not depend on the host's propagation either.

/// A private mount point in a mount namespace of the test thread's own; unmounts everything
/// below it when dropped (before the directory is removed).
struct Scratch(tempfile::TempDir);

impl Scratch {
    fn new() -> Self {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).unwrap();
        mount_flags("/", MsFlags::MS_REC | MsFlags::MS_PRIVATE);
        let dir = tempfile::tempdir().unwrap();
        bind(dir.path(), dir.path());
        mount_flags(dir.path(), MsFlags::MS_PRIVATE);
        Scratch(dir)
    }

    /// A new directory `name` in the scratch directory.
    fn dir(&self, name: &str) -> PathBuf {
        let path = self.0.path().join(name);
        std::fs::create_dir_all(&path).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = unmount_all_under(self.0.path());
    }
}

fn mount_flags(target: impl AsRef<Path>, flags: MsFlags) {
    nix::mount::mount(
        None::<&str>,
        target.as_ref(),
        None::<&str>,
        flags,
        None::<&str>,
    )
    .unwrap();
}

fn bind(source: &Path, target: &Path) {
    nix::mount::mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .unwrap();
}

/// A directory holding one file, `hello`.
fn disk(scratch: &Scratch, name: &str) -> PathBuf {
    let dir = scratch.dir(name);
    std::fs::write(dir.join("hello"), format!("from {name}")).unwrap();
    dir
}

#[tokio::test]
async fn bidirectional_mounts_made_in_a_container_reach_the_host_and_later_pods() {
    let scratch = Scratch::new();
    let kubelet = scratch.dir("kubelet");
    make_shared(&kubelet).unwrap();
    let share = disk(&scratch, "share");
    let run = scratch.dir("run");
    let runtime = runtime(&run);
    let plugin = runtime
        .create_sandbox(SandboxSpec::new("csi-node", "csi-node"))
        .await
        .unwrap();
    let mut spec = sleeper("plugin");
    spec.mounts.push(
        Mount::bind(&kubelet, "/var/lib/kubelet").with_propagation(Propagation::Bidirectional),
    );
    spec.mounts.push(Mount::bind(&share, "/export"));
    plugin.run_container(spec).await.unwrap();

    exec_ok(
        &plugin,
        "plugin",
        &[
            "sh",
            "-c",
            "mkdir -p /var/lib/kubelet/pods/vol && mount --bind /export /var/lib/kubelet/pods/vol",
        ],
    )
    .await;
    let published = kubelet.join("pods/vol");
    assert!(
        is_mount_point(&published).unwrap(),
        "{}",
        mountinfo_of_thread()
    );
    assert_eq!(
        std::fs::read_to_string(published.join("hello")).unwrap(),
        "from share"
    );

    // A pod created afterwards with a plain (private) mount of the published path sees it.
    let mut consumer_spec = SandboxSpec::new("consumer", "consumer");
    consumer_spec.mounts.push(Mount::bind(&published, "/data"));
    let consumer = runtime.create_sandbox(consumer_spec).await.unwrap();
    consumer.run_container(sleeper("app")).await.unwrap();
    assert_eq!(
        exec_ok(&consumer, "app", &["cat", "/data/hello"]).await,
        "from share"
    );

    exec_ok(&plugin, "plugin", &["umount", "/var/lib/kubelet/pods/vol"]).await;
    assert!(!is_mount_point(&published).unwrap());
    assert!(!published.join("hello").exists());
    runtime.teardown().await.unwrap();
}

#[tokio::test]
async fn host_to_container_mounts_receive_later_host_mounts_but_never_send() {
    let scratch = Scratch::new();
    let kubelet = scratch.dir("kubelet");
    make_shared(&kubelet).unwrap();
    let share = disk(&scratch, "share");
    let run = scratch.dir("run");
    let runtime = runtime(&run);
    let sandbox = runtime
        .create_sandbox(SandboxSpec::new("uid-h2c", "watcher"))
        .await
        .unwrap();
    let mut spec = sleeper("app");
    spec.mounts
        .push(Mount::bind(&kubelet, "/host").with_propagation(Propagation::HostToContainer));
    spec.mounts.push(Mount::bind(&share, "/export"));
    sandbox.run_container(spec).await.unwrap();

    let late = scratch.dir("kubelet/late");
    bind(&share, &late);
    assert_eq!(
        exec_ok(&sandbox, "app", &["cat", "/host/late/hello"]).await,
        "from share"
    );

    let own = scratch.dir("kubelet/own");
    exec_ok(
        &sandbox,
        "app",
        &["mount", "--bind", "/export", "/host/own"],
    )
    .await;
    assert_eq!(
        exec_ok(&sandbox, "app", &["cat", "/host/own/hello"]).await,
        "from share"
    );
    assert!(
        !is_mount_point(&own).unwrap(),
        "the container's mount reached the host"
    );
    runtime.teardown().await.unwrap();
}

#[tokio::test]
async fn private_container_mounts_of_a_shared_source_stay_private_both_ways() {
    let scratch = Scratch::new();
    let kubelet = scratch.dir("kubelet");
    make_shared(&kubelet).unwrap();
    let share = disk(&scratch, "share");
    let run = scratch.dir("run");
    let runtime = runtime(&run);
    let sandbox = runtime
        .create_sandbox(SandboxSpec::new("uid-private", "private"))
        .await
        .unwrap();
    let mut spec = sleeper("app");
    spec.mounts.push(Mount::bind(&kubelet, "/host"));
    spec.mounts.push(Mount::bind(&share, "/export"));
    sandbox.run_container(spec).await.unwrap();

    let own = scratch.dir("kubelet/own");
    exec_ok(
        &sandbox,
        "app",
        &["mount", "--bind", "/export", "/host/own"],
    )
    .await;
    assert!(
        !is_mount_point(&own).unwrap(),
        "the container's mount reached the host"
    );
    assert!(!own.join("hello").exists());

    let late = scratch.dir("kubelet/late");
    bind(&share, &late);
    assert_eq!(
        exec_ok(&sandbox, "app", &["sh", "-c", "ls -A /host/late | wc -l"]).await,
        "0\n",
        "a later host mount reached the container"
    );
    runtime.teardown().await.unwrap();
}

#[tokio::test]
async fn bidirectional_mount_of_a_non_shared_source_fails_naming_it() {
    let scratch = Scratch::new();
    let private = scratch.dir("private");
    let run = scratch.dir("run");
    let runtime = runtime(&run);
    let sandbox = runtime
        .create_sandbox(SandboxSpec::new("uid-noshare", "noshare"))
        .await
        .unwrap();
    let mut spec = sleeper("plugin");
    spec.mounts.push(
        Mount::bind(&private, "/var/lib/kubelet").with_propagation(Propagation::Bidirectional),
    );
    let err = sandbox.run_container(spec).await.unwrap_err().to_string();
    assert!(
        err.contains(&private.display().to_string()) && err.contains("must be a shared mount"),
        "{err}"
    );
    assert!(sandbox.run_container(sleeper("other")).await.is_ok());
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
    let run = tempfile::tempdir().unwrap();
    let runtime = runtime(run.path());
    let sandbox = runtime
        .create_sandbox(SandboxSpec::new("uid-image", "image"))
        .await
        .unwrap();

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

fn mountinfo_of_thread() -> String {
    std::fs::read_to_string("/proc/thread-self/mountinfo").unwrap()
}
