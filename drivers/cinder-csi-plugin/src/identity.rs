//! The CSI Identity service: [`csi_proto::identity::IdentityService`], shared with the
//! Manila driver; here Probe is always ready.

use csi_proto::identity::AlwaysReady;

use crate::config::DRIVER_NAME;

/// Identity: plugin info, capabilities and an always-ready Probe.
pub type IdentityService = csi_proto::identity::IdentityService<AlwaysReady>;

/// The capabilities follow the services served and `--with-topology`.
pub fn identity_service(controller: bool, with_topology: bool) -> IdentityService {
    IdentityService::new(
        DRIVER_NAME,
        env!("CARGO_PKG_VERSION"),
        controller,
        with_topology,
        AlwaysReady,
    )
}
