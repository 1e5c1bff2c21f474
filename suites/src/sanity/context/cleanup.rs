//! Undoing what a [`CaseContext`] recorded (cut-off calls, publications, stages,
//! snapshots, volumes) and listing what is left.

use std::time::Duration;

use tonic::{Code, Status};

use super::super::verdict::describe_status;
use super::CaseContext;
use super::record::{InFlight, Made};

/// How long cleanup keeps repeating an interrupted create the plugin is still busy with
/// (`Aborted`, `Unavailable`, `DeadlineExceeded`).
const REPEAT_TIMEOUT: Duration = Duration::from_secs(60);

impl CaseContext {
    /// Undoes everything the case left: calls cut off in flight first (creates repeated to
    /// learn what they made, stages and publishes reversed), then node unpublish and
    /// unstage, controller unpublish, then snapshots and volumes deleted newest first (so a
    /// snapshot goes before its source volume and a restored volume before its snapshot).
    /// Returns what could not be undone. What is undone is forgotten as it goes, so a
    /// cleanup cut short leaves exactly the rest in [`CaseContext::leftovers`].
    pub async fn cleanup(&mut self) -> Vec<String> {
        let mut problems = Vec::new();
        while let Some((_, call)) = self.in_flight.first().cloned() {
            let problem = self.undo_in_flight(call).await;
            // Forgotten once undone (or found impossible), not before: a cleanup cut short
            // still lists it.
            self.in_flight.remove(0);
            problems.extend(problem);
        }
        for item in self.made.clone() {
            let Made::Volume {
                id,
                staged_at,
                published_at,
                published_to,
            } = item
            else {
                continue;
            };
            for path in published_at {
                if let Err(s) = self.node_unpublish(&id, &path).await {
                    problems.push(format!(
                        "NodeUnpublishVolume {id} at {path}: {}",
                        describe_status(&s)
                    ));
                }
            }
            if let Some(path) = staged_at
                && let Err(s) = self.node_unstage(&id, &path).await
            {
                problems.push(format!(
                    "NodeUnstageVolume {id} at {path}: {}",
                    describe_status(&s)
                ));
            }
            for node in published_to {
                if let Err(s) = self.controller_unpublish(&id, &node).await {
                    problems.push(format!(
                        "ControllerUnpublishVolume {id} from {node}: {}",
                        describe_status(&s)
                    ));
                }
            }
        }
        for item in self.made.clone().iter().rev() {
            let (kind, id, result) = match item {
                Made::Snapshot { id } => ("DeleteSnapshot", id, self.delete_snapshot(id).await),
                Made::Volume { id, .. } => ("DeleteVolume", id, self.delete_volume(id).await),
            };
            if let Err(s) = result {
                problems.push(format!("{kind} {id}: {}", describe_status(&s)));
            }
        }
        problems
    }

    /// Undoes one call cut off in flight; what could not be undone.
    async fn undo_in_flight(&mut self, call: InFlight) -> Option<String> {
        match call {
            InFlight::CreateVolume(request) => {
                let name = request.name.clone();
                match repeat(|| {
                    let (mut client, request) = (self.controller(), request.clone());
                    async move { client.create_volume(request).await }
                })
                .await
                {
                    Ok(response) => {
                        let id = response.into_inner().volume.unwrap_or_default().volume_id;
                        self.track_volume(&id);
                        None
                    }
                    Err(s) => Some(format!(
                        "CreateVolume {name:?} was cut off and repeating it to learn the volume id failed ({}): a volume of that name may be left",
                        describe_status(&s)
                    )),
                }
            }
            InFlight::CreateSnapshot(request) => {
                let name = request.name.clone();
                match repeat(|| {
                    let (mut client, request) = (self.controller(), request.clone());
                    async move { client.create_snapshot(request).await }
                })
                .await
                {
                    Ok(response) => {
                        let id = response
                            .into_inner()
                            .snapshot
                            .unwrap_or_default()
                            .snapshot_id;
                        self.track_snapshot(&id);
                        None
                    }
                    Err(s) => Some(format!(
                        "CreateSnapshot {name:?} was cut off and repeating it to learn the snapshot id failed ({}): a snapshot of that name may be left",
                        describe_status(&s)
                    )),
                }
            }
            // A publish or stage that never happened unpublishes as a no-op (or NotFound).
            InFlight::NodePublish { volume_id, path } => {
                match self.node_unpublish(&volume_id, &path).await {
                    Err(s) if s.code() != Code::NotFound => Some(format!(
                        "NodeUnpublishVolume {volume_id} at {path} (its publish was cut off): {}",
                        describe_status(&s)
                    )),
                    _ => None,
                }
            }
            InFlight::NodeStage { volume_id, path } => {
                match self.node_unstage(&volume_id, &path).await {
                    Err(s) if s.code() != Code::NotFound => Some(format!(
                        "NodeUnstageVolume {volume_id} at {path} (its stage was cut off): {}",
                        describe_status(&s)
                    )),
                    _ => None,
                }
            }
        }
    }

    /// What this case made and has not undone (yet), one line each.
    pub fn leftovers(&self) -> Vec<String> {
        let mut left: Vec<String> = self
            .in_flight
            .iter()
            .map(|(_, call)| match call {
                InFlight::CreateVolume(r) => format!("maybe a volume named {:?}", r.name),
                InFlight::CreateSnapshot(r) => format!("maybe a snapshot named {:?}", r.name),
                InFlight::NodeStage { volume_id, path } => {
                    format!("maybe volume {volume_id} staged at {path}")
                }
                InFlight::NodePublish { volume_id, path } => {
                    format!("maybe volume {volume_id} published at {path}")
                }
            })
            .collect();
        for item in &self.made {
            match item {
                Made::Snapshot { id } => left.push(format!("snapshot {id}")),
                Made::Volume {
                    id,
                    staged_at,
                    published_at,
                    published_to,
                } => {
                    let mut where_ = Vec::new();
                    where_.extend(published_at.iter().map(|p| format!("published at {p}")));
                    where_.extend(staged_at.iter().map(|p| format!("staged at {p}")));
                    where_.extend(published_to.iter().map(|n| format!("attached to {n}")));
                    if where_.is_empty() {
                        left.push(format!("volume {id}"));
                    } else {
                        left.push(format!("volume {id} ({})", where_.join(", ")));
                    }
                }
            }
        }
        left
    }
}

/// Runs `call` until it succeeds, fails for good, or [`REPEAT_TIMEOUT`] passes; the plugin
/// may still be busy with the call that was cut off (`Aborted`, `Unavailable`,
/// `DeadlineExceeded`), so those are retried with a growing interval.
async fn repeat<T, F, Fut>(mut call: F) -> std::result::Result<T, Status>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, Status>>,
{
    let deadline = tokio::time::Instant::now() + REPEAT_TIMEOUT;
    let mut interval = Duration::from_millis(20);
    loop {
        match call().await {
            Err(s)
                if matches!(
                    s.code(),
                    Code::Aborted | Code::Unavailable | Code::DeadlineExceeded
                ) && tokio::time::Instant::now() + interval < deadline =>
            {
                tokio::time::sleep(interval).await;
                interval = (interval * 2).min(Duration::from_secs(2));
            }
            outcome => return outcome,
        }
    }
}
