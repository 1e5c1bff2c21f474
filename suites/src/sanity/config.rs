//! What a sanity run needs to know: endpoints, directories, secrets, volume parameters and
//! sizes. Field names follow csi-sanity's flags (`--csi.endpoint` → [`SanityConfig::endpoint`]).

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use csi_proto::Endpoint;
use regex::Regex;

use super::error::{Error, Result};

/// One GiB in bytes.
pub const GIB: i64 = 1024 * 1024 * 1024;

/// How the test volumes are accessed (`--csi.testvolumeaccesstype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AccessType {
    /// A mounted file system (the default).
    #[default]
    Mount,
    /// A raw block device.
    Block,
}

impl std::str::FromStr for AccessType {
    type Err = Error;
    fn from_str(text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "" | "mount" => Ok(AccessType::Mount),
            "block" => Ok(AccessType::Block),
            other => Err(Error::InvalidConfig(format!(
                "test volume access type {other:?}: expected `mount` or `block`"
            ))),
        }
    }
}

/// The configuration of a sanity run.
#[derive(Debug, Clone)]
pub struct SanityConfig {
    /// `--csi.endpoint`: the plugin's endpoint (Identity + Node, and Controller unless
    /// `controller_endpoint` is set).
    pub endpoint: Endpoint,
    /// `--csi.controllerendpoint`: a separate Controller (+ Identity) endpoint.
    pub controller_endpoint: Option<Endpoint>,
    /// `--csi.mountdir`: parent of NodePublishVolume's target path (`<mountdir>/target`).
    /// Created for each case if missing, and removed again after it.
    pub mount_dir: PathBuf,
    /// `--csi.stagingdir`: NodeStageVolume's staging target path. Created for each case
    /// if missing, and removed again after it.
    pub staging_dir: PathBuf,
    /// `--csi.secrets`: secrets passed with each RPC.
    pub secrets: CsiSecrets,
    /// `--csi.testvolumeparameters`: CreateVolume parameters.
    pub test_volume_parameters: HashMap<String, String>,
    /// `--csi.testvolumemutableparameters`: mutable parameters (volume attribute class)
    /// for ControllerModifyVolume and CreateVolume.
    pub test_volume_mutable_parameters: HashMap<String, String>,
    /// `--csi.testsnapshotparameters`: CreateSnapshot parameters.
    pub test_snapshot_parameters: HashMap<String, String>,
    /// `--csi.testvolumesize`: bytes requested by CreateVolume (default 10 GiB).
    pub test_volume_size: i64,
    /// `--csi.testvolumeexpandsize`: target of expansions (default size + 1 GiB).
    pub test_volume_expand_size: Option<i64>,
    /// `--csi.testvolumeaccesstype`: mount or block.
    pub test_volume_access_type: AccessType,
    /// `--csi.testnodevolumeattachlimit`: run the max-attach-limit case.
    pub test_node_volume_attach_limit: bool,
    /// How many times the idempotency cases repeat each call (default 10).
    pub idempotent_count: u32,
    /// Longest a single case (its cleanup excluded) may take.
    pub case_timeout: Duration,
    /// Longest to wait for a snapshot to become ready to use.
    pub snapshot_ready_timeout: Duration,
    /// Which cases run: the full case name must match a `focus` (if any) and no `skip`.
    pub filter: CaseFilter,
    /// csi-sanity's path commands (`--csi.createmountpathcmd` and friends): run instead of
    /// creating, removing or checking the directories here.
    pub path_commands: PathCommands,
}

/// Commands that create, remove and check the mount and staging paths instead of this
/// suite (csi-sanity's `--csi.createmountpathcmd`, `--csi.createstagingpathcmd`,
/// `--csi.removemountpathcmd`, `--csi.removestagingpathcmd`, `--csi.checkpathcmd` and their
/// timeouts), e.g. for a plugin whose paths live in another mount namespace or on another
/// host. Each runs as `<command> <path>` without a shell, as csi-sanity runs them:
///
/// - a create command gets the configured directory and prints the path to use on stdout
///   (surrounding white space trimmed); NodePublishVolume's target path is
///   `<printed path>/target`;
/// - a remove command gets the path the create step gave (or the directory this suite
///   created, when only the remove command is set);
/// - the check command prints `file`, `directory`, `not_found` or `other`.
///
/// A command that cannot start, exits non-zero or outlasts its timeout fails the case,
/// naming the command.
#[derive(Debug, Clone)]
pub struct PathCommands {
    /// `--csi.createmountpathcmd`.
    pub create_mount: Option<PathBuf>,
    /// `--csi.createstagingpathcmd`.
    pub create_staging: Option<PathBuf>,
    /// `--csi.createpathcmdtimeout` (default 10 s).
    pub create_timeout: Duration,
    /// `--csi.removemountpathcmd`.
    pub remove_mount: Option<PathBuf>,
    /// `--csi.removestagingpathcmd`.
    pub remove_staging: Option<PathBuf>,
    /// `--csi.removepathcmdtimeout` (default 10 s).
    pub remove_timeout: Duration,
    /// `--csi.checkpathcmd`.
    pub check: Option<PathBuf>,
    /// `--csi.checkpathcmdtimeout` (default 10 s).
    pub check_timeout: Duration,
}

