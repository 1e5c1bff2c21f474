//! The CSI Identity service: [`csi_proto::identity::IdentityService`], shared with the
//! Cinder driver; here Probe reflects the forwarding partner's readiness.

use csi_proto::identity::Readiness;
use tonic::Status;

use crate::error::Error;
use crate::node::partner::Partner;

/// Identity: plugin info, capabilities, and a Probe that reflects the partner's readiness
/// (always ready without one).
pub type IdentityService = csi_proto::identity::IdentityService<Option<Partner>>;

/// `partner` is probed by Probe; without one Probe is always ready.
pub fn identity_service(
    driver_name: String,
    controller: bool,
    with_topology: bool,
    partner: Option<Partner>,
) -> IdentityService {
    IdentityService::new(
        driver_name,
        env!("CARGO_PKG_VERSION"),
        controller,
        with_topology,
        partner,
    )
}

impl Readiness for Partner {
    async fn ready(&self) -> Result<(), Status> {
        self.probe().await.map_err(|e| {
            Status::from(Error::FailedPrecondition(format!(
                "partner node plugin at {} is not ready: {}",
                self.endpoint(),
                Status::from(e).message()
            )))
        })
    }
}
