//! CreateSnapshot / DeleteSnapshot.

use std::collections::HashMap;

use super::{Controller, GIB};
use crate::error::{Error, Result};
use crate::wait::Progress;
use openstack_client::Credentials;
use openstack_client::manila::{Snapshot, is_manila_id};

/// What CreateSnapshot returns.
#[derive(Clone, Debug, PartialEq)]
pub struct CreatedSnapshot {
    /// Snapshot id.
    pub snapshot_id: String,
    /// Source share id.
    pub source_volume_id: String,
    /// Size in bytes.
    pub size_bytes: i64,
    /// Creation time (seconds since the epoch, nanos).
    pub creation_time: Option<(i64, i32)>,
    /// Status `available`.
    pub ready_to_use: bool,
}

impl Controller {
    /// CreateSnapshot: get-or-create by name. The source share must be of this driver's
    /// protocol and have `snapshot_support` as Manila reports it on the share itself.
    #[tracing::instrument(skip_all, fields(name = %name, source = %source_volume_id))]
    pub async fn create_snapshot(
        &self,
        name: &str,
        source_volume_id: &str,
        secrets: &HashMap<String, String>,
    ) -> Result<CreatedSnapshot> {
        if name.is_empty() {
            return Err(Error::InvalidArgument(
                "name: snapshot name is required".into(),
            ));
        }
        if source_volume_id.is_empty() {
            return Err(Error::InvalidArgument("source_volume_id: required".into()));
        }
        let _guard = self.inflight.begin(name, "snapshot")?;
        let client = self.connect(secrets).await?;
        let snapshot = match client.snapshots_named(name).await?.into_iter().next() {
            Some(existing) if existing.share_id != source_volume_id => {
                return Err(Error::AlreadyExists(format!(
                    "snapshot {name:?} already exists as {} of share {}, not of {source_volume_id}",
                    existing.id, existing.share_id
                )));
            }
            Some(existing) => existing,
            None => {
                if !is_manila_id(source_volume_id) {
                    return Err(Error::NotFound(format!(
                        "source volume {source_volume_id:?} not found: it is not a Manila share id"
                    )));
                }
                let share = client.share(source_volume_id).await.map_err(|e| {
                    if e.is_not_found() {
                        Error::NotFound(format!("source volume {source_volume_id} not found"))
                    } else {
                        e.into()
                    }
                })?;
                self.check_snapshottable(&share)?;
                let description = format!("snapshotted-by={}", self.settings.driver_name);
                client
                    .create_snapshot(source_volume_id, name, &description)
                    .await?
            }
        };
        // No waiting: as the CSI spec expects, a snapshot still `creating` is returned with
        // ready_to_use=false and the CO (the snapshotter) calls again until it is ready.
        let snapshot = match check_snapshot(&client, &snapshot.id, name).await {
            Ok(snapshot) => snapshot,
            // A snapshot in `error` never recovers and a retry would find it again by name:
            // it goes, so that a retry takes a new one and nothing is left behind. The message
            // names the snapshot by its CSI name, not by the id of this attempt: the CO records
            // it in a status, and a message that changed with every attempt would make each
            // retry trigger the next at once.
            Err(Error::ResourceFailed { message, detail_id }) => {
                let rollback = self.rollback_snapshot(&client, &snapshot.id).await;
                return Err(Error::ResourceFailed {
                    message: format!("{message}; {rollback}"),
                    detail_id,
                });
            }
            Err(other) => return Err(other),
        };
        Ok(CreatedSnapshot {
            snapshot_id: snapshot.id.clone(),
            source_volume_id: snapshot.share_id.clone(),
            size_bytes: i64::try_from(snapshot.size)
                .unwrap_or(0)
                .saturating_mul(GIB),
            creation_time: snapshot.created_at.as_deref().and_then(parse_time),
            ready_to_use: snapshot.status == "available",
        })
    }

    /// Whether a snapshot may be taken of `share`, judged by the share's own fields as Manila
    /// reports them (its type may have changed since it was created, and the type is not
    /// always readable by a member): its protocol must be this driver's and its
    /// `snapshot_support` must not be false (a cloud that does not report it decides itself).
    fn check_snapshottable(&self, share: &openstack_client::manila::Share) -> Result<()> {
        let protocol = self.adapter.protocol().manila_name();
        if !share.is_protocol(protocol) {
            return Err(Error::InvalidArgument(format!(
                "share protocol mismatch: source volume {} is a {} share, this driver serves {protocol}",
                share.id,
                share.share_proto.as_deref().unwrap_or("?")
            )));
        }
        if share.snapshot_support == Some(false) {
            return Err(Error::InvalidArgument(format!(
                "source volume {}: the share does not support snapshots (its snapshot_support is false)",
                share.id
            )));
        }
        Ok(())
    }

