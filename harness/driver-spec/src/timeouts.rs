//! The test timeouts: upstream's `framework.TimeoutContext` defaults
//! (`test/e2e/framework/timeouts.go`), overridden per name by the spec's `Timeouts` (Go
//! duration strings, e.g. `PodStart: 10m`).
//!
//! Upstream overrides through `encoding/json`, so a name matches whatever its case
//! (`podStart` sets `PodStart`); unknown names and unparsable durations are only logged there
//! and make it fall back to every default. Here both are errors.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use kube_support::go_duration::parse_go_duration as parse_duration;

use super::reader::{Check, Field, unknown};

/// The name of one timeout, as upstream's `TimeoutContext` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TimeoutName {
    /// How long to wait between API calls while polling for a condition (2s).
    Poll,
    /// For a pod to start (5m).
    PodStart,
    /// For a pod to start, when it should be quick (2m).
    PodStartShort,
    /// For a pod to start, when it is known to be slow (15m).
    PodStartSlow,
    /// For a pod to be deleted (5m).
    PodDelete,
    /// For a claim to be provisioned (5m).
    ClaimProvision,
    /// For a claim to be provisioned, when it should be quick (1m).
    ClaimProvisionShort,
    /// For a claim to be provisioned from a data source (5m).
    DataSourceProvision,
    /// For a claim to be bound (3m).
    ClaimBound,
    /// For a PV to be reclaimed (3m).
    PvReclaim,
    /// For a PV to be bound (3m).
    PvBound,
    /// For a PV to be created (3m).
    PvCreate,
    /// For a PV to be deleted (5m).
    PvDelete,
    /// For a PV to be deleted, when it is known to be slow (20m).
    PvDeleteSlow,
    /// For a snapshot's content to be created (5m).
    SnapshotCreate,
    /// For a snapshot's content to be deleted (5m).
    SnapshotDelete,
    /// For the snapshot controller's metrics (5m).
    SnapshotControllerMetrics,
    /// For the system pods to run (10m).
    SystemPodsStartup,
    /// For every node to be schedulable (30m).
    NodeSchedulable,
    /// For the system daemonsets to be ready (5m).
    SystemDaemonsetStartup,
    /// For a node to become not ready (3m).
    NodeNotReady,
}

impl TimeoutName {
    /// Every timeout, in upstream's order.
    pub const ALL: [TimeoutName; 21] = [
        TimeoutName::Poll,
        TimeoutName::PodStart,
        TimeoutName::PodStartShort,
        TimeoutName::PodStartSlow,
        TimeoutName::PodDelete,
        TimeoutName::ClaimProvision,
        TimeoutName::ClaimProvisionShort,
        TimeoutName::DataSourceProvision,
        TimeoutName::ClaimBound,
        TimeoutName::PvReclaim,
        TimeoutName::PvBound,
        TimeoutName::PvCreate,
        TimeoutName::PvDelete,
        TimeoutName::PvDeleteSlow,
        TimeoutName::SnapshotCreate,
        TimeoutName::SnapshotDelete,
        TimeoutName::SnapshotControllerMetrics,
        TimeoutName::SystemPodsStartup,
        TimeoutName::NodeSchedulable,
        TimeoutName::SystemDaemonsetStartup,
        TimeoutName::NodeNotReady,
    ];

