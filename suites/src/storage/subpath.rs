//! `subPath` (upstream `subpath.go`, its non-disruptive cases on a filesystem volume):
//! directories and files of a volume mounted with `subPath` — existing or created for the
//! pod, several of one volume, read-only by the mount or by the volume — seen at the volume's
//! root; a subPath directory deleted under a running pod; subPaths leading out of the volume
//! refused (by the API for `..` and absolute paths, by the node for symbolic links).
//!
//! Upstream's init containers prepare the volume as here; its checks in separate containers
//! are `exec`s into the pod's one container, which mounts the volume's root beside the
//! subPath. Not ported: restarting a container whose liveness probe fails (`[Slow]`, a minute of
//! waiting for restarts to settle), the `[Disruptive]` ones (the node's kubelet stopped), and
//! symbolic links to the node's `/bin` and `/bin/sh` (the backstepping link and the link to a
//! missing path out of the volume are the ones run).

use k8s_openapi::api::core::v1::{Container, Pod, VolumeMount};
use kube::api::PostParams;
use kube_support::wait;

use super::bind_claim;
use super::data::{SEEDED_LEN, check_seeded, seeded_content, write_seeded};
use super::node_of;
use super::provisioning::access_mode;
use super::volumes::test_seed;
use crate::e2e::workload::{PodBuilder, TEST_IMAGE, Workload, claim, describe_pod};
use crate::registry::{Needs, TestCase, TestContext, TestError, TestResult};
use crate::{ensure, test_case};
use driver_spec::Capability;

const SUITE: &str = "subPath";

/// Where pods mount the volume's root.
const VOLUME_PATH: &str = "/test-volume";
/// Where pods mount a subPath directory.
const SUBPATH_PATH: &str = "/test-subpath";
/// Where pods mount a subPath file.
const FILE_PATH: &str = "/test-file";
/// The file the tests write.
const FILE: &str = "test-file";
/// The claim of every test.
const CLAIM: &str = "vol";

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            SUITE,
            "should support non-existent path",
            Needs::NONE,
            non_existent_path
        ),
        test_case!(
            SUITE,
            "should support existing directory",
            Needs::NONE,
            existing_directory
        ),
        test_case!(
            SUITE,
            "should support file as subpath",
            Needs::NONE,
            file_as_subpath
        ),
        test_case!(
            SUITE,
            "should support creating multiple subpath from same volumes",
            Needs::NONE,
            multiple_subpaths
        ),
        test_case!(
            SUITE,
            "should support readOnly directory specified in the volumeMount",
            Needs::NONE,
            read_only_directory_mount
        ),
        test_case!(
            SUITE,
            "should support readOnly file specified in the volumeMount",
            Needs::NONE,
            read_only_file_mount
        ),
        test_case!(
            SUITE,
            "should support existing directories when readOnly specified in the volumeSource, and refuse writes through them",
            Needs::NONE,
            read_only_volume_source
        ),
        test_case!(
            SUITE,
            "should be able to unmount after the subpath directory is deleted",
            Needs::NONE,
            unmount_after_deletion
        ),
        test_case!(
            SUITE,
            "should refuse a subPath that is absolute or steps out of the volume with ..",
            Needs::NONE,
            absolute_or_backstepping_refused
        ),
        test_case!(
            SUITE,
            "should fail if subpath with backstepping is outside the volume",
            Needs::NONE,
            escape_by_backstepping
        ),
        test_case!(
            SUITE,
            "should fail if non-existent subpath is outside the volume",
            Needs::NONE,
            escape_to_non_existent_path
        ),
    ]
}

/// The claim `vol` of the driver's class, Bound.
async fn bound_volume(ctx: &TestContext<'_>) -> TestResult {
    let class = ctx.storage_class().await?;
    bind_claim(
        ctx,
        &claim(CLAIM, Some(&class), &ctx.claim_size(), access_mode(ctx)),
        None,
    )
    .await?;
    Ok(())
}

/// The name of the pod volume of the claim `vol`.
fn volume_of(pod: &Pod) -> TestResult<String> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .find(|v| {
            v.persistent_volume_claim
                .as_ref()
                .is_some_and(|c| c.claim_name == CLAIM)
        })
        .map(|v| v.name.clone())
        .ok_or_else(|| TestError::failed("the test pod has no volume of the claim"))
}

