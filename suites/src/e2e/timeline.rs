//! A test's timeline: what it did to the system (a fault injected, a pod deleted, an upgrade
//! applied) and what it saw (a writer's longest stall, an Event), each stamped with the time
//! since the test started. The runner writes every non-empty timeline into the run's output
//! (`timelines/<suite>/<test>.txt`) and, when the test fails, beside its evidence.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

/// One line of a timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineEntry {
    /// Time since the timeline began.
    pub at: Duration,
    /// Who acted or observed: `inject`, `clear`, `writer writer-1`, `cluster`, …
    pub source: String,
    /// What happened.
    pub text: String,
}

/// A shareable, append-only timeline (clones record into the same one).
#[derive(Debug, Clone)]
pub struct Timeline {
    started: Instant,
    started_wall: SystemTime,
    entries: Arc<Mutex<Vec<TimelineEntry>>>,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline::new()
    }
}

impl Timeline {
    /// An empty timeline beginning now.
    pub fn new() -> Self {
        Timeline {
            started: Instant::now(),
            started_wall: SystemTime::now(),
            entries: Arc::default(),
        }
    }

    /// When the timeline began.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Records `text` from `source` now.
    pub fn record(&self, source: &str, text: impl Into<String>) {
        self.record_at(Instant::now(), source, text);
    }

    /// Records `text` from `source` at `at` (an observation made earlier, such as the start of
    /// a writer's stall found when its file is read).
    pub fn record_at(&self, at: Instant, source: &str, text: impl Into<String>) {
        let entry = TimelineEntry {
            at: at.saturating_duration_since(self.started),
            source: source.to_string(),
            text: text.into(),
        };
        let text = &entry.text;
        tracing::debug!(source, at = ?entry.at, "{text}");
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(entry);
    }

    /// Records `text` from `source` at the wall-clock time `at` (a timestamp a pod wrote).
    pub fn record_wall(&self, at: SystemTime, source: &str, text: impl Into<String>) {
        let since = at.duration_since(self.started_wall).unwrap_or_default();
        self.record_at(self.started + since, source, text);
    }

    /// The wall-clock time of `at`.
    pub fn wall_clock(&self, at: Instant) -> SystemTime {
        self.started_wall + at.saturating_duration_since(self.started)
    }

    /// The entries, in time order.
    pub fn entries(&self) -> Vec<TimelineEntry> {
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // Stable: entries recorded at the same instant keep their order.
        entries.sort_by_key(|e| e.at);
        entries
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
    }

    /// The timeline as text, one entry per line: `+  12.345s  source  text` (continuation
    /// lines of a multi-line text indented under it).
    pub fn render(&self) -> String {
        let mut out = String::new();
        for entry in self.entries() {
            let mut lines = entry.text.lines();
            let first = lines.next().unwrap_or_default();
            out.push_str(&format!(
                "+{:>9.3}s  {:<16}  {first}\n",
                entry.at.as_secs_f64(),
                entry.source
            ));
            for line in lines {
                out.push_str(&format!("{:30}{line}\n", ""));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_entries_in_time_order_with_their_source() {
        let timeline = Timeline::new();
        let later = timeline.started() + Duration::from_millis(2500);
        timeline.record_at(later, "writer w-1", "longest stall 0.3 s");
        timeline.record_at(timeline.started(), "inject", "ShareCreate: HTTP 503\nonce");
        let text = timeline.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].starts_with("+    0.000s  inject"), "{text}");
        assert!(lines[0].ends_with("ShareCreate: HTTP 503"), "{text}");
        assert_eq!(lines[1].trim(), "once", "{text}");
        assert!(lines[2].starts_with("+    2.500s  writer w-1"), "{text}");
    }

    #[test]
    fn clones_record_into_the_same_timeline() {
        let timeline = Timeline::new();
        assert!(timeline.is_empty());
        timeline.clone().record("cluster", "pod deleted");
        assert_eq!(timeline.entries().len(), 1);
    }
}