impl Default for PathCommands {
    fn default() -> Self {
        PathCommands {
            create_mount: None,
            create_staging: None,
            create_timeout: Duration::from_secs(10),
            remove_mount: None,
            remove_staging: None,
            remove_timeout: Duration::from_secs(10),
            check: None,
            check_timeout: Duration::from_secs(10),
        }
    }
}

/// What a path is, as csi-sanity's check command reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// Nothing there.
    NotFound,
    /// Something else (a socket, a device, …).
    Other,
}

impl std::str::FromStr for PathKind {
    type Err = String;
    fn from_str(text: &str) -> std::result::Result<Self, String> {
        match text.trim() {
            "file" => Ok(PathKind::File),
            "directory" => Ok(PathKind::Directory),
            "not_found" => Ok(PathKind::NotFound),
            "other" => Ok(PathKind::Other),
            other => Err(format!(
                "printed {other:?}, expected file, directory, not_found or other"
            )),
        }
    }
}

impl SanityConfig {
    /// The defaults of csi-sanity for `endpoint`.
    pub fn new(endpoint: Endpoint) -> Self {
        let tmp = std::env::temp_dir();
        SanityConfig {
            endpoint,
            controller_endpoint: None,
            mount_dir: tmp.join("csi-mount"),
            staging_dir: tmp.join("csi-staging"),
            secrets: CsiSecrets::default(),
            test_volume_parameters: HashMap::new(),
            test_volume_mutable_parameters: HashMap::new(),
            test_snapshot_parameters: HashMap::new(),
            test_volume_size: 10 * GIB,
            test_volume_expand_size: None,
            test_volume_access_type: AccessType::Mount,
            test_node_volume_attach_limit: false,
            idempotent_count: 10,
            case_timeout: Duration::from_secs(300),
            snapshot_ready_timeout: Duration::from_secs(300),
            filter: CaseFilter::default(),
            path_commands: PathCommands::default(),
        }
    }

    /// Target size of expansions.
    pub fn expand_size(&self) -> i64 {
        self.test_volume_expand_size
            .unwrap_or(self.test_volume_size + GIB)
    }

    /// Checks values no RPC would catch: sizes and directories.
    pub fn validate(&self) -> Result<()> {
        if self.test_volume_size <= 0 {
            return Err(Error::InvalidConfig(format!(
                "test volume size must be positive, got {}",
                self.test_volume_size
            )));
        }
        if let Some(size) = self.test_volume_expand_size
            && size <= self.test_volume_size
        {
            return Err(Error::InvalidConfig(format!(
                "test volume expand size {size} must exceed the test volume size {}",
                self.test_volume_size
            )));
        }
        for (flag, dir) in [
            ("mount dir", &self.mount_dir),
            ("staging dir", &self.staging_dir),
        ] {
            if !dir.is_absolute() {
                return Err(Error::InvalidConfig(format!(
                    "{flag} {} must be an absolute path",
                    dir.display()
                )));
            }
        }
        if self.mount_dir == self.staging_dir {
            return Err(Error::InvalidConfig(format!(
                "mount dir and staging dir are both {}",
                self.mount_dir.display()
            )));
        }
        Ok(())
    }
}

/// Which cases to run, by regular expressions on the full case name, as Ginkgo's
/// repeatable `--focus` / `--skip`: a case runs when any focus matches (or none is given)
/// and no skip matches.
#[derive(Debug, Clone, Default)]
pub struct CaseFilter {
    /// Only cases whose name matches one of these (all cases when empty).
    pub focus: Vec<Regex>,
    /// Not the cases whose name matches one of these.
    pub skip: Vec<Regex>,
}

