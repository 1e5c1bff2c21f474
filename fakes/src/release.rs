//! The OpenStack release the fake emulates ([`OpenStackRelease`]): it sets each service's
//! highest microversion and, through it, the behaviours tied to the microversions (Nova's
//! attachment shape from 2.89, its bodiless attach from 2.101). A seed's explicit
//! `max_microversion` ([`MaxMicroversion`]) still wins over the release's.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::microversion::Microversion;

/// An OpenStack release (the `YYYY.N` name of the coordinated release).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub enum OpenStackRelease {
    /// 2025.1 "Epoxy".
    #[serde(rename = "2025.1")]
    V2025_1,
    /// 2025.2 "Flamingo".
    #[serde(rename = "2025.2")]
    V2025_2,
    /// 2026.1 "Gazpacho", the newest: the default.
    #[default]
    #[serde(rename = "2026.1")]
    V2026_1,
}

/// A text that names no release [`OpenStackRelease`] knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown OpenStack release {given:?}: expected one of {}",
    OpenStackRelease::names()
)]
pub struct UnknownRelease {
    /// What was given.
    pub given: String,
}

impl OpenStackRelease {
    /// Every release the fake emulates, oldest first.
    pub const ALL: &'static [Self] = &[Self::V2025_1, Self::V2025_2, Self::V2026_1];

