//! The driver spec reader's tests: upstream's example files, every key and default, and
//! the message of each mistake (file, line, column, key path; pinned as snapshots).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rstest::rstest;

use super::*;

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/testdata")
        .join(name)
}

fn parse(text: &str) -> DriverSpec {
    DriverSpec::parse(text, Path::new("/specs/testdriver.yaml")).unwrap()
}

fn error(text: &str, file: &str) -> String {
    DriverSpec::parse(text, Path::new(file))
        .unwrap_err()
        .to_string()
}

const GIB: i64 = 1 << 30;

#[rstest]
#[case::yaml("manila.yaml")]
#[case::json("manila.json")]
fn openshifts_manila_spec_parses(#[case] file: &str) {
    let spec = DriverSpec::from_file(&testdata(file)).unwrap();
    assert_eq!(
        spec.storage_class,
        Some(ClassSource::FromExistingClassName(
            "csi-manila-default".into()
        ))
    );
    assert_eq!(spec.snapshot_class, Some(ClassSource::FromName));
    assert_eq!(spec.volume_attributes_class, None);
    let info = &spec.driver_info;
    assert_eq!(info.name, "manila.csi.openstack.org");
    assert_eq!(
        info.supported_size_range,
        SizeRange {
            min: GIB,
            max: Some(16 << 40),
            step: None
        }
    );
    let declared: Vec<_> = info.capabilities.iter().collect();
    assert_eq!(
        declared,
        [
            (Capability::Persistence, true),
            (Capability::FsGroup, false),
            (Capability::Exec, true),
            (Capability::MultiPods, true),
            (Capability::Rwx, true),
            (Capability::ControllerExpansion, true),
            (Capability::OfflineExpansion, true),
            (Capability::OnlineExpansion, true),
            (Capability::MultiplePvsSameId, true),
        ]
    );
    assert!(spec.has(Capability::Rwx));
    assert!(!spec.has(Capability::FsGroup));
    assert!(!spec.has(Capability::Block));
    assert_eq!(spec.path.as_deref(), Some(testdata(file).as_path()));
}

#[test]
fn yaml_and_json_give_equal_specs() {
    let yaml = DriverSpec::from_file(&testdata("manila.yaml")).unwrap();
    let json = DriverSpec::from_file(&testdata("manila.json")).unwrap();
    assert_eq!(
        DriverSpec { path: None, ..yaml },
        DriverSpec { path: None, ..json }
    );
}

#[test]
fn json_indented_with_tabs_is_read() {
    let spec = DriverSpec::parse(
        "{\n\t\"DriverInfo\": {\n\t\t\"Name\": \"x\",\n\t\t\"Capabilities\": {\"RWX\": true}\n\t}\n}\n",
        Path::new("testdriver.json"),
    )
    .unwrap();
    assert!(spec.has(Capability::Rwx));
}

#[test]
fn upstreams_defaults_fill_a_minimal_spec() {
    let spec = parse("DriverInfo:\n  Name: x\n");
    let info = &spec.driver_info;
    assert_eq!(info.supported_fs_types, BTreeSet::from([String::new()]));
    assert_eq!(info.required_access_modes, [AccessMode::ReadWriteOnce]);
    assert_eq!(info.supported_size_range, SizeRange::default());
    assert_eq!(info.supported_size_range.min, 5 * GIB);
    assert_eq!(info.capabilities, Capabilities::default());
    assert_eq!(spec.timeouts, Timeouts::default());
    assert_eq!(
        spec.timeouts.get(TimeoutName::PodStart),
        Duration::from_secs(300)
    );
    assert_eq!(spec.storage_class, None);
    assert_eq!(spec.inline_volumes, []);
    assert_eq!(info.max_file_size, None);
    assert_eq!(info.num_allowed_topologies, None);
}

#[test]
fn listed_fs_types_join_the_default_one() {
    let spec = parse("DriverInfo:\n  Name: x\n  SupportedFsType: {ext4: {}, xfs: null}\n");
    assert_eq!(
        spec.driver_info.supported_fs_types,
        BTreeSet::from(["".into(), "ext4".into(), "xfs".into()])
    );
}

