//! Parsing CSI endpoints as they appear on plugin and sidecar command lines.

use std::{fmt, path::PathBuf, str::FromStr};

use crate::error::{Error, Result};

/// Where a CSI server listens or a client connects.
///
/// Accepted spellings (as upstream CSI plugins and sidecars accept them):
///
/// | given                 | meaning                                              |
/// |-----------------------|------------------------------------------------------|
/// | `unix:///csi/csi.sock`| unix socket `/csi/csi.sock`                          |
/// | `unix://tmp/csi.sock` | unix socket `/tmp/csi.sock` (upstream's `"/" + rest`) |
/// | `unix:/csi/csi.sock`  | unix socket `/csi/csi.sock`                          |
/// | `/csi/csi.sock`       | unix socket at that path (relative paths too)        |
/// | `tcp://127.0.0.1:10000` | TCP `host:port`                                     |
///
/// The scheme is case-insensitive. `Display` prints the canonical form
/// (`unix:///abs/path` or `tcp://host:port`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// A unix domain socket path.
    Unix(PathBuf),
    /// A TCP address `host:port` (host may be a name, an IPv4 address or `[IPv6]`).
    Tcp(String),
}

impl Endpoint {
    /// Parses an endpoint; see the type documentation for the accepted forms.
    pub fn parse(text: &str) -> Result<Self> {
        let invalid = |reason: &str| Error::InvalidEndpoint {
            endpoint: text.to_owned(),
            reason: reason.to_owned(),
        };
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Err(invalid("it is empty"));
        }
        let lower = trimmed.to_ascii_lowercase();
        if lower.starts_with("unix://") {
            let rest = &trimmed["unix://".len()..];
            if rest.is_empty() {
                return Err(invalid("the socket path after unix:// is empty"));
            }
            let path = if rest.starts_with('/') {
                PathBuf::from(rest)
            } else {
                PathBuf::from(format!("/{rest}"))
            };
            return Ok(Self::Unix(path));
        }
        if lower.starts_with("unix:") {
            let rest = &trimmed["unix:".len()..];
            if rest.is_empty() {
                return Err(invalid("the socket path after unix: is empty"));
            }
            return Ok(Self::Unix(PathBuf::from(rest)));
        }
        if lower.starts_with("tcp://") {
            let address = &trimmed["tcp://".len()..];
            validate_host_port(address).map_err(|reason| invalid(&reason))?;
            return Ok(Self::Tcp(address.to_owned()));
        }
        if let Some((scheme, _)) = trimmed.split_once("://") {
            return Err(invalid(&format!(
                "unsupported scheme {scheme:?}: use unix://, tcp:// or a socket path"
            )));
        }
        Ok(Self::Unix(PathBuf::from(trimmed)))
    }

    /// The unix socket path, if this is a unix endpoint.
    pub fn unix_path(&self) -> Option<&std::path::Path> {
        match self {
            Self::Unix(path) => Some(path),
            Self::Tcp(_) => None,
        }
    }
}

fn validate_host_port(address: &str) -> std::result::Result<(), String> {
    let Some((host, port)) = address.rsplit_once(':') else {
        return Err("expected tcp://host:port".to_owned());
    };
    if host.is_empty() {
        return Err("the host in tcp://host:port is empty".to_owned());
    }
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return Err("an IPv6 host must be in brackets: tcp://[::1]:port".to_owned());
    }
    if host.contains('/') {
        return Err("tcp://host:port takes no path".to_owned());
    }
    port.parse::<u16>()
        .map_err(|_| format!("the port {port:?} is not a number from 0 to 65535"))?;
    Ok(())
}

impl FromStr for Endpoint {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        Self::parse(text)
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unix(path) if path.is_absolute() => write!(f, "unix://{}", path.display()),
            Self::Unix(path) => write!(f, "unix:{}", path.display()),
            Self::Tcp(address) => write!(f, "tcp://{address}"),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case("unix:///csi/csi.sock", "/csi/csi.sock")]
    #[case("UNIX:///csi/csi.sock", "/csi/csi.sock")]
    #[case("unix://tmp/csi.sock", "/tmp/csi.sock")]
    #[case("unix:/csi/csi.sock", "/csi/csi.sock")]
    #[case("unix:relative.sock", "relative.sock")]
    #[case(
        "/var/lib/kubelet/plugins/x/csi.sock",
        "/var/lib/kubelet/plugins/x/csi.sock"
    )]
    #[case("csi.sock", "csi.sock")]
    fn unix_forms_parse_to_the_socket_path(#[case] given: &str, #[case] path: &str) {
        assert_eq!(Endpoint::parse(given).unwrap(), Endpoint::Unix(path.into()));
    }

    #[rstest]
    #[case("tcp://127.0.0.1:10000", "127.0.0.1:10000")]
    #[case("tcp://localhost:0", "localhost:0")]
    #[case("TCP://[::1]:9000", "[::1]:9000")]
    fn tcp_forms_parse_to_host_port(#[case] given: &str, #[case] address: &str) {
        assert_eq!(
            Endpoint::parse(given).unwrap(),
            Endpoint::Tcp(address.into())
        );
    }

    #[rstest]
    #[case("", "empty")]
    #[case("unix://", "path after unix:// is empty")]
    #[case("unix:", "path after unix: is empty")]
    #[case("tcp://localhost", "expected tcp://host:port")]
    #[case("tcp://:80", "host in tcp://host:port is empty")]
    #[case("tcp://host:http", "port \"http\" is not a number")]
    #[case("tcp://::1:80", "IPv6 host must be in brackets")]
    #[case("http://host:80", "unsupported scheme \"http\"")]
    fn bad_endpoints_name_the_problem(#[case] given: &str, #[case] expected: &str) {
        let message = Endpoint::parse(given).unwrap_err().to_string();
        assert!(message.contains(expected), "{message:?} lacks {expected:?}");
        assert!(
            message.contains(&format!("{given:?}")),
            "{message:?} lacks the endpoint"
        );
    }

    #[rstest]
    #[case("unix://tmp/csi.sock", "unix:///tmp/csi.sock")]
    #[case("/a/b.sock", "unix:///a/b.sock")]
    #[case("rel.sock", "unix:rel.sock")]
    #[case("tcp://h:1", "tcp://h:1")]
    fn display_is_canonical_and_parses_back(#[case] given: &str, #[case] shown: &str) {
        let endpoint = Endpoint::parse(given).unwrap();
        assert_eq!(endpoint.to_string(), shown);
        assert_eq!(Endpoint::parse(shown).unwrap(), endpoint);
    }
}
