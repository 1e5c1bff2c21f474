//! kubelet's container restart back-off: the first restart is immediate, then each restart
//! waits `initial`, doubled every time up to `max`; a container that ran for longer than twice
//! `max` starts over.

use std::time::Duration;

/// The back-off of one container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackOff {
    initial: Duration,
    max: Duration,
    /// The delay before the next restart; `None`: restart at once.
    current: Option<Duration>,
}

impl BackOff {
    /// A fresh back-off.
    pub fn new(initial: Duration, max: Duration) -> Self {
        BackOff {
            initial,
            max,
            current: None,
        }
    }

    /// A back-off as it is after `restarts` restarts (for adopted containers).
    pub fn after_restarts(initial: Duration, max: Duration, restarts: u32) -> Self {
        let mut backoff = BackOff::new(initial, max);
        for _ in 0..restarts {
            backoff.restarted();
        }
        backoff
    }

    /// How long to wait before restarting a container that ran for `ran_for` and just ended.
    pub fn delay(&mut self, ran_for: Duration) -> Duration {
        if ran_for > self.max.saturating_mul(2) {
            self.current = None;
        }
        self.current.unwrap_or(Duration::ZERO)
    }

    /// Records a restart: the next one waits longer.
    pub fn restarted(&mut self) {
        self.current = Some(match self.current {
            None => self.initial,
            Some(d) => d.saturating_mul(2).min(self.max),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn first_restart_is_immediate_then_doubles_up_to_max() {
        let mut b = BackOff::new(10 * S, 300 * S);
        let mut delays = Vec::new();
        for _ in 0..8 {
            delays.push(b.delay(S).as_secs());
            b.restarted();
        }
        assert_eq!(delays, [0, 10, 20, 40, 80, 160, 300, 300]);
    }

    #[test]
    fn a_long_run_resets_the_back_off() {
        let mut b = BackOff::after_restarts(10 * S, 300 * S, 4);
        assert_eq!(b.delay(S), 80 * S);
        assert_eq!(b.delay(601 * S), Duration::ZERO);
    }
}
