//! Microversions: Manila's (`X-OpenStack-Manila-API-Version: 2.N`, [`Microversion`],
//! [`requested`]) and the generic header Cinder and Nova read (`OpenStack-API-Version:
//! volume 3.N`, [`cinder_requested`]; `compute 2.N` or Nova's legacy header,
//! [`nova_requested`]), each parsed as its service parses it; the seed's highest versions
//! are checked with the same parser.

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

/// The lowest Cinder microversion, and the one a request without the header gets.
pub const CINDER_MIN: Microversion = Microversion { major: 3, minor: 0 };
/// The lowest Nova microversion, and the one a request without a header gets.
pub const NOVA_MIN: Microversion = Microversion::v2(1);
/// Nova's legacy microversion header (read when the generic one names no `compute`).
pub const NOVA_LEGACY_HEADER: &str = "X-OpenStack-Nova-API-Version";

/// Why Cinder or Nova refused the microversion a request asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderRefusal {
    /// Not `M.N` (`^([1-9]\d*)\.([1-9]\d*|0)$`): 400.
    #[error("API Version String {0} is of invalid format. Must be of format MajorNum.MinorNum.")]
    Malformed(String),
    /// Outside the service's range: 406.
    #[error(
        "Version {version} is not supported by the API. Minimum is {min} and maximum is {max}."
    )]
    OutOfRange {
        /// What was asked.
        version: Microversion,
        /// The service's lowest.
        min: Microversion,
        /// The service's highest.
        max: Microversion,
    },
    /// Cinder: the header is there but no comma-separated part of it mentions `volume`
    /// (Cinder raises `VersionNotFoundForAPIMethod`, an `Invalid`): 400.
    #[error("API version None is not supported on this method.")]
    NoVolumePart,
    /// Cinder: the part that mentions `volume` is not two words (Cinder's `service,
    /// version = hdr.split()` fails, nothing catches it): 500.
    #[error("The server has either erred or is incapable of performing the requested operation.")]
    Unreadable(String),
}

impl HeaderRefusal {
    /// The status the service answers.
    pub fn status(&self) -> u16 {
        match self {
            Self::Malformed(_) | Self::NoVolumePart => 400,
            Self::OutOfRange { .. } => 406,
            Self::Unreadable(_) => 500,
        }
    }
}

/// Every value of header `name`, joined by commas as a WSGI server folds repeated headers.
fn folded(headers: &HeaderMap, name: &str) -> Option<String> {
    let values: Vec<String> = headers
        .get_all(name)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect();
    (!values.is_empty()).then(|| values.join(","))
}

/// `text` as a version within `[min, max]`.
fn within(text: &str, min: Microversion, max: Microversion) -> Result<Microversion, HeaderRefusal> {
    let version = Microversion::parse(text).ok_or_else(|| HeaderRefusal::Malformed(text.into()))?;
    if version < min || version > max {
        return Err(HeaderRefusal::OutOfRange { version, min, max });
    }
    Ok(version)
}

/// The microversion a Cinder request asks for, as Cinder's `set_api_version_request` reads
/// it: only [`GENERIC_HEADER`] (no legacy header); absent → 3.0; present, the first
/// comma-separated part that *contains* `volume` (case-sensitive, so `volumev3 3.42` counts
/// and `Volume 3.42` does not), split into exactly two words; `latest` → `max`.
pub(crate) fn cinder_requested(
    headers: &HeaderMap,
    max: Microversion,
) -> Result<Microversion, HeaderRefusal> {
    let Some(value) = folded(headers, GENERIC_HEADER) else {
        return Ok(CINDER_MIN);
    };
    let part = value
        .split(',')
        .find(|part| part.contains("volume"))
        .ok_or(HeaderRefusal::NoVolumePart)?;
    let words: Vec<&str> = part.split_whitespace().collect();
    let [_service, version] = words[..] else {
        return Err(HeaderRefusal::Unreadable(part.trim().into()));
    };
    if version == "latest" {
        return Ok(max);
    }
    within(version, CINDER_MIN, max)
}

