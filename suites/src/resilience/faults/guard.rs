//! The fault guard (inject, clear, cleared on drop), what the cloud holds, and the Events
//! and claims the tests wait on.

use super::STEP;
use crate::e2e::timeline::Timeline;
use crate::e2e::workload::{BoundClaim, claim};
use crate::registry::{TestContext, TestError, TestResult};
use crate::storage::provisioning::access_mode;
use crate::{ensure, ensure_eq};
use fakes::{FakeCloud, FaultAction, FaultRule, Leftovers, Times};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::DeleteParams;
use kube_support::wait;
use kube_support::wait::wait_event;
use std::collections::BTreeSet;
use std::time::Duration;

/// The fault rules a test injected, cleared when the test ends (also when it fails).
pub(super) struct Faults<'a> {
    pub(super) cloud: &'a FakeCloud,
    pub(super) timeline: Timeline,
}

impl<'a> Faults<'a> {
    pub(super) fn new(ctx: &'a TestContext<'a>) -> TestResult<Self> {
        let cloud = ctx.fake_cloud()?;
        let leftover = cloud.faults();
        if !leftover.is_empty() {
            // Not this test's doing, but it would change what this test sees.
            cloud.clear_faults();
            let rules: Vec<String> = leftover.iter().map(|r| describe_rule(&r.rule)).collect();
            tracing::warn!(?rules, "fault rules left by an earlier test cleared");
            ctx.timeline().record(
                "clear",
                format!("rules left by an earlier test: {}", rules.join("; ")),
            );
        }
        Ok(Faults {
            cloud,
            timeline: ctx.timeline().clone(),
        })
    }

    /// Adds `rule`, recording it as `inject`.
    pub(super) fn inject(&self, rule: FaultRule) -> TestResult {
        let text = describe_rule(&rule);
        self.cloud
            .add_fault(rule)
            .map_err(|e| TestError::failed(format!("injecting {text}: {e}")))?;
        self.timeline.record("inject", text);
        Ok(())
    }

    /// Removes every rule, recording it as `clear` with what each rule did.
    pub(super) fn clear(&self) {
        let rules = self.cloud.faults();
        self.cloud.clear_faults();
        let fired: Vec<String> = rules
            .iter()
            .map(|r| format!("{} (fired {} times)", describe_rule(&r.rule), r.fired))
            .collect();
        self.timeline.record(
            "clear",
            if fired.is_empty() {
                "no rule left (every one was spent)".to_string()
            } else {
                fired.join("; ")
            },
        );
    }
}

impl Drop for Faults<'_> {
    fn drop(&mut self) {
        if !self.cloud.faults().is_empty() {
            self.clear();
        }
    }
}

/// `ShareCreate: HTTP 500 "…", every time`.
pub(super) fn describe_rule(rule: &FaultRule) -> String {
    let action = match &rule.action {
        FaultAction::HttpError { status, message } => format!(
            "HTTP {status} {:?}",
            message.as_deref().unwrap_or("(generic message)")
        ),
        FaultAction::Latency { ms } => format!("answer after {ms} ms"),
        FaultAction::Stuck { status } => format!(
            "never finish (stay {})",
            status.as_deref().unwrap_or("in the transitional state")
        ),
        FaultAction::Error { detail_id, message } => format!(
            "end in error, user message detail {detail_id} {:?}",
            message.as_deref().unwrap_or("(Manila's text)")
        ),
    };
    let times = match rule.times {
        Times::Count(1) => "once".to_string(),
        Times::Count(n) => format!("{n} times"),
        Times::Always(_) => "every time".to_string(),
    };
    let resource = rule
        .resource
        .as_deref()
        .map(|r| format!(" on {r}"))
        .unwrap_or_default();
    format!("{:?}{resource}: {action}, {times}", rule.operation)
}

/// What the cloud held when the test began: anything else is the test's.
pub(super) struct Baseline {
    pub(super) shares: BTreeSet<String>,
    pub(super) snapshots: BTreeSet<String>,
    pub(super) rules: BTreeSet<String>,
}

impl Baseline {
    pub(super) fn of(cloud: &FakeCloud) -> Baseline {
        let now = cloud.leftovers();
        Baseline {
            shares: now.shares.into_iter().map(|s| s.id).collect(),
            snapshots: now.snapshots.into_iter().map(|s| s.id).collect(),
            rules: now.access_rules.into_iter().map(|r| r.id).collect(),
        }
    }

    /// The shares, snapshots and access rules made since.
    pub(super) fn new_in(&self, cloud: &FakeCloud) -> Leftovers {
        let mut now = cloud.leftovers();
        now.shares.retain(|s| !self.shares.contains(&s.id));
        now.snapshots.retain(|s| !self.snapshots.contains(&s.id));
        now.access_rules.retain(|r| !self.rules.contains(&r.id));
        now
    }
}

/// `share <id> "<name>" <status>, …; snapshot …; rule …`, or `nothing`.
pub(super) fn describe_resources(resources: &Leftovers) -> String {
    let mut parts = Vec::new();
    for share in &resources.shares {
        parts.push(format!(
            "share {} {:?} {}",
            share.id,
            share.name.as_deref().unwrap_or(""),
            share.status
        ));
    }
    for snapshot in &resources.snapshots {
        parts.push(format!(
            "snapshot {} of share {} {}",
            snapshot.id,
            snapshot.share_id.as_deref().unwrap_or("?"),
            snapshot.status
        ));
    }
    for rule in &resources.access_rules {
        parts.push(format!(
            "access rule {} {} on share {} {}",
            rule.id,
            rule.name.as_deref().unwrap_or(""),
            rule.share_id.as_deref().unwrap_or("?"),
            rule.status
        ));
    }
    if parts.is_empty() {
        "nothing".into()
    } else {
        parts.join("; ")
    }
}