    /// Upstream's field name, as the spec file writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            TimeoutName::Poll => "Poll",
            TimeoutName::PodStart => "PodStart",
            TimeoutName::PodStartShort => "PodStartShort",
            TimeoutName::PodStartSlow => "PodStartSlow",
            TimeoutName::PodDelete => "PodDelete",
            TimeoutName::ClaimProvision => "ClaimProvision",
            TimeoutName::ClaimProvisionShort => "ClaimProvisionShort",
            TimeoutName::DataSourceProvision => "DataSourceProvision",
            TimeoutName::ClaimBound => "ClaimBound",
            TimeoutName::PvReclaim => "PVReclaim",
            TimeoutName::PvBound => "PVBound",
            TimeoutName::PvCreate => "PVCreate",
            TimeoutName::PvDelete => "PVDelete",
            TimeoutName::PvDeleteSlow => "PVDeleteSlow",
            TimeoutName::SnapshotCreate => "SnapshotCreate",
            TimeoutName::SnapshotDelete => "SnapshotDelete",
            TimeoutName::SnapshotControllerMetrics => "SnapshotControllerMetrics",
            TimeoutName::SystemPodsStartup => "SystemPodsStartup",
            TimeoutName::NodeSchedulable => "NodeSchedulable",
            TimeoutName::SystemDaemonsetStartup => "SystemDaemonsetStartup",
            TimeoutName::NodeNotReady => "NodeNotReady",
        }
    }

    /// Upstream's default.
    pub fn default_value(self) -> Duration {
        let minutes = |m: u64| Duration::from_secs(m * 60);
        match self {
            TimeoutName::Poll => Duration::from_secs(2),
            TimeoutName::ClaimProvisionShort => minutes(1),
            TimeoutName::PodStartShort => minutes(2),
            TimeoutName::ClaimBound
            | TimeoutName::PvReclaim
            | TimeoutName::PvBound
            | TimeoutName::PvCreate
            | TimeoutName::NodeNotReady => minutes(3),
            TimeoutName::PodStart
            | TimeoutName::PodDelete
            | TimeoutName::ClaimProvision
            | TimeoutName::DataSourceProvision
            | TimeoutName::PvDelete
            | TimeoutName::SnapshotCreate
            | TimeoutName::SnapshotDelete
            | TimeoutName::SnapshotControllerMetrics
            | TimeoutName::SystemDaemonsetStartup => minutes(5),
            TimeoutName::SystemPodsStartup => minutes(10),
            TimeoutName::PodStartSlow => minutes(15),
            TimeoutName::PvDeleteSlow => minutes(20),
            TimeoutName::NodeSchedulable => minutes(30),
        }
    }
}

impl fmt::Display for TimeoutName {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is no timeout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown timeout {0:?}")]
pub struct UnknownTimeout(pub String);

impl FromStr for TimeoutName {
    type Err = UnknownTimeout;

    /// Upstream's spelling in any case, as `encoding/json` matches it.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        TimeoutName::ALL
            .into_iter()
            .find(|timeout| timeout.as_str().eq_ignore_ascii_case(name))
            .ok_or_else(|| UnknownTimeout(name.to_owned()))
    }
}

/// Every timeout's value: upstream's defaults unless the spec overrides them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeouts([Duration; TimeoutName::ALL.len()]);

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts(TimeoutName::ALL.map(TimeoutName::default_value))
    }
}

impl Timeouts {
    /// The value of `name`.
    pub fn get(&self, name: TimeoutName) -> Duration {
        self.0[name as usize]
    }

    /// Sets `name` to `value`.
    pub fn set(&mut self, name: TimeoutName, value: Duration) {
        self.0[name as usize] = value;
    }

    /// Every timeout with its value, in upstream's order.
    pub fn iter(&self) -> impl Iterator<Item = (TimeoutName, Duration)> + '_ {
        TimeoutName::ALL
            .into_iter()
            .map(|name| (name, self.get(name)))
    }

    /// Reads the spec's `Timeouts`: the defaults, overridden by the given names.
    pub(super) fn read(field: Option<&Field>) -> Check<Self> {
        let mut timeouts = Timeouts::default();
        let Some(field) = field else {
            return Ok(timeouts);
        };
        let names = TimeoutName::ALL.map(TimeoutName::as_str);
        let mut given: Vec<(TimeoutName, &str)> = Vec::new();
        for (key, value) in field.entries()? {
            let name: TimeoutName = key
                .parse()
                .map_err(|_| value.key_issue(unknown("timeout", key, &names)))?;
            if let Some((_, first)) = given.iter().find(|(seen, _)| *seen == name) {
                return Err(value.key_issue(format!(
                    "names the same timeout as {first} above (upstream ignores case)"
                )));
            }
            given.push((name, key));
            let text = value.str()?;
            timeouts.set(name, go_duration(text).map_err(|why| value.issue(why))?);
        }
        Ok(timeouts)
    }
}

