//! The generated bindings use the CSI specification's names and field numbers.
//!
//! Expected values were checked against the descriptor that upstream generated from
//! the v1.11.0 release of `csi.proto` (as vendored by Kubernetes).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;

use csi_proto::{
    prost_types::{
        FileDescriptorProto, FileDescriptorSet, field_descriptor_proto::Type as FieldType,
    },
    v1::{self, FILE_DESCRIPTOR_SET},
};
use prost::Message;

fn csi_file() -> FileDescriptorProto {
    let set = FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).unwrap();
    set.file
        .into_iter()
        .find(|f| f.name() == "csi.proto")
        .unwrap()
}

/// `message name` → field name → number, for top-level messages.
fn field_numbers(file: &FileDescriptorProto, message: &str) -> BTreeMap<String, i32> {
    let message = file
        .message_type
        .iter()
        .find(|m| m.name() == message)
        .unwrap();
    message
        .field
        .iter()
        .map(|f| (f.name().to_owned(), f.number()))
        .collect()
}

fn expect_fields(file: &FileDescriptorProto, message: &str, expected: &[(&str, i32)]) {
    let expected: BTreeMap<String, i32> = expected
        .iter()
        .map(|(name, number)| (name.to_string(), *number))
        .collect();
    assert_eq!(
        field_numbers(file, message),
        expected,
        "fields of {message}"
    );
}

#[test]
fn package_and_services_are_the_specs() {
    let file = csi_file();
    assert_eq!(file.package(), "csi.v1");
    let services: Vec<(&str, Vec<&str>)> = file
        .service
        .iter()
        .map(|s| (s.name(), s.method.iter().map(|m| m.name()).collect()))
        .collect();
    assert_eq!(
        services,
        vec![
            (
                "Identity",
                vec!["GetPluginInfo", "GetPluginCapabilities", "Probe"]
            ),
            (
                "Controller",
                vec![
                    "CreateVolume",
                    "DeleteVolume",
                    "ControllerPublishVolume",
                    "ControllerUnpublishVolume",
                    "ValidateVolumeCapabilities",
                    "ListVolumes",
                    "GetCapacity",
                    "ControllerGetCapabilities",
                    "CreateSnapshot",
                    "DeleteSnapshot",
                    "ListSnapshots",
                    "ControllerExpandVolume",
                    "ControllerGetVolume",
                    "ControllerModifyVolume",
                ]
            ),
            (
                "GroupController",
                vec![
                    "GroupControllerGetCapabilities",
                    "CreateVolumeGroupSnapshot",
                    "DeleteVolumeGroupSnapshot",
                    "GetVolumeGroupSnapshot",
                ]
            ),
            (
                "SnapshotMetadata",
                vec!["GetMetadataAllocated", "GetMetadataDelta"]
            ),
            (
                "Node",
                vec![
                    "NodeStageVolume",
                    "NodeUnstageVolume",
                    "NodePublishVolume",
                    "NodeUnpublishVolume",
                    "NodeGetVolumeStats",
                    "NodeExpandVolume",
                    "NodeGetCapabilities",
                    "NodeGetInfo",
                ]
            ),
        ]
    );
}

/// Only the SnapshotMetadata RPCs stream, and only their responses.
#[test]
fn only_snapshot_metadata_streams_its_responses() {
    let file = csi_file();
    let streaming: Vec<(&str, &str, bool, bool)> = file
        .service
        .iter()
        .flat_map(|s| s.method.iter().map(move |m| (s, m)))
        .filter(|(_, m)| m.client_streaming() || m.server_streaming())
        .map(|(s, m)| {
            (
                s.name(),
                m.name(),
                m.client_streaming(),
                m.server_streaming(),
            )
        })
        .collect();
    assert_eq!(
        streaming,
        vec![
            ("SnapshotMetadata", "GetMetadataAllocated", false, true),
            ("SnapshotMetadata", "GetMetadataDelta", false, true),
        ]
    );
}

