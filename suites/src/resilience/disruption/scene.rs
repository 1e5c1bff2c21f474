//! The writers and their volumes: the scene every disruption test starts from and checks.

use super::super::writers::{Stall, WriterFile, WriterSpec, Writers, wall};
use super::MAX_STALL;
use super::claims::wait_share_gone;
use crate::e2e::workload::{BoundClaim, PodBuilder, claim, describe_pod, pod_is_ready};
use crate::ensure;
use crate::registry::{TestContext, TestError, TestResult};
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, DeleteParams};
use kube_support::wait;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The claims and writers every test of the suite starts with (see the module docs).
pub(super) struct Scene<'w, 'a> {
    pub(super) writers: Writers<'w, 'a>,
    pub(super) claims: Vec<BoundClaim>,
    /// Each writer's pod and the share behind its claim.
    pub(super) shares: Vec<(String, String)>,
    /// The first and second node.
    pub(super) nodes: Vec<String>,
    /// The StorageClass the claims came from.
    pub(super) class: String,
}

impl<'w, 'a> Scene<'w, 'a> {
    /// Creates `shared` (RWX) and `single` (RWO), and starts the writers on two nodes.
    pub(super) async fn start(ctx: &'w TestContext<'a>) -> TestResult<Scene<'w, 'a>> {
        let nodes = crate::storage::nodes(ctx, 2)?;
        let class = ctx.storage_class().await?;
        let w = ctx.workload();
        let size = ctx.claim_size();
        w.create_claim(&claim("shared", Some(&class), &size, "ReadWriteMany"))
            .await?;
        w.create_claim(&claim("single", Some(&class), &size, "ReadWriteOnce"))
            .await?;
        let shared = w.wait_bound("shared").await?;
        let single = w.wait_bound("single").await?;
        let specs = vec![
            WriterSpec::new("writer-a", "shared").on(&nodes[0]),
            WriterSpec::new("writer-b", "shared").on(&nodes[1]),
            WriterSpec::new("writer-c", "single").on(&nodes[0]),
        ];
        let shares = vec![
            ("writer-a".to_string(), shared.share_id.clone()),
            ("writer-b".to_string(), shared.share_id.clone()),
            ("writer-c".to_string(), single.share_id.clone()),
        ];
        let writers = Writers::start(w, ctx.timeline(), specs).await?;
        ctx.timeline().record(
            "cluster",
            format!(
                "claims shared ({}, RWX) and single ({}, RWO) bound; writer-a and writer-c on {}, writer-b on {}",
                shared.volume_name(),
                single.volume_name(),
                nodes[0],
                nodes[1]
            ),
        );
        Ok(Scene {
            writers,
            claims: vec![shared, single],
            shares,
            nodes,
            class,
        })
    }

    /// The PVs of the writers' claims.
    pub(super) fn volume_names(&self) -> Vec<String> {
        self.claims
            .iter()
            .map(|c| c.volume_name().to_string())
            .collect()
    }

    /// After a disruption that began at `since`: every writer wrote since without a failed
    /// write, kept what `before` held, stalled at most [`MAX_STALL`], and (on the embedded
    /// default) its lines since then are in the share's directory.
    pub(super) async fn check(
        &self,
        ctx: &TestContext<'_>,
        since: SystemTime,
        before: &[WriterFile],
    ) -> TestResult<Stall> {
        let stall = self.writers.check_since(since, Some(before)).await?;
        let verdict = if stall.length <= MAX_STALL {
            "within"
        } else {
            "over"
        };
        ctx.timeline().record(
            "check",
            format!(
                "longest writer stall since {}: {:.3} s from {} ({verdict} the {} s limit)",
                wall(since),
                stall.length.as_secs_f64(),
                wall(stall.from),
                MAX_STALL.as_secs()
            ),
        );
        ensure!(
            stall.length <= MAX_STALL,
            "a writer stalled {:.3} s (from {}), longer than {} s",
            stall.length.as_secs_f64(),
            wall(stall.from),
            MAX_STALL.as_secs()
        );
        self.check_in_shares(ctx, since)?;
        Ok(stall)
    }

    /// On the embedded default: each writer's file in its share's directory of the fake
    /// cloud has a line written at or after `since`.
    pub(super) fn check_in_shares(&self, ctx: &TestContext<'_>, since: SystemTime) -> TestResult {
        let Some(fake) = ctx.environment().and_then(|e| e.fake_cloud()) else {
            return Ok(());
        };
        let mut seen = Vec::new();
        for (pod, share) in &self.shares {
            let path = fake.share_dir(share).join(format!("{pod}.log"));
            let text = std::fs::read_to_string(&path)
                .map_err(|e| TestError::failed(format!("reading {}: {e}", path.display())))?;
            let last = text
                .lines()
                .filter_map(|l| l.trim().parse::<u64>().ok())
                .next_back()
                .map(|nanos| UNIX_EPOCH + Duration::from_nanos(nanos));
            ensure!(
                last.is_some_and(|t| t >= since),
                "{pod}'s file in share {share}'s directory ({}) ends with a line from {}, before the disruption began ({}): the writes do not reach the share",
                path.display(),
                last.map_or("-".into(), wall),
                wall(since)
            );
            seen.push(format!("{pod}: {} lines", text.lines().count()));
        }
        ctx.timeline().record(
            "check",
            format!(
                "the writers' files in the shares' directories: {}",
                seen.join(", ")
            ),
        );
        Ok(())
    }