#[test]
fn explicit_expansion_capabilities_override_the_implied_ones() {
    let spec = parse(
        "DriverInfo:
  Name: x
  Capabilities:
    controllerExpansion: true
    onlineExpansion: false
    offlineExpansion: false
",
    );
    assert!(spec.has(Capability::ControllerExpansion));
    assert!(!spec.has(Capability::OnlineExpansion));
    assert!(!spec.has(Capability::OfflineExpansion));
    assert!(!spec.has(Capability::NodeExpansion));
}

#[test]
fn timeouts_override_the_defaults_by_name() {
    let spec = parse(
        "Timeouts:
  PodStart: 10m
  claimBound: 1m30s
  Poll: 500ms
DriverInfo:
  Name: x
",
    );
    let timeouts = &spec.timeouts;
    assert_eq!(
        timeouts.get(TimeoutName::PodStart),
        Duration::from_secs(600)
    );
    assert_eq!(
        timeouts.get(TimeoutName::ClaimBound),
        Duration::from_secs(90)
    );
    assert_eq!(timeouts.get(TimeoutName::Poll), Duration::from_millis(500));
    assert_eq!(
        timeouts.get(TimeoutName::PvDelete),
        Duration::from_secs(300)
    );
}

#[test]
fn every_section_is_read() {
    let spec = parse(
        r#"StorageClass: {FromName: true}
SnapshotClass: {FromName: false}
VolumeAttributesClass: {FromExistingClassName: gold}
GroupSnapshotClass: {FromFile: /etc/gsc.yaml}
InlineVolumes:
  - Attributes: {share: a}
    Shared: true
  - ReadOnly: true
ClientNodeName: node-1
NodeSelectors: {"topology.kubernetes.io/zone": nova}
DriverInfo:
  Name: x
  InTreePluginName: kubernetes.io/cinder
  FeatureTag: "[Feature:Manila]"
  TestTags: [slow]
  MaxFileSize: 1048576
  SupportedMountOption: {nfsvers=4.1: {}}
  RequiredMountOption: {}
  RequiredAccessModes: [ReadWriteMany, ReadOnlyMany]
  TopologyKeys: [topology.manila.csi.openstack.org/zone]
  NumAllowedTopologies: 2
  StressTestOptions: {NumPods: 10, NumRestarts: 2}
  VolumeSnapshotStressTestOptions: {NumPods: 3, NumSnapshots: 4}
  PerformanceTestOptions:
    ProvisioningOptions:
      VolumeSize: 1Gi
      Count: 50
      ExpectedMetrics: {AvgLatency: 2000000000, Throughput: 1.5}
"#,
    );
    assert_eq!(spec.storage_class, Some(ClassSource::FromName));
    assert_eq!(spec.snapshot_class, None, "FromName: false enables nothing");
    assert_eq!(
        spec.volume_attributes_class,
        Some(ClassSource::FromExistingClassName("gold".into()))
    );
    assert_eq!(
        spec.group_snapshot_class,
        Some(ClassSource::FromFile("/etc/gsc.yaml".into()))
    );
    assert_eq!(
        spec.inline_volumes,
        [
            InlineVolume {
                attributes: [("share".into(), "a".into())].into(),
                shared: true,
                read_only: false
            },
            InlineVolume {
                read_only: true,
                ..InlineVolume::default()
            }
        ]
    );
    assert_eq!(spec.client_node_name.as_deref(), Some("node-1"));
    assert_eq!(
        spec.node_selectors,
        [("topology.kubernetes.io/zone".into(), "nova".into())].into()
    );
    let info = spec.driver_info;
    assert_eq!(
        info.in_tree_plugin_name.as_deref(),
        Some("kubernetes.io/cinder")
    );
    assert_eq!(info.feature_tag.as_deref(), Some("[Feature:Manila]"));
    assert_eq!(info.test_tags, ["slow"]);
    assert_eq!(info.max_file_size, Some(1 << 20));
    assert_eq!(
        info.supported_mount_options,
        BTreeSet::from(["nfsvers=4.1".into()])
    );
    assert_eq!(info.required_mount_options, BTreeSet::new());
    assert_eq!(
        info.required_access_modes,
        [AccessMode::ReadWriteMany, AccessMode::ReadOnlyMany]
    );
    assert_eq!(
        info.topology_keys,
        ["topology.manila.csi.openstack.org/zone"]
    );
    assert_eq!(info.num_allowed_topologies, Some(2));
    assert_eq!(
        info.stress_test_options,
        Some(StressTestOptions {
            num_pods: 10,
            num_restarts: 2
        })
    );
    assert_eq!(
        info.volume_snapshot_stress_test_options,
        Some(VolumeSnapshotStressTestOptions {
            num_pods: 3,
            num_snapshots: 4
        })
    );
    assert_eq!(
        info.performance_test_options,
        Some(PerformanceTestOptions {
            provisioning: Some(ProvisioningPerformance {
                volume_size: Some(GIB),
                count: 50,
                expected_metrics: Some(ExpectedMetrics {
                    avg_latency: Duration::from_secs(2),
                    throughput: 1.5
                })
            })
        })
    );
}

