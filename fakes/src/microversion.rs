//! Microversions: Manila's (`X-OpenStack-Manila-API-Version: 2.N`, [`Microversion`],
//! [`requested`]) and the generic header Cinder and Nova read (`OpenStack-API-Version:
//! volume 3.N`, [`parse_pair`], [`requested_in_generic_header`]), each parsed as its service
//! parses it; the seed's highest versions are checked with the same parsers.

use std::fmt;

use wiremock::http::HeaderMap;

/// The header Manila reads and echoes.
pub const MANILA_HEADER: &str = "X-OpenStack-Manila-API-Version";
/// The generic microversion header (`volume 3.N`, `compute 2.N`): Cinder and Nova read and
/// answer it; Manila ignores it (`shared-file-system 2.N`).
pub const GENERIC_HEADER: &str = "OpenStack-API-Version";

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

    /// Parses `M.N` as Manila does (`^([1-9]\d*)\.([1-9]\d*|0)$`): ASCII digits, no
    /// leading zeros, a major of at least 1.
    pub fn parse(text: &str) -> Option<Self> {
        let (major, minor) = text.trim().split_once('.')?;
        if major.starts_with('0') {
            return None;
        }
        let number = |s: &str| {
            if s.is_empty()
                || (s.len() > 1 && s.starts_with('0'))
                || !s.bytes().all(|b| b.is_ascii_digit())
            {
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

/// The microversion a request asks for: Manila reads `X-OpenStack-Manila-API-Version`
/// only (the generic `OpenStack-API-Version` header is not honoured) and takes 2.0 when it
/// is absent; `latest` is not a version to Manila (400, as any malformed value).
pub fn requested(headers: &HeaderMap, max: Microversion) -> Result<Microversion, VersionError> {
    let Some(raw) = headers.get(MANILA_HEADER) else {
        return Ok(Microversion::MIN);
    };
    let raw = String::from_utf8_lossy(raw.as_bytes()).trim().to_owned();
    let version = Microversion::parse(&raw).ok_or(VersionError::Malformed(raw))?;
    if version < Microversion::MIN || version > max {
        return Err(VersionError::OutOfRange(version));
    }
    Ok(version)
}

/// `M.N` as a pair, as Cinder and Nova parse it (ASCII digits, no leading zero in the minor).
pub(crate) fn parse_pair(text: &str) -> Option<(u32, u32)> {
    let (major, minor) = text.trim().split_once('.')?;
    let ok = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !ok(major) || !ok(minor) || (minor.len() > 1 && minor.starts_with('0')) {
        return None;
    }
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The value `service` asks for in the [`GENERIC_HEADER`] (`volume 3.50`, possibly among
/// others separated by commas).
pub(crate) fn requested_in_generic_header<'a>(
    headers: &'a HeaderMap,
    service: &str,
) -> Option<&'a str> {
    headers
        .get_all(GENERIC_HEADER)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .find_map(|item| {
            let (name, version) = item.trim().split_once(' ')?;
            name.eq_ignore_ascii_case(service).then(|| version.trim())
        })
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
    #[case(GENERIC_HEADER, "shared-file-system 2.7", Ok(Microversion::MIN))]
    #[case(GENERIC_HEADER, "compute 2.7", Ok(Microversion::MIN))]
    #[case(MANILA_HEADER, "latest", Err(VersionError::Malformed("latest".into())))]
    #[case(MANILA_HEADER, "02.1", Err(VersionError::Malformed("02.1".into())))]
    #[case(MANILA_HEADER, "2.", Err(VersionError::Malformed("2.".into())))]
    #[case(MANILA_HEADER, "0.5", Err(VersionError::Malformed("0.5".into())))]
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
