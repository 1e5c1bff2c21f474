//! The releases an operator can install: the current one (N) and the previous one (N-1),
//! both built into the one binary, which the upgrade suite installs first and the current
//! operator then adopts and migrates. What N-1 does differently (its asset set, other
//! layouts) is each operator's own; what is shared is the choice ([`Release`], the
//! `--release` flag) and the versions they report ([`Versions`]).
//!
//! N-1's version is the operator crate's with the SemVer pre-release suffix `-previous`: a
//! pre-release sorts before its release (`0.1.0-previous` < `0.1.0`), as N-1 must for the
//! downgrade check ([`crate::downgrade`]), while the string still says which build produced
//! it (N-1 is not an older binary but this one run with `--release previous`).

use std::fmt;
use std::str::FromStr;

/// Which release's objects to render; an operator's `--release` flag (`OPERATOR_RELEASE`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Release {
    /// The previous release, N-1: the older layout, for upgrade tests.
    Previous,
    /// This operator's release, N.
    #[default]
    Current,
}

/// The suffix of the previous release's version (`<crate version>-previous`).
pub const PREVIOUS_SUFFIX: &str = "-previous";

/// The versions an operator's releases report (`status.version`, the ClusterOperator's
/// versions). Build it with [`versions!`](crate::versions) in the operator's crate, so that
/// the version is the operator's, not this library's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Versions {
    /// N's: the operator crate's version.
    pub current: &'static str,
    /// N-1's: the same with [`PREVIOUS_SUFFIX`].
    pub previous: &'static str,
}

/// The [`Versions`] of the crate that invokes it: its `CARGO_PKG_VERSION`, and that with
/// `-previous` ([`PREVIOUS_SUFFIX`]).
#[macro_export]
macro_rules! versions {
    () => {
        $crate::release::Versions {
            current: env!("CARGO_PKG_VERSION"),
            previous: concat!(env!("CARGO_PKG_VERSION"), "-previous"),
        }
    };
}

impl Versions {
    /// The version `release` reports.
    pub fn of(self, release: Release) -> &'static str {
        match release {
            Release::Previous => self.previous,
            Release::Current => self.current,
        }
    }
}

impl Release {
    /// Every release, oldest first.
    pub const ALL: [Release; 2] = [Release::Previous, Release::Current];

    /// Its name, as `--release` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Release::Previous => "previous",
            Release::Current => "current",
        }
    }
}

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A release name that is not one.
#[derive(Debug, thiserror::Error)]
#[error("unknown release {0:?}: expected previous or current")]
pub struct UnknownRelease(String);

impl FromStr for Release {
    type Err = UnknownRelease;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "previous" => Ok(Release::Previous),
            "current" => Ok(Release::Current),
            _ => Err(UnknownRelease(text.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn names_versions_and_parsing() {
        assert_eq!(Release::default(), Release::Current);
        let versions = crate::versions!();
        assert_eq!(versions.of(Release::Current), env!("CARGO_PKG_VERSION"));
        assert_eq!(
            versions.of(Release::Previous),
            format!("{}{PREVIOUS_SUFFIX}", env!("CARGO_PKG_VERSION"))
        );
        let (previous, current) = (
            semver::Version::parse(versions.previous).unwrap(),
            semver::Version::parse(versions.current).unwrap(),
        );
        assert!(previous < current, "N-1 sorts before N");
        for release in Release::ALL {
            assert_eq!(release.as_str().parse::<Release>().unwrap(), release);
            assert_eq!(release.to_string(), release.as_str());
        }
        assert_eq!(" Previous ".parse::<Release>().unwrap(), Release::Previous);
        assert_eq!(
            "n-1".parse::<Release>().unwrap_err().to_string(),
            "unknown release \"n-1\": expected previous or current"
        );
    }
}