impl CaseFilter {
    /// Why `name` is filtered out, or `None` if it runs.
    pub fn excludes(&self, name: &str) -> Option<String> {
        if !self.focus.is_empty() && !self.focus.iter().any(|f| f.is_match(name)) {
            let all: Vec<String> = self.focus.iter().map(|f| format!("/{f}/")).collect();
            return Some(format!("not matched by focus {}", all.join(" or ")));
        }
        if let Some(skip) = self.skip.iter().find(|s| s.is_match(name)) {
            return Some(format!("matched by skip /{skip}/"));
        }
        None
    }
}

/// A secret map: values never printed.
pub type SecretMap = HashMap<String, String>;

/// The secrets passed with each RPC, in csi-sanity's YAML format:
///
/// ```yaml
/// CreateVolumeSecret:
///   os-authURL: http://keystone:5000/v3
///   os-password: hunter2
/// DeleteVolumeSecret: { ... }
/// ```
///
/// Missing sections are empty maps. `Debug` prints key names only.
#[derive(Clone, Default)]
pub struct CsiSecrets {
    /// CreateVolume.
    pub create_volume_secret: SecretMap,
    /// DeleteVolume.
    pub delete_volume_secret: SecretMap,
    /// ControllerPublishVolume.
    pub controller_publish_volume_secret: SecretMap,
    /// ControllerUnpublishVolume.
    pub controller_unpublish_volume_secret: SecretMap,
    /// ValidateVolumeCapabilities.
    pub controller_validate_volume_capabilities_secret: SecretMap,
    /// NodeStageVolume.
    pub node_stage_volume_secret: SecretMap,
    /// NodePublishVolume.
    pub node_publish_volume_secret: SecretMap,
    /// NodeExpandVolume.
    pub node_expand_volume_secret: SecretMap,
    /// CreateSnapshot.
    pub create_snapshot_secret: SecretMap,
    /// DeleteSnapshot.
    pub delete_snapshot_secret: SecretMap,
    /// ListSnapshots.
    pub list_snapshots_secret: SecretMap,
    /// ControllerExpandVolume.
    pub controller_expand_volume_secret: SecretMap,
    /// ControllerModifyVolume.
    pub controller_modify_volume_secret: SecretMap,
    /// Sections of the file this suite does not know (reported, not used).
    pub unknown_sections: BTreeSet<String>,
}

/// The section names csi-sanity's secrets file may have.
pub const SECRET_SECTIONS: [&str; 13] = [
    "CreateVolumeSecret",
    "DeleteVolumeSecret",
    "ControllerPublishVolumeSecret",
    "ControllerUnpublishVolumeSecret",
    "ControllerValidateVolumeCapabilitiesSecret",
    "NodeStageVolumeSecret",
    "NodePublishVolumeSecret",
    "NodeExpandVolumeSecret",
    "CreateSnapshotSecret",
    "DeleteSnapshotSecret",
    "ListSnapshotsSecret",
    "ControllerExpandVolumeSecret",
    "ControllerModifyVolumeSecret",
];

impl CsiSecrets {
    /// The same secrets for every RPC (e.g. a driver's one credentials secret).
    pub fn everywhere(secret: &SecretMap) -> Self {
        CsiSecrets {
            create_volume_secret: secret.clone(),
            delete_volume_secret: secret.clone(),
            controller_publish_volume_secret: secret.clone(),
            controller_unpublish_volume_secret: secret.clone(),
            controller_validate_volume_capabilities_secret: secret.clone(),
            node_stage_volume_secret: secret.clone(),
            node_publish_volume_secret: secret.clone(),
            node_expand_volume_secret: secret.clone(),
            create_snapshot_secret: secret.clone(),
            delete_snapshot_secret: secret.clone(),
            list_snapshots_secret: secret.clone(),
            controller_expand_volume_secret: secret.clone(),
            controller_modify_volume_secret: secret.clone(),
            unknown_sections: BTreeSet::new(),
        }
    }

