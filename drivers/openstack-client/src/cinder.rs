//! Cinder v3: volumes, snapshots and the volume availability zones.

use std::collections::BTreeMap;

use reqwest::Method;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::block_storage::{AvailabilityZone, BlockStorageCloud, Service, decode, decode_zones};
use crate::error::Result;

/// A Cinder volume as `GET /volumes/{id}` shows it.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Volume {
    /// Volume id.
    pub id: String,
    /// Name (the CSI volume name).
    #[serde(default)]
    pub name: Option<String>,
    /// Size in GiB.
    pub size: i64,
    /// `creating`, `available`, `in-use`, `error`, …
    pub status: String,
    /// Availability zone.
    #[serde(default)]
    pub availability_zone: Option<String>,
    /// Volume type name.
    #[serde(default)]
    pub volume_type: Option<String>,
    /// Whether the volume may attach to several servers.
    #[serde(default)]
    pub multiattach: bool,
    /// Current attachments.
    #[serde(default)]
    pub attachments: Vec<Attachment>,
    /// The snapshot it was made from.
    #[serde(default)]
    pub snapshot_id: Option<String>,
    /// The volume it was cloned from.
    #[serde(default)]
    pub source_volid: Option<String>,
}

/// One attachment of a volume.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Attachment {
    /// The Nova server.
    #[serde(default)]
    pub server_id: String,
    /// The device name Nova chose.
    #[serde(default)]
    pub device: Option<String>,
}

impl Volume {
    /// Whether the volume is attached to `server`.
    pub fn attached_to(&self, server: &str) -> bool {
        self.attachments.iter().any(|a| a.server_id == server)
    }
}

/// A Cinder snapshot.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Snapshot {
    /// Snapshot id.
    pub id: String,
    /// Name (the CSI snapshot name).
    #[serde(default)]
    pub name: Option<String>,
    /// The source volume.
    pub volume_id: String,
    /// Size in GiB.
    pub size: i64,
    /// `creating`, `available`, `error`, …
    pub status: String,
    /// ISO 8601 creation time.
    #[serde(default)]
    pub created_at: Option<String>,
}

/// What CreateVolume asks Cinder for.
#[derive(Clone, Debug, Default)]
pub struct NewVolume {
    /// Name.
    pub name: String,
    /// Size in GiB.
    pub size: i64,
    /// Volume type.
    pub volume_type: Option<String>,
    /// Availability zone.
    pub availability_zone: Option<String>,
    /// Source snapshot.
    pub snapshot_id: Option<String>,
    /// Source volume.
    pub source_volid: Option<String>,
    /// Metadata.
    pub metadata: BTreeMap<String, String>,
    /// Scheduler hints (`OS-SCH-HNT:scheduler_hints`), when any.
    pub scheduler_hints: Option<SchedulerHints>,
}

/// Cinder's volume placement hints (the `OS-SCH-HNT` extension of the v3 API; no
/// microversion): volume ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SchedulerHints {
    /// `same_host`: create the volume on the back end of these volumes.
    pub same_host: Vec<String>,
    /// `different_host`: create it away from these volumes' back ends.
    pub different_host: Vec<String>,
}

impl SchedulerHints {
    /// The `OS-SCH-HNT:scheduler_hints` object: each non-empty list as a list of ids.
    pub fn to_json(&self) -> serde_json::Value {
        let mut hints = serde_json::Map::new();
        for (key, ids) in [
            ("same_host", &self.same_host),
            ("different_host", &self.different_host),
        ] {
            if !ids.is_empty() {
                hints.insert(key.into(), json!(ids));
            }
        }
        serde_json::Value::Object(hints)
    }
}

