//! `disruption`: while writer pods write, the driver's pods are deleted (the node plugin's,
//! the controller's in the middle of CreateVolume and DeleteVolume), a node agent restarts,
//! a node is lost (containers backend: `node_loss`) and
//! the cloud becomes unreachable for a while; mounts stay, writes go on, later unmounts and
//! deletions work, and nothing is left behind or duplicated.
//!
//! Every test starts the same writers ([`Scene`]): `writer-a` (first node) and `writer-b`
//! (second node) on the ReadWriteMany claim `shared`, `writer-c` (first node) on the
//! ReadWriteOnce claim `single`. After the disruption each writer must have written since
//! without a failed write, kept every earlier line, and stalled no longer than
//! [`MAX_STALL`]; on the embedded default its file in the share's directory of the fake cloud
//! must hold lines written after the disruption began (the bytes still land in the share).
//! Then the writers are deleted (unpublish), the claims deleted, and the PVs, shares and
//! mounts must go. What was injected when, and what each writer saw, is on the test's
//! timeline; a failure message carries the timeline.

mod claims;
mod driver_pods;
mod node_and_cloud;
mod node_loss;
mod pods;
mod scene;

use std::time::Duration;

use driver_spec::Capability;
use fakes::FakeCloud;

use crate::e2e::timeline::Timeline;
use crate::registry::{Needs, TestCase, TestError, TestResult};
use crate::test_case;
use driver_pods::{
    controller_deleted_during_create, controller_deleted_during_delete, node_plugins_deleted,
};
use node_and_cloud::{cloud_unreachable, node_agent_restarted};
use node_loss::node_lost;

const SUITE: &str = "disruption";

/// The longest gap a writer may see in its lines while the system is disrupted. The data
/// path does not go through the driver's pods or the cloud, so a writer should not notice
/// at all (0.1–0.2 s measured); this bound only tells a writer that was blocked (a hung or
/// lost mount) from one slowed by a loaded 2-core machine. The stall itself is a figure on
/// the timeline, not a timed assertion.
pub const MAX_STALL: Duration = Duration::from_secs(10);

/// How long the cloud holds its answer to the share create of the CreateVolume whose
/// controller is deleted (longer than the controller pod takes to go).
const CREATE_HELD: Duration = Duration::from_secs(50);

/// How long the cloud is unreachable.
const OUTAGE: Duration = Duration::from_secs(12);

/// Where node agents renew their Leases.
const NODE_LEASES: &str = "kube-node-lease";

/// The suite's tests.
pub fn tests() -> Vec<TestCase> {
    let writers = Needs::capabilities(&[Capability::Rwx, Capability::Exec]).nodes(2);
    vec![
        test_case!(
            SUITE,
            "should keep writes going while the node plugin pods are deleted and recreated, and unpublish with the new ones",
            writers.exclusive(),
            node_plugins_deleted
        ),
        test_case!(
            SUITE,
            "should bind the claim once with one share when the controller pod is deleted during CreateVolume",
            writers.manila().fake_cloud().exclusive(),
            controller_deleted_during_create
        ),
        test_case!(
            SUITE,
            "should delete the volume and its share when the controller pod is deleted during DeleteVolume",
            writers.manila().fake_cloud().exclusive(),
            controller_deleted_during_delete
        ),
        test_case!(
            SUITE,
            "should keep mounts and writes while the node agent restarts, and unmount afterwards",
            writers.exclusive(),
            node_agent_restarted
        ),
        test_case!(
            SUITE,
            "should keep a lost node's ReadWriteOnce volume until Kubernetes frees it, and lose no data when the evicted writer's replacement takes it",
            Needs::capabilities(&[Capability::Exec])
                .nodes(2)
                .driver(crate::registry::DriverConfig::AttachRequired)
                .exclusive(),
            node_lost
        ),
        test_case!(
            SUITE,
            "should keep writes going while the cloud is unreachable, and provision the claim made meanwhile once it is back",
            writers.manila().fake_cloud().exclusive(),
            cloud_unreachable
        ),
    ]
}

// ---------------------------------------------------------------------------------------
// The fake cloud and the timeline.

/// Puts the fake cloud back when dropped, however the test ends: its fault rules cleared and
/// reachable. The tests restore it themselves on their normal paths; this is for a test that
/// ends early (a failed step, a panic, the runner's timeout).
struct CloudRestorer<'c> {
    cloud: &'c FakeCloud,
    timeline: Timeline,
}

