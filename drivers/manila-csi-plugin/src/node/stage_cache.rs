//! What NodeStage computed for a volume, kept so NodePublish need not ask Manila again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::protocol::PartnerVolume;

/// Partner volume context and secrets per staged volume id.
#[derive(Debug, Clone, Default)]
pub struct StageCache {
    entries: Arc<Mutex<HashMap<String, PartnerVolume>>>,
}

impl StageCache {
    /// Remembers the partner data of a staged volume.
    pub fn insert(&self, volume_id: &str, volume: PartnerVolume) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.insert(volume_id.to_string(), volume);
        }
    }

    /// The partner data of a staged volume.
    pub fn get(&self, volume_id: &str) -> Option<PartnerVolume> {
        self.entries
            .lock()
            .ok()
            .and_then(|entries| entries.get(volume_id).cloned())
    }

    /// Forgets a volume (NodeUnstage).
    pub fn remove(&self, volume_id: &str) {
        if let Ok(mut entries) = self.entries.lock() {
            entries.remove(volume_id);
        }
    }

    /// Number of staged volumes.
    pub fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }

    /// Whether nothing is staged.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