/// A timeout in Go's `time.ParseDuration` syntax (`1m30s`, `1.5h`, `500ms`, `0`), which
/// [`parse_duration`] reads but for the sign and the Greek mu of `μs`; a negative timeout is
/// refused.
fn go_duration(text: &str) -> Result<Duration, String> {
    if text.trim() != text {
        return Err(format!("invalid duration {text:?}: spaces are not allowed"));
    }
    if let Some(rest) = text.strip_prefix('-') {
        return match go_duration(rest) {
            Ok(value) if value.is_zero() => Ok(value),
            Ok(_) => Err(format!("must not be negative, found {text:?}")),
            Err(why) => Err(why),
        };
    }
    let unsigned = text.strip_prefix('+').unwrap_or(text);
    if unsigned.starts_with(['+', '-']) {
        return Err(format!("invalid duration {text:?}"));
    }
    // U+03BC (Greek mu) and U+00B5 (micro sign) both spell microseconds in Go.
    parse_duration(&unsigned.replace('\u{3bc}', "\u{b5}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rstest::rstest;

    #[test]
    fn defaults_are_upstreams() {
        let timeouts = Timeouts::default();
        assert_eq!(timeouts.get(TimeoutName::Poll), Duration::from_secs(2));
        assert_eq!(
            timeouts.get(TimeoutName::PodStart),
            Duration::from_secs(300)
        );
        assert_eq!(
            timeouts.get(TimeoutName::ClaimProvisionShort),
            Duration::from_secs(60)
        );
        assert_eq!(
            timeouts.get(TimeoutName::PvDeleteSlow),
            Duration::from_secs(1200)
        );
        assert_eq!(
            timeouts.get(TimeoutName::NodeSchedulable),
            Duration::from_secs(1800)
        );
        assert_eq!(
            timeouts.get(TimeoutName::NodeNotReady),
            Duration::from_secs(180)
        );
        assert_eq!(timeouts.iter().count(), 21);
    }

    #[test]
    fn names_round_trip_in_any_case() {
        for name in TimeoutName::ALL {
            assert_eq!(name.as_str().parse::<TimeoutName>(), Ok(name));
            assert_eq!(
                name.as_str().to_lowercase().parse::<TimeoutName>(),
                Ok(name)
            );
        }
        assert!("PodStarts".parse::<TimeoutName>().is_err());
    }

    #[rstest]
    #[case("0", 0)]
    #[case("10m", 600_000)]
    #[case("1m30s", 90_000)]
    #[case("1.5h", 5_400_000)]
    #[case(".5s", 500)]
    #[case("+2s", 2_000)]
    #[case("-0s", 0)]
    #[case("1500us", 1)]
    #[case("1500\u{b5}s", 1)]
    #[case("1500\u{3bc}s", 1)]
    #[case("3ms", 3)]
    fn go_durations_parse(#[case] text: &str, #[case] millis: u128) {
        assert_eq!(go_duration(text).unwrap().as_millis(), millis);
    }

    #[rstest]
    #[case("", "empty duration")]
    #[case("5", "missing unit")]
    #[case("5 m", "invalid unit \" m\"")]
    #[case(" 5m", "spaces")]
    #[case("5min", "invalid unit \"min\"")]
    #[case("1d", "invalid unit \"d\"")]
    #[case("-5m", "negative")]
    #[case("+-5m", "invalid duration")]
    #[case("1.2.3s", "invalid duration")]
    fn bad_durations_are_refused(#[case] text: &str, #[case] expected: &str) {
        let error = go_duration(text).unwrap_err();
        assert!(error.contains(expected), "{error}");
    }
}
