//! `faults`: faults injected into the run's fake cloud during provisioning, expansion,
//! snapshotting and deletion; each shows the user the cloud's reason (an Event), recovers
//! by itself once the fault clears, and leaves nothing behind.
//!
//! Every test runs alone (the fault table is the whole cloud's) and follows one pattern:
//! note what the cloud holds, inject a fault (`Faults::inject`: the `inject` line of the
//! timeline), act as a user would (a claim, a resize, a VolumeSnapshot, a deletion), wait for
//! the Event that names the cloud's reason, prove the operation has not happened meanwhile,
//! clear the fault (`clear`), wait for the operation to complete, and prove the cloud holds
//! exactly what the user asked for: one share (with its access rule) behind the claim, one
//! snapshot behind the VolumeSnapshot; after the objects are deleted, nothing more than at
//! the start. A `Faults` guard clears whatever is left of its rules when the test ends, so a
//! failing test never leaves a fault for the next one.
//!
//! Faults Manila does not undo by itself (a share or snapshot stuck in a transitional state,
//! a snapshot in `error_deleting`) are "cleared" as a cloud operator would: with Manila's
//! admin `reset_status` action (`CloudInspector::reset_status`), after which the driver's
//! own retries finish the job.
//!
//! Two tests take as long as the driver's own limits: a share stuck in `creating` shows in
//! an event only after the driver's wait for it (`--share-wait-timeout`, 80 s), an answer
//! slower than the driver's HTTP timeout only after that timeout (60 s). The others take
//! seconds.

mod guard;
mod lifecycle;
mod provisioning;
mod snapshot_faults;

use driver_spec::Capability;
use std::time::Duration;

use crate::registry::{Needs, TestCase};
use crate::test_case;
use lifecycle::{share_delete_500, share_extend_500};
use provisioning::{
    access_rule_ends_in_error, keystone_outage, quota_exceeded, share_create_500, share_create_503,
    share_ends_in_error, share_stuck_creating, slower_than_http_timeout, token_expiry,
};
use snapshot_faults::{snapshot_ends_in_error, snapshot_error_deleting, snapshot_stuck_creating};

const SUITE: &str = "faults";

/// Every test: a Manila driver on the run's own fake cloud, alone.
const FAULTS: Needs = Needs::NONE.manila().cloud().fake_cloud().exclusive();

/// The expansion test.
const EXPANSION: Needs = Needs::capabilities(&[Capability::ControllerExpansion])
    .manila()
    .cloud()
    .fake_cloud()
    .exclusive();

/// The snapshot tests.
const SNAPSHOTS: Needs = Needs::capabilities(&[Capability::SnapshotDataSource])
    .snapshot_class()
    .manila()
    .cloud()
    .fake_cloud()
    .exclusive();

/// How long a step waits for the system to react to a fault or to its clearing (retries back
/// off, so a reaction can take a few of them).
const STEP: Duration = Duration::from_secs(120);

/// The driver's wait for a share to leave `creating` (`--share-wait-timeout`, 80 s by
/// default) and the retry after it: how long a stuck share takes to show in an event.
const STUCK_REPORTED: Duration = Duration::from_secs(150);

/// How long the driver must have seen a stuck snapshot still `creating` before the test
/// lets Manila finish it.
const STUCK_LOOKS_SPAN: Duration = Duration::from_secs(2);

/// Longer than the driver's HTTP timeout (60 s): a reply this late is never read.
const SLOWER_THAN_HTTP_TIMEOUT: Duration = Duration::from_secs(65);

/// The claim every test provisions.
const CLAIM: &str = "data";

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    vec![
        test_case!(
            SUITE,
            "should report Manila's HTTP 500 on share creation in a ProvisioningFailed event and provision once it clears",
            FAULTS,
            share_create_500
        ),
        test_case!(
            SUITE,
            "should report Manila's HTTP 503 on share creation in a ProvisioningFailed event and provision once it clears",
            FAULTS,
            share_create_503
        ),
        test_case!(
            SUITE,
            "should report a share ending in error with Manila's user message, delete it, and provision once the fault clears",
            FAULTS,
            share_ends_in_error
        ),
        test_case!(
            SUITE,
            "should report a share stuck in creating, keep it, and bind it once Manila finishes it",
            FAULTS,
            share_stuck_creating
        ),
        test_case!(
            SUITE,
            "should report an access rule ending in error with Manila's user message, delete its share, and provision once the fault clears",
            FAULTS,
            access_rule_ends_in_error
        ),
        test_case!(
            SUITE,
            "should report Manila's quota exceeded (HTTP 413) and provision once the quota allows it",
            FAULTS,
            quota_exceeded
        ),
        test_case!(
            SUITE,
            "should report a Keystone outage once the token expired, and provision once Keystone answers again",
            FAULTS,
            keystone_outage
        ),
        test_case!(
            SUITE,
            "should provision with an expired token by authenticating again, without a failure event",
            FAULTS,
            token_expiry
        ),
        test_case!(
            SUITE,
            "should report a Manila answer slower than the driver's HTTP timeout, then bind the share created meanwhile without a second one",
            FAULTS,
            slower_than_http_timeout
        ),
        test_case!(
            SUITE,
            "should report Manila's HTTP 500 on share extension in a VolumeResizeFailed event and resize once it clears",
            EXPANSION,
            share_extend_500
        ),
        test_case!(
            SUITE,
            "should report a snapshot ending in error with Manila's user message, delete it, and make the VolumeSnapshot ready once the fault clears",
            SNAPSHOTS,
            snapshot_ends_in_error
        ),
        test_case!(
            SUITE,
            "should keep a VolumeSnapshot whose snapshot is stuck in creating not ready without an error, and ready once Manila finishes it",
            SNAPSHOTS,
            snapshot_stuck_creating
        ),
        test_case!(
            SUITE,
            "should report a snapshot ending in error_deleting with Manila's user message, and delete it once Manila can",
            SNAPSHOTS,
            snapshot_error_deleting
        ),
        test_case!(
            SUITE,
            "should report Manila's HTTP 500 on share deletion in a VolumeFailedDelete event and delete the share once it clears",
            FAULTS,
            share_delete_500
        ),
    ]
}
