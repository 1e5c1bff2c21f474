//! The controller side: Manila share lifecycle behind the CSI Controller RPCs. The logic
//! here takes plain Rust inputs; [`service`] maps the gRPC messages onto it.

mod create;
mod delete;
mod expand;
pub mod service;

mod snapshot;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

pub use create::{CreateVolume, CreatedVolume, TopologyRequirement};
pub use snapshot::CreatedSnapshot;

use crate::error::{Error, Result};
use crate::protocol::ShareAdapter;
use crate::wait::{Progress, WaitPolicy};
use csi_proto::in_flight::InFlight;
use openstack_client::manila::{Share, is_manila_id};
use openstack_client::{Connector, ManilaClient};

/// Topology segment key of the Manila availability zone.
pub const TOPOLOGY_KEY: &str = "topology.manila.csi.openstack.org/zone";

/// One GiB in bytes.
pub const GIB: i64 = 1 << 30;

/// Settings the controller needs from the command line.
#[derive(Clone, Debug)]
pub struct ControllerSettings {
    /// `--drivername` (used in share and snapshot descriptions).
    pub driver_name: String,
    /// `--cluster-id`.
    pub cluster_id: Option<String>,
    /// `--with-topology`.
    pub with_topology: bool,
    /// `--runtime-config-file`.
    pub runtime_config_file: Option<PathBuf>,
    /// How long to wait for shares, snapshots and access rules.
    pub wait: WaitPolicy,
    /// With `--pvc-annotations`: where the claims' annotations are read.
    pub claims: Option<crate::pvc::ClaimReader>,
}

/// The controller: share lifecycle against the cloud named by each request's secrets.
#[derive(Debug, Clone)]
pub struct Controller {
    connector: Arc<Connector>,
    adapter: Arc<dyn ShareAdapter>,
    settings: ControllerSettings,
    inflight: InFlight,
}

impl Controller {
    /// A controller using `connector` for OpenStack access and `adapter` for the protocol.
    pub fn new(
        connector: Arc<Connector>,
        adapter: Arc<dyn ShareAdapter>,
        settings: ControllerSettings,
    ) -> Self {
        Controller {
            connector,
            adapter,
            settings,
            inflight: InFlight::default(),
        }
    }

    /// The settings.
    pub fn settings(&self) -> &ControllerSettings {
        &self.settings
    }

    async fn connect(&self, secrets: &HashMap<String, String>) -> Result<Arc<ManilaClient>> {
        Ok(self.connector.connect(secrets).await?)
    }

    /// Waits for `share_id` to leave the transient states `pending` and reach `target`.
    /// `error`-like states return [`Error::ResourceFailed`] with the newest user message.
    async fn wait_for_share(
        &self,
        client: &ManilaClient,
        share_id: &str,
        target: &str,
        pending: &[&str],
    ) -> Result<Share> {
        let what = format!("share {share_id} to become {target}");
        self.settings
            .wait
            .wait(&what, || async {
                let share = client.share(share_id).await?;
                if share.status == target {
                    return Ok(Progress::Done(share));
                }
                if pending.contains(&share.status.as_str()) {
                    return Ok(Progress::Pending(format!("status {}", share.status)));
                }
                if share.status.contains("error") {
                    let message = client.newest_error_message(share_id).await.ok().flatten();
                    return Err(Error::ResourceFailed {
                        message: format!(
                            "share {share_id} is in status {}{}",
                            share.status,
                            describe_message(message.as_ref())
                        ),
                        detail_id: message.and_then(|m| m.detail_id),
                    });
                }
                Err(Error::FailedPrecondition(format!(
                    "share {share_id} is in status {} while waiting for {target}",
                    share.status
                )))
            })
            .await
    }

    /// Waits until `share_id` is gone (404), so that a finished DeleteVolume leaves nothing.
    async fn wait_for_share_gone(&self, client: &ManilaClient, share_id: &str) -> Result<()> {
        let what = format!("share {share_id} to be deleted");
        self.settings
            .wait
            .wait(&what, || async {
                match client.share(share_id).await {
                    Err(e) if e.is_not_found() => Ok(Progress::Done(())),
                    Err(e) => Err(e.into()),
                    Ok(share) if share.status == "error_deleting" => Err(Error::Internal(format!(
                        "share {share_id} is in status error_deleting: Manila could not delete it"
                    ))),
                    Ok(share) => Ok(Progress::Pending(format!("status {}", share.status))),
                }
            })
            .await
    }
}

/// `: <user message> (detail <id>)`, or nothing.
fn describe_message(message: Option<&openstack_client::manila::Message>) -> String {
    match message {
        Some(m) => format!(
            ": {} (Manila user message detail_id {})",
            m.user_message.as_deref().unwrap_or("no text"),
            m.detail_id.as_deref().unwrap_or("?")
        ),
        None => String::new(),
    }
}

/// The largest share Manila can hold, in GiB: it keeps sizes in a 32-bit integer column.
pub const MAX_SHARE_GIB: u64 = i32::MAX as u64;

