//! Secret references in StorageClass parameters, as the upstream provisioner reads them:
//! `csi.storage.k8s.io/<kind>-secret-name` and `…-secret-namespace`, with templates.
//!
//! - namespace templates: `${pv.name}`, `${pvc.namespace}`;
//! - name templates: `${pv.name}`, `${pvc.namespace}`, `${pvc.name}`,
//!   `${pvc.annotations['<key>']}`.
//!
//! Both or neither of name and namespace must be given. A template the context cannot fill
//! (e.g. `${pvc.name}` when deleting without a claim) or an unknown token is an error naming
//! the parameter. [`read_secret`] reads a Secret's data into [`SecretData`], whose `Debug`
//! prints only the keys.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::{Secret, SecretReference};
use kube::Api;
use kube::Client;

use crate::error::{Error, Result};

/// Prefix of the parameters reserved for sidecars; drivers never see them.
pub const RESERVED_PREFIX: &str = "csi.storage.k8s.io/";

/// Whether a StorageClass parameter is for the sidecars, not the driver.
pub fn is_reserved_parameter(key: &str) -> bool {
    key.starts_with(RESERVED_PREFIX)
}

/// Which operation a secret is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretKind {
    /// CreateVolume/DeleteVolume.
    Provisioner,
    /// ControllerPublish/Unpublish.
    ControllerPublish,
    /// NodeStage.
    NodeStage,
    /// NodePublish.
    NodePublish,
    /// ControllerExpandVolume.
    ControllerExpand,
    /// NodeExpandVolume.
    NodeExpand,
}

impl SecretKind {
    /// Every kind.
    pub const ALL: [SecretKind; 6] = [
        SecretKind::Provisioner,
        SecretKind::ControllerPublish,
        SecretKind::NodeStage,
        SecretKind::NodePublish,
        SecretKind::ControllerExpand,
        SecretKind::NodeExpand,
    ];

    fn stem(self) -> &'static str {
        match self {
            SecretKind::Provisioner => "provisioner",
            SecretKind::ControllerPublish => "controller-publish",
            SecretKind::NodeStage => "node-stage",
            SecretKind::NodePublish => "node-publish",
            SecretKind::ControllerExpand => "controller-expand",
            SecretKind::NodeExpand => "node-expand",
        }
    }

    /// `csi.storage.k8s.io/<kind>-secret-name`.
    pub fn name_key(self) -> String {
        format!("{RESERVED_PREFIX}{}-secret-name", self.stem())
    }

    /// `csi.storage.k8s.io/<kind>-secret-namespace`.
    pub fn namespace_key(self) -> String {
        format!("{RESERVED_PREFIX}{}-secret-namespace", self.stem())
    }
}

/// What templates may refer to. Claim fields are absent when there is no claim (deletion).
#[derive(Clone, Debug, Default)]
pub struct TemplateContext<'a> {
    /// The PV's name (`pvc-<uid>`).
    pub pv_name: &'a str,
    /// The claim's name.
    pub pvc_name: Option<&'a str>,
    /// The claim's namespace.
    pub pvc_namespace: Option<&'a str>,
    /// The claim's annotations.
    pub pvc_annotations: Option<&'a BTreeMap<String, String>>,
}

/// A resolved reference to a Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretRef {
    /// Secret name.
    pub name: String,
    /// Secret namespace.
    pub namespace: String,
}

/// Resolves the `kind` secret reference in `parameters`; `None` when neither key is set.
pub fn secret_reference(
    kind: SecretKind,
    parameters: &BTreeMap<String, String>,
    context: &TemplateContext<'_>,
) -> Result<Option<SecretRef>> {
    let (name_key, namespace_key) = (kind.name_key(), kind.namespace_key());
    let (name, namespace) = match (parameters.get(&name_key), parameters.get(&namespace_key)) {
        (None, None) => return Ok(None),
        (Some(name), Some(namespace)) => (name, namespace),
        (Some(_), None) => {
            return Err(Error::SecretReference(format!(
                "StorageClass parameter {name_key} is set but {namespace_key} is not: give both or neither"
            )));
        }
        (None, Some(_)) => {
            return Err(Error::SecretReference(format!(
                "StorageClass parameter {namespace_key} is set but {name_key} is not: give both or neither"
            )));
        }
    };
    let namespace = expand(&namespace_key, namespace, context, false)?;
    let name = expand(&name_key, name, context, true)?;
    check_name(&namespace_key, &namespace, true)?;
    check_name(&name_key, &name, false)?;
    Ok(Some(SecretRef { name, namespace }))
}

