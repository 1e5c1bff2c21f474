//! Per-key exponential back-off for failed work items, as client-go's
//! `ItemExponentialFailureRateLimiter`: the n-th consecutive failure of a key waits
//! `base × 2^(n-1)`, capped at `max`; a success forgets the key.
//!
//! Use it from a kube-runtime `Controller`'s `error_policy` to pick the requeue delay,
//! keyed by [`object_key`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kube::{Resource, ResourceExt};

/// `namespace/name` of a namespaced object, `name` of a cluster-scoped one: the back-off
/// key and the name in messages.
pub fn object_key<K: Resource>(obj: &K) -> String {
    match obj.namespace() {
        Some(namespace) => format!("{namespace}/{}", obj.name_any()),
        None => obj.name_any(),
    }
}

/// Failure counts per key, and when each key may be tried again.
#[derive(Debug)]
pub struct KeyedBackoff {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<String, Failures>>,
}

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    retry_at: Instant,
}

impl KeyedBackoff {
    /// Back-off starting at `base`, never longer than `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        KeyedBackoff {
            base,
            max: max.max(base),
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Records a failure of `key` and returns how long to wait before retrying it.
    pub fn failed(&self, key: &str) -> Duration {
        let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let entry = failures.entry(key.to_string()).or_insert(Failures {
            count: 0,
            retry_at: now,
        });
        entry.count = entry.count.saturating_add(1);
        let factor = 2u32.saturating_pow(entry.count.saturating_sub(1).min(31));
        let delay = self.base.saturating_mul(factor).min(self.max);
        entry.retry_at = now + delay;
        delay
    }

    /// How long `key` must still wait after its last failure, if it must. A controller whose
    /// own writes (a status, an annotation) wake it up again checks this first, so that a
    /// lasting failure is retried at the back-off's pace, not at the pace of watch events
    /// (as client-go's rate-limited work queue does).
    pub fn waiting(&self, key: &str) -> Option<Duration> {
        let failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let retry_at = failures.get(key)?.retry_at;
        let now = Instant::now();
        (retry_at > now).then(|| retry_at - now)
    }

    /// Forgets `key`'s failures (after a success, or when the object is gone).
    pub fn succeeded(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }

    /// How many consecutive failures `key` has had.
    pub fn failures(&self, key: &str) -> u32 {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .map_or(0, |f| f.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_waits_out_its_delay_after_a_failure_and_not_after_a_success() {
        let backoff = KeyedBackoff::new(Duration::from_secs(60), Duration::from_secs(60));
        assert_eq!(backoff.waiting("a"), None);
        backoff.failed("a");
        let left = backoff.waiting("a");
        assert!(
            left.is_some_and(|l| l > Duration::from_secs(59) && l <= Duration::from_secs(60)),
            "{left:?}"
        );
        assert_eq!(backoff.waiting("b"), None);
        backoff.succeeded("a");
        assert_eq!(backoff.waiting("a"), None);
        let short = KeyedBackoff::new(Duration::ZERO, Duration::ZERO);
        short.failed("a");
        assert_eq!(short.waiting("a"), None, "a zero delay is over at once");
    }

    #[test]
    fn delays_double_per_key_up_to_the_cap_and_reset_on_success() {
        let backoff = KeyedBackoff::new(Duration::from_secs(1), Duration::from_secs(5));
        let delays: Vec<u64> = (0..5).map(|_| backoff.failed("a").as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 5, 5]);
        assert_eq!(
            backoff.failed("b"),
            Duration::from_secs(1),
            "keys are independent"
        );
        backoff.succeeded("a");
        assert_eq!(backoff.failures("a"), 0);
        assert_eq!(backoff.failed("a"), Duration::from_secs(1));
    }

    #[test]
    fn keys_are_namespace_and_name_or_just_the_name() {
        use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
        let mut claim = PersistentVolumeClaim::default();
        claim.metadata.name = Some("data".into());
        claim.metadata.namespace = Some("apps".into());
        assert_eq!(object_key(&claim), "apps/data");
        let mut pv = PersistentVolume::default();
        pv.metadata.name = Some("pvc-1".into());
        assert_eq!(object_key(&pv), "pvc-1");
    }

    #[test]
    fn many_failures_do_not_overflow() {
        let backoff = KeyedBackoff::new(Duration::from_millis(10), Duration::from_secs(300));
        for _ in 0..100 {
            backoff.failed("k");
        }
        assert_eq!(backoff.failed("k"), Duration::from_secs(300));
    }
}