#[test]
fn the_older_top_level_size_range_is_driver_infos() {
    let spec = parse("SupportedSizeRange:\n  Min: 1Gi\nDriverInfo:\n  Name: x\n");
    assert_eq!(
        spec.driver_info.supported_size_range,
        SizeRange {
            min: GIB,
            max: None,
            step: None
        }
    );
}

#[rstest]
#[case::relative("sc.yaml", "/specs/sc.yaml")]
#[case::nested("classes/../sc.yaml", "/specs/classes/../sc.yaml")]
#[case::absolute("/etc/sc.yaml", "/etc/sc.yaml")]
fn from_file_is_resolved_against_the_spec_files_directory(
    #[case] given: &str,
    #[case] resolved: &str,
) {
    let spec = parse(&format!(
        "StorageClass:\n  FromFile: {given}\nDriverInfo:\n  Name: x\n"
    ));
    let source = spec.storage_class.unwrap();
    assert_eq!(source.file(), Some(Path::new(resolved)));
}

#[test]
fn class_files_named_by_the_spec_are_read() {
    let spec = DriverSpec::from_file(&testdata("from-files.yaml")).unwrap();
    let sc_file = spec
        .storage_class
        .as_ref()
        .and_then(ClassSource::file)
        .unwrap();
    assert_eq!(sc_file, testdata("storageclass.yaml"));
    let storage_class = read_storage_class(sc_file).unwrap();
    assert_eq!(
        storage_class.metadata.name.as_deref(),
        Some("csi-manila-nfs")
    );
    assert_eq!(storage_class.provisioner, "manila.csi.openstack.org");
    assert_eq!(storage_class.allow_volume_expansion, Some(true));

    let vsc_file = spec
        .snapshot_class
        .as_ref()
        .and_then(ClassSource::file)
        .unwrap();
    let snapshot_class = read_snapshot_class(vsc_file).unwrap();
    assert_eq!(
        snapshot_class.metadata.name.as_deref(),
        Some("csi-manila-nfs")
    );
    assert_eq!(snapshot_class.data["driver"], "manila.csi.openstack.org");
    assert_eq!(snapshot_class.data["parameters"]["force-create"], "false");
}

/// Writes `text` as `name` in a fresh directory and reads it as `read` does.
fn class_file_error<T: std::fmt::Debug>(
    name: &str,
    text: &str,
    read: impl Fn(&Path) -> Result<T, SpecError>,
) -> String {
    let dir = tempfile::Builder::new().prefix("tests-").tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    let message = read(&path).unwrap_err().to_string();
    message.replace(&dir.path().display().to_string(), "<dir>")
}

#[rstest]
#[case("wrong_kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")]
#[case("no_kind", "apiVersion: storage.k8s.io/v1\nmetadata: {name: x}\n")]
#[case(
    "bad_field",
    "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: x}\nprovisioner: [a]\n"
)]
#[case("syntax", "kind: StorageClass\n  metadata: x\n")]
#[case("two_documents", "kind: StorageClass\n---\nkind: StorageClass\n")]
#[case("empty", "")]
fn class_file_errors_name_that_file(#[case] name: &str, #[case] text: &str) {
    let message = class_file_error("sc.yaml", text, read_storage_class);
    insta::with_settings!({ description => text }, {
        insta::assert_snapshot!(format!("class_file_{name}"), message);
    });
}

#[test]
fn a_snapshot_class_file_must_be_a_volume_snapshot_class() {
    let message = class_file_error(
        "vsc.yaml",
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\n",
        read_snapshot_class,
    );
    assert_eq!(
        message,
        r#"<dir>/vsc.yaml:2:7: kind: expected VolumeSnapshotClass, found "StorageClass""#
    );
}

