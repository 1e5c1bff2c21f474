//! CreateVolume: get-or-create a share by name, wait for it, grant access, build the
//! volume context.

use std::collections::HashMap;

use super::{Controller, TOPOLOGY_KEY, gib_to_bytes, size_in_gib};
use crate::error::{Error, Result};
use crate::options::{
    AFFINITY_PARAMETER, ANTI_AFFINITY_PARAMETER, GROUP_ID_PARAMETER, VolumeOptions,
};
use crate::pvc::{AFFINITY, ANTI_AFFINITY, ClaimHints, GROUP_ID, PVC_NAME, PVC_NAMESPACE};
use openstack_client::ManilaClient;
use openstack_client::manila::SCHEDULER_HINTS_MICROVERSION;
use openstack_client::manila::model::{Microversion, SchedulerHints};
use openstack_client::manila::{NewShare, Share, is_manila_id};

/// The scheduler hints of a new share: the StorageClass's `affinity`/`antiAffinity` (share
/// ids, checked when parsed) joined by the claim's annotations (names resolved to ids, ids
/// kept), in that order, repeats dropped; each list comma-joined. None when neither asks for
/// anything; otherwise the cloud must support microversion 2.65.
async fn resolve_hints(
    client: &ManilaClient,
    options: &VolumeOptions,
    claim: Option<&ClaimHints>,
    max_version: Microversion,
) -> Result<Option<SchedulerHints>> {
    let no_claim = ClaimHints::default();
    let claim = claim.unwrap_or(&no_claim);
    let wanted = [
        (
            AFFINITY_PARAMETER,
            AFFINITY,
            &options.affinity,
            &claim.affinity,
        ),
        (
            ANTI_AFFINITY_PARAMETER,
            ANTI_AFFINITY,
            &options.anti_affinity,
            &claim.anti_affinity,
        ),
    ];
    if wanted
        .iter()
        .all(|(_, _, class, annotated)| class.is_empty() && annotated.is_empty())
    {
        return Ok(None);
    }
    if max_version < SCHEDULER_HINTS_MICROVERSION {
        return Err(Error::FailedPrecondition(format!(
            "parameters {AFFINITY_PARAMETER}/{ANTI_AFFINITY_PARAMETER} and annotations {AFFINITY}/{ANTI_AFFINITY} need Manila microversion {SCHEDULER_HINTS_MICROVERSION} (scheduler hints); this cloud supports up to {max_version}"
        )));
    }
    let mut resolved = Vec::with_capacity(2);
    for (_, annotation, class, annotated) in wanted {
        let mut ids: Vec<String> = class.clone();
        for entry in annotated {
            let id = if is_manila_id(entry) {
                entry.clone()
            } else {
                match client.shares_named(entry).await?.as_slice() {
                    [share] => share.id.clone(),
                    [] => {
                        return Err(Error::InvalidArgument(format!(
                            "annotation {annotation}: no share named {entry:?}"
                        )));
                    }
                    _ => {
                        return Err(Error::InvalidArgument(format!(
                            "annotation {annotation}: several shares are named {entry:?}; give its id"
                        )));
                    }
                }
            };
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        resolved.push((!ids.is_empty()).then(|| ids.join(",")));
    }
    let different_host = resolved.pop().flatten();
    let same_host = resolved.pop().flatten();
    Ok(Some(SchedulerHints {
        same_host,
        different_host,
    }))
}

/// Manila's refusal of a share because of its group (no such group, a group that is not
/// `available`, a share type the group does not hold) as InvalidArgument naming `groupID`;
/// any other error unchanged.
fn group_refused(error: Error, group_id: Option<&str>) -> Error {
    match (error, group_id) {
        (
            Error::Cloud(openstack_client::Error::Api {
                status: 400 | 404,
                message,
                ..
            }),
            Some(group),
        ) if message.to_ascii_lowercase().contains("share group") => {
            Error::InvalidArgument(format!(
                "parameter {GROUP_ID_PARAMETER} (or annotation {GROUP_ID}): share group {group}: Manila refused the share: {message}"
            ))
        }
        (error, _) => error,
    }
}

/// One topology segment map (`key → value`).
type Segments = HashMap<String, String>;

/// Accessibility requirements of a CreateVolume request (topology segments).
#[derive(Clone, Debug, Default)]
pub struct TopologyRequirement {
    /// `requisite` segments.
    pub requisite: Vec<HashMap<String, String>>,
    /// `preferred` segments, most preferred first.
    pub preferred: Vec<HashMap<String, String>>,
}

/// A CreateVolume request in plain terms.
#[derive(Clone, Debug, Default)]
pub struct CreateVolume {
    /// Volume (= share) name.
    pub name: String,
    /// `capacity_range.required_bytes` (0 = unspecified).
    pub required_bytes: i64,
    /// `capacity_range.limit_bytes` (0 = unspecified).
    pub limit_bytes: i64,
    /// StorageClass parameters.
    pub parameters: HashMap<String, String>,
    /// OpenStack secrets.
    pub secrets: HashMap<String, String>,
    /// Restore from this snapshot id.
    pub source_snapshot_id: Option<String>,
    /// Topology requirements.
    pub topology: Option<TopologyRequirement>,
}

/// What CreateVolume returns.
#[derive(Clone, Debug, PartialEq)]
pub struct CreatedVolume {
    /// Share id.
    pub volume_id: String,
    /// Share size in bytes.
    pub capacity_bytes: i64,
    /// Volume context: `shareID`, `shareAccessIDs`, node-side options.
    pub context: HashMap<String, String>,
    /// Topology the share is accessible from (with `--with-topology`).
    pub accessible_topology: Vec<HashMap<String, String>>,
    /// Source snapshot, echoed.
    pub source_snapshot_id: Option<String>,
}

impl Controller {
    /// CreateVolume. Idempotent by name; a concurrent request for the same name is
    /// `Aborted`. Everything that can be checked without the cloud (parameters, size, zone)
    /// and the access rules against the cloud's microversion are checked before a share is
    /// created. Once the share exists, any failure deletes it again (reported with the code
    /// of the failure and a sentence on the rollback), except a deadline passing while the
    /// share or its rules are still on their way: that share is kept for the CO's retry. A
    /// share or rule ending in `error` is reported with the code its Manila user message
    /// maps to.
    #[tracing::instrument(skip_all, fields(name = %request.name))]
    pub async fn create_volume(&self, request: CreateVolume) -> Result<CreatedVolume> {
        if request.name.is_empty() {
            return Err(Error::InvalidArgument(
                "name: volume name is required".into(),
            ));
        }
        let options = VolumeOptions::try_from(&request.parameters)?;
        let metadata = options.share_metadata(self.settings.cluster_id.as_deref())?;
        let size = size_in_gib(request.required_bytes, request.limit_bytes)?;
        let (zone, accessible_topology) = self.placement(&options, request.topology.as_ref())?;
        let claim_hints = self.claim_hints(&request.parameters).await?;
        let _guard = self.inflight.begin(&request.name, "volume")?;
        let client = self.connect(&request.secrets).await?;
        let max_version = client.check_version().await?;
        self.adapter
            .check_access(&options, &request.name, max_version)?;
        let scheduler_hints =
            resolve_hints(&client, &options, claim_hints.as_ref(), max_version).await?;
        // The claim's group overrides the class's, as upstream.
        let group_id = claim_hints
            .as_ref()
            .and_then(|c| c.group_id.clone())
            .or_else(|| options.group_id.clone());

        let share = match client.shares_named(&request.name).await?.into_iter().next() {
            Some(existing) => {
                self.check_existing(&existing, &request, size, group_id.as_deref())?;
                tracing::debug!(share_id = %existing.id, status = %existing.status, "share exists");
                existing
            }
            None => {
                if let Some(snapshot_id) = &request.source_snapshot_id {
                    self.check_restorable(&client, snapshot_id, size).await?;
                }
                let new = NewShare {
                    name: request.name.clone(),
                    size,
                    protocol: self.adapter.protocol().manila_name().into(),
                    share_type: options.share_type.clone(),
                    availability_zone: zone.clone(),
                    share_network_id: options.share_network_id.clone(),
                    metadata,
                    snapshot_id: request.source_snapshot_id.clone(),
                    description: format!("provisioned-by={}", self.settings.driver_name),
                    scheduler_hints: scheduler_hints.clone(),
                    share_group_id: group_id.clone(),
                };
                let share = client
                    .create_share(&new)
                    .await
                    .map_err(|e| group_refused(e.into(), group_id.as_deref()))?;
                tracing::info!(share_id = %share.id, size, "share created");
                share
            }
        };

        let share = match self
            .wait_for_share(
                &client,
                &share.id,
                "available",
                &["creating", "creating_from_snapshot"],
            )
            .await
        {
            Ok(share) => share,
            Err(Error::ResourceFailed { message, detail_id }) => {
                let rollback = self.rollback(&client, &share.id).await;
                return Err(Error::ResourceFailed {
                    message: format!("volume {:?}: {message}; {rollback}", request.name),
                    detail_id,
                });
            }
            Err(error) => return Err(self.fail(&client, &share.id, &request.name, error).await),
        };

        let rules = match self
            .adapter
            .grant_access(&client, &share, &options, self.settings.wait)
            .await
        {
            Ok(rules) => rules,
            // A rule Manila could not apply stays in `error` and a retry would find it again:
            // the share goes (with its rules), so that a retry starts afresh and a claim
            // deleted meanwhile leaves nothing behind.
            Err(Error::ResourceFailed { message, detail_id }) => {
                let cloud_message = client.newest_error_message(&share.id).await.ok().flatten();
                let rollback = self.rollback(&client, &share.id).await;
                return Err(Error::ResourceFailed {
                    message: format!(
                        "volume {:?}: {message}{}; {rollback}",
                        request.name,
                        super::describe_message(cloud_message.as_ref())
                    ),
                    detail_id: detail_id.or(cloud_message.and_then(|m| m.detail_id)),
                });
            }
            Err(error) => return Err(self.fail(&client, &share.id, &request.name, error).await),
        };
        let mut context: HashMap<String, String> =
            options.cephfs.node_context().into_iter().collect();
        context.insert("shareID".into(), share.id.clone());
        // As upstream, the share group and the hints go into the volume context (the node
        // side accepts and ignores them).
        if let Some(group) = &group_id {
            context.insert(GROUP_ID_PARAMETER.into(), group.clone());
        }
        if let Some(hints) = &scheduler_hints {
            for (key, ids) in [
                (AFFINITY_PARAMETER, &hints.same_host),
                (ANTI_AFFINITY_PARAMETER, &hints.different_host),
            ] {
                if let Some(ids) = ids {
                    context.insert(key.into(), ids.clone());
                }
            }
        }
        context.insert(
            "shareAccessIDs".into(),
            rules
                .iter()
                .map(|r| r.id.as_str())
                .collect::<Vec<_>>()
                .join(","),
        );
        Ok(CreatedVolume {
            volume_id: share.id.clone(),
            capacity_bytes: gib_to_bytes(&format!("share {}", share.id), share.size)?,
            context,
            accessible_topology,
            source_snapshot_id: share.snapshot_id.clone().or(request.source_snapshot_id),
        })
    }

    /// What a failure after the share exists becomes: past a deadline the share is kept (it
    /// is still on its way and the CO retries until it gets an answer); anything else rolls
    /// the share back, so that neither a retry nor a claim deleted meanwhile finds a share
    /// that no volume owns.
    async fn fail(&self, client: &ManilaClient, share_id: &str, name: &str, error: Error) -> Error {
        match error {
            Error::DeadlineExceeded(message) => Error::DeadlineExceeded(format!(
                "volume {name:?}: {message}; the share is kept and a retry will wait for it again"
            )),
            error => {
                tracing::warn!(%share_id, %error, "CreateVolume failed after the share was created; rolling back");
                let outcome = self.rollback(client, share_id).await;
                Error::CreateFailed {
                    volume: name.to_string(),
                    source: Box::new(error),
                    outcome,
                }
            }
        }
    }

    /// With `--pvc-annotations`, the hints the request's claim asks for (none when the
    /// request names no claim, as without the provisioner's `--extra-create-metadata`).
    async fn claim_hints(
        &self,
        parameters: &HashMap<String, String>,
    ) -> Result<Option<ClaimHints>> {
        let Some(claims) = &self.settings.claims else {
            return Ok(None);
        };
        let (Some(name), Some(namespace)) =
            (parameters.get(PVC_NAME), parameters.get(PVC_NAMESPACE))
        else {
            tracing::debug!(
                "--pvc-annotations: the request names no claim (extra-create-metadata off?)"
            );
            return Ok(None);
        };
        let annotations = claims.annotations(namespace, name).await?;
        let hints = ClaimHints::from_annotations(&format!("{namespace}/{name}"), &annotations)?;
        Ok((!hints.is_empty()).then_some(hints))
    }

    /// The share's Manila zone and the volume's accessible topology, as upstream decides
    /// them. The zone is `availability`; with `--with-topology`, `autoTopology` and no
    /// `availability`, it is the zone of the first preferred (else requisite) segment with
    /// the topology key, and the volume is accessible from that zone only. Otherwise, with
    /// `--with-topology`, the volume is accessible from the request's preferred segments as
    /// given (the operator maps compute zones to the Manila zone with `allowedTopologies`):
    /// the Manila zone is never presented as a compute zone.
    fn placement(
        &self,
        options: &VolumeOptions,
        topology: Option<&TopologyRequirement>,
    ) -> Result<(Option<String>, Vec<Segments>)> {
        let availability = options.availability.clone().filter(|z| !z.is_empty());
        if !self.settings.with_topology {
            return Ok((availability, Vec::new()));
        }
        if options.auto_topology && availability.is_none() {
            let zone = topology.and_then(|t| {
                t.preferred
                    .iter()
                    .chain(t.requisite.iter())
                    .find_map(|segment| segment.get(TOPOLOGY_KEY).cloned())
            });
            return match zone {
                Some(zone) => Ok((
                    Some(zone.clone()),
                    vec![HashMap::from([(TOPOLOGY_KEY.to_string(), zone)])],
                )),
                None => Err(Error::InvalidArgument(format!(
                    "parameter autoTopology: the request has no accessibility requirement with key {TOPOLOGY_KEY}"
                ))),
            };
        }
        let preferred = topology.map(|t| t.preferred.clone()).unwrap_or_default();
        Ok((availability, preferred))
    }

    fn check_existing(
        &self,
        share: &Share,
        request: &CreateVolume,
        size: u64,
        group_id: Option<&str>,
    ) -> Result<()> {
        let protocol = self.adapter.protocol().manila_name();
        let mut mismatches = Vec::new();
        if share.size != size {
            mismatches.push(format!("size {} GiB, requested {size} GiB", share.size));
        }
        if share
            .share_proto
            .as_deref()
            .is_some_and(|p| !p.eq_ignore_ascii_case(protocol))
        {
            mismatches.push(format!(
                "protocol {}, this driver serves {protocol}",
                share.share_proto.as_deref().unwrap_or("?")
            ));
        }
        if let Some(snapshot) = &request.source_snapshot_id
            && share.snapshot_id.as_ref() != Some(snapshot)
        {
            mismatches.push(format!(
                "source snapshot {:?}, requested {snapshot}",
                share.snapshot_id
            ));
        }
        if let Some(group) = group_id
            && share.share_group_id.as_deref() != Some(group)
        {
            mismatches.push(format!(
                "share group {}, requested {group}",
                share.share_group_id.as_deref().unwrap_or("none")
            ));
        }
        if mismatches.is_empty() {
            Ok(())
        } else {
            Err(Error::AlreadyExists(format!(
                "volume {:?} already exists as share {} with {}",
                request.name,
                share.id,
                mismatches.join(", ")
            )))
        }
    }

    async fn check_restorable(
        &self,
        client: &ManilaClient,
        snapshot_id: &str,
        size: u64,
    ) -> Result<()> {
        if !is_manila_id(snapshot_id) {
            return Err(Error::NotFound(format!(
                "source snapshot {snapshot_id:?} not found: it is not a Manila snapshot id"
            )));
        }
        let snapshot = client.snapshot(snapshot_id).await.map_err(|e| {
            if e.is_not_found() {
                Error::NotFound(format!("source snapshot {snapshot_id} not found"))
            } else {
                e.into()
            }
        })?;
        match snapshot.status.as_str() {
            "available" => {}
            "creating" => {
                return Err(Error::Unavailable(format!(
                    "source snapshot {snapshot_id} is still creating; retry when it is available"
                )));
            }
            other => {
                return Err(Error::FailedPrecondition(format!(
                    "source snapshot {snapshot_id} is in status {other}, not available"
                )));
            }
        }
        if size < snapshot.size {
            return Err(Error::OutOfRange(format!(
                "capacity_range: {size} GiB is smaller than source snapshot {snapshot_id} ({} GiB)",
                snapshot.size
            )));
        }
        // Whether the snapshot can be restored is a property of its parent share as Manila
        // reports it (fixed when that share was created), not of the StorageClass's type.
        let parent = client.share(&snapshot.share_id).await.map_err(|e| {
            if e.is_not_found() {
                Error::NotFound(format!(
                    "share {} of source snapshot {snapshot_id} not found",
                    snapshot.share_id
                ))
            } else {
                e.into()
            }
        })?;
        let protocol = self.adapter.protocol().manila_name();
        if !parent.is_protocol(protocol) {
            return Err(Error::InvalidArgument(format!(
                "share protocol mismatch: source snapshot {snapshot_id} is of a {} share ({}), this driver serves {protocol}",
                parent.share_proto.as_deref().unwrap_or("?"),
                parent.id
            )));
        }
        if parent.create_share_from_snapshot_support == Some(false) {
            return Err(Error::InvalidArgument(format!(
                "source snapshot {snapshot_id}: its share {} does not allow creating shares from its snapshots (create_share_from_snapshot_support is false)",
                parent.id
            )));
        }
        Ok(())
    }

    /// Deletes a failed share and waits for it to go; returns a sentence for the error.
    async fn rollback(&self, client: &ManilaClient, share_id: &str) -> String {
        let outcome = async {
            client.delete_share(share_id).await?;
            self.wait_for_share_gone(client, share_id).await
        }
        .await;
        match outcome {
            Ok(()) => format!("share {share_id} was deleted (rollback)"),
            Err(e) => {
                tracing::warn!(%share_id, error = %e, "rollback of a failed share failed");
                format!("deleting share {share_id} failed too: {e}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::Arc;
    use std::time::Duration;

    use fakes::{CloudConfig, FakeCloud, FaultAction, FaultRule, Operation, SecretKind};

    use super::*;
    use crate::controller::{ControllerSettings, GIB};
    use crate::protocol::NfsAdapter;
    use crate::wait::WaitPolicy;
    use openstack_client::Connector;

    fn controller() -> Controller {
        Controller::new(
            Arc::new(Connector::new("create-tests".into())),
            Arc::new(NfsAdapter),
            ControllerSettings {
                driver_name: "manila.csi.openstack.org".into(),
                cluster_id: None,
                with_topology: false,
                runtime_config_file: None,
                wait: WaitPolicy::with_deadline(Duration::from_secs(5)),
                claims: None,
            },
        )
    }

    fn request(cloud: &FakeCloud, name: &str) -> CreateVolume {
        CreateVolume {
            name: name.into(),
            required_bytes: GIB,
            secrets: cloud.secret(SecretKind::Password).into_iter().collect(),
            ..CreateVolume::default()
        }
    }

    #[tokio::test]
    async fn an_access_rule_ending_in_error_rolls_the_share_back_naming_manilas_message() {
        let cloud = FakeCloud::start(CloudConfig::default()).await.unwrap();
        cloud
            .add_fault(FaultRule::new(
                Operation::AccessAllow,
                FaultAction::Error {
                    detail_id: "001".into(),
                    message: Some("the backend refused the export".into()),
                },
            ))
            .unwrap();
        let controller = controller();
        let error = controller
            .create_volume(request(&cloud, "pvc-rule"))
            .await
            .unwrap_err();
        let text = error.to_string();
        assert!(matches!(error, Error::ResourceFailed { .. }), "{error:?}");
        assert!(
            text.contains("pvc-rule")
                && text.contains("in state error")
                && text.contains("the backend refused the export")
                && text.contains("rollback"),
            "{text}"
        );
        let leftovers = cloud.leftovers();
        assert!(leftovers.is_empty(), "{leftovers:#?}");
        // The retry starts afresh: a new share whose rule becomes active.
        let volume = controller
            .create_volume(request(&cloud, "pvc-rule"))
            .await
            .unwrap();
        let leftovers = cloud.leftovers();
        assert_eq!(leftovers.shares.len(), 1, "{leftovers:#?}");
        assert_eq!(leftovers.shares[0].id, volume.volume_id);
        assert_eq!(leftovers.access_rules.len(), 1, "{leftovers:#?}");
        assert_eq!(leftovers.access_rules[0].status, "active");
    }
}
