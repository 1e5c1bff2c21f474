//! [`TestContext`]: what a test body gets: its own namespace (a [`Workload`]), the driver under
//! test in the configuration it asked for, the run's nodes and cloud, and the classes to
//! provision from. Cluster-scoped objects it makes through the context (StorageClasses,
//! VolumeSnapshotClasses) carry the namespace's label and go with the test.

use cluster::Cluster;
use driver_spec::DriverSpec;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DynamicObject, ObjectMeta, PostParams};

use super::cloud::Cloud;
use super::outcome::{TestError, TestResult};
use super::target::{ClassTemplate, DriverUnderTest, SnapshotClassTemplate, Target, TargetNode};
use crate::e2e::snapshots;
use crate::e2e::timeline::Timeline;
use crate::e2e::workload::Workload;

/// What a test body gets (see the module docs).
pub struct TestContext<'a> {
    /// The test's full name (`[suite] name`).
    test: String,
    workload: Workload<'a>,
    driver: &'a DriverUnderTest,
    target: &'a Target,
    timeline: Timeline,
}

impl std::fmt::Debug for TestContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestContext")
            .field("test", &self.test)
            .field("namespace", &self.workload.namespace())
            .field("driver", &self.driver.name)
            .finish_non_exhaustive()
    }
}

impl<'a> TestContext<'a> {
    /// The context of the test named `test` (its full name).
    pub(crate) fn new(
        test: String,
        workload: Workload<'a>,
        driver: &'a DriverUnderTest,
        target: &'a Target,
        timeline: Timeline,
    ) -> Self {
        TestContext {
            test,
            workload,
            driver,
            target,
            timeline,
        }
    }

    /// The test's timeline (see [`Timeline`]): what it injected and what it saw.
    pub fn timeline(&self) -> &Timeline {
        &self.timeline
    }

    /// The run's own fake cloud, to inject faults into, or a skip.
    pub fn fake_cloud(&self) -> TestResult<&fakes::FakeCloud> {
        self.environment()
            .and_then(|e| e.fake_cloud())
            .ok_or_else(|| TestError::skip("needs the run's own fake cloud"))
    }