    /// Parses csi-sanity's secrets YAML. Sections this suite does not know are kept in
    /// [`CsiSecrets::unknown_sections`] (csi-sanity ignores them silently; we report them).
    pub fn from_yaml(text: &str, origin: &Path) -> Result<Self> {
        let bad = |reason: String| Error::SecretsFile {
            path: origin.to_path_buf(),
            reason,
        };
        let raw: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| {
            // The parser's message names a location, never a value.
            bad(match e.location() {
                Some(at) => format!(
                    "not valid YAML (line {}, column {})",
                    at.line(),
                    at.column()
                ),
                None => "not valid YAML".into(),
            })
        })?;
        let mut secrets = CsiSecrets::default();
        let map = match raw {
            serde_yaml::Value::Null => return Ok(secrets),
            serde_yaml::Value::Mapping(map) => map,
            _ => {
                return Err(bad(
                    "expected a mapping of sections such as CreateVolumeSecret".into(),
                ));
            }
        };
        for (key, value) in map {
            let Some(section) = key.as_str() else {
                return Err(bad("section names must be strings".into()));
            };
            let Some(target) = secrets.section_mut(section) else {
                secrets.unknown_sections.insert(section.to_owned());
                continue;
            };
            *target = secret_map(section, value).map_err(bad)?;
        }
        Ok(secrets)
    }

    fn section_mut(&mut self, name: &str) -> Option<&mut SecretMap> {
        Some(match name {
            "CreateVolumeSecret" => &mut self.create_volume_secret,
            "DeleteVolumeSecret" => &mut self.delete_volume_secret,
            "ControllerPublishVolumeSecret" => &mut self.controller_publish_volume_secret,
            "ControllerUnpublishVolumeSecret" => &mut self.controller_unpublish_volume_secret,
            "ControllerValidateVolumeCapabilitiesSecret" => {
                &mut self.controller_validate_volume_capabilities_secret
            }
            "NodeStageVolumeSecret" => &mut self.node_stage_volume_secret,
            "NodePublishVolumeSecret" => &mut self.node_publish_volume_secret,
            "NodeExpandVolumeSecret" => &mut self.node_expand_volume_secret,
            "CreateSnapshotSecret" => &mut self.create_snapshot_secret,
            "DeleteSnapshotSecret" => &mut self.delete_snapshot_secret,
            "ListSnapshotsSecret" => &mut self.list_snapshots_secret,
            "ControllerExpandVolumeSecret" => &mut self.controller_expand_volume_secret,
            "ControllerModifyVolumeSecret" => &mut self.controller_modify_volume_secret,
            _ => return None,
        })
    }

    /// Reads and parses csi-sanity's secrets file.
    pub fn from_yaml_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::ReadFile {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_yaml(&text, path)
    }

    fn sections(&self) -> [(&'static str, &SecretMap); 13] {
        [
            (SECRET_SECTIONS[0], &self.create_volume_secret),
            (SECRET_SECTIONS[1], &self.delete_volume_secret),
            (SECRET_SECTIONS[2], &self.controller_publish_volume_secret),
            (SECRET_SECTIONS[3], &self.controller_unpublish_volume_secret),
            (
                SECRET_SECTIONS[4],
                &self.controller_validate_volume_capabilities_secret,
            ),
            (SECRET_SECTIONS[5], &self.node_stage_volume_secret),
            (SECRET_SECTIONS[6], &self.node_publish_volume_secret),
            (SECRET_SECTIONS[7], &self.node_expand_volume_secret),
            (SECRET_SECTIONS[8], &self.create_snapshot_secret),
            (SECRET_SECTIONS[9], &self.delete_snapshot_secret),
            (SECRET_SECTIONS[10], &self.list_snapshots_secret),
            (SECRET_SECTIONS[11], &self.controller_expand_volume_secret),
            (SECRET_SECTIONS[12], &self.controller_modify_volume_secret),
        ]
    }
}

impl fmt::Debug for CsiSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_map();
        for (name, map) in self.sections() {
            if !map.is_empty() {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.entry(&name, &format_args!("{keys:?} (values redacted)"));
            }
        }
        out.finish()
    }
}

/// One section: a mapping of names to scalars (numbers and booleans become strings, as
/// in csi-sanity). Errors name the section and key, never a value.
fn secret_map(section: &str, value: serde_yaml::Value) -> std::result::Result<SecretMap, String> {
    let map = match value {
        serde_yaml::Value::Null => return Ok(SecretMap::new()),
        serde_yaml::Value::Mapping(map) => map,
        _ => return Err(format!("section {section} must map names to values")),
    };
    let mut out = SecretMap::new();
    for (key, value) in map {
        let Some(key) = key.as_str().map(str::to_owned) else {
            return Err(format!("section {section}: key names must be strings"));
        };
        let text = match value {
            serde_yaml::Value::String(s) => s,
            serde_yaml::Value::Bool(b) => b.to_string(),
            serde_yaml::Value::Number(n) => n.to_string(),
            _ => {
                return Err(format!(
                    "section {section}: value of {key} must be a string"
                ));
            }
        };
        out.insert(key, text);
    }
    Ok(out)
}

