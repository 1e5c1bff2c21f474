//! `fsGroup` (upstream `fsgroupchangepolicy.go`, and the fsGroup check of upstream's volume
//! client pods): the pod's `fsGroup` owns the volume and what is created in it, and
//! `fsGroupChangePolicy` decides whether a later pod's fsGroup is applied to contents whose
//! group was changed meanwhile. Only for drivers whose spec claims `fsGroup`.

use driver_spec::Capability;
use k8s_openapi::api::core::v1::Pod;

use super::bind_claim;
use super::provisioning::access_mode;
use crate::e2e::workload::{PodBuilder, Workload, claim};
use crate::registry::{Needs, TestCase, TestContext, TestError, TestResult};
use crate::{ensure_eq, test_case};

const SUITE: &str = "fsGroup";

/// Where the pods mount the volume (as upstream's).
const ROOT: &str = "/mnt/volume1";
/// The file in the volume's root directory.
const ROOT_FILE: &str = "/mnt/volume1/file1";
/// A directory of the volume and the file in it.
const SUB_DIR: &str = "/mnt/volume1/subdir";
const SUB_FILE: &str = "/mnt/volume1/subdir/file2";

const FS_GROUP: &[Capability] = &[Capability::FsGroup];
const FS_GROUP_RWOP: &[Capability] = &[Capability::FsGroup, Capability::ReadWriteOncePod];

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            SUITE,
            "should give the volume and the files created in it the pod's fsGroup",
            Needs::capabilities(FS_GROUP),
            volume_owned_by_fs_group
        ),
        test_case!(
            SUITE,
            "(Always) pod created with an initial fsgroup, new pod fsgroup applied to volume contents",
            Needs::capabilities(FS_GROUP),
            always_new_group
        ),
        test_case!(
            SUITE,
            "(Always) rwop pod created with an initial fsgroup, new pod fsgroup applied to volume contents",
            Needs::capabilities(FS_GROUP_RWOP),
            always_new_group_rwop
        ),
        test_case!(
            SUITE,
            "(Always) pod created with an initial fsgroup, volume contents ownership changed via chgrp in first pod, new pod with same fsgroup applied to the volume contents",
            Needs::capabilities(FS_GROUP),
            always_chgrp_same_group
        ),
        test_case!(
            SUITE,
            "(Always) pod created with an initial fsgroup, volume contents ownership changed via chgrp in first pod, new pod with different fsgroup applied to the volume contents",
            Needs::capabilities(FS_GROUP),
            always_chgrp_other_group
        ),
        test_case!(
            SUITE,
            "(OnRootMismatch) pod created with an initial fsgroup, new pod fsgroup applied to volume contents",
            Needs::capabilities(FS_GROUP),
            on_root_mismatch_new_group
        ),
        test_case!(
            SUITE,
            "(OnRootMismatch) pod created with an initial fsgroup, volume contents ownership changed via chgrp in first pod, new pod with same fsgroup skips ownership changes to the volume contents",
            Needs::capabilities(FS_GROUP),
            on_root_mismatch_chgrp_same_group
        ),
        test_case!(
            SUITE,
            "(OnRootMismatch) pod created with an initial fsgroup, volume contents ownership changed via chgrp in first pod, new pod with different fsgroup applied to the volume contents",
            Needs::capabilities(FS_GROUP),
            on_root_mismatch_chgrp_other_group
        ),
    ]
}

/// One `fsGroupChangePolicy` case: the first pod's fsGroup creates a file in the root and one
/// in a subdirectory, optionally `chgrp`s them; the second pod's fsGroup then leaves them with
/// the expected groups.
struct PolicyCase {
    policy: &'static str,
    first: i64,
    /// The groups the first pod gives the root file and the subdirectory file, if any.
    chgrp: Option<(i64, i64)>,
    second: i64,
    /// The groups of the root file and the subdirectory file in the second pod.
    expected: (i64, i64),
    /// Whether the case holds for a driver with `volumeMountGroup` (where `OnRootMismatch` is
    /// not supported and a chgrp after mounting may not be possible).
    with_volume_mount_group: bool,
    read_write_once_pod: bool,
}

/// The claim's volume group is the pod's fsGroup, and so is a new file's.
async fn volume_owned_by_fs_group(ctx: &TestContext<'_>) -> TestResult {
    const GROUP: i64 = 1234;
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    bind_claim(
        ctx,
        &claim("data", Some(&class), &ctx.claim_size(), access_mode(ctx)),
        None,
    )
    .await?;
    let pod = PodBuilder::new("owned", "true")
        .claim("data", ROOT)
        .fs_group(GROUP)
        .build();
    w.ready_pod(&pod).await?;
    ensure_eq!(
        group_of(w, "owned", ROOT).await?,
        GROUP,
        "the group of {ROOT}"
    );
    w.exec("owned", &format!("touch {ROOT_FILE}")).await?;
    ensure_eq!(
        group_of(w, "owned", ROOT_FILE).await?,
        GROUP,
        "the group of the new file {ROOT_FILE}"
    );
    w.delete_pods(&["owned"]).await?;
    Ok(())
}

async fn always_new_group(ctx: &TestContext<'_>) -> TestResult {
    run_case(
        ctx,
        &PolicyCase {
            policy: "Always",
            first: 1000,
            chgrp: None,
            second: 2000,
            expected: (2000, 2000),
            with_volume_mount_group: true,
            read_write_once_pod: false,
        },
    )
    .await
}

