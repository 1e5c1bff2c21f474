//! Choosing a snapshot's VolumeSnapshotClass and resolving the class's snapshotter secret
//! reference (kept on the content so DeleteSnapshot finds it after the class is gone).

use kube::ResourceExt;
use kube::api::{Api, ListParams};

use crate::api::{
    SNAPSHOTTER_SECRET_NAME_PARAMETER, SNAPSHOTTER_SECRET_NAMESPACE_PARAMETER, VolumeSnapshotClass,
};
use crate::{Error, Result};

/// The class named `name`, or else the one default class of `driver`.
pub async fn select(
    api: &Api<VolumeSnapshotClass>,
    name: Option<&str>,
    driver: &str,
) -> Result<VolumeSnapshotClass> {
    if let Some(name) = name {
        return api
            .get_opt(name)
            .await
            .map_err(|e| Error::kube(format!("reading VolumeSnapshotClass {name}"), e))?
            .ok_or_else(|| Error::ClassNotFound { name: name.into() });
    }
    let classes = api
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::kube("listing VolumeSnapshotClasses", e))?;
    default_of(classes.items, driver)
}

/// The one class of `driver` annotated as default.
pub fn default_of(classes: Vec<VolumeSnapshotClass>, driver: &str) -> Result<VolumeSnapshotClass> {
    let mut defaults: Vec<VolumeSnapshotClass> = classes
        .into_iter()
        .filter(|c| c.driver == driver && c.is_default())
        .collect();
    match defaults.len() {
        0 => Err(Error::NoDefaultClass {
            driver: driver.into(),
        }),
        1 => Ok(defaults.remove(0)),
        _ => Err(Error::MultipleDefaultClasses {
            driver: driver.into(),
            names: defaults.iter().map(|c| c.name_any()).collect(),
        }),
    }
}

/// Where a snapshot's secret lives: (namespace, name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRef {
    /// The secret's namespace.
    pub namespace: String,
    /// The secret's name.
    pub name: String,
}

/// The names a secret template may use.
pub struct TemplateValues<'a> {
    /// `${volumesnapshotcontent.name}`
    pub content_name: &'a str,
    /// `${volumesnapshot.name}` (not allowed in the namespace template)
    pub snapshot_name: &'a str,
    /// `${volumesnapshot.namespace}`
    pub snapshot_namespace: &'a str,
}

/// Resolves the class's `csi.storage.k8s.io/snapshotter-secret-name/namespace` parameters:
/// none → `None`; only one of the two, an empty value or an unknown `${…}` → an error.
pub fn snapshotter_secret(
    class: &VolumeSnapshotClass,
    values: &TemplateValues<'_>,
) -> Result<Option<SecretRef>> {
    let bad = |reason: String| Error::SecretParameters {
        class: class.name_any(),
        reason,
    };
    let name = class.parameters.get(SNAPSHOTTER_SECRET_NAME_PARAMETER);
    let namespace = class.parameters.get(SNAPSHOTTER_SECRET_NAMESPACE_PARAMETER);
    let (name, namespace) = match (name, namespace) {
        (None, None) => return Ok(None),
        (Some(name), Some(namespace)) => (name, namespace),
        _ => {
            return Err(bad(format!(
                "{SNAPSHOTTER_SECRET_NAME_PARAMETER} and {SNAPSHOTTER_SECRET_NAMESPACE_PARAMETER} must be set together"
            )));
        }
    };
    let namespace = resolve(
        namespace,
        &[
            ("volumesnapshotcontent.name", values.content_name),
            ("volumesnapshot.namespace", values.snapshot_namespace),
        ],
    )
    .map_err(|r| bad(format!("{SNAPSHOTTER_SECRET_NAMESPACE_PARAMETER}: {r}")))?;
    let name = resolve(
        name,
        &[
            ("volumesnapshotcontent.name", values.content_name),
            ("volumesnapshot.name", values.snapshot_name),
            ("volumesnapshot.namespace", values.snapshot_namespace),
        ],
    )
    .map_err(|r| bad(format!("{SNAPSHOTTER_SECRET_NAME_PARAMETER}: {r}")))?;
    Ok(Some(SecretRef { namespace, name }))
}

