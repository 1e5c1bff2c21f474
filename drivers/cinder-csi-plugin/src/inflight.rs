//! Operations in flight, by key (a volume id or name, a snapshot name): a second request for
//! the same key while the first runs answers `Aborted`, as the CSI spec recommends, and the
//! caller retries. The mark goes when the [`InFlight`] guard drops, whatever the outcome.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};

/// The set of keys being worked on.
#[derive(Clone, Debug, Default)]
pub struct Operations {
    keys: Arc<Mutex<HashSet<String>>>,
}

/// The mark of one operation; removed on drop.
#[derive(Debug)]
pub struct InFlight {
    keys: Arc<Mutex<HashSet<String>>>,
    key: String,
}

impl Operations {
    /// Marks `key` busy, or answers Aborted naming `what` when it already is.
    pub fn start(&self, key: &str, what: &str) -> Result<InFlight> {
        let mut keys = self
            .keys
            .lock()
            .map_err(|_| Error::Internal("the in-flight set is poisoned".into()))?;
        if !keys.insert(key.to_string()) {
            return Err(Error::Aborted(format!(
                "an operation on {what} is already in progress"
            )));
        }
        Ok(InFlight {
            keys: self.keys.clone(),
            key: key.to_string(),
        })
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Ok(mut keys) = self.keys.lock() {
            keys.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_operation_on_a_key_is_aborted_until_the_first_ends() -> Result<()> {
        let operations = Operations::default();
        let first = operations.start("vol-1", "volume vol-1")?;
        assert!(matches!(
            operations.start("vol-1", "volume vol-1"),
            Err(Error::Aborted(_))
        ));
        let _other = operations.start("vol-2", "volume vol-2")?;
        drop(first);
        operations.start("vol-1", "volume vol-1").map(|_| ())
    }
}