#[test]
fn unreadable_files_are_named() {
    let missing = testdata("no-such-file.yaml");
    let error = DriverSpec::from_file(&missing).unwrap_err();
    assert_eq!(error.file(), missing);
    assert_eq!(
        kube_support::error::error_chain(&error),
        format!(
            "{}: cannot read the file: No such file or directory (os error 2)",
            missing.display()
        )
    );
    let error = read_storage_class(&missing).unwrap_err();
    assert!(matches!(error, SpecError::Read { .. }), "{error:?}");
}

#[rstest]
#[case("empty_file", "")]
#[case("only_comments", "# nothing yet\n")]
#[case("not_a_mapping", "- DriverInfo\n")]
#[case("syntax", "DriverInfo:\n  Name: x\n Capabilities: {}\n")]
#[case(
    "two_documents",
    "DriverInfo:\n  Name: x\n---\nDriverInfo:\n  Name: y\n"
)]
#[case(
    "unknown_top_level_key",
    "Timeout:\n  PodStart: 5m\nDriverInfo:\n  Name: x\n"
)]
#[case(
    "unknown_key_far_from_any",
    "Flavour: vanilla\nDriverInfo:\n  Name: x\n"
)]
#[case("retired_short_name", "ShortName: manila\nDriverInfo:\n  Name: x\n")]
#[case("retired_claim_size", "DriverInfo:\n  Name: x\nClaimSize: 5Gi\n")]
#[case(
    "unknown_driver_info_key",
    "DriverInfo:\n  Name: x\n  SupportedFSType: {ext4: {}}\n"
)]
#[case(
    "unknown_capability",
    "DriverInfo:\n  Name: x\n  Capabilities:\n    block: true\n    persistance: true\n"
)]
#[case(
    "capability_not_a_bool",
    "DriverInfo:\n  Name: x\n  Capabilities:\n    block: \"true\"\n"
)]
#[case(
    "capability_yaml_1_1_bool",
    "DriverInfo:\n  Name: x\n  Capabilities:\n    block: yes\n"
)]
#[case(
    "unknown_access_mode",
    "DriverInfo:\n  Name: x\n  RequiredAccessModes:\n    - ReadWriteOnce\n    - RWO\n"
)]
#[case(
    "access_modes_not_a_list",
    "DriverInfo:\n  Name: x\n  RequiredAccessModes: ReadWriteOnce\n"
)]
#[case(
    "not_a_quantity",
    "DriverInfo:\n  Name: x\n  SupportedSizeRange:\n    Min: 1GB\n"
)]
#[case(
    "quantity_not_a_string",
    "DriverInfo:\n  Name: x\n  SupportedSizeRange:\n    Max: 1073741824\n"
)]
#[case(
    "min_above_max",
    "DriverInfo:\n  Name: x\n  SupportedSizeRange:\n    Min: 2Ti\n    Max: 1Ti\n"
)]
#[case(
    "max_below_default_min",
    "DriverInfo:\n  Name: x\n  SupportedSizeRange:\n    Max: 1Gi\n"
)]
#[case(
    "zero_step",
    "DriverInfo:\n  Name: x\n  SupportedSizeRange:\n    Step: \"0\"\n"
)]
#[case(
    "both_size_ranges",
    "SupportedSizeRange: {Min: 1Gi}\nDriverInfo:\n  Name: x\n  SupportedSizeRange: {Min: 2Gi}\n"
)]
#[case(
    "bad_duration",
    "Timeouts:\n  PodStart: 5min\nDriverInfo:\n  Name: x\n"
)]
#[case(
    "duration_not_a_string",
    "Timeouts:\n  PodStart: 300\nDriverInfo:\n  Name: x\n"
)]
#[case(
    "negative_duration",
    "Timeouts:\n  PodDelete: -1m\nDriverInfo:\n  Name: x\n"
)]
#[case(
    "unknown_timeout",
    "Timeouts:\n  PodStartup: 5m\nDriverInfo:\n  Name: x\n"
)]
#[case(
    "same_timeout_twice",
    "Timeouts:\n  PodStart: 5m\n  podStart: 6m\nDriverInfo:\n  Name: x\n"
)]
#[case("missing_driver_info", "StorageClass:\n  FromName: true\n")]
#[case(
    "missing_name",
    "StorageClass:\n  FromName: true\nDriverInfo:\n  Capabilities: {}\n"
)]
#[case("empty_name", "DriverInfo:\n  Name: \"\"\n")]
#[case("driver_info_not_a_mapping", "DriverInfo: manila.csi.openstack.org\n")]
#[case(
    "two_class_sources",
    "StorageClass:\n  FromName: true\n  FromExistingClassName: gold\nDriverInfo:\n  Name: x\n"
)]
#[case("empty_class_section", "SnapshotClass:\nDriverInfo:\n  Name: x\n")]
#[case(
    "empty_from_file",
    "StorageClass:\n  FromFile: \"\"\nDriverInfo:\n  Name: x\n"
)]
#[case(
    "from_name_not_a_bool",
    "StorageClass:\n  FromName: csi-manila\nDriverInfo:\n  Name: x\n"
)]
#[case(
    "node_selector_not_a_string",
    "NodeSelectors:\n  zone: 1\nDriverInfo:\n  Name: x\n"
)]
#[case(
    "duplicate_key",
    "DriverInfo:\n  Name: x\n  Capabilities:\n    block: true\n    exec: true\n    block: false\n"
)]
#[case(
    "negative_topologies",
    "DriverInfo:\n  Name: x\n  NumAllowedTopologies: -1\n"
)]
#[case(
    "negative_max_file_size",
    "DriverInfo:\n  Name: x\n  MaxFileSize: -5\n"
)]
#[case(
    "fs_types_as_a_list",
    "DriverInfo:\n  Name: x\n  SupportedFsType: [ext4, xfs]\n"
)]
#[case("fs_types_null", "DriverInfo:\n  Name: x\n  SupportedFsType:\n")]
#[case(
    "fs_type_with_a_value",
    "DriverInfo:\n  Name: x\n  SupportedFsType:\n    ext4: true\n"
)]
#[case(
    "inline_volume_unknown_key",
    "InlineVolumes:\n  - Shared: true\n  - Attributes: {a: b}\n    Readonly: true\nDriverInfo:\n  Name: x\n"
)]
#[case(
    "stress_options_unknown_key",
    "DriverInfo:\n  Name: x\n  StressTestOptions:\n    NumPods: 10\n    NumSnapshots: 10\n"
)]
#[case(
    "latency_as_a_string",
    "DriverInfo:\n  Name: x\n  PerformanceTestOptions:\n    ProvisioningOptions:\n      ExpectedMetrics: {AvgLatency: 2s}\n"
)]
#[case("tagged_value", "DriverInfo:\n  Name: !Name x\n")]
#[case(
    "non_string_key",
    "NodeSelectors:\n  true: x\nDriverInfo:\n  Name: x\n"
)]
fn yaml_mistakes_are_located(#[case] name: &str, #[case] text: &str) {
    let message = error(text, "testdriver.yaml");
    insta::with_settings!({ description => text }, {
        insta::assert_snapshot!(format!("yaml_{name}"), message);
    });
}

