//! `demo`: the seed document's demo ("Simple Multi-Writer scenario"): a ReadWriteMany claim
//! `myclaim` of the StorageClass `csi-manila-nfs`, and pods `writer-one` and `writer-two` on
//! different nodes that append the date to `/mnt/test/$(hostname)` at the same time; each sees
//! the other's file grow. (The seed writes every 10 s; here every second, to see it sooner.)

use driver_spec::Capability;
use kube_support::wait;

use super::WAIT;
use crate::e2e::workload::{PodBuilder, claim, describe_pod};
use crate::registry::{Needs, TestCase, TestContext, TestError, TestResult};
use crate::{ensure, test_case};

const SUITE: &str = "demo";

/// The writers' script, as the seed's pods run it.
const WRITER: &str = "while true; do echo $(date) >> /mnt/test/$(hostname); sleep 1; done";

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    vec![test_case!(
        SUITE,
        "writer-one and writer-two on two nodes append to one ReadWriteMany claim of csi-manila-nfs and each sees the other's file grow",
        Needs::capabilities(&[Capability::Rwx, Capability::Exec]).nodes(2),
        two_writers
    )]
}

async fn two_writers(ctx: &TestContext<'_>) -> TestResult {
    let class = ctx.storage_class_named("csi-manila-nfs", |_| {}).await?;
    let w = ctx.workload();
    let size = ctx.claim_size();
    w.bound_claim(&claim("myclaim", Some(&class), &size, "ReadWriteMany"))
        .await?;
    for name in ["writer-one", "writer-two"] {
        w.create_pod(
            &PodBuilder::new(name, WRITER)
                .claim("myclaim", "/mnt/test")
                .spread_in("writers")
                .build(),
        )
        .await?;
    }
    let one = w.wait_ready("writer-one").await?;
    let two = w.wait_ready("writer-two").await?;
    let node =
        |pod: &k8s_openapi::api::core::v1::Pod| pod.spec.as_ref().and_then(|s| s.node_name.clone());
    ensure!(
        node(&one) != node(&two),
        "the writers share a node: {} / {}",
        describe_pod(&one),
        describe_pod(&two)
    );
    // Each writer sees the other's file grow …
    for (reader, writer) in [("writer-one", "writer-two"), ("writer-two", "writer-one")] {
        let first = lines_seen(ctx, reader, writer).await?;
        let what = format!("{reader} to see /mnt/test/{writer} grow past {first} lines");
        let grown = wait::wait_until(what, WAIT, || async move {
            match lines_seen(ctx, reader, writer).await {
                Ok(count) if count > first => Ok(Some(count)),
                Ok(count) => Err(format!("{count} lines")),
                Err(e) => Err(e.to_string()),
            }
        })
        .await;
        w.check(&format!("{reader} sees {writer}'s file grow"), grown)
            .await?;
    }
    // … and, as `kubectl exec writer-one -- ls -R /mnt` showed, just the two files.
    let listing = w.exec("writer-one", "ls /mnt/test").await?;
    let files: Vec<&str> = listing.lines().collect();
    ensure!(
        files == ["writer-one", "writer-two"],
        "files in /mnt/test as writer-one sees them: {files:?}"
    );
    let tail = w
        .exec("writer-one", "tail -n 1 /mnt/test/writer-two")
        .await?;
    ensure!(
        !tail.trim().is_empty(),
        "writer-one reads nothing at the end of writer-two's file"
    );
    w.delete_pods(&["writer-one", "writer-two"]).await?;
    Ok(())
}

/// How many lines `reader` sees in `writer`'s file (0 before it exists).
async fn lines_seen(ctx: &TestContext<'_>, reader: &str, writer: &str) -> TestResult<usize> {
    let out = ctx
        .workload()
        .exec(
            reader,
            &format!("test -f /mnt/test/{writer} && wc -l < /mnt/test/{writer} || echo 0"),
        )
        .await?;
    out.trim()
        .parse()
        .map_err(|e| TestError::failed(format!("counting lines: {out:?}: {e}")))
}