#[test]
fn well_known_messages_have_the_specs_field_numbers() {
    let file = csi_file();
    expect_fields(
        &file,
        "CreateVolumeRequest",
        &[
            ("name", 1),
            ("capacity_range", 2),
            ("volume_capabilities", 3),
            ("parameters", 4),
            ("secrets", 5),
            ("volume_content_source", 6),
            ("accessibility_requirements", 7),
            ("mutable_parameters", 8),
        ],
    );
    expect_fields(
        &file,
        "Volume",
        &[
            ("capacity_bytes", 1),
            ("volume_id", 2),
            ("volume_context", 3),
            ("content_source", 4),
            ("accessible_topology", 5),
        ],
    );
    expect_fields(
        &file,
        "NodePublishVolumeRequest",
        &[
            ("volume_id", 1),
            ("publish_context", 2),
            ("staging_target_path", 3),
            ("target_path", 4),
            ("volume_capability", 5),
            ("readonly", 6),
            ("secrets", 7),
            ("volume_context", 8),
        ],
    );
    expect_fields(
        &file,
        "NodeStageVolumeRequest",
        &[
            ("volume_id", 1),
            ("publish_context", 2),
            ("staging_target_path", 3),
            ("volume_capability", 4),
            ("secrets", 5),
            ("volume_context", 6),
        ],
    );
    expect_fields(
        &file,
        "Snapshot",
        &[
            ("size_bytes", 1),
            ("snapshot_id", 2),
            ("source_volume_id", 3),
            ("creation_time", 4),
            ("ready_to_use", 5),
            ("group_snapshot_id", 6),
        ],
    );
    expect_fields(
        &file,
        "VolumeUsage",
        &[("available", 1), ("total", 2), ("used", 3), ("unit", 4)],
    );
    expect_fields(
        &file,
        "NodeGetInfoResponse",
        &[
            ("node_id", 1),
            ("max_volumes_per_node", 2),
            ("accessible_topology", 3),
        ],
    );
    expect_fields(
        &file,
        "NodeExpandVolumeRequest",
        &[
            ("volume_id", 1),
            ("volume_path", 2),
            ("capacity_range", 3),
            ("staging_target_path", 4),
            ("volume_capability", 5),
            ("secrets", 6),
        ],
    );
    expect_fields(
        &file,
        "ValidateVolumeCapabilitiesRequest",
        &[
            ("volume_id", 1),
            ("volume_context", 2),
            ("volume_capabilities", 3),
            ("parameters", 4),
            ("secrets", 5),
            ("mutable_parameters", 6),
        ],
    );
    expect_fields(
        &file,
        "ControllerModifyVolumeRequest",
        &[("volume_id", 1), ("secrets", 2), ("mutable_parameters", 3)],
    );
    expect_fields(
        &file,
        "VolumeGroupSnapshot",
        &[
            ("group_snapshot_id", 1),
            ("snapshots", 2),
            ("creation_time", 3),
            ("ready_to_use", 4),
        ],
    );
    expect_fields(
        &file,
        "GetMetadataAllocatedRequest",
        &[
            ("snapshot_id", 1),
            ("starting_offset", 2),
            ("max_results", 3),
            ("secrets", 4),
        ],
    );
    expect_fields(
        &file,
        "GetMetadataDeltaRequest",
        &[
            ("base_snapshot_id", 1),
            ("target_snapshot_id", 2),
            ("starting_offset", 3),
            ("max_results", 4),
            ("secrets", 5),
        ],
    );
    expect_fields(
        &file,
        "GetMetadataDeltaResponse",
        &[
            ("block_metadata_type", 1),
            ("volume_capacity_bytes", 2),
            ("block_metadata", 3),
        ],
    );
    expect_fields(
        &file,
        "ControllerExpandVolumeRequest",
        &[
            ("volume_id", 1),
            ("capacity_range", 2),
            ("secrets", 3),
            ("volume_capability", 4),
        ],
    );
}

#[test]
fn capability_enums_have_the_specs_values() {
    use v1::{
        controller_service_capability::rpc::Type as Ctrl,
        node_service_capability::rpc::Type as Node,
    };
    assert_eq!(Ctrl::CreateDeleteVolume as i32, 1);
    assert_eq!(Ctrl::CreateDeleteSnapshot as i32, 5);
    assert_eq!(Ctrl::ExpandVolume as i32, 9);
    assert_eq!(Ctrl::ModifyVolume as i32, 14);
    assert_eq!(Node::StageUnstageVolume as i32, 1);
    assert_eq!(Node::GetVolumeStats as i32, 2);
    assert_eq!(Node::VolumeMountGroup as i32, 6);
    assert_eq!(Ctrl::ModifyVolume.as_str_name(), "MODIFY_VOLUME");
    use v1::volume_capability::access_mode::Mode;
    assert_eq!(Mode::MultiNodeMultiWriter as i32, 5);
    assert_eq!(Mode::SingleNodeMultiWriter as i32, 7);
    use v1::plugin_capability::service::Type as Service;
    assert_eq!(Service::GroupControllerService as i32, 3);
    assert_eq!(Service::SnapshotMetadataService as i32, 4);
    use v1::group_controller_service_capability::rpc::Type as Group;
    assert_eq!(Group::CreateDeleteGetVolumeGroupSnapshot as i32, 1);
    assert_eq!(v1::BlockMetadataType::FixedLength as i32, 1);
    assert_eq!(v1::BlockMetadataType::VariableLength as i32, 2);
}

