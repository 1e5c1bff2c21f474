//! Where the tests get their classes from: the `StorageClass`, `SnapshotClass`,
//! `VolumeAttributesClass` and `GroupSnapshotClass` sections, and the class files a
//! `FromFile` names (read only on demand, with errors naming that file).

use std::path::{Path, PathBuf};

use k8s_openapi::api::storage::v1::StorageClass;
use kube::core::DynamicObject;
use serde::de::DeserializeOwned;

use super::SpecError;
use super::reader::{Check, Field};

/// How the tests get one kind of class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassSource {
    /// `FromName: true`: a class with `DriverInfo.Name` as its provisioner (or driver) and no
    /// parameters.
    FromName,
    /// `FromFile`: the class in this file, resolved against the spec file's directory.
    FromFile(PathBuf),
    /// `FromExistingClassName`: a copy of the class of this name installed on the cluster.
    FromExistingClassName(String),
}

const KEYS: [&str; 3] = ["FromName", "FromFile", "FromExistingClassName"];

impl ClassSource {
    /// The class file, for [`ClassSource::FromFile`].
    pub fn file(&self) -> Option<&Path> {
        match self {
            ClassSource::FromFile(path) => Some(path),
            _ => None,
        }
    }

    /// Reads a class section: exactly one of its three keys. `FromName: false` alone, as
    /// upstream reads it, enables nothing: `None`. A relative `FromFile` is resolved against
    /// `base`.
    pub(super) fn read(field: &Field, base: &Path) -> Check<Option<ClassSource>> {
        let fields = field.fields(&KEYS)?;
        let given: Vec<_> = fields.iter().collect();
        let (name, at) = match given.as_slice() {
            [] => {
                return Err(field.key_issue(
                    "empty: give one of FromName, FromFile or FromExistingClassName, \
                     or remove the section",
                ));
            }
            [(name, at)] => (*name, *at),
            [(first, _), (_, at), ..] => {
                return Err(at.key_issue(format!(
                    "{first} is given too; give only one of FromName, FromFile or \
                     FromExistingClassName"
                )));
            }
        };
        match name {
            "FromName" => Ok(at.bool()?.then_some(ClassSource::FromName)),
            "FromFile" => Ok(Some(ClassSource::FromFile(base.join(at.non_empty_str()?)))),
            _ => Ok(Some(ClassSource::FromExistingClassName(
                at.non_empty_str()?.to_owned(),
            ))),
        }
    }
}

/// Reads a StorageClass from `path` (a `StorageClass.FromFile`).
pub fn read_storage_class(path: &Path) -> Result<StorageClass, SpecError> {
    read_object(path, "StorageClass")
}

/// Reads a VolumeSnapshotClass from `path` (a `SnapshotClass.FromFile`); its `driver`,
/// `deletionPolicy` and `parameters` are in the object's `data`.
pub fn read_snapshot_class(path: &Path) -> Result<DynamicObject, SpecError> {
    read_class_object(path, "VolumeSnapshotClass")
}

/// Reads an object of `kind` from `path`, e.g. a `VolumeAttributesClass` or
/// `VolumeGroupSnapshotClass` named by those sections' `FromFile`.
pub fn read_class_object(path: &Path, kind: &str) -> Result<DynamicObject, SpecError> {
    read_object(path, kind)
}

/// Reads the one document of `path`, checks its `kind`, then deserializes it.
fn read_object<T: DeserializeOwned>(path: &Path, kind: &str) -> Result<T, SpecError> {
    let text = std::fs::read_to_string(path).map_err(|source| SpecError::Read {
        file: path.to_owned(),
        source,
    })?;
    let node = super::document(&text, path, &format!("a {kind}"))?;
    check_kind(&Field::root(&node), kind).map_err(|issue| SpecError::at(issue, &text, path))?;
    serde_yaml::from_str(&text).map_err(|error| SpecError::from_yaml(path, &text, &error))
}

fn check_kind(root: &Field, kind: &str) -> Check<()> {
    let entries = root.entries()?;
    let Some((_, found)) = entries.iter().find(|(key, _)| *key == "kind") else {
        return Err(root.missing("kind", format!("missing; expected kind: {kind}")));
    };
    match found.str()? {
        text if text == kind => Ok(()),
        text => Err(found.issue(format!("expected {kind}, found {text:?}"))),
    }
}