impl<'c> CloudRestorer<'c> {
    pub(super) fn new(cloud: &'c FakeCloud, timeline: &Timeline) -> Self {
        CloudRestorer {
            cloud,
            timeline: timeline.clone(),
        }
    }
}

impl Drop for CloudRestorer<'_> {
    fn drop(&mut self) {
        let faults = self.cloud.faults();
        if !faults.is_empty() {
            self.cloud.clear_faults();
            self.timeline.record(
                "clear",
                format!("{} unfired fault rule(s) cleared", faults.len()),
            );
        }
        if self.cloud.is_reachable() {
            return;
        }
        // Only after an abnormal end: block this worker thread until the cloud listens again.
        use tokio::runtime::{Handle, RuntimeFlavor};
        let back = match Handle::try_current() {
            Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| handle.block_on(self.cloud.set_reachable(true)))
                    .map_err(|e| e.to_string())
            }
            _ => Err("not on a multi-threaded Tokio runtime".to_string()),
        };
        match back {
            Ok(()) => self
                .timeline
                .record("clear", "the cloud is reachable again (test ended early)"),
            Err(e) => {
                tracing::error!("the fake cloud stays unreachable after a disruption test: {e}");
                self.timeline
                    .record("clear", format!("could not make the cloud reachable: {e}"));
            }
        }
    }
}

/// `d` in milliseconds.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `result`, a failure recorded on `timeline` and carrying it under its message.
fn with_timeline(timeline: &Timeline, result: TestResult) -> TestResult {
    result.map_err(|error| match error {
        TestError::Failed(message) => {
            let first = message.lines().next().unwrap_or_default().to_string();
            timeline.record("result", format!("failed: {first}"));
            TestError::Failed(format!("{message}\n\ntimeline:\n{}", timeline.render()))
        }
        skipped => skipped,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use fakes::{FaultAction, FaultRule, Operation};

    #[test]
    fn every_test_runs_alone_and_needs_two_nodes() {
        let tests = tests();
        assert_eq!(tests.len(), 6);
        for test in &tests {
            assert_eq!(test.suite, SUITE);
            assert!(test.needs.exclusive, "{}", test.name);
            assert_eq!(test.needs.nodes, 2, "{}", test.name);
            assert!(test.name.starts_with("should "), "{}", test.name);
        }
        let on_fake: Vec<&str> = tests
            .iter()
            .filter(|t| t.needs.fake_cloud)
            .map(|t| t.name)
            .collect();
        assert_eq!(on_fake.len(), 3, "{on_fake:?}");
        // The node loss needs the attach-required instance (a volume Kubernetes attaches).
        let attached: Vec<&str> = tests
            .iter()
            .filter(|t| t.needs.driver == crate::registry::DriverConfig::AttachRequired)
            .map(|t| t.name)
            .collect();
        assert_eq!(attached.len(), 1, "{attached:?}");
    }

    #[test]
    fn a_failure_carries_the_timeline_and_a_skip_does_not() {
        let timeline = Timeline::new();
        timeline.record("inject", "controller pod deleted");
        let failed = with_timeline(&timeline, Err(TestError::failed("stalled"))).unwrap_err();
        let text = failed.to_string();
        assert!(text.starts_with("stalled\n\ntimeline:\n"), "{text}");
        assert!(text.contains("controller pod deleted"), "{text}");
        assert!(text.contains("failed: stalled"), "{text}");
        let skipped = with_timeline(&timeline, Err(TestError::skip("no cloud"))).unwrap_err();
        assert_eq!(skipped, TestError::skip("no cloud"));
        assert!(with_timeline(&timeline, Ok(())).is_ok());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_test_ending_early_leaves_the_cloud_reachable_and_without_faults() {
        let cloud = FakeCloud::start(fakes::CloudConfig::default())
            .await
            .unwrap();
        let timeline = Timeline::new();
        {
            let _restore = CloudRestorer::new(&cloud, &timeline);
            cloud
                .add_fault(FaultRule::new(
                    Operation::ShareCreate,
                    FaultAction::Latency { ms: 1 },
                ))
                .unwrap();
            cloud.set_reachable(false).await.unwrap();
        }
        assert!(cloud.is_reachable());
        assert!(cloud.faults().is_empty());
        let text = timeline.render();
        assert!(text.contains("1 unfired fault rule(s) cleared"), "{text}");
        assert!(
            text.contains("reachable again (test ended early)"),
            "{text}"
        );
    }
}
