//! Leader election by a `coordination.k8s.io/v1` Lease, with
//! [`kube-lease-manager`](https://docs.rs/kube-lease-manager): the holder renews before
//! `lease_duration - renew_deadline` runs out; others take the Lease once it has expired;
//! the holder releases it on shutdown so a successor does not wait for expiry.
//!
//! As upstream sidecars do, losing the Lease while leading ends the work with
//! [`LeaderError::LeadershipLost`]; the binary then exits and restarts as a follower.

use std::time::Duration;

use kube::Client;
use kube_lease_manager::{LeaseManagerBuilder, LeaseParams};

/// Leader election failed, or leadership was lost.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// Leader election could not run.
    #[error("leader election")]
    Election(#[source] kube_lease_manager::LeaseManagerError),
    /// Leadership was lost while leading: the process must stop, as upstream sidecars do.
    #[error("lost the leader lease {0}")]
    LeadershipLost(String),
}

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
    /// An election for the Lease `lease_name` (see [`lease_name`]) in `namespace` (else the
    /// pod's namespace, else `default`); the identity is this replica's name
    /// ([`crate::instance::name`], `fallback_host` when it has none) plus a random suffix.
    pub fn new(
        lease_name: String,
        namespace: Option<String>,
        fallback_host: &str,
        lease_duration: Duration,
        renew_deadline: Duration,
    ) -> LeaderElection {
        let host = crate::instance::name(fallback_host);
        LeaderElection {
            lease_name,
            namespace: namespace
                .or_else(crate::instance::namespace)
                .unwrap_or_else(|| "default".into()),
            identity: format!("{host}_{}", uuid::Uuid::new_v4().simple()),
            lease_duration,
            renew_deadline,
        }
    }

    /// Waits to hold the Lease, then runs `work` while holding it. Returns `work`'s
    /// result, or [`LeaderError::LeadershipLost`] if the Lease is lost first; `shutdown`
    /// resolving ends waiting or `work` cleanly. The Lease is released in every case.
    pub async fn run<T>(
        &self,
        client: Client,
        work: impl Future<Output = Result<T, LeaderError>>,
        shutdown: impl Future<Output = ()>,
    ) -> Result<Option<T>, LeaderError> {
        let duration = self.lease_duration.as_secs().max(2);
        let grace = duration
            .saturating_sub(self.renew_deadline.as_secs())
            .clamp(1, duration - 1);
        let manager = LeaseManagerBuilder::new(client, &self.lease_name)
            .with_namespace(&self.namespace)
            .with_parameters(LeaseParams::new(&self.identity, duration, grace))
            .build()
            .await
            .map_err(LeaderError::Election)?;
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
                        return Err(LeaderError::LeadershipLost(self.lease_name.clone()));
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
                            return Err(LeaderError::LeadershipLost(self.lease_name.clone()));
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