/// Replaces `${…}` tokens; claim tokens other than the namespace only for names.
fn expand(
    key: &str,
    template: &str,
    context: &TemplateContext<'_>,
    is_name: bool,
) -> Result<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or_else(|| {
            Error::SecretReference(format!(
                "StorageClass parameter {key}: unterminated template in {template:?}"
            ))
        })?;
        let token = &after[..end];
        let missing = |what: &str| {
            Error::SecretReference(format!(
                "StorageClass parameter {key}: template ${{{token}}} needs the {what}, which is not available here"
            ))
        };
        let value: String = match token {
            "pv.name" => context.pv_name.to_string(),
            "pvc.namespace" => context
                .pvc_namespace
                .ok_or_else(|| missing("claim's namespace"))?
                .to_string(),
            "pvc.name" if is_name => context
                .pvc_name
                .ok_or_else(|| missing("claim's name"))?
                .to_string(),
            annotation
                if is_name
                    && annotation.starts_with("pvc.annotations['")
                    && annotation.ends_with("']") =>
            {
                let annotation_key = &annotation["pvc.annotations['".len()..annotation.len() - 2];
                let annotations = context
                    .pvc_annotations
                    .ok_or_else(|| missing("claim's annotations"))?;
                annotations.get(annotation_key).cloned().ok_or_else(|| {
                    Error::SecretReference(format!(
                        "StorageClass parameter {key}: the claim has no annotation {annotation_key:?}"
                    ))
                })?
            }
            _ => {
                let allowed = if is_name {
                    "${pv.name}, ${pvc.namespace}, ${pvc.name}, ${pvc.annotations['<key>']}"
                } else {
                    "${pv.name}, ${pvc.namespace}"
                };
                return Err(Error::SecretReference(format!(
                    "StorageClass parameter {key}: unknown template ${{{token}}} (allowed: {allowed})"
                )));
            }
        };
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// A resolved name must be a DNS subdomain (namespaces: a DNS label).
fn check_name(key: &str, value: &str, label: bool) -> Result<()> {
    let max = if label { 63 } else { 253 };
    let valid_chars = value
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || (!label && c == '.'));
    let valid_ends = value
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && value
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric());
    if value.is_empty() || value.len() > max || !valid_chars || !valid_ends {
        return Err(Error::SecretReference(format!(
            "StorageClass parameter {key} resolves to {value:?}, which is not a valid {}",
            if label {
                "namespace name"
            } else {
                "Secret name"
            }
        )));
    }
    Ok(())
}

/// A Secret's data as strings. `Debug` prints the keys only.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretData(pub BTreeMap<String, String>);

impl fmt::Debug for SecretData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.keys().map(|k| (k, "[redacted]")))
            .finish()
    }
}

impl SecretData {
    /// The map, to hand to a CSI request.
    pub fn into_map(self) -> std::collections::HashMap<String, String> {
        self.0.into_iter().collect()
    }
}

impl SecretRef {
    /// The reference a PV's `spec.csi.*SecretRef` holds (a missing namespace is `default`,
    /// as upstream reads it).
    pub fn from_pv(reference: &SecretReference) -> SecretRef {
        SecretRef {
            name: reference.name.clone().unwrap_or_default(),
            namespace: reference
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
        }
    }
}

/// The secrets of a CSI request: the data of the Secret `reference` names, or none without
/// a reference.
pub async fn request_secrets(
    client: &Client,
    reference: Option<&SecretRef>,
) -> Result<std::collections::HashMap<String, String>> {
    match reference {
        Some(reference) => Ok(read_secret(client, reference).await?.into_map()),
        None => Ok(Default::default()),
    }
}

/// The secrets of a CSI request from a PV's `spec.csi.*SecretRef` (see
/// [`SecretRef::from_pv`]), none without one.
pub async fn pv_request_secrets(
    client: &Client,
    reference: Option<&SecretReference>,
) -> Result<std::collections::HashMap<String, String>> {
    let reference = reference.map(SecretRef::from_pv);
    request_secrets(client, reference.as_ref()).await
}

