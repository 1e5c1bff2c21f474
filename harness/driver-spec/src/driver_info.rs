//! `DriverInfo`: what the suites know of the driver (upstream's `storageframework.DriverInfo`
//! in `test/e2e/storage/framework/testdriver.go`), with the defaults upstream's external
//! driver applies.

use std::collections::BTreeSet;
use std::time::Duration;

use super::access_mode::AccessMode;
use super::capability::{Capabilities, Capability};
use super::node::Node;
use super::reader::{Check, Field, Fields};
use super::size::{self, SizeRange};

/// The static description of the driver under test.
#[derive(Debug, Clone, PartialEq)]
pub struct DriverInfo {
    /// `Name`: the CSI driver's name, also the provisioner of `FromName` classes. Required.
    pub name: String,
    /// `InTreePluginName`: the in-tree plugin a CSI driver replaces, if any.
    pub in_tree_plugin_name: Option<String>,
    /// `FeatureTag`: a Ginkgo tag such as `[Feature:Foo]` (older upstream releases).
    pub feature_tag: Option<String>,
    /// `TestTags`: tags added to every test of the driver (newer upstream releases).
    pub test_tags: Vec<String>,
    /// `MaxFileSize`: the largest file the tests write, in bytes; `None` when absent or 0
    /// (the suites' default).
    pub max_file_size: Option<i64>,
    /// `SupportedSizeRange`: Min defaults to 5Gi.
    pub supported_size_range: SizeRange,
    /// `SupportedFsType`: always holds `""` (the default filesystem), as upstream's decoder
    /// adds the file's entries to its default set.
    pub supported_fs_types: BTreeSet<String>,
    /// `SupportedMountOption`.
    pub supported_mount_options: BTreeSet<String>,
    /// `RequiredMountOption`.
    pub required_mount_options: BTreeSet<String>,
    /// `Capabilities`, with upstream's implied expansion defaults.
    pub capabilities: Capabilities,
    /// `RequiredAccessModes`: `[ReadWriteOnce]` when absent or empty.
    pub required_access_modes: Vec<AccessMode>,
    /// `TopologyKeys`.
    pub topology_keys: Vec<String>,
    /// `NumAllowedTopologies`: `None` when absent or 0 (upstream then uses 1).
    pub num_allowed_topologies: Option<u32>,
    /// `StressTestOptions`.
    pub stress_test_options: Option<StressTestOptions>,
    /// `VolumeSnapshotStressTestOptions`.
    pub volume_snapshot_stress_test_options: Option<VolumeSnapshotStressTestOptions>,
    /// `PerformanceTestOptions`.
    pub performance_test_options: Option<PerformanceTestOptions>,
}

/// `StressTestOptions`: the scale of the stress tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StressTestOptions {
    /// `NumPods`: pods to create, each with up to one volume.
    pub num_pods: u32,
    /// `NumRestarts`: restarts of each pod.
    pub num_restarts: u32,
}

/// `VolumeSnapshotStressTestOptions`: the scale of the snapshot stress tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VolumeSnapshotStressTestOptions {
    /// `NumPods`: pods to create, each with up to one volume.
    pub num_pods: u32,
    /// `NumSnapshots`: snapshots of each volume.
    pub num_snapshots: u32,
}

/// `PerformanceTestOptions`.
#[derive(Debug, Clone, PartialEq)]
pub struct PerformanceTestOptions {
    /// `ProvisioningOptions`.
    pub provisioning: Option<ProvisioningPerformance>,
}

/// `PerformanceTestOptions.ProvisioningOptions`: the provisioning performance test.
#[derive(Debug, Clone, PartialEq)]
pub struct ProvisioningPerformance {
    /// `VolumeSize`: the size of each claim, in bytes.
    pub volume_size: Option<i64>,
    /// `Count`: how many claims.
    pub count: u32,
    /// `ExpectedMetrics`: from claim creation until bound.
    pub expected_metrics: Option<ExpectedMetrics>,
}

/// `ExpectedMetrics` of a performance test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExpectedMetrics {
    /// `AvgLatency`: written in nanoseconds, as upstream decodes a Go `time.Duration`.
    pub avg_latency: Duration,
    /// `Throughput`: operations per second.
    pub throughput: f64,
}

const KEYS: [&str; 16] = [
    "Name",
    "InTreePluginName",
    "FeatureTag",
    "TestTags",
    "MaxFileSize",
    "SupportedSizeRange",
    "SupportedFsType",
    "SupportedMountOption",
    "RequiredMountOption",
    "Capabilities",
    "RequiredAccessModes",
    "TopologyKeys",
    "NumAllowedTopologies",
    "StressTestOptions",
    "VolumeSnapshotStressTestOptions",
    "PerformanceTestOptions",
];

impl DriverInfo {
    /// Whether the driver declares `capability` true.
    pub fn has(&self, capability: Capability) -> bool {
        self.capabilities.has(capability)
    }