/// `builder`'s pod with an init container `init` running `script` (`set -e`) with the volume's
/// root at [`VOLUME_PATH`], as upstream prepares the volume before the subPath container starts.
fn with_init(builder: PodBuilder, script: &str) -> TestResult<Pod> {
    let mut pod = builder.build();
    let volume = volume_of(&pod)?;
    if let Some(spec) = pod.spec.as_mut() {
        spec.init_containers = Some(vec![Container {
            name: "init".into(),
            image: Some(TEST_IMAGE.into()),
            command: Some(vec!["sh".into(), "-c".into(), format!("set -e\n{script}")]),
            volume_mounts: Some(vec![VolumeMount {
                name: volume,
                mount_path: VOLUME_PATH.into(),
                ..Default::default()
            }]),
            ..Default::default()
        }]);
    }
    Ok(pod)
}

/// `pod` with its mount at `path` read-only.
fn read_only_mount(mut pod: Pod, path: &str) -> Pod {
    for container in pod.spec.iter_mut().flat_map(|s| s.containers.iter_mut()) {
        for mount in container.volume_mounts.iter_mut().flatten() {
            if mount.mount_path == path {
                mount.read_only = Some(true);
            }
        }
    }
    pod
}

/// `pod` with its claim's volume source read-only (its mounts stay as they are).
fn read_only_source(mut pod: Pod) -> Pod {
    for volume in pod
        .spec
        .iter_mut()
        .flat_map(|s| s.volumes.iter_mut().flatten())
    {
        if let Some(source) = volume.persistent_volume_claim.as_mut() {
            source.read_only = Some(true);
        }
    }
    pod
}

/// A shell command writing the data of `seed` (as [`write_seeded`]) to `path`.
fn seeded_write(seed: u64, path: &str) -> String {
    format!(
        "printf '%s' '{}' > '{path}'",
        seeded_content(seed, SEEDED_LEN)
    )
}

/// Fails unless `script` runs in the pod and exits non-zero (a write that must be refused, a
/// file that must not exist), naming `what`.
async fn refused(w: &Workload<'_>, pod: &str, script: &str, what: &str) -> TestResult {
    match w.exec(pod, script).await {
        Ok(_) => Err(TestError::failed(format!(
            "{what} succeeded (`{script}` in {pod})"
        ))),
        // The script ran and failed (`exec` reports its exit code and stderr so).
        Err(crate::e2e::Error::Unexpected(message)) if message.contains(" exited ") => Ok(()),
        Err(e) => Err(TestError::failed(format!(
            "{what}: `{script}` could not be run in {pod}: {e}"
        ))),
    }
}

/// The subPath is the namespace's name (as upstream's), created by the node for the pod;
/// data written through it is at `<volume>/<subPath>/`, in the pod and, where the driver
/// claims persistence, in a later pod mounting only the volume's root.
async fn non_existent_path(ctx: &TestContext<'_>) -> TestResult {
    bound_volume(ctx).await?;
    let w = ctx.workload();
    let sub = ctx.namespace().to_string();
    let seed = test_seed(ctx, 0);
    let pod = PodBuilder::new("subpath", "true")
        .claim_sub_path(CLAIM, &sub, SUBPATH_PATH)
        .claim(CLAIM, VOLUME_PATH)
        .build();
    w.ready_pod(&pod).await?;
    w.exec("subpath", &format!("test -d '{VOLUME_PATH}/{sub}'"))
        .await
        .map_err(|e| {
            TestError::failed(format!(
                "the subPath {sub} is not a directory of the volume once the pod runs: {e}"
            ))
        })?;
    write_seeded(w, "subpath", &format!("{SUBPATH_PATH}/{FILE}"), seed).await?;
    let at_root = format!("{VOLUME_PATH}/{sub}/{FILE}");
    check_seeded(w, "subpath", &at_root, seed).await?;
    w.delete_pods(&["subpath"]).await?;

    if ctx.spec().has(Capability::Persistence) {
        let root_only = PodBuilder::new("root", "true")
            .claim(CLAIM, VOLUME_PATH)
            .build();
        w.ready_pod(&root_only).await?;
        check_seeded(w, "root", &at_root, seed)
            .await
            .map_err(|e| e.context("in a later pod mounting the volume's root"))?;
        w.delete_pods(&["root"]).await?;
    }
    Ok(())
}

