//! The tracked calls of a [`CaseContext`]: each records what it made (or forgets what it
//! undid) so that cleanup can undo the rest.

use std::time::Duration;

use csi_proto::v1;
use tonic::Status;

use super::super::verdict::{CaseResult, Verdict, describe_status};
use super::CaseContext;
use super::record::{InFlight, Made};

impl CaseContext {
    pub(super) fn volume_mut(&mut self, id: &str) -> Option<&mut Made> {
        self.made
            .iter_mut()
            .find(|m| matches!(m, Made::Volume { id: v, .. } if v == id))
    }

    pub(super) fn track_volume(&mut self, id: &str) {
        if !id.is_empty() && self.volume_mut(id).is_none() {
            self.made.push(Made::Volume {
                id: id.to_owned(),
                staged_at: None,
                published_at: Vec::new(),
                published_to: Vec::new(),
            });
        }
    }

    /// CreateVolume; a returned volume is recorded for cleanup.
    pub async fn create_volume(
        &mut self,
        request: v1::CreateVolumeRequest,
    ) -> std::result::Result<v1::Volume, Status> {
        let call = self.started(InFlight::CreateVolume(request.clone()));
        let response = self.controller().create_volume(request).await;
        self.answered(call);
        let volume = response?.into_inner().volume.unwrap_or_default();
        self.track_volume(&volume.volume_id);
        Ok(volume)
    }

    /// CreateVolume that must succeed with a volume id.
    pub async fn must_create_volume(
        &mut self,
        request: v1::CreateVolumeRequest,
    ) -> CaseResult<v1::Volume> {
        let name = request.name.clone();
        let volume = self.create_volume(request).await.map_err(|s| {
            Verdict::Fail(format!(
                "CreateVolume {name:?} failed: {}",
                describe_status(&s)
            ))
        })?;
        if volume.volume_id.is_empty() {
            return Err(Verdict::Fail(format!(
                "CreateVolume {name:?} returned no volume id"
            )));
        }
        Ok(volume)
    }

    /// DeleteVolume; on success the volume is no longer cleaned up.
    pub async fn delete_volume(&mut self, volume_id: &str) -> std::result::Result<(), Status> {
        let request = v1::DeleteVolumeRequest {
            volume_id: volume_id.to_owned(),
            secrets: self.config().secrets.delete_volume_secret.clone(),
        };
        self.controller().delete_volume(request).await?;
        self.made
            .retain(|m| !matches!(m, Made::Volume { id, .. } if id == volume_id));
        Ok(())
    }

    /// CreateSnapshot; a returned snapshot is recorded for cleanup.
    pub async fn create_snapshot(
        &mut self,
        request: v1::CreateSnapshotRequest,
    ) -> std::result::Result<v1::Snapshot, Status> {
        let call = self.started(InFlight::CreateSnapshot(request.clone()));
        let response = self.controller().create_snapshot(request).await;
        self.answered(call);
        let snapshot = response?.into_inner().snapshot.unwrap_or_default();
        self.track_snapshot(&snapshot.snapshot_id);
        Ok(snapshot)
    }

    pub(super) fn track_snapshot(&mut self, id: &str) {
        let known = self
            .made
            .iter()
            .any(|m| matches!(m, Made::Snapshot { id: s } if s == id));
        if !id.is_empty() && !known {
            self.made.push(Made::Snapshot { id: id.to_owned() });
        }
    }

    /// CreateSnapshot that must succeed with a well-formed snapshot.
    pub async fn must_create_snapshot(
        &mut self,
        request: v1::CreateSnapshotRequest,
    ) -> CaseResult<v1::Snapshot> {
        let name = request.name.clone();
        let snapshot = self.create_snapshot(request).await.map_err(|s| {
            Verdict::Fail(format!(
                "CreateSnapshot {name:?} failed: {}",
                describe_status(&s)
            ))
        })?;
        verify_snapshot(&snapshot, &format!("CreateSnapshot {name:?}"))?;
        Ok(snapshot)
    }

    /// Repeats CreateSnapshot (idempotent) until the snapshot is ready to use, with a
    /// growing interval, up to the configured timeout.
    pub async fn create_ready_snapshot(
        &mut self,
        request: v1::CreateSnapshotRequest,
    ) -> CaseResult<v1::Snapshot> {
        let deadline = tokio::time::Instant::now() + self.config().snapshot_ready_timeout;
        let mut interval = Duration::from_millis(20);
        loop {
            let snapshot = self.must_create_snapshot(request.clone()).await?;
            if snapshot.ready_to_use {
                return Ok(snapshot);
            }
            if tokio::time::Instant::now() + interval > deadline {
                return Err(Verdict::Fail(format!(
                    "snapshot {} ({:?}) not ready to use after {:?}",
                    snapshot.snapshot_id,
                    request.name,
                    self.config().snapshot_ready_timeout
                )));
            }
            tokio::time::sleep(interval).await;
            interval = (interval * 2).min(Duration::from_secs(2));
        }
    }

    /// Creates a volume then a snapshot of it (ListSnapshots cases).
    pub async fn snapshot_of_new_volume(
        &mut self,
        volume_name: &str,
        snapshot_name: &str,
    ) -> CaseResult<(v1::Volume, v1::Snapshot)> {
        let volume = self
            .must_create_volume(self.create_request_exact(volume_name))
            .await?;
        let snapshot = self
            .must_create_snapshot(self.snapshot_request(snapshot_name, &volume.volume_id))
            .await?;
        Ok((volume, snapshot))
    }