/// Waits until the cloud's new resources satisfy `wanted` (`what` says what that is) and
/// returns them; a failure says what was last seen.
pub(super) async fn wait_cloud(
    ctx: &TestContext<'_>,
    baseline: &Baseline,
    what: &str,
    timeout: Duration,
    wanted: impl Fn(&Leftovers) -> bool,
) -> TestResult<Leftovers> {
    let cloud = ctx.fake_cloud()?;
    let found = wait::wait_until(format!("the cloud to hold {what}"), timeout, || {
        let now = baseline.new_in(cloud);
        let outcome = if wanted(&now) {
            Ok(Some(now))
        } else {
            Err(describe_resources(&now))
        };
        std::future::ready(outcome)
    })
    .await;
    let now = ctx.workload().check(what, found).await?;
    ctx.timeline().record("cloud", describe_resources(&now));
    Ok(now)
}

/// Waits for the event `reason` about `object` (in `namespace`) containing `contains`;
/// records it as seen by `source` and returns its message.
pub(super) async fn wait_for_event(
    ctx: &TestContext<'_>,
    source: &str,
    namespace: &str,
    object: &str,
    reason: &str,
    contains: &str,
    timeout: Duration,
) -> TestResult<String> {
    let found = wait_event(&ctx.client(), namespace, object, reason, contains, timeout).await;
    let event = ctx
        .workload()
        .check(&format!("a {reason} event about {object}"), found)
        .await?;
    let message = event.message.unwrap_or_default();
    ctx.timeline()
        .record(source, format!("{reason} about {object}: {message}"));
    Ok(message)
}

/// Fails unless the event message names every one of `expected`.
pub(super) fn ensure_names(reason: &str, message: &str, expected: &[&str]) -> TestResult {
    let missing: Vec<&&str> = expected.iter().filter(|e| !message.contains(**e)).collect();
    ensure!(
        missing.is_empty(),
        "the {reason} event does not name {missing:?}: {message}"
    );
    Ok(())
}

/// The claim's phase.
pub(super) async fn claim_phase(ctx: &TestContext<'_>, name: &str) -> TestResult<String> {
    let claim = ctx.workload().claims.get(name).await?;
    Ok(claim
        .status
        .and_then(|s| s.phase)
        .unwrap_or_else(|| "(none)".into()))
}

/// Fails unless the claim is still Pending (the fault holds it back).
pub(super) async fn ensure_pending(ctx: &TestContext<'_>, name: &str) -> TestResult {
    let phase = claim_phase(ctx, name).await?;
    ctx.timeline()
        .record("cluster", format!("claim {name} is {phase}"));
    ensure_eq!(
        phase.as_str(),
        "Pending",
        "the phase of claim {name} while the fault lasts"
    );
    Ok(())
}

/// Waits until the claim is Bound and records it.
pub(super) async fn wait_bound(ctx: &TestContext<'_>, name: &str) -> TestResult<BoundClaim> {
    let bound = ctx.workload().wait_bound(name).await?;
    ctx.timeline().record(
        "cluster",
        format!(
            "claim {name} Bound to {} (share {})",
            bound.volume_name(),
            bound.share_id
        ),
    );
    Ok(bound)
}

/// The cloud holds exactly one new share, the claim's, named after its PV, with active
/// access rules only on it (and whatever `snapshots` new snapshots).
pub(super) async fn ensure_only_share(
    ctx: &TestContext<'_>,
    baseline: &Baseline,
    bound: &BoundClaim,
    snapshots: usize,
) -> TestResult {
    let now = wait_cloud(
        ctx,
        baseline,
        &format!("only share {} with active access rules", bound.share_id),
        STEP,
        |now| {
            now.shares.len() == 1
                && now.access_rules.iter().all(|r| r.status == "active")
                && now.snapshots.len() == snapshots
        },
    )
    .await?;
    ensure_eq!(
        now.shares[0].id.as_str(),
        bound.share_id.as_str(),
        "the one new share ({})",
        describe_resources(&now)
    );
    ensure_eq!(
        now.shares[0].status.as_str(),
        "available",
        "the share's status"
    );
    ensure!(
        !now.access_rules.is_empty()
            && now
                .access_rules
                .iter()
                .all(|r| r.share_id.as_deref() == Some(bound.share_id.as_str())),
        "the access rules are not all on share {}: {}",
        bound.share_id,
        describe_resources(&now)
    );
    // The same through Manila's API, by the name the driver gives the share.
    let named = ctx.cloud()?.shares_named(bound.volume_name()).await?;
    let ids: Vec<&str> = named.iter().map(|s| s.id.as_str()).collect();
    ensure_eq!(
        ids,
        vec![bound.share_id.as_str()],
        "the shares Manila lists named {}",
        bound.volume_name()
    );
    Ok(())
}

/// Deletes the claims `names` and waits until the cloud holds nothing the test made.
pub(super) async fn delete_and_ensure_nothing_left(
    ctx: &TestContext<'_>,
    baseline: &Baseline,
    names: &[&str],
) -> TestResult {
    let w = ctx.workload();
    for name in names {
        w.claims.delete(name, &DeleteParams::default()).await?;
        ctx.timeline()
            .record("cluster", format!("deleting claim {name}"));
    }
    wait_cloud(
        ctx,
        baseline,
        "nothing the test made (no share, snapshot or access rule)",
        STEP,
        |now| now.is_empty(),
    )
    .await?;
    Ok(())
}

/// The claim `name` of `class` in the test's size and access mode.
pub(super) fn test_claim(ctx: &TestContext<'_>, name: &str, class: &str) -> PersistentVolumeClaim {
    claim(name, Some(class), &ctx.claim_size(), access_mode(ctx))
}
