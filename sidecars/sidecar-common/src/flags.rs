//! The flags the upstream CSI sidecars share, with their names and defaults.
//!
//! Flatten [`CommonFlags`] into a sidecar's own clap struct, and [`RetryFlags`] into the
//! controller sidecars' (provisioner, attacher, resizer, snapshotter). Booleans accept Go style
//! (`--leader-election`, `--leader-election=false`); durations accept Go's syntax
//! (`15s`, `1m30s`, `500ms`; [`kube_support::go_duration::parse_go_duration`]).

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args};
use kube_support::backoff::KeyedBackoff;
use kube_support::go_duration::parse_go_duration as parse_duration;
use kube_support::leader::LeaderElection;

use crate::error::{Error, Result};

/// Flags shared by every sidecar.
#[derive(Clone, Debug, Args)]
pub struct CommonFlags {
    /// The CSI driver's socket: a path or `unix:///path`.
    #[arg(
        long = "csi-address",
        env = "ADDRESS",
        default_value = "/run/csi/socket"
    )]
    pub csi_address: String,

    /// Timeout of each CSI call (and of waiting for the driver at start-up).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,

    /// Kubeconfig file; when absent the in-cluster configuration (or `$KUBECONFIG`) is used.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,

    /// Run only while holding the leader Lease.
    #[arg(long = "leader-election", num_args = 0..=1, default_missing_value = "true",
          default_value_t = false, action = ArgAction::Set)]
    pub leader_election: bool,

    /// Namespace of the leader Lease (default: the pod's namespace, else `default`).
    #[arg(long = "leader-election-namespace", env = "NAMESPACE")]
    pub leader_election_namespace: Option<String>,

    /// How long a Lease stays valid after its last renewal.
    #[arg(long = "leader-election-lease-duration", default_value = "15s", value_parser = parse_duration)]
    pub lease_duration: Duration,

    /// How long before expiry the leader must have renewed.
    #[arg(long = "leader-election-renew-deadline", default_value = "10s", value_parser = parse_duration)]
    pub renew_deadline: Duration,

    /// How often non-leaders retry (kept for compatibility; the Lease manager paces itself).
    #[arg(long = "leader-election-retry-period", default_value = "5s", value_parser = parse_duration)]
    pub retry_period: Duration,

    /// `host:port` serving `/healthz` and `/metrics` (off when absent).
    #[arg(long = "http-endpoint")]
    pub http_endpoint: Option<String>,

    /// Log verbosity as klog's `-v`: 0–1 warn, 2–3 info, 4 debug, 5+ trace. `RUST_LOG` wins.
    #[arg(short = 'v', long = "v", default_value_t = 2)]
    pub verbosity: u8,
}

impl CommonFlags {
    /// Checks what the parser cannot: the lease timings.
    pub fn validate(&self) -> Result<()> {
        if self.lease_duration <= self.renew_deadline {
            return Err(Error::InvalidFlag {
                flag: "--leader-election-lease-duration",
                reason: format!(
                    "{:?} must be longer than --leader-election-renew-deadline {:?}",
                    self.lease_duration, self.renew_deadline
                ),
            });
        }
        if self.renew_deadline.is_zero() || self.timeout.is_zero() {
            return Err(Error::InvalidFlag {
                flag: "--timeout/--leader-election-renew-deadline",
                reason: "must be positive".into(),
            });
        }
        Ok(())
    }

    /// The leader election these flags describe for the Lease `lease_name` (see
    /// [`kube_support::leader::lease_name`]): in `--leader-election-namespace`, else the
    /// pod's namespace, else `default`.
    pub fn leader_election(&self, lease_name: String) -> LeaderElection {
        LeaderElection::new(
            lease_name,
            self.leader_election_namespace.clone(),
            "sidecar",
            self.lease_duration,
            self.renew_deadline,
        )
    }
}

/// The retry flags of the controller sidecars: a failed object is retried after
/// `--retry-interval-start`, doubling per consecutive failure up to `--retry-interval-max`.
#[derive(Clone, Debug, Args)]
pub struct RetryFlags {
    /// First retry delay of a failed object; doubles per consecutive failure.
    #[arg(long = "retry-interval-start", default_value = "1s", value_parser = parse_duration)]
    pub retry_interval_start: Duration,

