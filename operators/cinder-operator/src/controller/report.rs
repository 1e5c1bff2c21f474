//! What one reconcile found and did ([`operator_kit::report::Report`]) with this operator's
//! error.

/// What one reconcile found and did, for the status.
pub(super) type Report = operator_kit::report::Report<crate::error::Error>;