fn query(value: &str) -> String {
    let mut out = String::new();
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

impl BlockStorageCloud {
    /// The volume availability zones (`GET /os-availability-zone`), in Cinder's order.
    pub async fn volume_availability_zones(&self) -> Result<Vec<AvailabilityZone>> {
        let path = "/os-availability-zone";
        let body = self
            .request(Service::Cinder, Method::GET, path, None)
            .await?;
        decode_zones("Cinder", path, body)
    }

    /// `GET /volumes/{id}`.
    pub async fn volume(&self, id: &str) -> Result<Volume> {
        let path = format!("/volumes/{id}");
        let body = self
            .request(Service::Cinder, Method::GET, &path, None)
            .await?;
        decode("Cinder", &path, body["volume"].clone())
    }

    /// `GET /volumes/detail`, optionally filtered by name.
    pub async fn volumes(&self, name: Option<&str>) -> Result<Vec<Volume>> {
        let path = match name {
            Some(name) => format!("/volumes/detail?name={}", query(name)),
            None => "/volumes/detail".to_string(),
        };
        let body = self
            .request(Service::Cinder, Method::GET, &path, None)
            .await?;
        let volumes: Vec<Volume> = decode("Cinder", &path, body["volumes"].clone())?;
        // Filters are hints to some clouds: keep only exact matches.
        Ok(volumes
            .into_iter()
            .filter(|v| name.is_none_or(|n| v.name.as_deref() == Some(n)))
            .collect())
    }

    /// `POST /volumes`.
    pub async fn create_volume(&self, new: &NewVolume) -> Result<Volume> {
        let mut volume = json!({ "name": new.name, "size": new.size, "metadata": new.metadata });
        let optional = [
            ("volume_type", &new.volume_type),
            ("availability_zone", &new.availability_zone),
            ("snapshot_id", &new.snapshot_id),
            ("source_volid", &new.source_volid),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                volume[key] = json!(value);
            }
        }
        let mut body = json!({ "volume": volume });
        if let Some(hints) = &new.scheduler_hints {
            body["OS-SCH-HNT:scheduler_hints"] = hints.to_json();
        }
        let answer = self
            .request(Service::Cinder, Method::POST, "/volumes", Some(&body))
            .await?;
        decode("Cinder", "/volumes", answer["volume"].clone())
    }

    /// `DELETE /volumes/{id}`.
    pub async fn delete_volume(&self, id: &str) -> Result<()> {
        self.request(
            Service::Cinder,
            Method::DELETE,
            &format!("/volumes/{id}"),
            None,
        )
        .await
        .map(|_| ())
    }

    /// `POST /volumes/{id}/action` `os-extend`.
    pub async fn extend_volume(&self, id: &str, new_size: i64) -> Result<()> {
        let body = json!({ "os-extend": { "new_size": new_size } });
        self.request(
            Service::Cinder,
            Method::POST,
            &format!("/volumes/{id}/action"),
            Some(&body),
        )
        .await
        .map(|_| ())
    }

    /// The user messages Cinder keeps about `resource_id` (why a volume went to `error`),
    /// newest first (`GET /messages?resource_uuid=`).
    pub async fn user_messages(&self, resource_id: &str) -> Result<Vec<String>> {
        let path = format!("/messages?resource_uuid={}", query(resource_id));
        let body = self
            .request(Service::Cinder, Method::GET, &path, None)
            .await?;
        let mut messages: Vec<(String, String)> = body["messages"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter(|m| m["resource_uuid"].as_str().is_none_or(|r| r == resource_id))
            .filter_map(|m| {
                let text = m["user_message"].as_str()?.to_string();
                Some((m["created_at"].as_str().unwrap_or("").to_string(), text))
            })
            .collect();
        messages.sort_by(|a, b| b.0.cmp(&a.0));
        Ok(messages.into_iter().map(|(_, text)| text).collect())
    }

    /// `GET /snapshots/{id}`.
    pub async fn snapshot(&self, id: &str) -> Result<Snapshot> {
        let path = format!("/snapshots/{id}");
        let body = self
            .request(Service::Cinder, Method::GET, &path, None)
            .await?;
        decode("Cinder", &path, body["snapshot"].clone())
    }

    /// `GET /snapshots/detail`, optionally filtered by name or source volume.
    pub async fn snapshots(
        &self,
        name: Option<&str>,
        volume_id: Option<&str>,
    ) -> Result<Vec<Snapshot>> {
        let mut filters = Vec::new();
        if let Some(name) = name {
            filters.push(format!("name={}", query(name)));
        }
        if let Some(volume_id) = volume_id {
            filters.push(format!("volume_id={}", query(volume_id)));
        }
        let path = if filters.is_empty() {
            "/snapshots/detail".to_string()
        } else {
            format!("/snapshots/detail?{}", filters.join("&"))
        };
        let body = self
            .request(Service::Cinder, Method::GET, &path, None)
            .await?;
        let snapshots: Vec<Snapshot> = decode("Cinder", &path, body["snapshots"].clone())?;
        Ok(snapshots
            .into_iter()
            .filter(|s| name.is_none_or(|n| s.name.as_deref() == Some(n)))
            .filter(|s| volume_id.is_none_or(|v| s.volume_id == v))
            .collect())
    }

    /// `POST /snapshots`; `force` lets Cinder snapshot an `in-use` volume.
    pub async fn create_snapshot(
        &self,
        name: &str,
        volume_id: &str,
        metadata: &BTreeMap<String, String>,
        force: bool,
    ) -> Result<Snapshot> {
        let body = json!({ "snapshot": {
            "name": name, "volume_id": volume_id, "force": force, "metadata": metadata,
        }});
        let answer = self
            .request(Service::Cinder, Method::POST, "/snapshots", Some(&body))
            .await?;
        decode("Cinder", "/snapshots", answer["snapshot"].clone())
    }

    /// `DELETE /snapshots/{id}`.
    pub async fn delete_snapshot(&self, id: &str) -> Result<()> {
        self.request(
            Service::Cinder,
            Method::DELETE,
            &format!("/snapshots/{id}"),
            None,
        )
        .await
        .map(|_: Value| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_percent_encoded_in_queries() {
        assert_eq!(query("pvc-1 a&b"), "pvc-1%20a%26b");
    }

    #[test]
    fn a_volume_decodes_with_its_attachments() -> Result<()> {
        let volume: Volume = decode(
            "Cinder",
            "/volumes/v",
            json!({"id": "v", "size": 1, "status": "in-use", "multiattach": false,
                   "attachments": [{"server_id": "s1", "device": "/dev/vdb", "attachment_id": "a"}]}),
        )?;
        assert!(volume.attached_to("s1"));
        assert!(!volume.attached_to("s2"));
        Ok(())
    }
}