/// A directory and a file in it made before the container starts: the file is seen through
/// the subPath, and a file written through the subPath lands in that directory.
async fn existing_directory(ctx: &TestContext<'_>) -> TestResult {
    bound_volume(ctx).await?;
    let w = ctx.workload();
    let sub = ctx.namespace().to_string();
    let (before, after) = (test_seed(ctx, 1), test_seed(ctx, 2));
    let pod = with_init(
        PodBuilder::new("subpath", "true")
            .claim_sub_path(CLAIM, &sub, SUBPATH_PATH)
            .claim(CLAIM, VOLUME_PATH),
        &format!(
            "mkdir -p '{VOLUME_PATH}/{sub}'\n{}",
            seeded_write(before, &format!("{VOLUME_PATH}/{sub}/{FILE}"))
        ),
    )?;
    w.ready_pod(&pod).await?;
    check_seeded(w, "subpath", &format!("{SUBPATH_PATH}/{FILE}"), before).await?;
    write_seeded(w, "subpath", &format!("{SUBPATH_PATH}/other"), after).await?;
    check_seeded(w, "subpath", &format!("{VOLUME_PATH}/{sub}/other"), after).await?;
    w.delete_pods(&["subpath"]).await?;
    Ok(())
}

/// A file of the volume as subPath, mounted as a file: it holds what was written before the
/// container started, and what is written through it is the file at the volume's root.
async fn file_as_subpath(ctx: &TestContext<'_>) -> TestResult {
    bound_volume(ctx).await?;
    let w = ctx.workload();
    let sub = ctx.namespace().to_string();
    let (before, after) = (test_seed(ctx, 1), test_seed(ctx, 2));
    let pod = with_init(
        PodBuilder::new("subpath", "true")
            .claim_sub_path(CLAIM, &sub, FILE_PATH)
            .claim(CLAIM, VOLUME_PATH),
        &seeded_write(before, &format!("{VOLUME_PATH}/{sub}")),
    )?;
    w.ready_pod(&pod).await?;
    w.exec("subpath", &format!("test -f {FILE_PATH}"))
        .await
        .map_err(|e| TestError::failed(format!("{FILE_PATH} is not a file: {e}")))?;
    check_seeded(w, "subpath", FILE_PATH, before).await?;
    write_seeded(w, "subpath", FILE_PATH, after).await?;
    check_seeded(w, "subpath", &format!("{VOLUME_PATH}/{sub}"), after).await?;
    w.delete_pods(&["subpath"]).await?;
    Ok(())
}

/// Two subPaths of one volume in one container: each write lands in its own directory.
async fn multiple_subpaths(ctx: &TestContext<'_>) -> TestResult {
    bound_volume(ctx).await?;
    let w = ctx.workload();
    let pod = with_init(
        PodBuilder::new("subpaths", "true")
            .claim_sub_path(CLAIM, "subpath1", "/test-subpath1")
            .claim_sub_path(CLAIM, "subpath2", "/test-subpath2")
            .claim(CLAIM, VOLUME_PATH),
        &format!("mkdir -p {VOLUME_PATH}/subpath1 {VOLUME_PATH}/subpath2"),
    )?;
    w.ready_pod(&pod).await?;
    let seeds = [test_seed(ctx, 1), test_seed(ctx, 2)];
    for (index, seed) in seeds.iter().enumerate() {
        let path = format!("/test-subpath{}/{FILE}", index + 1);
        write_seeded(w, "subpaths", &path, *seed).await?;
    }
    for (index, seed) in seeds.iter().enumerate() {
        let at_root = format!("{VOLUME_PATH}/subpath{}/{FILE}", index + 1);
        check_seeded(w, "subpaths", &at_root, *seed).await?;
    }
    w.delete_pods(&["subpaths"]).await?;
    Ok(())
}

/// An existing directory mounted read-only by its volumeMount: its file reads, a file written
/// at the volume's root appears in it, and writing through it fails.
async fn read_only_directory_mount(ctx: &TestContext<'_>) -> TestResult {
    bound_volume(ctx).await?;
    let w = ctx.workload();
    let sub = ctx.namespace().to_string();
    let (before, after) = (test_seed(ctx, 1), test_seed(ctx, 2));
    let pod = with_init(
        PodBuilder::new("subpath", "true")
            .claim_sub_path(CLAIM, &sub, SUBPATH_PATH)
            .claim(CLAIM, VOLUME_PATH),
        &format!(
            "mkdir -p '{VOLUME_PATH}/{sub}'\n{}",
            seeded_write(before, &format!("{VOLUME_PATH}/{sub}/{FILE}"))
        ),
    )?;
    w.ready_pod(&read_only_mount(pod, SUBPATH_PATH)).await?;
    check_seeded(w, "subpath", &format!("{SUBPATH_PATH}/{FILE}"), before).await?;
    write_seeded(w, "subpath", &format!("{VOLUME_PATH}/{sub}/other"), after).await?;
    check_seeded(w, "subpath", &format!("{SUBPATH_PATH}/other"), after).await?;
    refused(
        w,
        "subpath",
        &format!("touch {SUBPATH_PATH}/new"),
        "creating a file through the read-only subPath mount",
    )
    .await?;
    refused(
        w,
        "subpath",
        &format!("test -e '{VOLUME_PATH}/{sub}/new'"),
        "finding the refused file in the volume",
    )
    .await?;
    w.delete_pods(&["subpath"]).await?;
    Ok(())
}