/// Reads a parameters file (`--csi.testvolumeparameters`): a YAML mapping of strings.
pub fn load_parameters(path: &Path) -> Result<HashMap<String, String>> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::ReadFile {
        path: path.to_path_buf(),
        source,
    })?;
    let parsed: Option<HashMap<String, String>> =
        serde_yaml::from_str(&text).map_err(|e| Error::ParametersFile {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    Ok(parsed.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn secrets_file_in_csi_sanity_format() {
        let text = "CreateVolumeSecret:\n  os-password: hunter2\n  os-userName: demo\nNodeStageVolumeSecret:\n  os-password: hunter2\nGroupSnapshotSecret:\n  a: b\n";
        let secrets = CsiSecrets::from_yaml(text, Path::new("s.yaml")).unwrap();
        assert_eq!(secrets.create_volume_secret["os-userName"], "demo");
        assert_eq!(secrets.node_stage_volume_secret.len(), 1);
        assert!(secrets.delete_volume_secret.is_empty());
        assert_eq!(
            secrets.unknown_sections.iter().collect::<Vec<_>>(),
            ["GroupSnapshotSecret"]
        );
        let debug = format!("{secrets:?}");
        assert!(!debug.contains("hunter2"), "{debug}");
        assert!(debug.contains("os-userName"), "{debug}");
    }

    #[test]
    fn secrets_file_errors_name_the_file_and_never_the_values() {
        let err = CsiSecrets::from_yaml("CreateVolumeSecret: [hunter2]\n", Path::new("s.yaml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("s.yaml"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
        let err = CsiSecrets::from_yaml("- a\n", Path::new("s.yaml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("expected a mapping"), "{err}");
        let err = CsiSecrets::from_yaml("CreateVolumeSecret: hunter2\n", Path::new("s.yaml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("CreateVolumeSecret"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn validation_names_the_culprit() {
        let mut config = SanityConfig::new(Endpoint::Unix("/tmp/x.sock".into()));
        config.validate().unwrap();
        config.test_volume_expand_size = Some(GIB);
        assert!(
            config
                .validate()
                .unwrap_err()
                .to_string()
                .contains("expand size")
        );
        config.test_volume_expand_size = None;
        config.mount_dir = "relative".into();
        assert!(
            config
                .validate()
                .unwrap_err()
                .to_string()
                .contains("mount dir relative")
        );
    }

    #[test]
    fn filter_focus_and_skip() {
        let filter = CaseFilter {
            focus: vec![Regex::new("Node").unwrap()],
            skip: vec![Regex::new("idempotent").unwrap()],
        };
        assert_eq!(filter.excludes("Node Service should work"), None);
        assert!(
            filter
                .excludes("Node Service should be idempotent")
                .is_some()
        );
        assert!(filter.excludes("Identity Service Probe").is_some());
    }

    #[test]
    fn several_focus_and_skip_as_ginkgo() {
        let regexes = |texts: &[&str]| -> Vec<Regex> {
            texts.iter().map(|t| Regex::new(t).unwrap()).collect()
        };
        let filter = CaseFilter {
            focus: regexes(&["Identity", "NodeGetInfo"]),
            skip: regexes(&["Probe", "GetPluginInfo"]),
        };
        // Any focus is enough.
        assert_eq!(
            filter.excludes("Identity Service GetPluginCapabilities"),
            None
        );
        assert_eq!(
            filter.excludes("Node Service NodeGetInfo should work"),
            None
        );
        // Neither focus matches.
        let why = filter.excludes("Node Service NodeGetCapabilities").unwrap();
        assert!(why.contains("/Identity/ or /NodeGetInfo/"), "{why}");
        // Any skip excludes, even when a focus matches.
        assert!(
            filter
                .excludes("Identity Service Probe")
                .unwrap()
                .contains("/Probe/")
        );
        assert!(
            filter
                .excludes("Identity Service GetPluginInfo")
                .unwrap()
                .contains("/GetPluginInfo/")
        );
        // No focus: everything not skipped runs.
        let skip_only = CaseFilter {
            focus: Vec::new(),
            skip: regexes(&["a^"]),
        };
        assert_eq!(skip_only.excludes("anything"), None);
    }

    #[test]
    fn path_kinds_as_the_check_command_prints_them() {
        assert_eq!("file\n".parse::<PathKind>(), Ok(PathKind::File));
        assert_eq!(" directory".parse::<PathKind>(), Ok(PathKind::Directory));
        assert_eq!("not_found".parse::<PathKind>(), Ok(PathKind::NotFound));
        assert_eq!("other".parse::<PathKind>(), Ok(PathKind::Other));
        assert!(
            "missing"
                .parse::<PathKind>()
                .unwrap_err()
                .contains("\"missing\"")
        );
    }
}