/// Reads the Secret `reference` points to: `data` (decoded as UTF-8) and `stringData`.
pub async fn read_secret(client: &Client, reference: &SecretRef) -> Result<SecretData> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &reference.namespace);
    let secret = secrets
        .get(&reference.name)
        .await
        .map_err(|source| Error::Kube {
            what: format!("reading Secret {}/{}", reference.namespace, reference.name),
            source,
        })?;
    let mut data = BTreeMap::new();
    for (key, bytes) in secret.data.unwrap_or_default() {
        let value = String::from_utf8(bytes.0).map_err(|_| {
            Error::SecretReference(format!(
                "Secret {}/{} key {key:?} is not UTF-8 text",
                reference.namespace, reference.name
            ))
        })?;
        data.insert(key, value);
    }
    data.extend(secret.string_data.unwrap_or_default());
    Ok(SecretData(data))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use rstest::rstest;

    fn params(name: &str, namespace: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            (
                "csi.storage.k8s.io/provisioner-secret-name".to_string(),
                name.to_string(),
            ),
            (
                "csi.storage.k8s.io/provisioner-secret-namespace".to_string(),
                namespace.to_string(),
            ),
        ])
    }

    fn annotations() -> BTreeMap<String, String> {
        BTreeMap::from([("team/secret".to_string(), "team-creds".to_string())])
    }

    #[rstest]
    #[case("fixed", "kube-system", "fixed", "kube-system")]
    #[case("${pvc.name}-creds", "${pvc.namespace}", "data-creds", "apps")]
    #[case("${pv.name}", "${pv.name}", "pvc-123", "pvc-123")]
    #[case(
        "${pvc.annotations['team/secret']}",
        "ns-${pvc.namespace}",
        "team-creds",
        "ns-apps"
    )]
    fn templates_expand(
        #[case] name: &str,
        #[case] namespace: &str,
        #[case] want_name: &str,
        #[case] want_ns: &str,
    ) {
        let annotations = annotations();
        let context = TemplateContext {
            pv_name: "pvc-123",
            pvc_name: Some("data"),
            pvc_namespace: Some("apps"),
            pvc_annotations: Some(&annotations),
        };
        let reference =
            secret_reference(SecretKind::Provisioner, &params(name, namespace), &context)
                .unwrap()
                .unwrap();
        assert_eq!(
            reference,
            SecretRef {
                name: want_name.into(),
                namespace: want_ns.into()
            }
        );
    }

    #[rstest]
    #[case("x", "${pvc.name}", "unknown template ${pvc.name}")]
    #[case("${node.name}", "ns", "unknown template ${node.name}")]
    #[case("${pvc.annotations['absent']}", "ns", "no annotation \"absent\"")]
    #[case("${pvc.name", "ns", "unterminated")]
    #[case("UPPER", "ns", "not a valid Secret name")]
    fn bad_templates_name_the_parameter(
        #[case] name: &str,
        #[case] namespace: &str,
        #[case] expected: &str,
    ) {
        let annotations = annotations();
        let context = TemplateContext {
            pv_name: "pvc-1",
            pvc_name: Some("data"),
            pvc_namespace: Some("apps"),
            pvc_annotations: Some(&annotations),
        };
        let error = secret_reference(SecretKind::Provisioner, &params(name, namespace), &context)
            .unwrap_err()
            .to_string();
        assert!(error.contains(expected), "{error}");
        assert!(
            error.contains("csi.storage.k8s.io/provisioner-secret-"),
            "{error}"
        );
    }

    #[test]
    fn claim_templates_fail_without_a_claim() {
        let context = TemplateContext {
            pv_name: "pvc-1",
            ..Default::default()
        };
        let error = secret_reference(
            SecretKind::Provisioner,
            &params("${pvc.name}", "ns"),
            &context,
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("claim's name"), "{error}");
    }

    #[test]
    fn half_a_reference_is_refused_and_none_is_none() {
        let context = TemplateContext {
            pv_name: "pvc-1",
            ..Default::default()
        };
        let only_name = BTreeMap::from([(SecretKind::NodeStage.name_key(), "s".to_string())]);
        let error = secret_reference(SecretKind::NodeStage, &only_name, &context)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("node-stage-secret-namespace is not"),
            "{error}"
        );
        assert_eq!(
            secret_reference(SecretKind::NodePublish, &only_name, &context).unwrap(),
            None
        );
    }

    #[test]
    fn pv_secret_references_default_to_the_default_namespace() {
        let reference = SecretReference {
            name: Some("creds".into()),
            namespace: None,
        };
        assert_eq!(
            SecretRef::from_pv(&reference),
            SecretRef {
                name: "creds".into(),
                namespace: "default".into()
            }
        );
    }

    #[test]
    fn secret_data_debug_hides_values() {
        let data = SecretData(BTreeMap::from([(
            "os-password".to_string(),
            "hunter2".to_string(),
        )]));
        let printed = format!("{data:?}");
        assert!(
            printed.contains("os-password") && !printed.contains("hunter2"),
            "{printed}"
        );
    }
}