    /// Deletes a failed snapshot and waits for it to go; returns a sentence for the error.
    async fn rollback_snapshot(
        &self,
        client: &openstack_client::ManilaClient,
        snapshot_id: &str,
    ) -> String {
        let outcome = async {
            if client.delete_snapshot(snapshot_id).await? {
                self.wait_for_snapshot_gone(client, snapshot_id).await?;
            }
            Ok::<(), Error>(())
        }
        .await;
        match outcome {
            Ok(()) => {
                tracing::info!(%snapshot_id, "failed snapshot deleted (rollback)");
                "the failed Manila snapshot was deleted (rollback)".into()
            }
            Err(e) => {
                tracing::warn!(%snapshot_id, error = %e, "rollback of a failed snapshot failed");
                format!("deleting snapshot {snapshot_id} failed too: {e}")
            }
        }
    }

    /// Waits until `snapshot_id` is gone (404); `error_deleting` is Manila's failure.
    async fn wait_for_snapshot_gone(
        &self,
        client: &openstack_client::ManilaClient,
        snapshot_id: &str,
    ) -> Result<()> {
        let what = format!("snapshot {snapshot_id} to be deleted");
        self.settings
            .wait
            .wait(&what, || async {
                match client.snapshot(snapshot_id).await {
                    Err(e) if e.is_not_found() => Ok(Progress::Done(())),
                    Err(e) => Err(e.into()),
                    Ok(s) if s.status == "error_deleting" => {
                        let message = client
                            .newest_error_message(snapshot_id)
                            .await
                            .ok()
                            .flatten();
                        Err(Error::Internal(format!(
                            "snapshot {snapshot_id} is in status error_deleting{}",
                            super::describe_message(message.as_ref())
                        )))
                    }
                    Ok(s) => Ok(Progress::Pending(format!("status {}", s.status))),
                }
            })
            .await
    }

    /// DeleteSnapshot: an unknown id is success, and so is an id that is not a Manila
    /// snapshot id (a UUID), which cannot name one (it is never sent to the cloud).
    #[tracing::instrument(skip_all, fields(snapshot_id = %snapshot_id))]
    pub async fn delete_snapshot(
        &self,
        snapshot_id: &str,
        secrets: &HashMap<String, String>,
    ) -> Result<()> {
        if snapshot_id.is_empty() {
            return Err(Error::InvalidArgument("snapshot_id: required".into()));
        }
        Credentials::try_from(secrets)?;
        if !is_manila_id(snapshot_id) {
            tracing::info!("not a Manila snapshot id: no such snapshot, nothing to delete");
            return Ok(());
        }
        let _guard = self.inflight.begin(snapshot_id, "snapshot id")?;
        let client = self.connect(secrets).await?;
        // Manila refuses to delete a snapshot still being cut: wait until it is done
        // (available or failed), as a delete right after CreateSnapshot must succeed.
        match self.wait_for_snapshot_settled(&client, snapshot_id).await? {
            Settled::Gone => return Ok(()),
            Settled::Deletable => {}
        }
        if !client.delete_snapshot(snapshot_id).await? {
            return Ok(());
        }
        self.wait_for_snapshot_gone(&client, snapshot_id).await
    }

    /// Waits while the snapshot is `creating`; `Gone` when there is no such snapshot.
    async fn wait_for_snapshot_settled(
        &self,
        client: &openstack_client::ManilaClient,
        snapshot_id: &str,
    ) -> Result<Settled> {
        let what = format!("snapshot {snapshot_id} to finish creating before its deletion");
        self.settings
            .wait
            .wait(&what, || async {
                match client.snapshot(snapshot_id).await {
                    Err(e) if e.is_not_found() => Ok(Progress::Done(Settled::Gone)),
                    Err(e) => Err(e.into()),
                    Ok(s) if s.status == "creating" => {
                        Ok(Progress::Pending(format!("status {}", s.status)))
                    }
                    Ok(_) => Ok(Progress::Done(Settled::Deletable)),
                }
            })
            .await
    }
}

/// What a snapshot about to be deleted turned out to be.
enum Settled {
    /// There is no such snapshot: nothing to delete.
    Gone,
    /// Not creating any more: Manila takes the delete (or says why not).
    Deletable,
}

