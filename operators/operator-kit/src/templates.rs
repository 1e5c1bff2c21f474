//! Rendering an operator's embedded manifests: `${NAME}` placeholders filled from a table of
//! values, every object labelled with the operator's `managed-by` label, the namespace set on
//! namespaced kinds (and removed from cluster-scoped ones), and the result checked to be an
//! object the [`crate::apply::Applier`] can send. Which templates exist, which values they
//! take and any driver-specific touch are each operator's (its `assets` module).
//!
//! Also the hash of a Secret's data ([`data_hash`]) that operators put on their pod templates
//! as an annotation, so that changed credentials or a changed CA restart the driver.

use std::collections::BTreeMap;
use std::hash::Hasher;

use kube::api::DynamicObject;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::MANAGED_BY_LABEL;
use crate::identity::OperatorIdentity;
use crate::kinds::api_resource;

/// A manifest could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// A template names a placeholder the operator has no value for.
    #[error("asset {asset}: unknown placeholder ${{{name}}}")]
    UnknownPlaceholder {
        /// The template's file name.
        asset: &'static str,
        /// The placeholder.
        name: String,
    },
    /// A template is not valid YAML for a Kubernetes object.
    #[error("asset {asset}: {reason}")]
    Invalid {
        /// The template's file name.
        asset: &'static str,
        /// What is wrong.
        reason: String,
    },
}

/// Where rendered objects go and whose they are.
#[derive(Clone, Copy, Debug)]
pub struct Placement<'a> {
    /// The operator whose `managed-by` label every object gets.
    pub identity: &'a OperatorIdentity,
    /// The namespace of the namespaced objects.
    pub namespace: &'a str,
}

/// The objects of one template file (`asset`, named in errors): placeholders replaced from
/// `vars`, each YAML document labelled and placed ([`Placement`]), then handed to `adjust`
/// (the operator's own touches, as JSON) before it becomes an object. Empty documents are
/// skipped; an object of a kind the applier does not know, or without `apiVersion`, `kind`
/// or `metadata.name`, is an error.
pub fn render(
    asset: &'static str,
    template: &str,
    vars: &BTreeMap<&'static str, String>,
    placement: Placement<'_>,
    mut adjust: impl FnMut(&mut Value),
) -> Result<Vec<DynamicObject>, TemplateError> {
    let invalid = |reason: String| TemplateError::Invalid { asset, reason };
    let text = substitute(asset, template, vars)?;
    let mut objects = Vec::new();
    for document in serde_yaml::Deserializer::from_str(&text) {
        let value = serde_yaml::Value::deserialize(document).map_err(|e| invalid(e.to_string()))?;
        if value.is_null() {
            continue;
        }
        let mut value: Value = serde_json::to_value(value).map_err(|e| invalid(e.to_string()))?;
        label(&mut value, placement.identity);
        place(&mut value, placement.namespace).map_err(invalid)?;
        adjust(&mut value);
        let object: DynamicObject =
            serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?;
        if object.types.is_none() || object.metadata.name.is_none() {
            return Err(invalid(
                "an object without apiVersion, kind or metadata.name".into(),
            ));
        }
        objects.push(object);
    }
    Ok(objects)
}

