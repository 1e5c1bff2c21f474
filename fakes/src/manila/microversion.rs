//! Manila microversions: parsing the request headers, range checks, echoing.

use std::fmt;

use wiremock::http::HeaderMap;

/// The header Manila reads and echoes.
pub const MANILA_HEADER: &str = "X-OpenStack-Manila-API-Version";
/// The generic microversion header (`shared-file-system 2.N`).
pub const GENERIC_HEADER: &str = "OpenStack-API-Version";
/// The service name in the generic header.
pub const SERVICE: &str = "shared-file-system";

/// A `major.minor` API microversion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Microversion {
    /// Major version (2 for the v2 API).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl Microversion {
    /// 2.0, the minimum and the default when a request names none.
    pub const MIN: Self = Self::v2(0);

    /// `2.minor`.
    pub const fn v2(minor: u32) -> Self {
        Self { major: 2, minor }
    }

    /// Parses `M.N` (no leading zeros beyond a single `0`).
    pub fn parse(text: &str) -> Option<Self> {
        let (major, minor) = text.trim().split_once('.')?;
        let number = |s: &str| {
            if s.is_empty() || (s.len() > 1 && s.starts_with('0')) {
                None
            } else {
                s.parse::<u32>().ok()
            }
        };
        Some(Self {
            major: number(major)?,
            minor: number(minor)?,
        })
    }
}

impl fmt::Display for Microversion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Why a request's microversion was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionError {
    /// Not of the `M.N` form: Manila answers 400.
    Malformed(String),
    /// Outside `[min, max]`: Manila answers 406.
    OutOfRange(Microversion),
}

/// The microversion a request asks for (2.0 when it names none); `latest` means `max`.
pub fn requested(headers: &HeaderMap, max: Microversion) -> Result<Microversion, VersionError> {
    let raw = headers
        .get(MANILA_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .map(str::to_owned)
        .or_else(|| {
            headers
                .get_all(GENERIC_HEADER)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .find_map(|v| {
                    let (service, version) = v.trim().split_once(' ')?;
                    (service.eq_ignore_ascii_case(SERVICE)).then(|| version.trim().to_owned())
                })
        });
    let Some(raw) = raw else {
        return Ok(Microversion::MIN);
    };
    if raw.eq_ignore_ascii_case("latest") {
        return Ok(max);
    }
    let version = Microversion::parse(&raw).ok_or(VersionError::Malformed(raw))?;
    if version < Microversion::MIN || version > max {
        return Err(VersionError::OutOfRange(version));
    }
    Ok(version)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use rstest::rstest;

    fn headers(name: &str, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            wiremock::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
        h
    }

    #[rstest]
    #[case(MANILA_HEADER, "2.45", Ok(Microversion::v2(45)))]
    #[case(GENERIC_HEADER, "shared-file-system 2.7", Ok(Microversion::v2(7)))]
    #[case(GENERIC_HEADER, "compute 2.7", Ok(Microversion::MIN))]
    #[case(MANILA_HEADER, "latest", Ok(Microversion::v2(84)))]
    #[case(
        MANILA_HEADER,
        "2.85",
        Err(VersionError::OutOfRange(Microversion::v2(85)))
    )]
    #[case(MANILA_HEADER, "1.0", Err(VersionError::OutOfRange(Microversion { major: 1, minor: 0 })))]
    #[case(MANILA_HEADER, "two", Err(VersionError::Malformed("two".into())))]
    #[case(MANILA_HEADER, "2.07", Err(VersionError::Malformed("2.07".into())))]
    fn requested_version(
        #[case] name: &str,
        #[case] value: &str,
        #[case] expected: Result<Microversion, VersionError>,
    ) {
        assert_eq!(
            requested(&headers(name, value), Microversion::v2(84)),
            expected
        );
    }

    #[test]
    fn absent_header_means_2_0() {
        assert_eq!(
            requested(&HeaderMap::new(), Microversion::v2(84)),
            Ok(Microversion::MIN)
        );
    }
}