/// The microversion a Nova request asks for, as Nova reads it through oslo's
/// `microversion_parse.get_version(headers, "compute", [X-OpenStack-Nova-API-Version])`: in
/// [`GENERIC_HEADER`] the *last* comma-separated `compute <version>` (service name
/// case-insensitive, one-word parts skipped); failing that the legacy header's last
/// comma-separated value; neither → 2.1; `latest` → `max`.
pub(crate) fn nova_requested(
    headers: &HeaderMap,
    max: Microversion,
) -> Result<Microversion, HeaderRefusal> {
    let standard = folded(headers, GENERIC_HEADER).and_then(|value| {
        value.split(',').rev().find_map(|part| {
            let (service, version) = part.trim().split_once(char::is_whitespace)?;
            service
                .eq_ignore_ascii_case("compute")
                .then(|| version.trim().to_owned())
        })
    });
    let legacy = || {
        folded(headers, NOVA_LEGACY_HEADER)
            .map(|value| value.rsplit(',').next().unwrap_or("").trim().to_owned())
    };
    match standard.or_else(legacy) {
        None => Ok(NOVA_MIN),
        Some(version) if version == "latest" => Ok(max),
        Some(version) => within(&version, NOVA_MIN, max),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use rstest::rstest;

    fn headers(name: &str, value: &str) -> HeaderMap {
        all_headers(&[(name, value)])
    }

    /// Every `(name, value)` in order, repeated names kept as separate header lines.
    fn all_headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append(
                wiremock::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        h
    }

    fn v(major: u32, minor: u32) -> Microversion {
        Microversion { major, minor }
    }

    const CINDER_MAX: Microversion = Microversion {
        major: 3,
        minor: 71,
    };
    const NOVA_MAX: Microversion = Microversion::v2(100);

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

    /// Cinder's `set_api_version_request`: the first comma part containing `volume`.
    #[rstest]
    #[case::absent(&[], Ok(v(3, 0)))]
    #[case::plain(&[(GENERIC_HEADER, "volume 3.42")], Ok(v(3, 42)))]
    #[case::old_gophercloud_volumev3(&[(GENERIC_HEADER, "volumev3 3.42")], Ok(v(3, 42)))]
    #[case::among_others(&[(GENERIC_HEADER, "compute 2.60, volume 3.50")], Ok(v(3, 50)))]
    #[case::first_volume_part_wins(&[(GENERIC_HEADER, "volume 3.44,volume 3.50")], Ok(v(3, 44)))]
    #[case::repeated_header_lines(&[(GENERIC_HEADER, "compute 2.60"), (GENERIC_HEADER, "volume 3.27")], Ok(v(3, 27)))]
    #[case::extra_spaces(&[(GENERIC_HEADER, "  volume   3.42 ")], Ok(v(3, 42)))]
    #[case::latest(&[(GENERIC_HEADER, "volume latest")], Ok(CINDER_MAX))]
    #[case::latest_is_case_sensitive(&[(GENERIC_HEADER, "volume LATEST")], Err(HeaderRefusal::Malformed("LATEST".into())))]
    #[case::service_is_case_sensitive(&[(GENERIC_HEADER, "Volume 3.42")], Err(HeaderRefusal::NoVolumePart))]
    #[case::block_storage_is_not_volume(&[(GENERIC_HEADER, "block-storage 3.42")], Err(HeaderRefusal::NoVolumePart))]
    #[case::legacy_header_ignored(&[("X-OpenStack-Volume-API-Version", "3.42")], Ok(v(3, 0)))]
    #[case::only_compute(&[(GENERIC_HEADER, "compute 2.60")], Err(HeaderRefusal::NoVolumePart))]
    #[case::one_word(&[(GENERIC_HEADER, "volume")], Err(HeaderRefusal::Unreadable("volume".into())))]
    #[case::three_words(&[(GENERIC_HEADER, "volume 3.42 x")], Err(HeaderRefusal::Unreadable("volume 3.42 x".into())))]
    #[case::leading_zero(&[(GENERIC_HEADER, "volume 03.42")], Err(HeaderRefusal::Malformed("03.42".into())))]
    #[case::above(&[(GENERIC_HEADER, "volume 3.72")], Err(HeaderRefusal::OutOfRange { version: v(3, 72), min: CINDER_MIN, max: CINDER_MAX }))]
    #[case::other_major(&[(GENERIC_HEADER, "volume 2.0")], Err(HeaderRefusal::OutOfRange { version: v(2, 0), min: CINDER_MIN, max: CINDER_MAX }))]
    fn cinder_reads_the_header_as_cinder_does(
        #[case] pairs: &[(&str, &str)],
        #[case] expected: Result<Microversion, HeaderRefusal>,
    ) {
        assert_eq!(cinder_requested(&all_headers(pairs), CINDER_MAX), expected);
    }

    /// Nova through `microversion_parse`: the last `compute` part, else the legacy header.
    #[rstest]
    #[case::absent(&[], Ok(v(2, 1)))]
    #[case::standard(&[(GENERIC_HEADER, "compute 2.60")], Ok(v(2, 60)))]
    #[case::service_case_insensitive(&[(GENERIC_HEADER, "COMPUTE 2.60")], Ok(v(2, 60)))]
    #[case::last_compute_part_wins(&[(GENERIC_HEADER, "compute 2.5,compute 2.60")], Ok(v(2, 60)))]
    #[case::among_others(&[(GENERIC_HEADER, "volume 3.50, compute 2.89")], Ok(v(2, 89)))]
    #[case::legacy(&[(NOVA_LEGACY_HEADER, "2.60")], Ok(v(2, 60)))]
    #[case::legacy_last_value(&[(NOVA_LEGACY_HEADER, "2.1, 2.60")], Ok(v(2, 60)))]
    #[case::standard_before_legacy(&[(GENERIC_HEADER, "compute 2.70"), (NOVA_LEGACY_HEADER, "2.60")], Ok(v(2, 70)))]
    #[case::legacy_when_no_compute_part(&[(GENERIC_HEADER, "volume 3.50"), (NOVA_LEGACY_HEADER, "2.60")], Ok(v(2, 60)))]
    #[case::one_word_part_skipped(&[(GENERIC_HEADER, "compute")], Ok(v(2, 1)))]
    #[case::latest(&[(GENERIC_HEADER, "compute latest")], Ok(NOVA_MAX))]
    #[case::legacy_latest(&[(NOVA_LEGACY_HEADER, "latest")], Ok(NOVA_MAX))]
    #[case::malformed(&[(GENERIC_HEADER, "compute 2.x")], Err(HeaderRefusal::Malformed("2.x".into())))]
    #[case::trailing_words(&[(GENERIC_HEADER, "compute 2.60 now")], Err(HeaderRefusal::Malformed("2.60 now".into())))]
    #[case::empty_legacy(&[(NOVA_LEGACY_HEADER, "")], Err(HeaderRefusal::Malformed(String::new())))]
    #[case::below(&[(GENERIC_HEADER, "compute 2.0")], Err(HeaderRefusal::OutOfRange { version: v(2, 0), min: NOVA_MIN, max: NOVA_MAX }))]
    #[case::above(&[(GENERIC_HEADER, "compute 2.101")], Err(HeaderRefusal::OutOfRange { version: v(2, 101), min: NOVA_MIN, max: NOVA_MAX }))]
    fn nova_reads_the_headers_as_microversion_parse_does(
        #[case] pairs: &[(&str, &str)],
        #[case] expected: Result<Microversion, HeaderRefusal>,
    ) {
        assert_eq!(nova_requested(&all_headers(pairs), NOVA_MAX), expected);
    }

    #[rstest]
    #[case(HeaderRefusal::Malformed("x".into()), 400)]
    #[case(HeaderRefusal::NoVolumePart, 400)]
    #[case(HeaderRefusal::OutOfRange { version: v(3, 99), min: CINDER_MIN, max: CINDER_MAX }, 406)]
    #[case(HeaderRefusal::Unreadable("volume".into()), 500)]
    fn refusals_answer_the_services_status(#[case] refusal: HeaderRefusal, #[case] status: u16) {
        assert_eq!(refusal.status(), status);
    }
}