    /// Longest retry delay.
    #[arg(long = "retry-interval-max", default_value = "5m", value_parser = parse_duration)]
    pub retry_interval_max: Duration,
}

impl RetryFlags {
    /// The per-object back-off these flags describe.
    pub fn backoff(&self) -> KeyedBackoff {
        KeyedBackoff::new(self.retry_interval_start, self.retry_interval_max)
    }
}

/// A name made from an object's uid as upstream's `--volume-name-prefix` /
/// `--volume-name-uuid-length` (and the snapshotter's `--snapshot-name-*`) make it:
/// `<prefix>-<uid>`, the uid cut to `uuid_length` characters when that is not negative.
pub fn name_from_uid(prefix: &str, uuid_length: i32, uid: &str) -> String {
    let uid = match usize::try_from(uuid_length) {
        Ok(length) => uid.get(..length.min(uid.len())).unwrap_or(uid),
        Err(_) => uid,
    };
    format!("{prefix}-{uid}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        common: CommonFlags,
        #[command(flatten)]
        retry: RetryFlags,
    }

    fn parse_all(args: &[&str]) -> std::result::Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("sidecar").chain(args.iter().copied()))
    }

    fn parse(args: &[&str]) -> std::result::Result<CommonFlags, clap::Error> {
        parse_all(args).map(|c| c.common)
    }

    #[test]
    fn defaults_match_upstream() {
        let flags = parse(&[]).unwrap();
        assert_eq!(flags.timeout, Duration::from_secs(10));
        assert!(!flags.leader_election);
        assert_eq!(flags.lease_duration, Duration::from_secs(15));
        assert_eq!(flags.renew_deadline, Duration::from_secs(10));
        assert_eq!(flags.retry_period, Duration::from_secs(5));
        flags.validate().unwrap();
    }

    #[test]
    fn retry_flags_default_as_upstream_and_make_the_backoff() {
        let retry = parse_all(&[]).unwrap().retry;
        assert_eq!(retry.retry_interval_start, Duration::from_secs(1));
        assert_eq!(retry.retry_interval_max, Duration::from_secs(300));
        let retry = parse_all(&["--retry-interval-start=100ms", "--retry-interval-max=1s"])
            .unwrap()
            .retry;
        let backoff = retry.backoff();
        let delays: Vec<u128> = (0..5).map(|_| backoff.failed("k").as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1000]);
    }

    #[test]
    fn names_from_uids_are_prefixed_and_optionally_cut() {
        let uid = "0b0e7a4c-9d5e-4f7a-8a53-3b2f8f1b7f10";
        assert_eq!(name_from_uid("pvc", -1, uid), format!("pvc-{uid}"));
        assert_eq!(name_from_uid("manila", 8, uid), "manila-0b0e7a4c");
        assert_eq!(name_from_uid("x", 100, "short"), "x-short");
    }

    #[test]
    fn go_style_flags_parse() {
        let flags = parse(&[
            "--csi-address=unix:///csi/csi.sock",
            "--leader-election",
            "--timeout=1m",
            "--v=5",
            "--http-endpoint=:8080",
        ])
        .unwrap();
        assert!(flags.leader_election);
        assert_eq!(flags.timeout, Duration::from_secs(60));
        assert_eq!(flags.verbosity, 5);
        assert_eq!(flags.http_endpoint.as_deref(), Some(":8080"));
        let flags = parse(&["--leader-election=false", "-v", "4"]).unwrap();
        assert!(!flags.leader_election);
        assert_eq!(flags.verbosity, 4);
    }

    #[test]
    fn lease_shorter_than_renew_deadline_is_refused() {
        let flags = parse(&[
            "--leader-election-lease-duration=5s",
            "--leader-election-renew-deadline=10s",
        ])
        .unwrap();
        let error = flags.validate().unwrap_err().to_string();
        assert!(
            error.contains("--leader-election-lease-duration"),
            "{error}"
        );
    }
}
