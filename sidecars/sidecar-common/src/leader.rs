//! Leader election by a `coordination.k8s.io/v1` Lease, with
//! [`kube-lease-manager`](https://docs.rs/kube-lease-manager): the holder renews before
//! `lease_duration - renew_deadline` runs out; others take the Lease once it has expired;
//! the holder releases it on shutdown so a successor does not wait for expiry.
//!
//! As upstream sidecars do, losing the Lease while leading ends the work with
//! [`Error::LeadershipLost`]; the binary then exits and restarts as a follower.

use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseParams};

use crate::error::{Error, Result};
use crate::flags::CommonFlags;

/// Who competes for which Lease, and its timings.
#[derive(Clone, Debug)]
pub struct LeaderElection {
    /// The Lease name.
    pub lease_name: String,
    /// The Lease namespace.
    pub namespace: String,
    /// This instance's holder identity (unique per instance).
    pub identity: String,
    /// Validity after the last renewal.
    pub lease_duration: Duration,
    /// Renew this long before expiry at the latest.
    pub renew_deadline: Duration,
}

impl LeaderElection {
    /// The election `flags` describe for the Lease `lease_name` (see [`lease_name`]); the
    /// identity is this replica's name ([`crate::instance::name`]) plus a random suffix.
    pub fn from_flags(flags: &CommonFlags, lease_name: String) -> LeaderElection {
        let host = crate::instance::name("sidecar");
        LeaderElection {
            lease_name,
            namespace: flags
                .leader_election_namespace
                .clone()
                .or_else(in_cluster_namespace)
                .unwrap_or_else(|| "default".into()),
            identity: format!("{host}_{}", uuid::Uuid::new_v4().simple()),
            lease_duration: flags.lease_duration,
            renew_deadline: flags.renew_deadline,
        }
    }

    /// Waits to hold the Lease, then runs `work` while holding it. Returns `work`'s
    /// result, or [`Error::LeadershipLost`] if the Lease is lost first; `shutdown`
    /// resolving ends waiting or `work` cleanly. The Lease is released in every case.
    pub async fn run<T>(
        &self,
        client: Client,
        work: impl Future<Output = Result<T>>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<Option<T>> {
        let duration = self.lease_duration.as_secs().max(2);
        let grace = duration
            .saturating_sub(self.renew_deadline.as_secs())
            .clamp(1, duration - 1);
        let manager = LeaseManagerBuilder::new(client, &self.lease_name)
            .with_namespace(&self.namespace)
            .with_parameters(LeaseParams::new(&self.identity, duration, grace))
            .build()
            .await
            .map_err(Error::LeaderElection)?;
        let (mut leading, task) = manager.watch().await;
        tracing::info!(lease = %self.lease_name, namespace = %self.namespace, identity = %self.identity,
            "waiting for the leader lease");
        tokio::pin!(shutdown);
        tokio::pin!(work);
        let outcome = async {
            loop {
                if *leading.borrow_and_update() {
                    break;
                }
                tokio::select! {
                    () = &mut shutdown => return Ok(None),
                    changed = leading.changed() => if changed.is_err() {
                        return Err(Error::LeadershipLost(self.lease_name.clone()));
                    },
                }
            }
            tracing::info!(lease = %self.lease_name, identity = %self.identity, "became leader");
            loop {
                tokio::select! {
                    () = &mut shutdown => return Ok(None),
                    result = &mut work => return result.map(Some),
                    changed = leading.changed() => {
                        if changed.is_err() || !*leading.borrow_and_update() {
                            return Err(Error::LeadershipLost(self.lease_name.clone()));
                        }
                    }
                }
            }
        }
        .await;
        // Closing the channel makes the manager release the Lease and stop.
        drop(leading);
        match task.await {
            Ok(Ok(_)) => tracing::info!(lease = %self.lease_name, "released the leader lease"),
            Ok(Err(e)) => {
                tracing::warn!(lease = %self.lease_name, error = %e, "releasing the leader lease failed")
            }
            Err(e) => tracing::warn!(lease = %self.lease_name, error = %e, "the lease task failed"),
        }
        outcome
    }
}

/// A Lease name from a driver name as upstream sanitises it: lower case, every character
/// other than `[a-z0-9-]` replaced by `-`, optionally after a prefix
/// (`manila.csi.openstack.org` → `manila-csi-openstack-org`).
pub fn lease_name(prefix: &str, driver: &str) -> String {
    let sanitized: String = driver
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = format!("{prefix}{sanitized}");
    name.trim_matches('-').chars().take(63).collect()
}

/// The namespace of the pod this runs in, from the service-account mount.
fn in_cluster_namespace() -> Option<String> {
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .ok()
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_names_are_sanitised_driver_names() {
        assert_eq!(
            lease_name("", "manila.csi.openstack.org"),
            "manila-csi-openstack-org"
        );
        assert_eq!(
            lease_name("external-attacher-leader-", "Manila.CSI/x"),
            "external-attacher-leader-manila-csi-x"
        );
    }
}