#[rstest]
#[case(
    "syntax",
    "{\"DriverInfo\": {\"Name\": \"x\"}\n \"StorageClass\": {}}\n"
)]
#[case(
    "unknown_capability",
    "{\n  \"DriverInfo\": {\n    \"Name\": \"x\",\n    \"Capabilities\": {\"persistance\": true}\n  }\n}\n"
)]
#[case(
    "bad_duration",
    "{\n  \"Timeouts\": {\n    \"PodStart\": \"5 minutes\"\n  },\n  \"DriverInfo\": {\"Name\": \"x\"}\n}\n"
)]
#[case(
    "min_above_max",
    "{\"DriverInfo\": {\n  \"Name\": \"x\",\n  \"SupportedSizeRange\": {\"Min\": \"2Ti\", \"Max\": \"1Ti\"}\n}}\n"
)]
#[case(
    "duplicate_key",
    "{\n  \"DriverInfo\": {\"Name\": \"x\"},\n  \"DriverInfo\": {\"Name\": \"y\"}\n}\n"
)]
#[case(
    "missing_name",
    "{\n  \"DriverInfo\": {\n    \"Capabilities\": {}\n  }\n}\n"
)]
#[case("not_a_mapping", "[\"DriverInfo\"]\n")]
fn json_mistakes_are_located(#[case] name: &str, #[case] text: &str) {
    let message = error(text, "testdriver.json");
    insta::with_settings!({ description => text }, {
        insta::assert_snapshot!(format!("json_{name}"), message);
    });
}