    /// Reads `DriverInfo`; `top_level_range` is the spec's top-level `SupportedSizeRange`
    /// (where older upstream releases read it), used when `DriverInfo` has none.
    pub(super) fn read(field: &Field, top_level_range: Option<&Field>) -> Check<Self> {
        let fields = field.fields(&KEYS)?;
        let name = match fields.get("Name") {
            Some(at) => at.non_empty_str()?.to_owned(),
            None => {
                return Err(field.missing(
                    "Name",
                    "missing: the CSI driver's name (e.g. manila.csi.openstack.org)",
                ));
            }
        };
        let optional_str = |key: &str| -> Check<Option<String>> {
            fields
                .get(key)
                .map(|at| at.str().map(str::to_owned))
                .transpose()
        };
        let range_field = match (fields.get("SupportedSizeRange"), top_level_range) {
            (Some(_), Some(top)) => {
                return Err(top.key_issue(
                    "given here and as DriverInfo.SupportedSizeRange; keep only the one in \
                     DriverInfo (this top-level place is an older upstream layout)",
                ));
            }
            (inside, top) => inside.or(top),
        };
        let mut supported_fs_types = BTreeSet::from([String::new()]);
        if let Some(at) = fields.get("SupportedFsType") {
            if let Node::Null = at.node {
                return Err(at.issue(
                    "null clears upstream's default {\"\"} and skips every filesystem test; \
                     list file systems or remove the key",
                ));
            }
            supported_fs_types.extend(at.set()?);
        }
        let set = |key: &str| -> Check<BTreeSet<String>> {
            Ok(fields
                .get(key)
                .map(Field::set)
                .transpose()?
                .unwrap_or_default())
        };
        Ok(DriverInfo {
            name,
            in_tree_plugin_name: optional_str("InTreePluginName")?,
            feature_tag: optional_str("FeatureTag")?,
            test_tags: fields
                .get("TestTags")
                .map(Field::strings)
                .transpose()?
                .unwrap_or_default(),
            max_file_size: fields
                .get("MaxFileSize")
                .map(non_negative)
                .transpose()?
                .filter(|size| *size > 0),
            supported_size_range: range_field
                .map(SizeRange::read)
                .transpose()?
                .unwrap_or_default(),
            supported_fs_types,
            supported_mount_options: set("SupportedMountOption")?,
            required_mount_options: set("RequiredMountOption")?,
            capabilities: fields
                .get("Capabilities")
                .map(Capabilities::read)
                .transpose()?
                .unwrap_or_default(),
            required_access_modes: AccessMode::read_list(fields.get("RequiredAccessModes"))?,
            topology_keys: fields
                .get("TopologyKeys")
                .map(Field::strings)
                .transpose()?
                .unwrap_or_default(),
            num_allowed_topologies: fields
                .get("NumAllowedTopologies")
                .map(Field::count)
                .transpose()?
                .filter(|count| *count > 0),
            stress_test_options: fields
                .get("StressTestOptions")
                .map(read_stress)
                .transpose()?,
            volume_snapshot_stress_test_options: fields
                .get("VolumeSnapshotStressTestOptions")
                .map(read_snapshot_stress)
                .transpose()?,
            performance_test_options: fields
                .get("PerformanceTestOptions")
                .map(read_performance)
                .transpose()?,
        })
    }
}

fn non_negative(field: &Field) -> Check<i64> {
    match field.int()? {
        value if value < 0 => Err(field.issue(format!("must not be negative, found {value}"))),
        value => Ok(value),
    }
}

/// A count that is 0 when absent, as Go's zero value.
fn count(fields: &Fields, key: &str) -> Check<u32> {
    Ok(fields.get(key).map(Field::count).transpose()?.unwrap_or(0))
}

fn read_stress(field: &Field) -> Check<StressTestOptions> {
    let fields = field.fields(&["NumPods", "NumRestarts"])?;
    Ok(StressTestOptions {
        num_pods: count(&fields, "NumPods")?,
        num_restarts: count(&fields, "NumRestarts")?,
    })
}

fn read_snapshot_stress(field: &Field) -> Check<VolumeSnapshotStressTestOptions> {
    let fields = field.fields(&["NumPods", "NumSnapshots"])?;
    Ok(VolumeSnapshotStressTestOptions {
        num_pods: count(&fields, "NumPods")?,
        num_snapshots: count(&fields, "NumSnapshots")?,
    })
}

fn read_performance(field: &Field) -> Check<PerformanceTestOptions> {
    let fields = field.fields(&["ProvisioningOptions"])?;
    let provisioning = |field: &Field| -> Check<ProvisioningPerformance> {
        let fields = field.fields(&["VolumeSize", "Count", "ExpectedMetrics"])?;
        Ok(ProvisioningPerformance {
            volume_size: fields.get("VolumeSize").map(size::quantity).transpose()?,
            count: count(&fields, "Count")?,
            expected_metrics: fields
                .get("ExpectedMetrics")
                .map(read_metrics)
                .transpose()?,
        })
    };
    Ok(PerformanceTestOptions {
        provisioning: fields
            .get("ProvisioningOptions")
            .map(provisioning)
            .transpose()?,
    })
}

fn read_metrics(field: &Field) -> Check<ExpectedMetrics> {
    let fields = field.fields(&["AvgLatency", "Throughput"])?;
    let avg_latency = match fields.get("AvgLatency") {
        None => Duration::ZERO,
        Some(at) if matches!(at.node, Node::Str(_)) => {
            return Err(at.issue(
                "expected an integer of nanoseconds (upstream decodes a Go time.Duration \
                 from JSON), found a string",
            ));
        }
        Some(at) => Duration::from_nanos(non_negative(at)?.unsigned_abs()),
    };
    let throughput = fields
        .get("Throughput")
        .map(Field::float)
        .transpose()?
        .unwrap_or(0.0);
    Ok(ExpectedMetrics {
        avg_latency,
        throughput,
    })
}
