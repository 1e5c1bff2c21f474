//! Provisioning in bulk, as the provisioning benchmarks measure it: every claim of a
//! namespace Bound, then every PersistentVolume and every share gone.

use std::time::Duration;

use fakes::FakeCloud;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Client;
use kube::api::{Api, ListParams};

use crate::wait::wait_for;

/// Waits until `count` claims of `claims` are Bound.
pub async fn wait_claims_bound(
    claims: &Api<PersistentVolumeClaim>,
    count: usize,
    timeout: Duration,
) {
    wait_for(&format!("{count} claims Bound"), timeout, || async {
        let list = claims
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let bound = list
            .items
            .iter()
            .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"))
            .count();
        if bound == count {
            Ok(Some(()))
        } else {
            Err(format!("{bound}/{count} Bound"))
        }
    })
    .await
}

/// Waits until the cluster has no PersistentVolume and `cloud` no share.
pub async fn wait_volumes_and_shares_gone(client: &Client, cloud: &FakeCloud, timeout: Duration) {
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    wait_for("every PV and share deleted", timeout, || async {
        let left = volumes
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .len();
        let shares = cloud.leftovers().shares.len();
        match (left, shares) {
            (0, 0) => Ok(Some(())),
            _ => Err(format!("{left} PVs, {shares} shares left")),
        }
    })
    .await
}