/// Replaces every `${NAME}` of `template`; `$(NAME)` (Kubernetes' own expansion) stays.
pub fn substitute(
    asset: &'static str,
    template: &str,
    vars: &BTreeMap<&'static str, String>,
) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(TemplateError::Invalid {
                asset,
                reason: "an unterminated ${ placeholder".into(),
            });
        };
        let name = &after[..end];
        let value = vars
            .get(name)
            .ok_or_else(|| TemplateError::UnknownPlaceholder {
                asset,
                name: name.to_string(),
            })?;
        out.push_str(value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Puts the operator's `managed-by` label on an object.
fn label(value: &mut Value, identity: &OperatorIdentity) {
    let metadata = &mut value["metadata"];
    if !metadata["labels"].is_object() {
        metadata["labels"] = json!({});
    }
    metadata["labels"][MANAGED_BY_LABEL] = json!(identity.managed_by);
}

/// Sets `metadata.namespace` to `namespace` on an object of a namespaced kind and removes it
/// from a cluster-scoped one; a kind the applier does not know is an error (it could not be
/// applied anyway).
fn place(value: &mut Value, namespace: &str) -> Result<(), String> {
    let api_version = value["apiVersion"].as_str().unwrap_or_default();
    let kind = value["kind"].as_str().unwrap_or_default();
    let Some((_, namespaced)) = api_resource(api_version, kind) else {
        return Err(format!(
            "kind {api_version}/{kind} is not one the operator applies"
        ));
    };
    let Some(metadata) = value["metadata"].as_object_mut() else {
        return Err("an object without metadata".into());
    };
    if namespaced {
        metadata.insert("namespace".into(), json!(namespace));
    } else {
        metadata.remove("namespace");
    }
    Ok(())
}

/// A short hash of `data` (a Secret's data, say), the same in every process and release
/// (SipHash with fixed zero keys, as `std::hash::SipHasher` defines it): the value of a
/// pod-template annotation, so that a change of the data restarts the pods.
pub fn data_hash(data: &BTreeMap<String, String>) -> String {
    #[allow(deprecated)] // SipHasher's output is specified; DefaultHasher's may change.
    let mut hasher = std::hash::SipHasher::new();
    for (key, value) in data {
        hasher.write(key.as_bytes());
        hasher.write_u8(0);
        hasher.write(value.as_bytes());
        hasher.write_u8(0);
    }
    format!("{:016x}", hasher.finish())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::identity::TEST_IDENTITY;

    const TEMPLATE: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${NAME}
  namespace: wrong
spec:
  replicas: 1
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: role
  namespace: dropped
  labels:
    app: x
---
";

    fn vars() -> BTreeMap<&'static str, String> {
        BTreeMap::from([("NAME", "controller".to_string())])
    }

    fn placement() -> Placement<'static> {
        Placement {
            identity: &TEST_IDENTITY,
            namespace: "example-ns",
        }
    }

    #[test]
    fn objects_are_labelled_for_the_operator_and_placed_as_their_kind_is() {
        let mut adjusted = Vec::new();
        let objects = render("t.yaml", TEMPLATE, &vars(), placement(), |value| {
            adjusted.push(value["kind"].as_str().unwrap().to_string())
        })
        .unwrap();
        assert_eq!(adjusted, ["Deployment", "ClusterRole"]);
        assert_eq!(objects.len(), 2);
        let deployment = &objects[0];
        assert_eq!(deployment.metadata.name.as_deref(), Some("controller"));
        assert_eq!(deployment.metadata.namespace.as_deref(), Some("example-ns"));
        let role = &objects[1];
        assert_eq!(role.metadata.namespace, None);
        for object in &objects {
            assert!(TEST_IDENTITY.is_managed(object.metadata.labels.as_ref()));
        }
        assert_eq!(
            role.metadata
                .labels
                .as_ref()
                .unwrap()
                .get("app")
                .map(String::as_str),
            Some("x"),
            "a template's own labels stay"
        );
    }

    #[test]
    fn unknown_kinds_and_nameless_objects_are_refused() {
        let pod = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n";
        assert_eq!(
            render("p.yaml", pod, &vars(), placement(), |_| {})
                .unwrap_err()
                .to_string(),
            "asset p.yaml: kind v1/Pod is not one the operator applies"
        );
        let nameless = "apiVersion: v1\nkind: ServiceAccount\nmetadata: {}\n";
        assert_eq!(
            render("s.yaml", nameless, &vars(), placement(), |_| {})
                .unwrap_err()
                .to_string(),
            "asset s.yaml: an object without apiVersion, kind or metadata.name"
        );
    }

    #[test]
    fn an_unknown_placeholder_names_asset_and_placeholder() {
        let error = substitute("x.yaml", "a: ${NOPE}", &BTreeMap::new()).unwrap_err();
        assert!(matches!(
            &error,
            TemplateError::UnknownPlaceholder { asset: "x.yaml", name } if name == "NOPE"
        ));
        assert_eq!(
            error.to_string(),
            "asset x.yaml: unknown placeholder ${NOPE}"
        );
        let unterminated = substitute("x.yaml", "a: ${NOPE", &BTreeMap::new()).unwrap_err();
        assert_eq!(
            unterminated.to_string(),
            "asset x.yaml: an unterminated ${ placeholder"
        );
        let kept = substitute("x.yaml", "a: $(NODE_ID)", &BTreeMap::new()).unwrap();
        assert_eq!(kept, "a: $(NODE_ID)");
    }

    #[test]
    fn the_hash_changes_with_any_value_and_is_stable() {
        let data = BTreeMap::from([("a".to_string(), "1".to_string())]);
        let mut other = data.clone();
        other.insert("a".into(), "2".into());
        assert_eq!(data_hash(&data), data_hash(&data.clone()));
        assert_ne!(data_hash(&data), data_hash(&other));
        assert_eq!(data_hash(&data).len(), 16);
        // Pinned: the same data must hash the same in every release (else an upgrade would
        // restart the driver's pods for nothing).
        let fixed = BTreeMap::from([("os-authURL".to_string(), "http://k/v3".to_string())]);
        assert_eq!(data_hash(&fixed), "0a9b3c515b857a1f");
    }
}
