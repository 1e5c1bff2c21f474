//! The Kubernetes external-storage driver spec file: the YAML or JSON file upstream's e2e
//! suite takes with `-storage.testdriver` to test an installed CSI driver
//! (`test/e2e/storage/external/external.go`, `driverDefinition`), read into typed values.
//!
//! Upstream decodes the file into Go structs and silently drops what it does not know, so a
//! typo (`persistance: true`, `Timeout:`) or a key of an older release (`ShortName`,
//! `ClaimSize`) quietly disables tests. This reader is strict instead: every unknown key,
//! wrong type, unparsable size or duration, unknown capability, timeout or access mode, and
//! every contradiction (two class sources, `Min` above `Max`) is a [`SpecError`] naming the
//! file, line, column and key path:
//!
//! ```text
//! testdriver.yaml:12:5: DriverInfo.Capabilities.persistance: unknown capability; did you mean "persistence"?
//! ```
//!
//! Upstream's defaults are applied as its external driver applies them: `SupportedFsType`
//! always holds `""`, `SupportedSizeRange.Min` is 5Gi unless given, `RequiredAccessModes` is
//! `[ReadWriteOnce]` when empty, `controllerExpansion: true` implies `onlineExpansion` and
//! `offlineExpansion` unless given, and every timeout not in `Timeouts` keeps
//! `framework.TimeoutContext`'s default. The older top-level `SupportedSizeRange` is read as
//! `DriverInfo`'s.
//!
//! How: `node` reads the document into a plain tree (syntax errors are located by
//! serde_yaml), `reader` walks it into the typed spec, and each mistake found there is
//! located by `locate`, which walks the text again with serde_yaml up to the key path.
//!
//! ```no_run
//! use driver_spec::{Capability, DriverSpec};
//!
//! let spec = DriverSpec::from_file("manila-testdriver.yaml".as_ref())?;
//! assert!(spec.has(Capability::Rwx));
//! # Ok::<_, driver_spec::SpecError>(())
//! ```

mod access_mode;
mod capability;
mod class;
mod driver_info;
mod error;
mod locate;
mod node;
mod reader;
mod size;
mod suggest;
mod timeouts;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use access_mode::{AccessMode, UnknownAccessMode};
pub use capability::{Capabilities, Capability, UnknownCapability};
pub use class::{ClassSource, read_class_object, read_snapshot_class, read_storage_class};
pub use driver_info::{
    DriverInfo, ExpectedMetrics, PerformanceTestOptions, ProvisioningPerformance,
    StressTestOptions, VolumeSnapshotStressTestOptions,
};
pub use error::SpecError;
pub use size::{DEFAULT_MIN_SIZE, SizeRange};
pub use timeouts::{TimeoutName, Timeouts, UnknownTimeout};

use node::Node;
use reader::{Check, Field};

/// A driver spec file, read and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct DriverSpec {
    /// `StorageClass`: enables the dynamic provisioning tests.
    pub storage_class: Option<ClassSource>,
    /// `SnapshotClass`: enables the snapshot tests.
    pub snapshot_class: Option<ClassSource>,
    /// `VolumeAttributesClass`: enables the volume modification tests.
    pub volume_attributes_class: Option<ClassSource>,
    /// `GroupSnapshotClass`: enables the volume group snapshot tests (newer upstream
    /// releases).
    pub group_snapshot_class: Option<ClassSource>,
    /// `InlineVolumes`: enables the CSI ephemeral inline volume tests.
    pub inline_volumes: Vec<InlineVolume>,
    /// `ClientNodeName`: the node every test pod runs on.
    pub client_node_name: Option<String>,
    /// `NodeSelectors`: added to every test pod's node selector.
    pub node_selectors: BTreeMap<String, String>,
    /// `Timeouts`: upstream's defaults, overridden by the spec.
    pub timeouts: Timeouts,
    /// `DriverInfo`.
    pub driver_info: DriverInfo,
    /// The file the spec was read from (the `origin` given to [`DriverSpec::parse`]).
    pub path: Option<PathBuf>,
}

/// One entry of `InlineVolumes`: a CSI ephemeral inline volume the tests may use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InlineVolume {
    /// `Attributes`: the volume context passed to NodePublishVolume.
    pub attributes: BTreeMap<String, String>,
    /// `Shared`: whether pods using the same attributes see each other's data.
    pub shared: bool,
    /// `ReadOnly`: whether the driver only mounts it read-only.
    pub read_only: bool,
}