async fn always_new_group_rwop(ctx: &TestContext<'_>) -> TestResult {
    run_case(
        ctx,
        &PolicyCase {
            policy: "Always",
            first: 1000,
            chgrp: None,
            second: 2000,
            expected: (2000, 2000),
            with_volume_mount_group: true,
            read_write_once_pod: true,
        },
    )
    .await
}

async fn always_chgrp_same_group(ctx: &TestContext<'_>) -> TestResult {
    run_case(
        ctx,
        &PolicyCase {
            policy: "Always",
            first: 1000,
            chgrp: Some((2000, 3000)),
            second: 1000,
            expected: (1000, 1000),
            with_volume_mount_group: false,
            read_write_once_pod: false,
        },
    )
    .await
}

async fn always_chgrp_other_group(ctx: &TestContext<'_>) -> TestResult {
    run_case(
        ctx,
        &PolicyCase {
            policy: "Always",
            first: 1000,
            chgrp: Some((2000, 3000)),
            second: 4000,
            expected: (4000, 4000),
            with_volume_mount_group: false,
            read_write_once_pod: false,
        },
    )
    .await
}

async fn on_root_mismatch_new_group(ctx: &TestContext<'_>) -> TestResult {
    run_case(
        ctx,
        &PolicyCase {
            policy: "OnRootMismatch",
            first: 1000,
            chgrp: None,
            second: 2000,
            expected: (2000, 2000),
            with_volume_mount_group: false,
            read_write_once_pod: false,
        },
    )
    .await
}

async fn on_root_mismatch_chgrp_same_group(ctx: &TestContext<'_>) -> TestResult {
    run_case(
        ctx,
        &PolicyCase {
            policy: "OnRootMismatch",
            first: 1000,
            chgrp: Some((2000, 3000)),
            second: 1000,
            expected: (2000, 3000),
            with_volume_mount_group: false,
            read_write_once_pod: false,
        },
    )
    .await
}

async fn on_root_mismatch_chgrp_other_group(ctx: &TestContext<'_>) -> TestResult {
    run_case(
        ctx,
        &PolicyCase {
            policy: "OnRootMismatch",
            first: 1000,
            chgrp: Some((2000, 3000)),
            second: 4000,
            expected: (4000, 4000),
            with_volume_mount_group: false,
            read_write_once_pod: false,
        },
    )
    .await
}

/// A pod mounting the claim `data` at [`ROOT`] with `fs_group` and the change policy.
fn policy_pod(name: &str, fs_group: i64, policy: &str) -> Pod {
    let mut pod = PodBuilder::new(name, "true")
        .claim("data", ROOT)
        .fs_group(fs_group)
        .build();
    if let Some(context) = pod.spec.as_mut().and_then(|s| s.security_context.as_mut()) {
        context.fs_group_change_policy = Some(policy.into());
    }
    pod
}

/// The group id of `path` in `pod`.
async fn group_of(w: &Workload<'_>, pod: &str, path: &str) -> TestResult<i64> {
    let out = w.exec(pod, &format!("stat -c %g '{path}'")).await?;
    out.trim().parse().map_err(|_| {
        TestError::failed(format!(
            "`stat -c %g {path}` in pod {pod} printed {out:?}, not a group id"
        ))
    })
}

async fn run_case(ctx: &TestContext<'_>, case: &PolicyCase) -> TestResult {
    if ctx.spec().has(Capability::VolumeMountGroup) && !case.with_volume_mount_group {
        return Err(TestError::skip(format!(
            "Driver {:?} supports VolumeMountGroup, which is incompatible with this test - skipping",
            ctx.driver().name
        )));
    }
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    let mode = if case.read_write_once_pod {
        "ReadWriteOncePod"
    } else {
        access_mode(ctx)
    };
    bind_claim(
        ctx,
        &claim("data", Some(&class), &ctx.claim_size(), mode),
        None,
    )
    .await?;

    w.ready_pod(&policy_pod("first", case.first, case.policy))
        .await?;
    w.exec(
        "first",
        &format!("touch {ROOT_FILE} && mkdir {SUB_DIR} && touch {SUB_FILE}"),
    )
    .await?;
    for path in [ROOT_FILE, SUB_FILE] {
        ensure_eq!(
            group_of(w, "first", path).await?,
            case.first,
            "the group of {path}, created in the first pod"
        );
    }
    if let Some((root_group, sub_group)) = case.chgrp {
        for (path, group) in [(ROOT_FILE, root_group), (SUB_FILE, sub_group)] {
            w.exec("first", &format!("chgrp {group} {path}")).await?;
            ensure_eq!(
                group_of(w, "first", path).await?,
                group,
                "the group of {path} after chgrp"
            );
        }
    }
    w.delete_pods(&["first"]).await?;

    w.ready_pod(&policy_pod("second", case.second, case.policy))
        .await?;
    for (path, group) in [(ROOT_FILE, case.expected.0), (SUB_FILE, case.expected.1)] {
        ensure_eq!(
            group_of(w, "second", path).await?,
            group,
            "the group of {path} in the second pod (fsGroup {}, policy {})",
            case.second,
            case.policy
        );
    }
    w.delete_pods(&["second"]).await?;
    Ok(())
}
