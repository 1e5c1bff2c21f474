//! The in-flight map: a second request for a name (or id) that is still being processed is
//! answered `Aborted` instead of racing the first.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};

/// Names of operations currently running.
#[derive(Clone, Debug, Default)]
pub struct InFlight {
    keys: Arc<Mutex<HashSet<String>>>,
}

/// Removes its key from the map when dropped (also when the request future is cancelled).
#[derive(Debug)]
pub struct InFlightGuard {
    keys: Arc<Mutex<HashSet<String>>>,
    key: String,
}

impl InFlight {
    /// Registers `key`, or fails with [`Error::Aborted`] naming `what` if it is already
    /// registered.
    pub fn begin(&self, key: &str, what: &str) -> Result<InFlightGuard> {
        let mut keys = self
            .keys
            .lock()
            .map_err(|_| Error::Internal("in-flight map lock poisoned".into()))?;
        if !keys.insert(key.to_string()) {
            return Err(Error::Aborted(format!(
                "an operation for {what} {key:?} is already in progress"
            )));
        }
        Ok(InFlightGuard {
            keys: self.keys.clone(),
            key: key.to_string(),
        })
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        if let Ok(mut keys) = self.keys.lock() {
            keys.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_second_request_is_aborted_until_the_first_ends() {
        let inflight = InFlight::default();
        let guard = inflight.begin("pvc-1", "volume").unwrap();
        let error = inflight.begin("pvc-1", "volume").unwrap_err();
        assert!(matches!(error, Error::Aborted(_)), "{error}");
        inflight.begin("pvc-2", "volume").unwrap();
        drop(guard);
        inflight.begin("pvc-1", "volume").unwrap();
    }
}