const TOP_LEVEL_KEYS: [&str; 10] = [
    "StorageClass",
    "SnapshotClass",
    "VolumeAttributesClass",
    "GroupSnapshotClass",
    "InlineVolumes",
    "ClientNodeName",
    "NodeSelectors",
    "Timeouts",
    "DriverInfo",
    "SupportedSizeRange",
];

/// Keys of older upstream releases that are no longer read, with what replaced them.
const RETIRED_KEYS: [(&str, &str); 2] = [
    (
        "ShortName",
        "no longer read by upstream (tests are named after DriverInfo.Name); remove it",
    ),
    (
        "ClaimSize",
        "no longer read by upstream; claim sizes come from DriverInfo.SupportedSizeRange \
         (Min defaults to 5Gi)",
    ),
];

impl DriverSpec {
    /// Reads and checks the spec file at `path`.
    pub fn from_file(path: &Path) -> Result<Self, SpecError> {
        let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read {
            file: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Reads and checks `text`, the content of the spec file `origin`: errors name `origin`,
    /// and a relative `FromFile` is resolved against its directory.
    pub fn parse(text: &str, origin: &Path) -> Result<Self, SpecError> {
        let node = document(text, origin, "a mapping with at least DriverInfo.Name")?;
        read_spec(&node, origin).map_err(|issue| SpecError::at(issue, text, origin))
    }

    /// Whether the driver declares `capability` true.
    pub fn has(&self, capability: Capability) -> bool {
        self.driver_info.has(capability)
    }
}

/// The one YAML or JSON document of `text`, which must be a mapping (of `expected`).
fn document(text: &str, file: &Path, expected: &str) -> Result<Node, SpecError> {
    let node = Node::parse(text).map_err(|error| SpecError::from_yaml(file, text, &error))?;
    match node {
        Node::Map(_) => Ok(node),
        Node::Null => Err(SpecError::whole_file(
            file,
            format!("the file is empty; expected {expected}"),
        )),
        other => Err(SpecError::at(
            Field::root(&other).expected(expected),
            text,
            file,
        )),
    }
}

fn read_spec(node: &Node, origin: &Path) -> Check<DriverSpec> {
    let root = Field::root(node);
    for (name, field) in root.entries()? {
        if let Some((_, hint)) = RETIRED_KEYS.iter().find(|(retired, _)| *retired == name) {
            return Err(field.key_issue(*hint));
        }
    }
    let fields = root.fields(&TOP_LEVEL_KEYS)?;
    let base = origin.parent().unwrap_or(Path::new(""));
    let class = |key: &str| -> Check<Option<ClassSource>> {
        Ok(fields
            .get(key)
            .map(|field| ClassSource::read(field, base))
            .transpose()?
            .flatten())
    };
    let storage_class = class("StorageClass")?;
    let snapshot_class = class("SnapshotClass")?;
    let volume_attributes_class = class("VolumeAttributesClass")?;
    let group_snapshot_class = class("GroupSnapshotClass")?;
    let inline_volumes = match fields.get("InlineVolumes") {
        Some(field) => field
            .items()?
            .iter()
            .map(read_inline_volume)
            .collect::<Check<_>>()?,
        None => Vec::new(),
    };
    let client_node_name = fields
        .get("ClientNodeName")
        .map(|field| field.non_empty_str().map(str::to_owned))
        .transpose()?;
    let node_selectors = fields
        .get("NodeSelectors")
        .map(Field::string_map)
        .transpose()?
        .unwrap_or_default();
    let timeouts = Timeouts::read(fields.get("Timeouts"))?;
    let driver_info = match fields.get("DriverInfo") {
        Some(field) => DriverInfo::read(field, fields.get("SupportedSizeRange"))?,
        None => {
            return Err(root.missing(
                "DriverInfo",
                "missing: every driver spec needs DriverInfo with at least Name",
            ));
        }
    };
    Ok(DriverSpec {
        storage_class,
        snapshot_class,
        volume_attributes_class,
        group_snapshot_class,
        inline_volumes,
        client_node_name,
        node_selectors,
        timeouts,
        driver_info,
        path: Some(origin.to_owned()),
    })
}

fn read_inline_volume(field: &Field) -> Check<InlineVolume> {
    let fields = field.fields(&["Attributes", "Shared", "ReadOnly"])?;
    let flag = |key: &str| -> Check<bool> {
        Ok(fields
            .get(key)
            .map(Field::bool)
            .transpose()?
            .unwrap_or(false))
    };
    Ok(InlineVolume {
        attributes: fields
            .get("Attributes")
            .map(Field::string_map)
            .transpose()?
            .unwrap_or_default(),
        shared: flag("Shared")?,
        read_only: flag("ReadOnly")?,
    })
}