/// Size in whole GiB for a CSI capacity range: rounded up, at least 1; `limit` (0 = none)
/// must allow it. Sizes beyond the largest Manila share ([`MAX_SHARE_GIB`]) are OutOfRange;
/// the arithmetic cannot overflow whatever the request says.
pub fn size_in_gib(required_bytes: i64, limit_bytes: i64) -> Result<u64> {
    let (Ok(required), Ok(limit)) = (u64::try_from(required_bytes), u64::try_from(limit_bytes))
    else {
        return Err(Error::InvalidArgument(
            "capacity_range: required_bytes and limit_bytes must not be negative".into(),
        ));
    };
    let gib = required.max(1).div_ceil(GIB.unsigned_abs());
    if gib > MAX_SHARE_GIB {
        return Err(Error::OutOfRange(format!(
            "capacity_range: {required_bytes} bytes is {gib} GiB, more than the largest Manila share ({MAX_SHARE_GIB} GiB)"
        )));
    }
    // At most MAX_SHARE_GIB × GIB < 2^61: no overflow.
    if limit > 0 && gib * GIB.unsigned_abs() > limit {
        return Err(Error::OutOfRange(format!(
            "capacity_range: {required_bytes} bytes rounded up to {gib} GiB exceeds limit_bytes {limit_bytes}"
        )));
    }
    Ok(gib)
}

/// A share size in GiB as CSI bytes; OutOfRange when it does not fit an `i64` (a share
/// larger than Manila allows, as a cloud might still report).
pub fn gib_to_bytes(what: &str, gib: u64) -> Result<i64> {
    i64::try_from(gib)
        .ok()
        .and_then(|gib| gib.checked_mul(GIB))
        .ok_or_else(|| {
            Error::OutOfRange(format!(
                "{what} has {gib} GiB, which is more bytes than CSI can report"
            ))
        })
}

/// A volume id that is not a Manila share id (a UUID) names no volume: NotFound, before
/// anything reaches the cloud.
fn not_found_unless_share_id(volume_id: &str) -> Result<()> {
    if is_manila_id(volume_id) {
        Ok(())
    } else {
        Err(Error::NotFound(format!(
            "volume {volume_id:?} not found: it is not a Manila share id"
        )))
    }
}

impl Controller {
    /// ValidateVolumeCapabilities' look at the share, as upstream does it: the share must
    /// exist (NotFound), be `available` (still `creating` or `creating_from_snapshot`:
    /// Unavailable, the CO may ask again; any other status, e.g. `error` or `deleting`:
    /// FailedPrecondition naming it). A share of another protocol than this driver's is not
    /// an error but not confirmed either: `Ok(Some(reason))`.
    pub async fn validate_volume(
        &self,
        volume_id: &str,
        secrets: &HashMap<String, String>,
    ) -> Result<Option<String>> {
        not_found_unless_share_id(volume_id)?;
        let client = self.connect(secrets).await?;
        let share = client.share(volume_id).await?;
        match share.status.as_str() {
            "available" => {}
            status @ ("creating" | "creating_from_snapshot") => {
                return Err(Error::Unavailable(format!(
                    "share {volume_id} is still {status}; retry when it is available"
                )));
            }
            status => {
                return Err(Error::FailedPrecondition(format!(
                    "share {volume_id} is in status {status}, not available"
                )));
            }
        }
        let protocol = self.adapter.protocol().manila_name();
        if share.is_protocol(protocol) {
            Ok(None)
        } else {
            Ok(Some(format!(
                "share protocol mismatch: share {volume_id} is a {} share, this driver serves {protocol}",
                share.share_proto.as_deref().unwrap_or("?")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn sizes_round_up_to_whole_gib() {
        assert_eq!(size_in_gib(0, 0).unwrap(), 1);
        assert_eq!(size_in_gib(1, 0).unwrap(), 1);
        assert_eq!(size_in_gib(GIB, 0).unwrap(), 1);
        assert_eq!(size_in_gib(GIB + 1, 0).unwrap(), 2);
        assert!(size_in_gib(GIB + 1, GIB + 5).is_err());
        assert_eq!(size_in_gib(GIB, GIB).unwrap(), 1);
    }

    #[rstest::rstest]
    #[case(i64::MAX, 0)]
    #[case(i64::MAX, i64::MAX)]
    #[case(i64::MAX - GIB + 2, 0)]
    #[case(((MAX_SHARE_GIB as i64) + 1) * GIB, 0)]
    fn huge_sizes_are_out_of_range(#[case] required: i64, #[case] limit: i64) {
        let error = size_in_gib(required, limit).unwrap_err();
        assert!(matches!(error, Error::OutOfRange(_)), "{error:?}");
        assert!(
            error.to_string().contains("largest Manila share"),
            "{error}"
        );
    }

    #[test]
    fn limits_near_the_maximum_do_not_overflow() {
        assert_eq!(size_in_gib(1, i64::MAX).unwrap(), 1);
        assert_eq!(
            size_in_gib(MAX_SHARE_GIB as i64 * GIB, i64::MAX).unwrap(),
            MAX_SHARE_GIB
        );
        let error = size_in_gib(MAX_SHARE_GIB as i64 * GIB, GIB).unwrap_err();
        assert!(matches!(error, Error::OutOfRange(_)), "{error:?}");
        assert!(matches!(
            size_in_gib(-1, 0).unwrap_err(),
            Error::InvalidArgument(_)
        ));
        assert!(matches!(
            size_in_gib(0, i64::MIN).unwrap_err(),
            Error::InvalidArgument(_)
        ));
    }

    #[test]
    fn share_sizes_beyond_i64_bytes_are_out_of_range() {
        assert_eq!(gib_to_bytes("share s", 2).unwrap(), 2 * GIB);
        for gib in [1 << 33, u64::MAX] {
            let error = gib_to_bytes("share s", gib).unwrap_err();
            assert!(matches!(error, Error::OutOfRange(_)), "{error:?}");
        }
    }
}
