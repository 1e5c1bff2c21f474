//! Downgrades are refused. The ClusterCSIDriver's `status.version` says which version of the
//! operator last installed the driver; an operator older than that (by SemVer precedence, so
//! N-1's `0.1.0-previous` is older than N's `0.1.0`) does not apply its objects over the newer
//! ones: it leaves the installed driver exactly as it is and says so in the
//! `<Prefix>OperatorVersionControllerDegraded` condition (and a Warning Event) naming both
//! versions and what to do. Going back silently would take away what the newer release added
//! (N-1 deletes N's per-sidecar roles and re-creates every StorageClass without expansion).
//!
//! `managementState: Force` is the way out, as upstream uses it: the older operator then
//! installs its release over the newer one, with a Warning Event.

use semver::Version;

use crate::identity::OperatorIdentity;
use crate::release::Release;

/// Reason of the condition and Event when a downgrade is refused.
pub const REFUSED: &str = "DowngradeRefused";
/// Reason of the Event when a downgrade goes ahead under `managementState: Force`.
pub const FORCED: &str = "DowngradeForced";

/// What the operator does about the version that installed the driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VersionCheck {
    /// Nothing installed yet, the same version, an upgrade, or a version that cannot be
    /// compared: install this release.
    Proceed,
    /// A newer operator installed the driver: leave it as it is (the message says why and
    /// what to do).
    Refuse {
        /// For the condition and the Event.
        message: String,
    },
    /// A newer operator installed the driver, but `managementState` is Force: install this
    /// release anyway (the message is for a Warning Event).
    Forced {
        /// For the Event.
        message: String,
    },
}

/// Whether an operator of `running` version (installing `release`) may install its objects
/// over a driver installed by version `installed` (`status.version`; `None` before the first
/// install). `force`: `managementState` is Force. `identity` names the driver in the messages.
pub fn check(
    identity: &OperatorIdentity,
    installed: Option<&str>,
    running: &str,
    release: Release,
    force: bool,
) -> VersionCheck {
    let Some(installed) = installed.filter(|v| !v.is_empty()) else {
        return VersionCheck::Proceed;
    };
    let (Ok(installed_version), Ok(running_version)) =
        (Version::parse(installed), Version::parse(running))
    else {
        tracing::warn!(
            installed,
            running,
            "cannot compare the versions as SemVer: not checking for a downgrade"
        );
        return VersionCheck::Proceed;
    };
    if installed_version <= running_version {
        return VersionCheck::Proceed;
    }
    if force {
        VersionCheck::Forced {
            message: format!(
                "downgrading the {} from version {installed} to {running} \
                 (release {release}) because managementState is Force: {running}'s objects \
                 replace {installed}'s",
                identity.display_name
            ),
        }
    } else {
        VersionCheck::Refuse {
            message: format!(
                "refusing to downgrade the {} from version {installed} to \
                 {running} (this operator, release {release}): the driver installed by \
                 {installed} is left as it is. Apply the operator manifests of version \
                 {installed} or later again, or set the ClusterCSIDriver's managementState to \
                 Force to install {running} over it",
                identity.display_name
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::TEST_IDENTITY;

    const CURRENT_VERSION: &str = crate::versions!().current;
    const PREVIOUS_VERSION: &str = crate::versions!().previous;

    #[test]
    fn installing_upgrading_and_reconciling_the_same_version_proceed() {
        for installed in [
            None,
            Some(""),
            Some(PREVIOUS_VERSION),
            Some(CURRENT_VERSION),
        ] {
            assert_eq!(
                check(
                    &TEST_IDENTITY,
                    installed,
                    CURRENT_VERSION,
                    Release::Current,
                    false
                ),
                VersionCheck::Proceed,
                "{installed:?}"
            );
        }
        assert_eq!(
            check(
                &TEST_IDENTITY,
                Some("0.9.3"),
                "1.0.0",
                Release::Current,
                false
            ),
            VersionCheck::Proceed
        );
    }

    #[test]
    fn n_minus_1_refuses_to_go_back_from_n_naming_both_versions() {
        let VersionCheck::Refuse { message } = check(
            &TEST_IDENTITY,
            Some(CURRENT_VERSION),
            PREVIOUS_VERSION,
            Release::Previous,
            false,
        ) else {
            panic!("not refused");
        };
        assert!(
            message.starts_with(&format!(
                "refusing to downgrade the Example CSI driver from version {CURRENT_VERSION} to \
                 {PREVIOUS_VERSION} (this operator, release previous)"
            )),
            "{message}"
        );
        assert!(message.contains("left as it is"), "{message}");
        assert!(
            message.contains(&format!("manifests of version {CURRENT_VERSION} or later")),
            "{message}"
        );
        assert!(message.contains("managementState to Force"), "{message}");
        // Any older version, not only N-1.
        assert!(matches!(
            check(
                &TEST_IDENTITY,
                Some("1.2.0"),
                "1.1.9",
                Release::Current,
                false
            ),
            VersionCheck::Refuse { .. }
        ));
    }

    #[test]
    fn force_downgrades_with_a_warning() {
        let VersionCheck::Forced { message } = check(
            &TEST_IDENTITY,
            Some(CURRENT_VERSION),
            PREVIOUS_VERSION,
            Release::Previous,
            true,
        ) else {
            panic!("not forced");
        };
        assert!(
            message.contains("because managementState is Force"),
            "{message}"
        );
        assert!(message.contains(CURRENT_VERSION), "{message}");
        // Force changes nothing when there is no downgrade.
        assert_eq!(
            check(
                &TEST_IDENTITY,
                Some(PREVIOUS_VERSION),
                CURRENT_VERSION,
                Release::Current,
                true
            ),
            VersionCheck::Proceed
        );
    }

    #[test]
    fn versions_that_are_not_semver_are_not_compared() {
        assert_eq!(
            check(
                &TEST_IDENTITY,
                Some("v2-custom"),
                CURRENT_VERSION,
                Release::Current,
                false
            ),
            VersionCheck::Proceed
        );
    }
}