    /// The `YYYY.N` name (`2025.1`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::V2025_1 => "2025.1",
            Self::V2025_2 => "2025.2",
            Self::V2026_1 => "2026.1",
        }
    }

    /// The code name (`Epoxy`).
    pub const fn codename(self) -> &'static str {
        match self {
            Self::V2025_1 => "Epoxy",
            Self::V2025_2 => "Flamingo",
            Self::V2026_1 => "Gazpacho",
        }
    }

    /// Manila's highest microversion in this release.
    pub const fn manila_max(self) -> Microversion {
        match self {
            Self::V2025_1 => Microversion::v2(89),
            Self::V2025_2 => Microversion::v2(91),
            Self::V2026_1 => Microversion::v2(95),
        }
    }

    /// Cinder's highest microversion in this release (3.71 in all three).
    pub const fn cinder_max(self) -> Microversion {
        Microversion {
            major: 3,
            minor: 71,
        }
    }

    /// Nova's highest microversion in this release.
    pub const fn nova_max(self) -> Microversion {
        match self {
            Self::V2025_1 | Self::V2025_2 => Microversion::v2(100),
            Self::V2026_1 => Microversion::v2(103),
        }
    }

    fn names() -> String {
        Self::ALL
            .iter()
            .map(|r| r.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for OpenStackRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for OpenStackRelease {
    type Err = UnknownRelease;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .copied()
            .find(|r| r.as_str() == text.trim())
            .ok_or_else(|| UnknownRelease { given: text.into() })
    }
}

/// A seed's highest microversion for one service: unset (the default, `null` or absent in
/// YAML) it is the release's; set, it overrides the release (`"2.64"`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MaxMicroversion(Option<String>);

impl MaxMicroversion {
    /// Unset: the release's maximum applies.
    pub const fn from_release() -> Self {
        Self(None)
    }

    /// The explicit value, if the seed set one.
    pub fn explicit(&self) -> Option<&str> {
        self.0.as_deref()
    }

    /// The explicit value parsed, else `release_max`; `None` when the explicit value does
    /// not parse (the seed's validation refuses it before a cloud starts).
    pub(crate) fn resolve(&self, release_max: Microversion) -> Option<Microversion> {
        match &self.0 {
            None => Some(release_max),
            Some(text) => Microversion::parse(text),
        }
    }

    /// Checks an explicit value is `major.N` (`field` names it in the error).
    pub(crate) fn validate(&self, field: &str, major: u32) -> Result<(), String> {
        match &self.0 {
            None => Ok(()),
            Some(text) => match Microversion::parse(text) {
                Some(v) if v.major == major => Ok(()),
                _ => Err(format!("{field} {text:?} is not of the form {major}.N")),
            },
        }
    }
}

impl From<&str> for MaxMicroversion {
    fn from(text: &str) -> Self {
        Self(Some(text.into()))
    }
}

impl From<String> for MaxMicroversion {
    fn from(text: String) -> Self {
        Self(Some(text))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("2025.1", OpenStackRelease::V2025_1)]
    #[case("2025.2", OpenStackRelease::V2025_2)]
    #[case("2026.1", OpenStackRelease::V2026_1)]
    #[case(" 2026.1 ", OpenStackRelease::V2026_1)]
    fn names_parse_and_print_the_same(#[case] text: &str, #[case] release: OpenStackRelease) {
        assert_eq!(text.parse::<OpenStackRelease>(), Ok(release));
        assert_eq!(release.to_string(), text.trim());
        let yaml = serde_yaml::to_string(&release).unwrap();
        assert_eq!(yaml.trim().trim_matches('\''), text.trim());
        let back: OpenStackRelease = serde_yaml::from_str(&yaml).unwrap();
        assert_eq!(back, release);
    }

    #[rstest]
    #[case("2024.2")]
    #[case("epoxy")]
    #[case("")]
    fn unknown_names_are_refused_listing_the_known_ones(#[case] text: &str) {
        let err = text.parse::<OpenStackRelease>().unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("unknown OpenStack release {text:?}: expected one of 2025.1, 2025.2, 2026.1")
        );
        let yaml = serde_yaml::from_str::<OpenStackRelease>(&format!("'{text}'")).unwrap_err();
        assert!(yaml.to_string().contains("2026.1"), "{yaml}");
    }

    #[test]
    fn the_default_is_the_newest() {
        assert_eq!(
            OpenStackRelease::default(),
            *OpenStackRelease::ALL.last().unwrap()
        );
        assert!(OpenStackRelease::ALL.windows(2).all(|w| w[0] < w[1]));
    }

    #[rstest]
    #[case(OpenStackRelease::V2025_1, (2, 89), (3, 71), (2, 100))]
    #[case(OpenStackRelease::V2025_2, (2, 91), (3, 71), (2, 100))]
    #[case(OpenStackRelease::V2026_1, (2, 95), (3, 71), (2, 103))]
    fn each_release_sets_every_services_maximum(
        #[case] release: OpenStackRelease,
        #[case] manila: (u32, u32),
        #[case] cinder: (u32, u32),
        #[case] nova: (u32, u32),
    ) {
        let pair = |v: Microversion| (v.major, v.minor);
        assert_eq!(pair(release.manila_max()), manila);
        assert_eq!(pair(release.cinder_max()), cinder);
        assert_eq!(pair(release.nova_max()), nova);
    }

    #[test]
    fn an_explicit_maximum_overrides_the_release() {
        let release = OpenStackRelease::V2026_1.manila_max();
        assert_eq!(
            MaxMicroversion::from_release().resolve(release),
            Some(release)
        );
        assert_eq!(
            MaxMicroversion::from("2.64").resolve(release),
            Some(Microversion::v2(64))
        );
        assert_eq!(
            MaxMicroversion::from("3.5").validate("manila.max_microversion", 2),
            Err("manila.max_microversion \"3.5\" is not of the form 2.N".into())
        );
        assert_eq!(
            MaxMicroversion::from("latest").validate("cinder.max_microversion", 3),
            Err("cinder.max_microversion \"latest\" is not of the form 3.N".into())
        );
        let unset: MaxMicroversion = serde_yaml::from_str("null").unwrap();
        assert_eq!(unset, MaxMicroversion::from_release());
        let set: MaxMicroversion = serde_yaml::from_str("'2.64'").unwrap();
        assert_eq!(set.explicit(), Some("2.64"));
    }
}