    /// The test's namespace with its claims and pods.
    pub fn workload(&self) -> &Workload<'a> {
        &self.workload
    }

    pub(crate) fn into_workload(self) -> Workload<'a> {
        self.workload
    }

    /// The test's namespace.
    pub fn namespace(&self) -> &str {
        self.workload.namespace()
    }

    /// The driver under test, in the configuration the test asked for.
    pub fn driver(&self) -> &DriverUnderTest {
        self.driver
    }

    /// The spec file as it applies to the driver.
    pub fn spec(&self) -> &DriverSpec {
        &self.driver.spec
    }

    /// The cluster.
    pub fn cluster(&self) -> &Cluster {
        &self.target.cluster
    }

    /// An admin kube client.
    pub fn client(&self) -> kube::Client {
        self.target.cluster.client()
    }

    /// The schedulable nodes.
    pub fn nodes(&self) -> &[TargetNode] {
        &self.target.nodes
    }

    /// The zone of `node`, if it has one.
    pub fn zone_of(&self, node: &str) -> Option<&str> {
        self.target
            .nodes
            .iter()
            .find(|n| n.name == node)
            .and_then(|n| n.zone.as_deref())
    }

    /// The cloud, or a skip when the run cannot reach it.
    pub fn cloud(&self) -> TestResult<&Cloud> {
        self.target.cloud.as_ref().ok_or_else(|| {
            TestError::skip("the run has no access to the cloud's API (give --clouds-yaml)")
        })
    }

    /// The embedded environment of the run (the fake cloud, the cluster's run directory),
    /// when the run started one.
    pub fn environment(&self) -> Option<&super::environment::RunEnvironment> {
        self.target.environment()
    }

    /// Where mounts of this run's volumes appear on this host, if they do.
    pub fn mounts_root(&self) -> Option<&std::path::Path> {
        self.target.mounts_root.as_deref()
    }

    /// The size to request for a claim: the smallest the spec file allows (at least 1 Gi,
    /// since Manila sizes shares in whole GiB).
    pub fn claim_size(&self) -> String {
        const GIB: i64 = 1 << 30;
        let min = self.driver.spec.driver_info.supported_size_range.min;
        kube_support::quantity::format_bytes(min.max(GIB))
    }

    /// The name of the StorageClass to provision from: the spec file's existing class, or a
    /// class of the test's own made from the spec file's.
    pub async fn storage_class(&self) -> TestResult<String> {
        let template = self.class_template()?;
        if let Some(existing) = &template.existing {
            return Ok(existing.clone());
        }
        self.storage_class_with("sc", |_| {}).await
    }

    /// A StorageClass of the test's own, `<namespace>-<suffix>`, made from the spec file's
    /// class and changed by `edit` (binding mode, expansion, parameters, …).
    pub async fn storage_class_with(
        &self,
        suffix: &str,
        edit: impl FnOnce(&mut StorageClass),
    ) -> TestResult<String> {
        let name = format!("{}-{suffix}", self.namespace());
        self.storage_class_named(&name, edit).await
    }

    /// A StorageClass named `name` (a name the test needs to show, e.g. `csi-manila-nfs`),
    /// made like [`TestContext::storage_class_with`]; it goes with the test. Tests using a
    /// fixed name must not run beside each other.
    pub async fn storage_class_named(
        &self,
        name: &str,
        edit: impl FnOnce(&mut StorageClass),
    ) -> TestResult<String> {
        let template = self.class_template()?;
        let mut class = template.class.clone();
        class.metadata = ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(self.workload.labels()),
            ..Default::default()
        };
        edit(&mut class);
        let classes: Api<StorageClass> = Api::all(self.client());
        classes
            .create(&PostParams::default(), &class)
            .await
            .map_err(|e| TestError::failed(format!("creating StorageClass {name}: {e}")))?;
        Ok(name.to_string())
    }

    /// The name of the VolumeSnapshotClass to snapshot with: the spec file's existing class,
    /// or one of the test's own made from the spec file's.
    pub async fn snapshot_class(&self) -> TestResult<String> {
        let template = self.snapshot_template()?;
        if let Some(existing) = &template.existing {
            return Ok(existing.clone());
        }
        self.snapshot_class_with("vsc", |_| {}).await
    }

    /// A VolumeSnapshotClass of the test's own, `<namespace>-<suffix>`, made from the spec
    /// file's class and changed by `edit` (e.g. `deletionPolicy`).
    pub async fn snapshot_class_with(
        &self,
        suffix: &str,
        edit: impl FnOnce(&mut DynamicObject),
    ) -> TestResult<String> {
        let template = self.snapshot_template()?;
        let name = format!("{}-{suffix}", self.namespace());
        let mut class: DynamicObject = template.class.clone();
        class.metadata = ObjectMeta {
            name: Some(name.clone()),
            labels: Some(self.workload.labels()),
            ..Default::default()
        };
        edit(&mut class);
        snapshots::volume_snapshot_classes(&self.client())
            .create(&PostParams::default(), &class)
            .await
            .map_err(|e| TestError::failed(format!("creating VolumeSnapshotClass {name}: {e}")))?;
        Ok(name)
    }

    fn snapshot_template(&self) -> TestResult<&SnapshotClassTemplate> {
        self.driver.snapshot_class.as_ref().ok_or_else(|| {
            TestError::skip(format!(
                "the driver spec of {} names no SnapshotClass",
                self.driver.name
            ))
        })
    }

    fn class_template(&self) -> TestResult<&ClassTemplate> {
        self.driver.storage_class.as_ref().ok_or_else(|| {
            TestError::skip(format!(
                "the driver spec of {} names no StorageClass: dynamic provisioning does not apply",
                self.driver.name
            ))
        })
    }
}