/// The custom options are extensions of google.protobuf's descriptor messages, with the
/// spec's numbers, and secrets fields carry `csi_secret`.
#[test]
fn custom_options_extend_the_descriptor_messages_with_the_specs_numbers() {
    let file = csi_file();
    let extensions: BTreeMap<&str, (&str, i32)> = file
        .extension
        .iter()
        .map(|e| (e.name(), (e.extendee(), e.number())))
        .collect();
    let expected: BTreeMap<&str, (&str, i32)> = [
        ("alpha_enum", (".google.protobuf.EnumOptions", 1060)),
        (
            "alpha_enum_value",
            (".google.protobuf.EnumValueOptions", 1060),
        ),
        ("csi_secret", (".google.protobuf.FieldOptions", 1059)),
        ("alpha_field", (".google.protobuf.FieldOptions", 1060)),
        ("alpha_message", (".google.protobuf.MessageOptions", 1060)),
        ("alpha_method", (".google.protobuf.MethodOptions", 1060)),
        ("alpha_service", (".google.protobuf.ServiceOptions", 1060)),
    ]
    .into();
    assert_eq!(extensions, expected);
    assert!(file.extension.iter().all(|e| e.r#type() == FieldType::Bool));

    // Every `(csi_secret) = true` is kept in the descriptor as FieldOptions field 1059
    // = true: tag (1059 << 3 | 0) = [0x98, 0x42], value 1. The `alpha_*` options are
    // field 1060 = true: [0xa0, 0x42, 0x01]. Upstream v1.11.0 marks 18 secrets fields
    // and 24 experimental elements (fields, messages, enum values, RPCs, a service).
    let count = |pattern: [u8; 3]| {
        FILE_DESCRIPTOR_SET
            .windows(3)
            .filter(|w| *w == pattern)
            .count()
    };
    let source = include_str!("../proto/csi.proto");
    assert_eq!(source.matches("(csi_secret) = true").count(), 18);
    assert_eq!(count([0x98, 0x42, 0x01]), 18);
    assert_eq!(count([0xa0, 0x42, 0x01]), 24);
}

/// Bytes a Go or C++ CSI client would put on the wire, built by hand, decode into the
/// generated types (and the generated types encode to the same bytes).
#[test]
fn hand_encoded_bytes_decode_into_the_generated_messages() {
    // NodePublishVolumeRequest { volume_id(1) = "v", target_path(4) = "/t", readonly(6) = true }
    let bytes = [0x0a, 0x01, b'v', 0x22, 0x02, b'/', b't', 0x30, 0x01];
    let request = v1::NodePublishVolumeRequest::decode(&bytes[..]).unwrap();
    assert_eq!(request.volume_id, "v");
    assert_eq!(request.target_path, "/t");
    assert!(request.readonly);
    assert_eq!(request.encode_to_vec(), bytes);

    // GetPluginInfoResponse { name(1) = "a", vendor_version(2) = "1" }
    let bytes = [0x0a, 0x01, b'a', 0x12, 0x01, b'1'];
    let info = v1::GetPluginInfoResponse::decode(&bytes[..]).unwrap();
    assert_eq!(
        (info.name.as_str(), info.vendor_version.as_str()),
        ("a", "1")
    );

    // ProbeResponse { ready(1) = BoolValue { value(1) = true } }
    let probe = v1::ProbeResponse::decode(&[0x0a, 0x02, 0x08, 0x01][..]).unwrap();
    assert_eq!(probe.ready, Some(true));

    // VolumeUsage { available(1) = 5, total(2) = 10, used(3) = 5, unit(4) = INODES(2) }
    let usage = v1::VolumeUsage::decode(&[0x08, 5, 0x10, 10, 0x18, 5, 0x20, 2][..]).unwrap();
    assert_eq!((usage.available, usage.total, usage.used), (5, 10, 5));
    assert_eq!(usage.unit(), v1::volume_usage::Unit::Inodes);
}
