//! Waiting for a cloud resource to reach a state: the shared back-off
//! ([`openstack_client::wait`]) reporting a missed deadline as this driver's
//! [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded).

pub use openstack_client::wait::Progress;

/// How to wait, failing with this driver's error.
pub type WaitPolicy = openstack_client::wait::WaitPolicy<crate::Error>;
