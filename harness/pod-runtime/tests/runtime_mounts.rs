//! What a container's mount namespace holds: mount propagation (Kubernetes'
//! `mountPropagation`) and, as with runc, none of the host's mounts (the runtime pivots into the
//! sandbox's root and detaches the host's). Real processes, namespaces and mounts (needs root,
//! as CI runs).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::fs::File;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::mount::{MntFlags, MsFlags};
use nix::sched::CloneFlags;
use nix::sys::stat::Mode;
use pod_runtime::host_mounts::{ScratchDir, is_mount_point, make_shared};
use pod_runtime::{
    Container, ContainerSpec, ExitStatus, Lifeline, Mount, Propagation, Runtime, RuntimeConfig,
    Sandbox, SandboxSpec,
};

fn runtime(run_dir: &Path) -> Runtime {
    let mut config = RuntimeConfig::new(run_dir);
    config.helper = PathBuf::from(env!("CARGO_BIN_EXE_pod-sandbox"));
    config.lifeline = Some(Lifeline::this_process().unwrap());
    Runtime::new(config).unwrap()
}

fn sleeper(name: &str) -> ContainerSpec {
    ContainerSpec::new(name, ["sleep", "1000"])
}

/// Runs `command` in the latest attempt of `container` of `sandbox`; it must succeed.
async fn exec_ok(sandbox: &Sandbox, container: &str, command: &[&str]) -> String {
    let container = latest(sandbox, container);
    let argv: Vec<String> = command.iter().map(|s| s.to_string()).collect();
    let out = container.exec(&argv).await.unwrap();
    assert_eq!(
        out.status,
        ExitStatus::Exited(0),
        "{command:?}: stderr {:?}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The latest attempt of the container `name` of `sandbox`.
fn latest(sandbox: &Sandbox, name: &str) -> Container {
    sandbox
        .containers()
        .unwrap()
        .into_iter()
        .rfind(|c| c.name() == name)
        .unwrap()
}

// Mount propagation. These tests mount on the "host", so each first moves its thread (and so
// the sandboxes it creates) into a mount namespace of its own: the real host's mount table
// never changes, whatever runs in parallel. Inside, a scratch directory is a private mount
// point, so the outcome does not depend on the host's propagation either.

/// A private mount point in a mount namespace of the test thread's own; unmounts everything
/// below it when dropped, then removes it ([`ScratchDir`]).
struct Scratch(ScratchDir);

impl Scratch {
    fn new() -> Self {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNS).unwrap();
        mount(None, Path::new("/"), MsFlags::MS_REC | MsFlags::MS_PRIVATE);
        let dir = ScratchDir::new().unwrap();
        bind(dir.path(), dir.path());
        mount(None, dir.path(), MsFlags::MS_PRIVATE);
        Scratch(dir)
    }

    /// A new directory `name` in the scratch directory.
    fn dir(&self, name: &str) -> PathBuf {
        let path = self.0.path().join(name);
        std::fs::create_dir_all(&path).unwrap();
        path
    }
}

/// mount(2) of `source` (none: a change of `target`'s flags) at `target` with `flags`.
fn mount(source: Option<&Path>, target: &Path, flags: MsFlags) {
    nix::mount::mount(source, target, None::<&str>, flags, None::<&str>).unwrap();
}

fn bind(source: &Path, target: &Path) {
    mount(Some(source), target, MsFlags::MS_BIND);
}

/// A directory holding one file, `hello`.
fn disk(scratch: &Scratch, name: &str) -> PathBuf {
    let dir = scratch.dir(name);
    std::fs::write(dir.join("hello"), format!("from {name}")).unwrap();
    dir
}

/// A scratch directory holding `kubelet` (a shared mount point, as the node agent makes its
/// `pods` and `plugins`), `share` (a disk) and a runtime's run directory. Fields drop in
/// this order: the runtime before the scratch directory is unmounted.
struct SharedKubelet {
    runtime: Runtime,
    kubelet: PathBuf,
    share: PathBuf,
    scratch: Scratch,
}

impl SharedKubelet {
    fn new() -> Self {
        let scratch = Scratch::new();
        let kubelet = scratch.dir("kubelet");
        make_shared(&kubelet).unwrap();
        let share = disk(&scratch, "share");
        let runtime = runtime(&scratch.dir("run"));
        SharedKubelet {
            runtime,
            kubelet,
            share,
            scratch,
        }
    }

    /// A sandbox `id` (`hostname`) running the sleeping container `container`, which mounts
    /// the kubelet directory at `target` with `propagation` and the share at `/export`.
    async fn sandbox(
        &self,
        (id, hostname): (&str, &str),
        container: &str,
        target: &str,
        propagation: Propagation,
    ) -> Sandbox {
        let sandbox = self
            .runtime
            .create_sandbox(SandboxSpec::new(id, hostname))
            .await
            .unwrap();
        let mut spec = sleeper(container);
        spec.mounts
            .push(Mount::bind(&self.kubelet, target).with_propagation(propagation));
        spec.mounts.push(Mount::bind(&self.share, "/export"));
        sandbox.run_container(spec).await.unwrap();
        sandbox
    }

    /// Bind-mounts the share on the host at `kubelet/late`, after the containers started.
    fn mount_late_on_host(&self) {
        bind(&self.share, &self.scratch.dir("kubelet/late"));
    }

    /// Has the container `app` of `sandbox` (the kubelet directory at `/host`) bind-mount
    /// the share at `/host/own`; returns that directory's path on the host.
    async fn mount_own_in_container(&self, sandbox: &Sandbox) -> PathBuf {
        let own = self.scratch.dir("kubelet/own");
        let argv = ["mount", "--bind", "/export", "/host/own"];
        exec_ok(sandbox, "app", &argv).await;
        own
    }
}

#[tokio::test]
async fn bidirectional_mounts_made_in_a_container_reach_the_host_and_later_pods() {
    let node = SharedKubelet::new();
    let SharedKubelet {
        runtime, kubelet, ..
    } = &node;
    let plugin = node
        .sandbox(
            ("csi-node", "csi-node"),
            "plugin",
            "/var/lib/kubelet",
            Propagation::Bidirectional,
        )
        .await;

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
    let node = SharedKubelet::new();
    let sandbox = node
        .sandbox(
            ("uid-h2c", "watcher"),
            "app",
            "/host",
            Propagation::HostToContainer,
        )
        .await;

    node.mount_late_on_host();
    assert_eq!(
        exec_ok(&sandbox, "app", &["cat", "/host/late/hello"]).await,
        "from share"
    );

    let own = node.mount_own_in_container(&sandbox).await;
    assert_eq!(
        exec_ok(&sandbox, "app", &["cat", "/host/own/hello"]).await,
        "from share"
    );
    assert!(
        !is_mount_point(&own).unwrap(),
        "the container's mount reached the host"
    );
    node.runtime.teardown().await.unwrap();
}

#[tokio::test]
async fn private_container_mounts_of_a_shared_source_stay_private_both_ways() {
    let node = SharedKubelet::new();
    let sandbox = node
        .sandbox(
            ("uid-private", "private"),
            "app",
            "/host",
            Propagation::Private,
        )
        .await;

    let own = node.mount_own_in_container(&sandbox).await;
    assert!(
        !is_mount_point(&own).unwrap(),
        "the container's mount reached the host"
    );
    assert!(!own.join("hello").exists());

    node.mount_late_on_host();
    assert_eq!(
        exec_ok(&sandbox, "app", &["sh", "-c", "ls -A /host/late | wc -l"]).await,
        "0\n",
        "a later host mount reached the container"
    );
    node.runtime.teardown().await.unwrap();
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

fn mountinfo_of_thread() -> String {
    std::fs::read_to_string("/proc/thread-self/mountinfo").unwrap()
}

// What a container's mount namespace holds. A container must not keep a copy of a mount the
// host had when it started: the host could still unmount it, but its mount point could not be
// removed from any namespace holding the copy ("Device or resource busy"), e.g. by a CSI node
// plugin restarted while a volume was published, when it unpublishes that volume.

/// The mount points of process `pid`'s mount namespace as a process that enters it (setns)
/// sees them: relative to the namespace's root, so every mount of the namespace reachable
/// from there, not only those below the process's own root.
fn mount_points_of_namespace(pid: i32) -> Vec<PathBuf> {
    std::thread::spawn(move || {
        // setns into a mount namespace needs a file-system context of this thread's own.
        nix::sched::unshare(CloneFlags::CLONE_FS).unwrap();
        let namespace = File::open(format!("/proc/{pid}/ns/mnt")).unwrap();
        // Opened first: once inside, /proc is the sandbox's (another PID namespace).
        let thread = File::open("/proc/thread-self").unwrap();
        nix::sched::setns(namespace, CloneFlags::CLONE_NEWNS).unwrap();
        let mountinfo =
            nix::fcntl::openat(&thread, "mountinfo", OFlag::O_RDONLY, Mode::empty()).unwrap();
        std::io::read_to_string(File::from(mountinfo))
            .unwrap()
            .lines()
            .filter_map(|line| line.split(' ').nth(4))
            .map(PathBuf::from)
            .collect()
    })
    .join()
    .unwrap()
}

/// Asserts that the mount namespace of `container` holds no mount at a host path below
/// `host_dir` and holds each of `expected` (paths inside the container).
fn assert_only_its_own_mounts(container: &Container, host_dir: &Path, expected: &[&str]) {
    let mounts = mount_points_of_namespace(container.process().pid);
    let leaked: Vec<_> = mounts.iter().filter(|m| m.starts_with(host_dir)).collect();
    assert!(
        leaked.is_empty(),
        "container {:?} holds host mounts {leaked:?}; its namespace: {mounts:#?}",
        container.name()
    );
    for path in expected {
        assert!(
            mounts.iter().any(|m| m == Path::new(path)),
            "container {:?} lacks the mount {path}; its namespace: {mounts:#?}",
            container.name()
        );
    }
}

#[tokio::test]
async fn the_host_s_mounts_stay_out_of_containers_and_can_be_removed_while_they_run() {
    let scratch = Scratch::new();
    let disk = disk(&scratch, "disk");
    let host_only = scratch.dir("host/vol");
    bind(&disk, &host_only);
    let runtime = runtime(&scratch.dir("run"));
    let mut pod = SandboxSpec::new("uid-isolated", "isolated");
    pod.mounts.push(Mount::bind(&disk, "/data"));
    let sandbox = runtime.create_sandbox(pod).await.unwrap();
    // One in the sandbox's mount namespace, one with a namespace (and a mount) of its own.
    let shared = sandbox.run_container(sleeper("app")).await.unwrap();
    let mut spec = sleeper("own");
    spec.mounts.push(Mount::read_only(&disk, "/own"));
    let own = sandbox.run_container(spec).await.unwrap();

    let common = [
        "/", "/proc", "/dev", "/sys", "/tmp", "/run", "/usr", "/data",
    ];
    assert_only_its_own_mounts(&shared, scratch.0.path(), &common);
    assert_only_its_own_mounts(&own, scratch.0.path(), &[&common[..], &["/own"]].concat());
    assert_eq!(
        exec_ok(&sandbox, "own", &["cat", "/data/hello", "/own/hello"]).await,
        "from diskfrom disk"
    );

    nix::mount::umount2(&host_only, MntFlags::empty()).unwrap();
    std::fs::remove_dir(&host_only).unwrap();
    assert!(shared.is_running() && own.is_running());
    runtime.teardown().await.unwrap();
}

/// A volume published on the node (as by an earlier instance of a CSI node plugin) before a
/// container mounting the kubelet directory at `/var/lib/kubelet` with `propagation` started
/// (the plugin restarted); then it is unmounted (Bidirectional: by the container, as
/// NodeUnpublishVolume does; HostToContainer: by the host) and the container removes its
/// mount point. That must work, and the host must be left with neither mount nor directory.
async fn unpublish_from_a_container_started_while_published(propagation: Propagation) {
    let node = SharedKubelet::new();
    let published = node.scratch.dir("kubelet/pods/vol");
    bind(&node.share, &published);
    let sandbox = node
        .sandbox(
            ("uid-restarted", "restarted"),
            "plugin",
            "/var/lib/kubelet",
            propagation,
        )
        .await;
    let plugin = latest(&sandbox, "plugin");
    assert_eq!(
        exec_ok(
            &sandbox,
            "plugin",
            &["cat", "/var/lib/kubelet/pods/vol/hello"]
        )
        .await,
        "from share"
    );

    let target = "/var/lib/kubelet/pods/vol";
    if propagation == Propagation::Bidirectional {
        exec_ok(&sandbox, "plugin", &["umount", target]).await;
    } else {
        nix::mount::umount2(&published, MntFlags::empty()).unwrap();
    }
    assert!(
        !is_mount_point(&published).unwrap(),
        "{}",
        mountinfo_of_thread()
    );
    exec_ok(&sandbox, "plugin", &["rmdir", target]).await;
    assert!(!published.exists());
    assert_only_its_own_mounts(&plugin, node.scratch.0.path(), &["/var/lib/kubelet"]);
    node.runtime.teardown().await.unwrap();
}

#[tokio::test]
async fn a_bidirectional_container_started_while_a_volume_is_published_can_unpublish_it() {
    unpublish_from_a_container_started_while_published(Propagation::Bidirectional).await;
}

#[tokio::test]
async fn a_host_to_container_container_started_while_a_volume_is_published_can_remove_it() {
    unpublish_from_a_container_started_while_published(Propagation::HostToContainer).await;
}
