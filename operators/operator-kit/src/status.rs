//! Conditions: each part of an operator reports `<Prefix><Part>Available/Progressing/Degraded`
//! on the ClusterCSIDriver (plus `<Prefix>ControllerDisabled` when the driver cannot be used
//! on the cloud; see [`crate::identity`]), and the ClusterOperator gets the aggregate, as
//! OpenShift's operators report them.
//!
//! A condition keeps its `lastTransitionTime` while its status stays the same; only a
//! change of status moves it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::OperatorCondition;
use crate::downgrade;
use crate::identity::OperatorIdentity;

/// `True`, `False` or `Unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`.
    Unknown,
}

impl Status {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }

    /// `True` when `value`, else `False`.
    pub fn from_bool(value: bool) -> Status {
        if value { Status::True } else { Status::False }
    }
}

/// A condition to set: type, status, reason, message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Condition {
    /// Type.
    pub type_: String,
    /// Status.
    pub status: Status,
    /// CamelCase reason.
    pub reason: String,
    /// Message (may be empty).
    pub message: String,
}

impl Condition {
    /// A condition of `type_`.
    pub fn new(
        type_: impl Into<String>,
        status: Status,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Condition {
            type_: type_.into(),
            status,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// The three conditions of one sub-controller (`<prefix>Available`, `…Progressing`,
/// `…Degraded`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Health {
    /// It does its job.
    pub available: bool,
    /// It is changing (rollout in progress).
    pub progressing: bool,
    /// Something is wrong that needs attention (empty message = not degraded).
    pub degraded: Option<String>,
    /// Why: a CamelCase reason for whichever condition is the interesting one.
    pub reason: String,
    /// What is happening, in words.
    pub message: String,
}

impl Health {
    /// Available, not progressing, not degraded.
    pub fn ok(reason: impl Into<String>, message: impl Into<String>) -> Health {
        Health {
            available: true,
            progressing: false,
            degraded: None,
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// Degraded (and not available) with `reason` and `message`.
    pub fn degraded(reason: impl Into<String>, message: impl Into<String>) -> Health {
        let message = message.into();
        Health {
            available: false,
            progressing: false,
            degraded: Some(message.clone()),
            reason: reason.into(),
            message,
        }
    }

    /// The three conditions, prefixed with `prefix`.
    pub fn conditions(&self, prefix: &str) -> [Condition; 3] {
        let as_expected = "AsExpected";
        [
            Condition::new(
                format!("{prefix}Available"),
                Status::from_bool(self.available),
                if self.available {
                    as_expected
                } else {
                    &self.reason
                },
                &self.message,
            ),
            Condition::new(
                format!("{prefix}Progressing"),
                Status::from_bool(self.progressing),
                if self.progressing {
                    &self.reason
                } else {
                    as_expected
                },
                if self.progressing {
                    self.message.as_str()
                } else {
                    ""
                },
            ),
            Condition::new(
                format!("{prefix}Degraded"),
                Status::from_bool(self.degraded.is_some()),
                if self.degraded.is_some() {
                    &self.reason
                } else {
                    as_expected
                },
                self.degraded.as_deref().unwrap_or(""),
            ),
        ]
    }
}

/// Merges `wanted` into `current`: conditions of the same type are replaced (keeping their
/// transition time when the status is the same), others are added. Conditions of other types
/// already in `current` stay. Returns whether anything changed.
pub fn merge(current: &mut Vec<OperatorCondition>, wanted: &[Condition], now: &Time) -> bool {
    let mut changed = false;
    for condition in wanted {
        let status = condition.status.as_str();
        let reason = Some(condition.reason.clone()).filter(|r| !r.is_empty());
        let message = Some(condition.message.clone()).filter(|m| !m.is_empty());
        match current.iter_mut().find(|c| c.type_ == condition.type_) {
            Some(existing) => {
                if existing.status != status {
                    existing.status = status.into();
                    existing.last_transition_time = Some(now.clone());
                    changed = true;
                }
                if existing.reason != reason || existing.message != message {
                    existing.reason = reason;
                    existing.message = message;
                    changed = true;
                }
            }
            None => {
                current.push(OperatorCondition {
                    type_: condition.type_.clone(),
                    status: status.into(),
                    last_transition_time: Some(now.clone()),
                    reason,
                    message,
                });
                changed = true;
            }
        }
    }
    current.sort_by(|a, b| a.type_.cmp(&b.type_));
    changed
}

/// The ClusterOperator's `Available`, `Progressing`, `Degraded` and `Upgradeable` from the
/// sub-controllers' conditions: Degraded if any `…Degraded` is True, Progressing if any
/// `…Progressing` is True, Available unless some `…Available` is False. A disabled driver
/// (`identity`'s [`OperatorIdentity::disabled_condition`] True) is Available (with the reason
/// in the message), never Degraded. Upgradeable is False while a downgrade is refused (a
/// `…Degraded` condition with reason [`downgrade::REFUSED`]).
pub fn aggregate(identity: &OperatorIdentity, conditions: &[OperatorCondition]) -> Vec<Condition> {
    let with_suffix = |suffix: &str, status: &str| -> Vec<&OperatorCondition> {
        conditions
            .iter()
            .filter(|c| c.type_.ends_with(suffix) && c.status == status)
            .collect()
    };
    let summary = |list: &[&OperatorCondition]| -> String {
        list.iter()
            .map(|c| match &c.message {
                Some(m) => format!("{}: {m}", c.type_),
                None => c.type_.clone(),
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let degraded = with_suffix("Degraded", "True");
    let progressing = with_suffix("Progressing", "True");
    let unavailable = with_suffix("Available", "False");
    let disabled_type = identity.disabled_condition();
    let disabled = conditions
        .iter()
        .find(|c| c.type_ == disabled_type && c.status == "True");
    let mut out = Vec::new();
    out.push(if unavailable.is_empty() {
        let message = disabled
            .and_then(|c| c.message.clone())
            .map(|m| format!("{} not installed: {m}", identity.display_name))
            .unwrap_or_default();
        Condition::new("Available", Status::True, "AsExpected", message)
    } else {
        Condition::new(
            "Available",
            Status::False,
            "SubControllersUnavailable",
            summary(&unavailable),
        )
    });
    out.push(if progressing.is_empty() {
        Condition::new("Progressing", Status::False, "AsExpected", "")
    } else {
        Condition::new(
            "Progressing",
            Status::True,
            "SubControllersProgressing",
            summary(&progressing),
        )
    });
    out.push(if degraded.is_empty() {
        Condition::new("Degraded", Status::False, "AsExpected", "")
    } else {
        Condition::new(
            "Degraded",
            Status::True,
            "SubControllersDegraded",
            summary(&degraded),
        )
    });
    // A refused downgrade: the installed driver is newer than this operator, so moving the
    // cluster on (or back) is not safe until someone decides (Force, or the newer operator).
    let refused = conditions.iter().find(|c| {
        c.type_.ends_with("Degraded")
            && c.status == "True"
            && c.reason.as_deref() == Some(downgrade::REFUSED)
    });
    out.push(match refused {
        Some(c) => Condition::new(
            "Upgradeable",
            Status::False,
            downgrade::REFUSED,
            format!("{}: {}", c.type_, c.message.as_deref().unwrap_or("")),
        ),
        None => Condition::new("Upgradeable", Status::True, "AsExpected", ""),
    });
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::identity::TEST_IDENTITY;

    fn time(seconds: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(seconds).unwrap())
    }

    #[test]
    fn transition_time_moves_only_when_the_status_changes() {
        let mut current = Vec::new();
        let health = Health::ok("AsExpected", "ready");
        assert!(merge(&mut current, &health.conditions("X"), &time(1)));
        assert!(!merge(&mut current, &health.conditions("X"), &time(2)));
        let available = current.iter().find(|c| c.type_ == "XAvailable").unwrap();
        assert_eq!(available.last_transition_time, Some(time(1)));

        let broken = Health::degraded("Broken", "the Deployment is gone");
        assert!(merge(&mut current, &broken.conditions("X"), &time(3)));
        let degraded = current.iter().find(|c| c.type_ == "XDegraded").unwrap();
        assert_eq!(degraded.status, "True");
        assert_eq!(degraded.reason.as_deref(), Some("Broken"));
        assert_eq!(degraded.message.as_deref(), Some("the Deployment is gone"));
        assert_eq!(degraded.last_transition_time, Some(time(3)));
    }

    #[test]
    fn a_disabled_driver_is_available_not_degraded() {
        let mut current = Vec::new();
        merge(
            &mut current,
            &[Condition::new(
                "ExampleControllerDisabled",
                Status::True,
                "ExampleNotInCatalog",
                "no example service in the catalog",
            )],
            &time(1),
        );
        let aggregate = aggregate(&TEST_IDENTITY, &current);
        assert_eq!(aggregate[0].type_, "Available");
        assert_eq!(aggregate[0].status, Status::True);
        assert_eq!(
            aggregate[0].message,
            "Example CSI driver not installed: no example service in the catalog"
        );
        assert_eq!(aggregate[2].type_, "Degraded");
        assert_eq!(aggregate[2].status, Status::False);
    }

    #[test]
    fn any_degraded_sub_controller_degrades_the_operator() {
        let mut current = Vec::new();
        merge(
            &mut current,
            &Health::ok("AsExpected", "").conditions("A"),
            &time(1),
        );
        merge(
            &mut current,
            &Health::degraded("InvalidCredentials", "secret x/y key clouds.yaml: missing")
                .conditions("B"),
            &time(1),
        );
        let aggregate = aggregate(&TEST_IDENTITY, &current);
        assert_eq!(aggregate[0].status, Status::False);
        assert_eq!(aggregate[2].status, Status::True);
        assert!(aggregate[2].message.contains("BDegraded: secret x/y"));
    }

    #[test]
    fn a_refused_downgrade_makes_the_operator_not_upgradeable() {
        let mut current = Vec::new();
        merge(
            &mut current,
            &Health::ok("AsExpected", "").conditions("A"),
            &time(1),
        );
        let upgradeable = |current: &[OperatorCondition]| {
            aggregate(&TEST_IDENTITY, current)
                .into_iter()
                .find(|c| c.type_ == "Upgradeable")
                .unwrap()
        };
        assert_eq!(upgradeable(&current).status, Status::True);
        let refusal = Health {
            available: true,
            progressing: false,
            degraded: Some("installed 2.0.0 is newer than 1.0.0".into()),
            reason: downgrade::REFUSED.into(),
            message: "installed 2.0.0 is newer than 1.0.0".into(),
        };
        merge(&mut current, &refusal.conditions("Version"), &time(2));
        let condition = upgradeable(&current);
        assert_eq!(condition.status, Status::False);
        assert_eq!(condition.reason, downgrade::REFUSED);
        assert!(
            condition
                .message
                .contains("VersionDegraded: installed 2.0.0"),
            "{}",
            condition.message
        );
    }
}