    /// Deletes the writers (their volumes unpublished: no mount of them left), then every
    /// claim (theirs and `more`), and waits until the PVs and shares are gone.
    pub(super) async fn finish(self, ctx: &TestContext<'_>, more: Vec<BoundClaim>) -> TestResult {
        let Scene {
            writers, claims, ..
        } = self;
        let claims: Vec<BoundClaim> = claims.into_iter().chain(more).collect();
        let volumes: Vec<String> = claims.iter().map(|c| c.volume_name().to_string()).collect();
        writers.stop().await?;
        wait_unmounted(ctx, &volumes).await?;
        let w = ctx.workload();
        for bound in &claims {
            let name = bound.claim.metadata.name.as_deref().unwrap_or_default();
            w.claims.delete(name, &DeleteParams::default()).await?;
        }
        let pvs: Api<PersistentVolume> = Api::all(ctx.client());
        for bound in &claims {
            wait::wait_deleted(&pvs, bound.volume_name(), w.timeouts().claim_bound).await?;
            wait_share_gone(ctx, &bound.share_id).await?;
        }
        ctx.timeline().record(
            "check",
            format!(
                "claims deleted; PVs {} and their shares gone",
                volumes.join(", ")
            ),
        );
        Ok(())
    }
}

/// Starts pod `reader` on `node` with the claim `shared`, counts the lines of writer-a's
/// file it sees (there must be some), and deletes it.
pub(super) async fn read_through_new_pod(ctx: &TestContext<'_>, node: &str) -> TestResult<usize> {
    let w = ctx.workload();
    let reader = PodBuilder::new("reader", "true")
        .claim("shared", "/data")
        .node(node);
    w.ready_pod(&reader.build()).await?;
    let out = w.exec("reader", "wc -l < /data/writer-a.log").await?;
    let lines: usize = out.trim().parse().map_err(|e| {
        TestError::failed(format!(
            "counting writer-a's lines in pod reader: {out:?}: {e}"
        ))
    })?;
    ensure!(lines > 0, "pod reader on {node} sees writer-a's file empty");
    w.delete_pods(&["reader"]).await?;
    Ok(lines)
}

/// Waits until no mount of `volumes` is left below the run's mount root (nothing to check
/// where the mounts are on other machines).
pub(super) async fn wait_unmounted(ctx: &TestContext<'_>, volumes: &[String]) -> TestResult {
    if mounts_of(ctx, volumes).await?.is_none() {
        return Ok(());
    }
    wait::wait_until(
        format!("no mount of {} left", volumes.join(", ")),
        ctx.workload().timeouts().pod_deleted,
        || async {
            match mounts_of(ctx, volumes).await {
                Ok(Some(left)) if left.is_empty() => Ok(Some(())),
                Ok(Some(left)) => Err(left.join(", ")),
                Ok(None) => Ok(Some(())),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await?;
    ctx.timeline().record(
        "check",
        format!("writers deleted; no mount of {} left", volumes.join(", ")),
    );
    Ok(())
}

/// The mount points of `volumes` (their staging and publish paths) below the run's mount
/// root, wherever the nodes mount (this host, or each node's container), sorted; `None`
/// when the mounts are not visible from here.
pub(super) async fn mounts_of(
    ctx: &TestContext<'_>,
    volumes: &[String],
) -> TestResult<Option<Vec<String>>> {
    let Some(root) = ctx.mounts_root() else {
        return Ok(None);
    };
    let mut mounts: Vec<String> = ctx
        .cluster()
        .mount_points_under(root)
        .await?
        .iter()
        .map(|m| m.display().to_string())
        .filter(|m| {
            m.split('/')
                .any(|component| volumes.iter().any(|v| v == component))
        })
        .collect();
    mounts.sort();
    Ok(Some(mounts))
}

/// `(container id, restarts)` of each container of the pods `names`, in order.
pub(super) async fn container_ids(
    ctx: &TestContext<'_>,
    names: &[&str],
) -> TestResult<Vec<(String, i32)>> {
    let mut out = Vec::new();
    for name in names {
        let pod = ctx.workload().pods.get(name).await?;
        ensure!(
            pod_is_ready(&pod),
            "pod {} is not Ready",
            describe_pod(&pod)
        );
        let statuses = pod
            .status
            .and_then(|s| s.container_statuses)
            .unwrap_or_default();
        out.extend(
            statuses
                .into_iter()
                .map(|c| (c.container_id.unwrap_or_default(), c.restart_count)),
        );
    }
    Ok(out)
}