/// An existing file mounted read-only by its volumeMount: it reads, and writing it fails and
/// leaves it as it was.
async fn read_only_file_mount(ctx: &TestContext<'_>) -> TestResult {
    bound_volume(ctx).await?;
    let w = ctx.workload();
    let sub = ctx.namespace().to_string();
    let seed = test_seed(ctx, 1);
    let pod = with_init(
        PodBuilder::new("subpath", "true").claim_sub_path(CLAIM, &sub, FILE_PATH),
        &seeded_write(seed, &format!("{VOLUME_PATH}/{sub}")),
    )?;
    w.ready_pod(&read_only_mount(pod, FILE_PATH)).await?;
    check_seeded(w, "subpath", FILE_PATH, seed).await?;
    refused(
        w,
        "subpath",
        &format!("echo overwritten > {FILE_PATH}"),
        "writing the read-only subPath file",
    )
    .await?;
    check_seeded(w, "subpath", FILE_PATH, seed)
        .await
        .map_err(|e| e.context("after the refused write"))?;
    w.delete_pods(&["subpath"]).await?;
    Ok(())
}

/// A pod writes through a subPath; a later pod whose volume source is read-only reads the
/// file through the same subPath and cannot write there (upstream's "should verify container
/// cannot write to subpath readonly volumes" with it).
async fn read_only_volume_source(ctx: &TestContext<'_>) -> TestResult {
    bound_volume(ctx).await?;
    let w = ctx.workload();
    let sub = ctx.namespace().to_string();
    let seed = test_seed(ctx, 1);
    let pod = |name: &str| {
        PodBuilder::new(name, "true")
            .claim_sub_path(CLAIM, &sub, SUBPATH_PATH)
            .build()
    };
    w.ready_pod(&pod("writer")).await?;
    write_seeded(w, "writer", &format!("{SUBPATH_PATH}/{FILE}"), seed).await?;
    w.delete_pods(&["writer"]).await?;

    w.ready_pod(&read_only_source(pod("reader"))).await?;
    check_seeded(w, "reader", &format!("{SUBPATH_PATH}/{FILE}"), seed).await?;
    refused(
        w,
        "reader",
        &format!("touch {SUBPATH_PATH}/new"),
        "creating a file through a subPath of a read-only volume",
    )
    .await?;
    w.delete_pods(&["reader"]).await?;
    Ok(())
}

/// The subPath directory is removed (from the volume's root) while the pod runs; the pod is
/// then deleted cleanly (the runner then checks no mount of the volume is left).
async fn unmount_after_deletion(ctx: &TestContext<'_>) -> TestResult {
    bound_volume(ctx).await?;
    let w = ctx.workload();
    let sub = ctx.namespace().to_string();
    let pod = PodBuilder::new("subpath", "true")
        .claim_sub_path(CLAIM, &sub, SUBPATH_PATH)
        .claim(CLAIM, VOLUME_PATH)
        .build();
    w.ready_pod(&pod).await?;
    w.exec("subpath", &format!("rm -r '{VOLUME_PATH}/{sub}'"))
        .await?;
    refused(
        w,
        "subpath",
        &format!("test -e '{VOLUME_PATH}/{sub}'"),
        "finding the removed subPath directory",
    )
    .await?;
    w.delete_pods(&["subpath"]).await?;
    Ok(())
}

/// How a container with a subPath that must be refused came out.
enum SubPathStart {
    /// Waiting in `CreateContainerConfigError` with this message naming the subPath.
    Refused(String),
    /// Started (or ended), as described, on this node.
    Started { node: String, described: String },
}

