//! Claims, volumes and the shares behind them.

use crate::registry::{TestContext, TestError, TestResult};
use fakes::FakeCloud;
use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, ListParams};
use kube_support::wait;

/// The name the provisioner gives the volume of claim `name` (`pvc-<uid>`).
pub(super) async fn volume_name_of(ctx: &TestContext<'_>, name: &str) -> TestResult<String> {
    let claim = ctx.workload().claims.get(name).await?;
    let uid = claim
        .metadata
        .uid
        .ok_or_else(|| TestError::failed(format!("claim {name} has no uid")))?;
    Ok(format!("pvc-{uid}"))
}

/// The phase of the claim `name`.
pub(super) async fn claim_phase(ctx: &TestContext<'_>, name: &str) -> TestResult<String> {
    let claim = ctx.workload().claims.get(name).await?;
    Ok(claim.status.and_then(|s| s.phase).unwrap_or_default())
}

/// The PVs whose claimRef is the claim `name` of the test's namespace.
pub(super) async fn volumes_of_claim(ctx: &TestContext<'_>, name: &str) -> TestResult<Vec<String>> {
    let pvs: Api<PersistentVolume> = Api::all(ctx.client());
    let mut names: Vec<String> = pvs
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|pv| {
            pv.spec
                .as_ref()
                .and_then(|s| s.claim_ref.as_ref())
                .is_some_and(|r| {
                    r.namespace.as_deref() == Some(ctx.namespace())
                        && r.name.as_deref() == Some(name)
                })
        })
        .filter_map(|pv| pv.metadata.name)
        .collect();
    names.sort();
    Ok(names)
}

/// The ids of the fake cloud's shares named `name`.
pub(super) fn shares_named(fake: &FakeCloud, name: &str) -> Vec<String> {
    let mut ids: Vec<String> = fake
        .leftovers()
        .shares
        .into_iter()
        .filter(|s| s.name.as_deref() == Some(name))
        .map(|s| s.id)
        .collect();
    ids.sort();
    ids
}

/// Whether the fake cloud's fault rule `id` has yet to fire.
pub(super) fn is_pending(fake: &FakeCloud, id: u64) -> bool {
    fake.faults().iter().any(|f| f.id == id)
}

/// The status of the fake cloud's share `id`, if it exists.
pub(super) fn share_status(fake: &FakeCloud, id: &str) -> Option<String> {
    fake.leftovers()
        .shares
        .into_iter()
        .find(|s| s.id == id)
        .map(|s| s.status)
}

/// The fake cloud's shares, for messages.
pub(super) fn describe_shares(fake: &FakeCloud) -> String {
    let shares = fake.leftovers().shares;
    if shares.is_empty() {
        return "none".into();
    }
    shares
        .iter()
        .map(|s| format!("{} {} {}", s.id, s.name.as_deref().unwrap_or("-"), s.status))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The ids of the shares whose metadata names the claim `name` of the test's namespace
/// (the provisioner passes them with `--extra-create-metadata`), whatever their name.
pub(super) async fn shares_for_claim(ctx: &TestContext<'_>, name: &str) -> TestResult<Vec<String>> {
    let inspector = ctx
        .environment()
        .and_then(|e| e.inspector())
        .ok_or_else(|| TestError::skip("needs the run's own fake cloud"))?;
    let mut ids: Vec<String> = inspector
        .shares()
        .await?
        .into_iter()
        .filter(|s| {
            s.metadata
                .get("csi.storage.k8s.io/pvc/namespace")
                .map(String::as_str)
                == Some(ctx.namespace())
                && s.metadata
                    .get("csi.storage.k8s.io/pvc/name")
                    .map(String::as_str)
                    == Some(name)
        })
        .map(|s| s.id)
        .collect();
    ids.sort();
    Ok(ids)
}

/// Waits until the cloud no longer has the share `id` (in process on the embedded default,
/// else through the run's cloud client; without either the runner's checks remain).
pub(super) async fn wait_share_gone(ctx: &TestContext<'_>, id: &str) -> TestResult {
    let timeout = ctx.workload().timeouts().claim_bound;
    if let Some(fake) = ctx.environment().and_then(|e| e.fake_cloud()) {
        wait::wait_until(format!("share {id} deleted"), timeout, || async move {
            match share_status(fake, id) {
                None => Ok(Some(())),
                Some(status) => Err(format!("status {status}")),
            }
        })
        .await?;
    } else if let Ok(cloud) = ctx.cloud() {
        wait::wait_until(format!("share {id} deleted"), timeout, || async move {
            match cloud.share(id).await {
                Ok(None) => Ok(Some(())),
                Ok(Some(share)) => Err(format!("status {}", share.status)),
                Err(e) => Err(e.to_string()),
            }
        })
        .await?;
    }
    Ok(())
}
