//! Faults during provisioning: Manila's errors, shares in error or stuck, access rules in
//! error, quota, Keystone, and a reply slower than the driver's HTTP timeout.

use super::guard::{
    Baseline, Faults, delete_and_ensure_nothing_left, describe_resources, ensure_names,
    ensure_only_share, ensure_pending, test_claim, wait_bound, wait_cloud, wait_for_event,
};
use super::{CLAIM, SLOWER_THAN_HTTP_TIMEOUT, STEP, STUCK_REPORTED};
use crate::e2e::cloud::CloudInspector;
use crate::registry::{TestContext, TestResult};
use crate::{ensure, ensure_eq};
use fakes::{FaultAction, FaultRule, Operation, Times};

/// A fault on provisioning: `rule` injected, a claim made, its ProvisioningFailed event
/// naming every one of `expected` (the first is waited for), the claim still Pending, the
/// fault cleared, the claim Bound to the only share the test left.
pub(super) async fn provisioning_fails_then_recovers(
    ctx: &TestContext<'_>,
    rule: FaultRule,
    expected: &[&str],
) -> TestResult {
    let cloud = ctx.fake_cloud()?;
    let faults = Faults::new(ctx)?;
    let baseline = Baseline::of(cloud);
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    faults.inject(rule)?;
    w.create_claim(&test_claim(ctx, CLAIM, &class)).await?;
    let first = expected.first().copied().unwrap_or_default();
    let message = wait_for_event(
        ctx,
        "provisioner",
        w.namespace(),
        CLAIM,
        "ProvisioningFailed",
        first,
        STEP,
    )
    .await?;
    ensure_names("ProvisioningFailed", &message, expected)?;
    ensure_pending(ctx, CLAIM).await?;
    faults.clear();
    let bound = wait_bound(ctx, CLAIM).await?;
    ensure_only_share(ctx, &baseline, &bound, 0).await?;
    delete_and_ensure_nothing_left(ctx, &baseline, &[CLAIM]).await
}

/// `operation` answering HTTP `status` with `message` until cleared.
pub(super) fn http_error_always(operation: Operation, status: u16, message: &str) -> FaultRule {
    FaultRule::new(
        operation,
        FaultAction::HttpError {
            status,
            message: Some(message.into()),
        },
    )
    .times(Times::ALWAYS)
}

/// ShareCreate answers 500 until cleared.
pub(super) async fn share_create_500(ctx: &TestContext<'_>) -> TestResult {
    let message =
        "The server has either erred or is incapable of performing the requested operation.";
    provisioning_fails_then_recovers(
        ctx,
        http_error_always(Operation::ShareCreate, 500, message),
        &["HTTP 500", message, "code = Internal"],
    )
    .await
}

/// ShareCreate answers 503 until cleared.
pub(super) async fn share_create_503(ctx: &TestContext<'_>) -> TestResult {
    let message = "Service Unavailable: the share scheduler is restarting.";
    provisioning_fails_then_recovers(
        ctx,
        http_error_always(Operation::ShareCreate, 503, message),
        &["HTTP 503", message, "code = Unavailable"],
    )
    .await
}

/// Every share ends in `error` (no valid host for its size, detail 009) until cleared; the
/// driver deletes each (the rollback) and reports Manila's user message.
pub(super) async fn share_ends_in_error(ctx: &TestContext<'_>) -> TestResult {
    provisioning_fails_then_recovers(
        ctx,
        FaultRule::new(
            Operation::ShareCreate,
            FaultAction::Error {
                detail_id: "009".into(),
                message: None,
            },
        )
        .times(Times::ALWAYS),
        &[
            "status error",
            "Capacity filter didn't succeed",
            "detail_id 009",
            "rollback",
            "code = OutOfRange",
        ],
    )
    .await
}

/// Every access rule ends in `error` until cleared; the driver deletes the share with it
/// (nothing is left behind) and names Manila's user message.
pub(super) async fn access_rule_ends_in_error(ctx: &TestContext<'_>) -> TestResult {
    let message = "the NFS backend could not apply the export";
    provisioning_fails_then_recovers(
        ctx,
        FaultRule::new(
            Operation::AccessAllow,
            FaultAction::Error {
                detail_id: "001".into(),
                message: Some(message.into()),
            },
        )
        .times(Times::ALWAYS),
        &["in state error", message, "rollback"],
    )
    .await
}