/// Waits until the container `app` of `pod` is refused for its subPath (upstream's
/// `waitForPodSubpathError`) or starts.
async fn subpath_outcome(w: &Workload<'_>, pod: &str) -> TestResult<SubPathStart> {
    let pods = w.pods.clone();
    let found = wait::wait_until(
        format!("container app of pod {pod} refused for its subPath, or started"),
        w.timeouts().pod_ready,
        || {
            let pods = pods.clone();
            async move {
                let Some(seen) = pods.get_opt(pod).await.map_err(|e| e.to_string())? else {
                    return Err("absent".into());
                };
                let state = seen
                    .status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref())
                    .and_then(|c| c.iter().find(|c| c.name == "app"))
                    .and_then(|c| c.state.clone())
                    .unwrap_or_default();
                if let Some(waiting) = &state.waiting {
                    let message = waiting.message.clone().unwrap_or_default();
                    if waiting.reason.as_deref() == Some("CreateContainerConfigError")
                        && message.contains("subPath")
                    {
                        return Ok(Some(SubPathStart::Refused(message)));
                    }
                }
                if state.running.is_some() || state.terminated.is_some() {
                    return Ok(Some(SubPathStart::Started {
                        node: node_of(&seen).unwrap_or_default(),
                        described: describe_pod(&seen),
                    }));
                }
                Err(describe_pod(&seen))
            }
        },
    )
    .await;
    Ok(w.check(&format!("the subPath outcome of pod {pod}"), found)
        .await?)
}

/// Creates `pod` (whose container `app` has a subPath out of the volume) and fails unless the
/// API refuses it naming the subPath (422) or the node refuses its container for the subPath;
/// `escape` says how the subPath leaves the volume.
async fn expect_refused(ctx: &TestContext<'_>, pod: &Pod, escape: &str) -> TestResult {
    let w = ctx.workload();
    let name = pod.metadata.name.clone().unwrap_or_default();
    match w.pods.create(&PostParams::default(), pod).await {
        Err(kube::Error::Api(e)) if e.code == 422 => {
            ensure!(
                e.message.contains("subPath"),
                "the API refused pod {name} ({escape}) without naming its subPath: {}",
                e.message
            );
            tracing::info!(pod = %name, message = %e.message, "the API refused the subPath");
            return Ok(());
        }
        Err(e) => return Err(TestError::failed(format!("creating pod {name}: {e}"))),
        Ok(_) => {}
    }
    match subpath_outcome(w, &name).await? {
        SubPathStart::Refused(message) => {
            tracing::info!(pod = %name, %message, "the subPath was refused by the node");
            Ok(())
        }
        SubPathStart::Started { node, described } => Err(TestError::failed(format!(
            "the container of pod {name} started on node {node} with a subPath {escape}, \
             where kubelet refuses it (CreateContainerConfigError naming the subPath): \
             {described}"
        ))),
    }
}

/// subPaths `/etc` and `../escape`: refused (by the API's validation, on a kubelet cluster).
async fn absolute_or_backstepping_refused(ctx: &TestContext<'_>) -> TestResult {
    bound_volume(ctx).await?;
    for (name, sub) in [("absolute", "/etc"), ("backstepping", "../escape")] {
        let pod = PodBuilder::new(name, "true")
            .claim_sub_path(CLAIM, sub, SUBPATH_PATH)
            .build();
        expect_refused(ctx, &pod, &format!("{sub:?}")).await?;
    }
    Ok(())
}

/// The subPath is a symbolic link to `../`, the volume's parent on the node: refused.
/// (Upstream's links to `/bin` and `/bin/sh` are the same check.)
async fn escape_by_backstepping(ctx: &TestContext<'_>) -> TestResult {
    escape_by_link(ctx, "../").await
}

/// The subPath is a symbolic link to a path that does not exist out of the volume: refused.
async fn escape_to_non_existent_path(ctx: &TestContext<'_>) -> TestResult {
    escape_by_link(ctx, "/bin/notanexistingpath").await
}

async fn escape_by_link(ctx: &TestContext<'_>, target: &str) -> TestResult {
    bound_volume(ctx).await?;
    let sub = ctx.namespace().to_string();
    let pod = with_init(
        PodBuilder::new("escape", "true").claim_sub_path(CLAIM, &sub, SUBPATH_PATH),
        &format!("ln -s '{target}' '{VOLUME_PATH}/{sub}'"),
    )?;
    expect_refused(
        ctx,
        &pod,
        &format!("{sub:?}, a symbolic link to {target:?}"),
    )
    .await
}
