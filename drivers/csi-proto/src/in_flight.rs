//! Operations in flight, by key (a volume name or id, a snapshot name): a second request for
//! the same key while the first runs is refused ([`Busy`], which a driver answers as
//! `Aborted`, as the CSI spec recommends), and the caller retries. The mark goes when the
//! [`InFlightGuard`] drops, whatever the outcome (also when the request is cancelled).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

/// The keys being worked on. Clones share the set.
#[derive(Clone, Debug, Default)]
pub struct InFlight {
    keys: Arc<Mutex<HashSet<String>>>,
}

/// The mark of one operation; removes its key when dropped.
#[derive(Debug)]
pub struct InFlightGuard {
    keys: Arc<Mutex<HashSet<String>>>,
    key: String,
}

/// `key` is already being worked on; `what` is the caller's name for it (for the message the
/// caller words).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Busy {
    /// The key.
    pub key: String,
    /// What the key names (`volume`, `snapshot id` …).
    pub what: String,
}

impl InFlight {
    /// Marks `key` busy, or answers [`Busy`] when it already is.
    pub fn begin(&self, key: &str, what: &str) -> Result<InFlightGuard, Busy> {
        // The set is only ever changed by one insert or remove: a panic cannot tear it.
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        if !keys.insert(key.to_string()) {
            return Err(Busy {
                key: key.to_string(),
                what: what.to_string(),
            });
        }
        Ok(InFlightGuard {
            keys: self.keys.clone(),
            key: key.to_string(),
        })
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_operation_on_a_key_is_refused_until_the_first_ends() -> Result<(), Busy> {
        let in_flight = InFlight::default();
        let first = in_flight.begin("vol-1", "volume")?;
        assert_eq!(
            in_flight.begin("vol-1", "volume id").err(),
            Some(Busy {
                key: "vol-1".into(),
                what: "volume id".into()
            })
        );
        let _other = in_flight.begin("vol-2", "volume")?;
        drop(first);
        in_flight.begin("vol-1", "volume").map(|_| ())
    }
}