/// ShareCreate answers Manila's 413 (over quota) until cleared.
pub(super) async fn quota_exceeded(ctx: &TestContext<'_>) -> TestResult {
    let message = "Requested share exceeds allowed project/user or share type gigabytes quota.";
    provisioning_fails_then_recovers(
        ctx,
        http_error_always(Operation::ShareCreate, 413, message),
        &["HTTP 413", message, "code = ResourceExhausted"],
    )
    .await
}

/// Keystone answers 503 while every token is expired: the driver cannot authenticate again,
/// and says Keystone is why.
pub(super) async fn keystone_outage(ctx: &TestContext<'_>) -> TestResult {
    let cloud = ctx.fake_cloud()?;
    let faults = Faults::new(ctx)?;
    let baseline = Baseline::of(cloud);
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    let message = "Keystone is down for maintenance.";
    faults.inject(http_error_always(Operation::Auth, 503, message))?;
    cloud.expire_tokens();
    ctx.timeline()
        .record("inject", "every issued token expired");
    w.create_claim(&test_claim(ctx, CLAIM, &class)).await?;
    let event = wait_for_event(
        ctx,
        "provisioner",
        w.namespace(),
        CLAIM,
        "ProvisioningFailed",
        "Keystone",
        STEP,
    )
    .await?;
    ensure_names(
        "ProvisioningFailed",
        &event,
        &["HTTP 503", message, "code = Unavailable"],
    )?;
    ensure_pending(ctx, CLAIM).await?;
    let during = baseline.new_in(cloud);
    ensure!(
        during.shares.is_empty(),
        "a share was made although Keystone was down: {}",
        describe_resources(&during)
    );
    faults.clear();
    let bound = wait_bound(ctx, CLAIM).await?;
    ensure_only_share(ctx, &baseline, &bound, 0).await?;
    delete_and_ensure_nothing_left(ctx, &baseline, &[CLAIM]).await
}

/// Every token expires between two claims: the driver's next Manila call is refused (401),
/// it authenticates again and provisions without any failure the user would see.
pub(super) async fn token_expiry(ctx: &TestContext<'_>) -> TestResult {
    let cloud = ctx.fake_cloud()?;
    let _faults = Faults::new(ctx)?;
    let baseline = Baseline::of(cloud);
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    // A first claim: the driver holds a token of the cloud.
    w.create_claim(&test_claim(ctx, "before", &class)).await?;
    wait_bound(ctx, "before").await?;
    let mark = cloud.journal().last().map_or(0, |e| e.seq);
    cloud.expire_tokens();
    ctx.timeline()
        .record("inject", "every issued token expired");
    w.create_claim(&test_claim(ctx, CLAIM, &class)).await?;
    let bound = wait_bound(ctx, CLAIM).await?;
    let after: Vec<fakes::JournalEntry> = cloud
        .journal()
        .into_iter()
        .filter(|e| e.seq > mark)
        .collect();
    let refused = after
        .iter()
        .filter(|e| e.service == fakes::Service::Manila && e.status == 401)
        .count();
    let issued = after
        .iter()
        .filter(|e| {
            e.service == fakes::Service::Keystone
                && e.method == "POST"
                && e.path.ends_with("/auth/tokens")
                && (200..300).contains(&e.status)
        })
        .count();
    ctx.timeline().record(
        "cloud",
        format!(
            "since the expiry: {refused} Manila requests refused with 401, {issued} tokens issued"
        ),
    );
    ensure!(
        refused >= 1,
        "Manila never refused an expired token after the expiry: did the test expire the driver's token? {} requests since",
        after.len()
    );
    ensure!(
        issued >= 1,
        "no token was issued after the expiry, yet claim {CLAIM} was provisioned"
    );
    let events = crate::e2e::workload::events_about(&ctx.client(), w.namespace(), CLAIM).await?;
    let failures: Vec<String> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("ProvisioningFailed"))
        .map(|e| e.message.clone().unwrap_or_default())
        .collect();
    ensure!(
        failures.is_empty(),
        "the expired token showed as a failure to the user: {failures:?}"
    );
    let now = baseline.new_in(cloud);
    ensure!(
        now.shares.len() == 2 && now.shares.iter().any(|s| s.id == bound.share_id),
        "want the two claims' shares, the cloud holds {}",
        describe_resources(&now)
    );
    delete_and_ensure_nothing_left(ctx, &baseline, &["before", CLAIM]).await
}