/// Replaces `${key}` tokens; an unknown token or an empty result is an error.
fn resolve(template: &str, values: &[(&str, &str)]) -> std::result::Result<String, String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("unterminated ${{ in {template:?}"))?;
        let key = &after[..end];
        let value = values
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
            .ok_or_else(|| format!("{template:?} uses ${{{key}}}, which is not available here"))?;
        out.push_str(value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    if out.is_empty() {
        return Err(format!("{template:?} resolves to an empty name"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::BTreeMap;

    use super::*;
    use crate::api::{DeletionPolicy, IS_DEFAULT_CLASS_ANNOTATION};

    fn class(name: &str, driver: &str, default: bool) -> VolumeSnapshotClass {
        let mut c = VolumeSnapshotClass::new(name, driver, DeletionPolicy::Delete);
        if default {
            c.metadata.annotations = Some(BTreeMap::from([(
                IS_DEFAULT_CLASS_ANNOTATION.to_owned(),
                "true".to_owned(),
            )]));
        }
        c
    }

    const VALUES: TemplateValues<'static> = TemplateValues {
        content_name: "snapcontent-1",
        snapshot_name: "snap",
        snapshot_namespace: "apps",
    };

    #[test]
    fn the_default_class_is_the_one_annotated_for_the_driver() {
        let classes = vec![
            class("other-default", "other.csi", true),
            class("plain", "manila.csi.openstack.org", false),
            class("default", "manila.csi.openstack.org", true),
        ];
        assert_eq!(
            default_of(classes, "manila.csi.openstack.org")
                .unwrap()
                .name_any(),
            "default"
        );
    }

    #[test]
    fn no_or_several_defaults_are_errors_naming_the_driver() {
        let none = default_of(vec![class("plain", "d", false)], "d").unwrap_err();
        assert_eq!(
            none.to_string(),
            "no default VolumeSnapshotClass for driver d"
        );
        let two = default_of(vec![class("a", "d", true), class("b", "d", true)], "d").unwrap_err();
        assert_eq!(
            two.to_string(),
            "2 default VolumeSnapshotClasses for driver d: a, b"
        );
    }

    #[test]
    fn secret_templates_resolve() {
        let mut c = class("c", "d", false);
        c.parameters.insert(
            SNAPSHOTTER_SECRET_NAME_PARAMETER.into(),
            "${volumesnapshot.name}-creds".into(),
        );
        c.parameters.insert(
            SNAPSHOTTER_SECRET_NAMESPACE_PARAMETER.into(),
            "${volumesnapshot.namespace}".into(),
        );
        assert_eq!(
            snapshotter_secret(&c, &VALUES).unwrap(),
            Some(SecretRef {
                namespace: "apps".into(),
                name: "snap-creds".into()
            })
        );
        assert_eq!(
            snapshotter_secret(&class("c", "d", false), &VALUES).unwrap(),
            None
        );
    }

    #[test]
    fn bad_secret_parameters_are_named() {
        let mut c = class("c", "d", false);
        c.parameters
            .insert(SNAPSHOTTER_SECRET_NAME_PARAMETER.into(), "creds".into());
        let err = snapshotter_secret(&c, &VALUES).unwrap_err().to_string();
        assert!(err.contains("must be set together"), "{err}");
        c.parameters.insert(
            SNAPSHOTTER_SECRET_NAMESPACE_PARAMETER.into(),
            "${volumesnapshot.name}".into(),
        );
        let err = snapshotter_secret(&c, &VALUES).unwrap_err().to_string();
        assert!(
            err.contains("${volumesnapshot.name}, which is not available"),
            "{err}"
        );
    }
}
