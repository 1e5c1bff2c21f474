//! Waiting for a cloud resource to reach a status: the shared back-off
//! ([`openstack_client::wait`]) reporting a missed deadline as this driver's
//! [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded).

pub use openstack_client::wait::Progress;

/// How to poll, failing with this driver's error. The default polls from 100 ms, doubling
/// up to 3 s, for 3 minutes.
pub type WaitPolicy = openstack_client::wait::WaitPolicy<crate::Error>;
