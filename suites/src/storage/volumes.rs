//! `volumes` (upstream `volumes.go`): a volume stores data — written by one pod, read back by
//! the next once the first is gone, where the driver claims persistence — and files on it can
//! be executed.

use driver_spec::Capability;

use super::bind_claim;
use super::data::{check_seeded, write_seeded};
use super::provisioning::access_mode;
use crate::e2e::workload::{MOUNT_PATH, claim, pod_with_claim};
use crate::registry::{Needs, TestCase, TestContext, TestResult};
use crate::{ensure, test_case};

const SUITE: &str = "volumes";

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    vec![
        test_case!(SUITE, "should store data", Needs::NONE, store_data),
        test_case!(
            SUITE,
            "should allow exec of files on the volume",
            Needs::capabilities(&[Capability::Exec]),
            exec_files
        ),
    ]
}

/// A seed for data written by this test only: the namespace's name (unique per test) mixed
/// with `salt`, so data of another test or of another writer of this one never matches.
pub fn test_seed(ctx: &TestContext<'_>, salt: u64) -> u64 {
    ctx.namespace()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
        .wrapping_add(salt)
}

/// Upstream's injector and client pods: one pod writes data and reads it back; with
/// `persistence`, a second pod, started after the first is gone, reads the same data.
async fn store_data(ctx: &TestContext<'_>) -> TestResult {
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    bind_claim(
        ctx,
        &claim("data", Some(&class), &ctx.claim_size(), access_mode(ctx)),
        None,
    )
    .await?;
    let file = format!("{MOUNT_PATH}/index.html");
    let seed = test_seed(ctx, 0);

    w.ready_pod(&pod_with_claim("injector", "data", None, "true"))
        .await?;
    write_seeded(w, "injector", &file, seed).await?;
    check_seeded(w, "injector", &file, seed).await?;
    w.delete_pods(&["injector"]).await?;

    // Upstream skips only the persistence check for a driver without persistence.
    if ctx.spec().has(Capability::Persistence) {
        w.ready_pod(&pod_with_claim("client", "data", None, "true"))
            .await?;
        check_seeded(w, "client", &file, seed)
            .await
            .map_err(|e| e.context("after the writing pod was deleted"))?;
        w.delete_pods(&["client"]).await?;
    }
    Ok(())
}

/// A shell script written into the volume, made executable and run from there: it runs (the
/// volume is not mounted `noexec`) and lists the volume, itself included.
async fn exec_files(ctx: &TestContext<'_>) -> TestResult {
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    bind_claim(
        ctx,
        &claim("data", Some(&class), &ctx.claim_size(), access_mode(ctx)),
        None,
    )
    .await?;
    w.ready_pod(&pod_with_claim("exec", "data", None, "true"))
        .await?;
    let script = format!("{MOUNT_PATH}/test-{}.sh", ctx.namespace());
    let marker = format!("executed from the volume {}", test_seed(ctx, 1));
    let command = format!(
        "printf '%s\\n' '#!/bin/sh' 'echo \"{marker}\"' 'ls {MOUNT_PATH}' > '{script}' \
         && chmod u+x '{script}' && '{script}'"
    );
    let out = w.exec("exec", &command).await?;
    ensure!(
        out.lines().any(|l| l == marker),
        "running {script} from the volume did not print {marker:?}; it printed {out:?}"
    );
    let name = script.rsplit('/').next().unwrap_or_default();
    ensure!(
        out.lines().any(|l| l == name),
        "the script's listing of {MOUNT_PATH} does not show the script {name}: {out:?}"
    );
    w.delete_pods(&["exec"]).await?;
    Ok(())
}