/// Reads a snapshot once: `available` and `creating` are fine (ready or not yet), an error
/// state is the cloud's failure (with its user message), anything else a wrong state.
/// `name` is the CSI snapshot name, which the error messages use.
async fn check_snapshot(
    client: &openstack_client::ManilaClient,
    snapshot_id: &str,
    name: &str,
) -> Result<Snapshot> {
    let snapshot = client.snapshot(snapshot_id).await?;
    match snapshot.status.as_str() {
        "available" | "creating" => Ok(snapshot),
        status if status.contains("error") => {
            let message = client
                .newest_error_message(snapshot_id)
                .await
                .ok()
                .flatten();
            Err(Error::ResourceFailed {
                message: format!(
                    "snapshot {name:?} is in status {status}{}",
                    super::describe_message(message.as_ref())
                ),
                detail_id: message.and_then(|m| m.detail_id),
            })
        }
        status => Err(Error::FailedPrecondition(format!(
            "snapshot {name:?} ({snapshot_id}) is in status {status}"
        ))),
    }
}

/// Manila timestamps: `2024-01-02T03:04:05.678901` (UTC, no zone) or RFC 3339.
fn parse_time(text: &str) -> Option<(i64, i32)> {
    let parsed = chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&chrono::Utc))
        .or_else(|_| {
            chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%dT%H:%M:%S%.f").map(|t| t.and_utc())
        })
        .ok()?;
    Some((
        parsed.timestamp(),
        i32::try_from(parsed.timestamp_subsec_nanos()).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manila_timestamps_parse() {
        assert_eq!(parse_time("1970-01-01T00:00:10.5"), Some((10, 500_000_000)));
        assert_eq!(parse_time("1970-01-01T00:00:10Z"), Some((10, 0)));
        assert_eq!(parse_time("garbage"), None);
    }
}

#[cfg(test)]
mod rollback_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::Arc;
    use std::time::Duration;

    use fakes::{CloudConfig, FakeCloud, FaultAction, FaultRule, Operation, SecretKind, Times};

    use super::*;
    use crate::controller::{ControllerSettings, CreateVolume};
    use crate::protocol::NfsAdapter;
    use crate::wait::WaitPolicy;
    use openstack_client::Connector;

    #[tokio::test]
    async fn a_snapshot_ending_in_error_is_rolled_back_and_a_retry_takes_a_new_one() {
        let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
        let secrets: HashMap<String, String> =
            cloud.secret(SecretKind::Password).into_iter().collect();
        let controller = Controller::new(
            Arc::new(Connector::new("snapshot-tests".into())),
            Arc::new(NfsAdapter),
            ControllerSettings {
                driver_name: "manila.csi.openstack.org".into(),
                cluster_id: None,
                with_topology: false,
                runtime_config_file: None,
                wait: WaitPolicy::with_deadline(Duration::from_secs(5)),
                claims: None,
            },
        );
        let volume = controller
            .create_volume(CreateVolume {
                name: "pvc-source".into(),
                required_bytes: GIB,
                secrets: secrets.clone(),
                ..CreateVolume::default()
            })
            .await
            .unwrap();
        cloud
            .add_fault(
                FaultRule::new(
                    Operation::SnapshotCreate,
                    FaultAction::Error {
                        detail_id: "001".into(),
                        message: Some("the backend could not snapshot".into()),
                    },
                )
                .times(Times::Count(2)),
            )
            .unwrap();
        // Without delays the first look after the create sees `error`.
        cloud.set_delays(fakes::Delays::none());
        let error = controller
            .create_snapshot("snap-1", &volume.volume_id, &secrets)
            .await
            .unwrap_err();
        let text = error.to_string();
        assert!(matches!(error, Error::ResourceFailed { .. }), "{error:?}");
        assert!(
            text.contains("status error")
                && text.contains("the backend could not snapshot")
                && text.contains("rollback"),
            "{text}"
        );
        assert!(
            cloud.leftovers().snapshots.is_empty(),
            "{:#?}",
            cloud.leftovers()
        );
        // A second failed attempt reads the same (the CO acts again on a changed message).
        let again = controller
            .create_snapshot("snap-1", &volume.volume_id, &secrets)
            .await
            .unwrap_err();
        assert_eq!(again.to_string(), text);
        let retried = controller
            .create_snapshot("snap-1", &volume.volume_id, &secrets)
            .await
            .unwrap();
        let snapshots = cloud.leftovers().snapshots;
        assert_eq!(snapshots.len(), 1, "{snapshots:#?}");
        assert_eq!(snapshots[0].id, retried.snapshot_id);
        assert_ne!(snapshots[0].status, "error");
    }
}