    /// DeleteSnapshot; on success the snapshot is no longer cleaned up.
    pub async fn delete_snapshot(&mut self, snapshot_id: &str) -> std::result::Result<(), Status> {
        let request = v1::DeleteSnapshotRequest {
            snapshot_id: snapshot_id.to_owned(),
            secrets: self.config().secrets.delete_snapshot_secret.clone(),
        };
        self.controller().delete_snapshot(request).await?;
        self.made
            .retain(|m| !matches!(m, Made::Snapshot { id } if id == snapshot_id));
        Ok(())
    }

    /// ControllerPublishVolume; a success is undone by cleanup.
    pub async fn controller_publish(
        &mut self,
        request: v1::ControllerPublishVolumeRequest,
    ) -> std::result::Result<v1::ControllerPublishVolumeResponse, Status> {
        let (volume_id, node_id) = (request.volume_id.clone(), request.node_id.clone());
        let response = self
            .controller()
            .controller_publish_volume(request)
            .await?
            .into_inner();
        if let Some(Made::Volume { published_to, .. }) = self.volume_mut(&volume_id)
            && !published_to.contains(&node_id)
        {
            published_to.push(node_id);
        }
        Ok(response)
    }

    /// ControllerUnpublishVolume; forgets the publication on success.
    pub async fn controller_unpublish(
        &mut self,
        volume_id: &str,
        node_id: &str,
    ) -> std::result::Result<(), Status> {
        let request = v1::ControllerUnpublishVolumeRequest {
            volume_id: volume_id.to_owned(),
            node_id: node_id.to_owned(),
            secrets: self
                .config()
                .secrets
                .controller_unpublish_volume_secret
                .clone(),
        };
        self.controller()
            .controller_unpublish_volume(request)
            .await?;
        if let Some(Made::Volume { published_to, .. }) = self.volume_mut(volume_id) {
            published_to.retain(|n| n != node_id);
        }
        Ok(())
    }

    /// NodeStageVolume; a success is undone by cleanup.
    pub async fn node_stage(
        &mut self,
        request: v1::NodeStageVolumeRequest,
    ) -> std::result::Result<(), Status> {
        let (volume_id, path) = (
            request.volume_id.clone(),
            request.staging_target_path.clone(),
        );
        let call = self.started(InFlight::NodeStage {
            volume_id: volume_id.clone(),
            path: path.clone(),
        });
        let response = self.node().node_stage_volume(request).await;
        self.answered(call);
        response?;
        if let Some(Made::Volume { staged_at, .. }) = self.volume_mut(&volume_id) {
            *staged_at = Some(path);
        }
        Ok(())
    }

    /// NodeUnstageVolume; forgets the stage on success.
    pub async fn node_unstage(
        &mut self,
        volume_id: &str,
        path: &str,
    ) -> std::result::Result<(), Status> {
        let request = v1::NodeUnstageVolumeRequest {
            volume_id: volume_id.to_owned(),
            staging_target_path: path.to_owned(),
        };
        self.node().node_unstage_volume(request).await?;
        if let Some(Made::Volume { staged_at, .. }) = self.volume_mut(volume_id) {
            *staged_at = None;
        }
        Ok(())
    }

    /// NodePublishVolume; a success is undone by cleanup.
    pub async fn node_publish(
        &mut self,
        request: v1::NodePublishVolumeRequest,
    ) -> std::result::Result<(), Status> {
        let (volume_id, path) = (request.volume_id.clone(), request.target_path.clone());
        let call = self.started(InFlight::NodePublish {
            volume_id: volume_id.clone(),
            path: path.clone(),
        });
        let response = self.node().node_publish_volume(request).await;
        self.answered(call);
        response?;
        if let Some(Made::Volume { published_at, .. }) = self.volume_mut(&volume_id)
            && !published_at.contains(&path)
        {
            published_at.push(path);
        }
        Ok(())
    }

    /// NodeUnpublishVolume; forgets the publication on success.
    pub async fn node_unpublish(
        &mut self,
        volume_id: &str,
        path: &str,
    ) -> std::result::Result<(), Status> {
        let request = v1::NodeUnpublishVolumeRequest {
            volume_id: volume_id.to_owned(),
            target_path: path.to_owned(),
        };
        self.node().node_unpublish_volume(request).await?;
        if let Some(Made::Volume { published_at, .. }) = self.volume_mut(volume_id) {
            published_at.retain(|p| p != path);
        }
        Ok(())
    }
}

/// Checks what csi-sanity requires of every returned snapshot.
pub fn verify_snapshot(snapshot: &v1::Snapshot, what: &str) -> CaseResult {
    let missing: Vec<&str> = [
        ("snapshot_id", snapshot.snapshot_id.is_empty()),
        ("source_volume_id", snapshot.source_volume_id.is_empty()),
        (
            "creation_time",
            snapshot
                .creation_time
                .as_ref()
                .is_none_or(|t| t.seconds == 0 && t.nanos == 0),
        ),
    ]
    .into_iter()
    .filter_map(|(field, missing)| missing.then_some(field))
    .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Verdict::Fail(format!(
            "{what}: the snapshot lacks {}",
            missing.join(", ")
        )))
    }
}
