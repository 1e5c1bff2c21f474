//! What a run can contain: [`TestCase`]s grouped into suites, each with the [`Needs`] that
//! decide, before it runs, whether it applies to the driver under test (capabilities claimed
//! by the driver spec file, nodes, a driver configuration, access to the cloud).

use std::future::Future;
use std::pin::Pin;

use driver_spec::Capability;

use super::context::TestContext;
use super::outcome::TestResult;
use super::target::DriverConfig;

/// The future a test body returns.
pub type TestFuture<'a> = Pin<Box<dyn Future<Output = TestResult> + Send + 'a>>;

/// A test body: an async function of the test's context.
pub type TestFn = for<'a> fn(&'a TestContext<'a>) -> TestFuture<'a>;

/// What a test needs; checked before it runs, so that a test that does not apply is skipped
/// with the reason instead of failing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Needs {
    /// Capabilities the driver spec file must claim.
    pub capabilities: &'static [Capability],
    /// At least this many schedulable nodes.
    pub nodes: usize,
    /// The driver configuration.
    pub driver: DriverConfig,
    /// Access to the cloud's API (to look at the shares behind volumes).
    pub cloud: bool,
    /// A Manila driver (its StorageClass parameters, share types): the driver-specific tests.
    pub manila: bool,
    /// The Cinder driver (its volume types, Nova attachments): the driver-specific tests.
    pub cinder: bool,
    /// A VolumeSnapshotClass (the spec file's `SnapshotClass`).
    pub snapshot_class: bool,
    /// The run's own fake cloud, to inject faults into (the embedded default).
    pub fake_cloud: bool,
    /// To run alone: the test disrupts what other tests use (the driver's pods, the cloud).
    pub exclusive: bool,
    /// To start an embedded cluster of its own (with another release of the driver): the
    /// run's binaries on this host, i.e. the embedded default.
    pub own_cluster: bool,
}

impl Needs {
    /// Nothing beyond a driver and a node.
    pub const NONE: Needs = Needs {
        capabilities: &[],
        nodes: 1,
        driver: DriverConfig::Default,
        cloud: false,
        manila: false,
        cinder: false,
        snapshot_class: false,
        fake_cloud: false,
        exclusive: false,
        own_cluster: false,
    };

    /// These capabilities.
    pub const fn capabilities(capabilities: &'static [Capability]) -> Needs {
        Needs {
            capabilities,
            ..Needs::NONE
        }
    }

    /// And at least `nodes` schedulable nodes.
    pub const fn nodes(self, nodes: usize) -> Needs {
        Needs { nodes, ..self }
    }

    /// And this driver configuration.
    pub const fn driver(self, driver: DriverConfig) -> Needs {
        Needs { driver, ..self }
    }

    /// And access to the cloud's API.
    pub const fn cloud(self) -> Needs {
        Needs {
            cloud: true,
            ..self
        }
    }

    /// And a Manila driver.
    pub const fn manila(self) -> Needs {
        Needs {
            manila: true,
            ..self
        }
    }

    /// And the Cinder driver.
    pub const fn cinder(self) -> Needs {
        Needs {
            cinder: true,
            ..self
        }
    }

    /// And a VolumeSnapshotClass.
    pub const fn snapshot_class(self) -> Needs {
        Needs {
            snapshot_class: true,
            ..self
        }
    }

    /// And the run's own fake cloud (its fault injection).
    pub const fn fake_cloud(self) -> Needs {
        Needs {
            fake_cloud: true,
            ..self
        }
    }

    /// And no other test running at the same time.
    pub const fn exclusive(self) -> Needs {
        Needs {
            exclusive: true,
            ..self
        }
    }

    /// And an embedded cluster of the test's own beside the run's.
    pub const fn own_cluster(self) -> Needs {
        Needs {
            own_cluster: true,
            ..self
        }
    }
}

/// One test of a suite.
#[derive(Clone, Copy)]
pub struct TestCase {
    /// The suite, as upstream names its test suites (`provisioning`, `multiVolume`, …).
    pub suite: &'static str,
    /// What it checks, as a sentence (`should …`).
    pub name: &'static str,
    /// What it needs to apply.
    pub needs: Needs,
    /// Its body.
    pub run: TestFn,
}

impl std::fmt::Debug for TestCase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCase")
            .field("suite", &self.suite)
            .field("name", &self.name)
            .field("needs", &self.needs)
            .finish_non_exhaustive()
    }
}

impl TestCase {
    /// `<suite> <name>`, what `--focus`/`--skip` match and reports print.
    pub fn full_name(&self) -> String {
        format!("[{}] {}", self.suite, self.name)
    }
}

/// Declares a [`TestCase`] from an `async fn(&TestContext<'_>) -> TestResult`.
///
/// ```ignore
/// test_case!("provisioning", "should provision storage", Needs::NONE, provision)
/// ```
#[macro_export]
macro_rules! test_case {
    ($suite:expr, $name:expr, $needs:expr, $body:path) => {
        $crate::registry::TestCase {
            suite: $suite,
            name: $name,
            needs: $needs,
            run: |ctx| Box::pin($body(ctx)),
        }
    };
}

/// The CSI sanity suite's name in a run (its cases are reported one by one).
pub const SANITY_SUITE: &str = "sanity";

/// Every suite a run knows, in run order, with a line about each (`conformance run --list`).
pub const SUITES: &[(&str, &str)] = &[
    (
        SANITY_SUITE,
        "CSI spec conformance of the driver's endpoint (csi-sanity's cases); embedded default only",
    ),
    ("volumes", "a volume stores data; its files can be executed"),
    (
        "provisioning",
        "dynamic provisioning: claims bound to volumes of their size, deleted with them, data sources, bad parameters refused",
    ),
    (
        "snapshottable",
        "VolumeSnapshots, dynamic and pre-provisioned, Delete and Retain: ready with a snapshot in the cloud, restored into claims holding the data",
    ),
    (
        "multiVolume",
        "several volumes and pods: one node and several, RWX across nodes, read-only, RWO refused on a second node",
    ),
    (
        "volume-expand",
        "claims resized, offline and in use; refused without allowVolumeExpansion",
    ),
    (
        "volumeMode",
        "block volumes refused by a filesystem-only driver; unused volumes not mounted",
    ),
    ("subPath", "directories of a volume mounted with subPath"),
    ("volumeIO", "files of several sizes written and read back"),
    ("fsGroup", "volume ownership by the pod's fsGroup"),
    (
        "volumeLimits",
        "a node filled up to its CSINode attach limit: the next pod waits for a free slot; every CSINode reports a limit",
    ),
    (
        "topology",
        "provisioning that follows where pods run; AllowedTopologies honoured and conflicts refused",
    ),
    (
        "demo",
        "the seed's demo: writer-one and writer-two on two nodes append to one RWX claim of csi-manila-nfs",
    ),
    (
        "disruption",
        "while pods write: the driver's pods deleted mid-operation, the cloud unreachable; mounts and writes go on, nothing is left or duplicated",
    ),
    (
        "faults",
        "cloud faults injected during provisioning, expansion, snapshots and deletion: the user sees the cloud's reason, and it recovers once the fault clears",
    ),
    (
        "upgrade",
        "operator and driver upgraded from release N-1 to N on a cluster of the test's own while pods write: writer stall, nothing deleted, snapshots restore; the downgrade refused",
    ),
];

/// The suites a run includes only when `--suite` names them: they disrupt the driver or the
/// cloud, so their tests run one at a time and take minutes more.
pub const OPT_IN_SUITES: &[&str] = &["disruption", "faults", "upgrade"];