/// A share stays `creating` (Manila's backend hangs): after the driver's wait the user sees
/// the share's state; the driver keeps the share; once Manila finishes it (an operator's
/// reset), the retry binds that very share.
pub(super) async fn share_stuck_creating(ctx: &TestContext<'_>) -> TestResult {
    let cloud = ctx.fake_cloud()?;
    let faults = Faults::new(ctx)?;
    let admin = CloudInspector::new(cloud)?;
    let baseline = Baseline::of(cloud);
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    faults.inject(FaultRule::new(
        Operation::ShareCreate,
        FaultAction::Stuck { status: None },
    ))?;
    w.create_claim(&test_claim(ctx, CLAIM, &class)).await?;
    let stuck = wait_cloud(ctx, &baseline, "one share creating", STEP, |now| {
        now.shares.len() == 1 && now.shares[0].status == "creating"
    })
    .await?;
    let stuck_id = stuck.shares[0].id.clone();
    let message = wait_for_event(
        ctx,
        "provisioner",
        w.namespace(),
        CLAIM,
        "ProvisioningFailed",
        "status creating",
        STUCK_REPORTED,
    )
    .await?;
    ensure_names(
        "ProvisioningFailed",
        &message,
        &[&stuck_id, "timed out", "code = DeadlineExceeded"],
    )?;
    ensure_pending(ctx, CLAIM).await?;
    let during = baseline.new_in(cloud);
    ensure!(
        during.shares.len() == 1 && during.shares[0].id == stuck_id,
        "the retry did not keep to the stuck share {stuck_id}: {}",
        describe_resources(&during)
    );
    faults.clear();
    admin.reset_status("shares", &stuck_id, "available").await?;
    ctx.timeline().record(
        "clear",
        format!("an operator reset share {stuck_id} to available (the backend finished)"),
    );
    let bound = wait_bound(ctx, CLAIM).await?;
    ensure_eq!(
        bound.share_id.as_str(),
        stuck_id.as_str(),
        "the share of the claim"
    );
    ensure_only_share(ctx, &baseline, &bound, 0).await?;
    delete_and_ensure_nothing_left(ctx, &baseline, &[CLAIM]).await
}

/// ShareCreate answers after the driver's HTTP timeout: the driver gives up on the answer,
/// the share is made anyway, and the retry finds it by name instead of making another.
pub(super) async fn slower_than_http_timeout(ctx: &TestContext<'_>) -> TestResult {
    let cloud = ctx.fake_cloud()?;
    let faults = Faults::new(ctx)?;
    let baseline = Baseline::of(cloud);
    let class = ctx.storage_class().await?;
    let w = ctx.workload();
    let late = u64::try_from(SLOWER_THAN_HTTP_TIMEOUT.as_millis()).unwrap_or(u64::MAX);
    faults.inject(FaultRule::new(
        Operation::ShareCreate,
        FaultAction::Latency { ms: late },
    ))?;
    w.create_claim(&test_claim(ctx, CLAIM, &class)).await?;
    // Manila made the share at once; its answer is what is late.
    let made = wait_cloud(
        ctx,
        &baseline,
        "the share being answered late",
        STEP,
        |now| now.shares.len() == 1,
    )
    .await?;
    let made_id = made.shares[0].id.clone();
    let message = wait_for_event(
        ctx,
        "provisioner",
        w.namespace(),
        CLAIM,
        "ProvisioningFailed",
        "timed out",
        STEP,
    )
    .await?;
    ensure_names(
        "ProvisioningFailed",
        &message,
        &["Manila", "/shares", "code = Unavailable"],
    )?;
    let bound = wait_bound(ctx, CLAIM).await?;
    ensure_eq!(
        bound.share_id.as_str(),
        made_id.as_str(),
        "the share of the claim (the one made while the answer was late)"
    );
    ensure_only_share(ctx, &baseline, &bound, 0).await?;
    faults.clear();
    delete_and_ensure_nothing_left(ctx, &baseline, &[CLAIM]).await
}
