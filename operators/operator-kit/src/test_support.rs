//! For the operators' unit tests only (the `test-support` feature, a dev-dependency of
//! each): the rights an RBAC rule list grants, and the operator's own rights from its
//! `rbac.yaml`, to check them against what it renders and does. Panics on input that is
//! not what a test expects.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde::Deserialize;
use serde_json::Value;

/// One (apiGroup, resource, verb) a rule allows or needs.
pub type Right = (String, String, String);

/// Every right of `rules` (a Role's or ClusterRole's), one per group, resource and verb;
/// rules naming resources or non-resource URLs are refused (no operator uses them).
pub fn rights(rules: &Value) -> Vec<Right> {
    let mut out = Vec::new();
    for rule in rules.as_array().into_iter().flatten() {
        assert!(
            rule.get("resourceNames").is_none() && rule.get("nonResourceURLs").is_none(),
            "{rule}"
        );
        let list = |key: &str| -> Vec<String> {
            rule[key]
                .as_array()
                .unwrap_or_else(|| panic!("{key} of {rule}"))
                .iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect()
        };
        for group in list("apiGroups") {
            for resource in list("resources") {
                for verb in list("verbs") {
                    out.push((group.clone(), resource.clone(), verb));
                }
            }
        }
    }
    out
}

/// Whether `held` allows `right` (`*` matches any group, resource or verb).
pub fn allows(held: &[Right], (group, resource, verb): &Right) -> bool {
    held.iter().any(|(g, r, v)| {
        (g == group || g == "*") && (r == resource || r == "*") && (v == verb || v == "*")
    })
}

/// The rights of `needed` that `held` does not allow, as `verb group/resource`.
pub fn missing(held: &[Right], needed: &[Right]) -> Vec<String> {
    needed
        .iter()
        .filter(|right| !allows(held, right))
        .map(|(g, r, v)| format!("{v} {g}/{r}"))
        .collect()
}

/// `verbs` on `group`/`resource`.
pub fn needs(group: &str, resource: &str, verbs: &[&str]) -> Vec<Right> {
    verbs
        .iter()
        .map(|v| (group.to_string(), resource.to_string(), v.to_string()))
        .collect()
}

/// The operator's own rights: its one ClusterRole's and its one Role's (in its namespace).
#[derive(Clone, Debug)]
pub struct OperatorRights {
    /// The ClusterRole's.
    pub cluster: Vec<Right>,
    /// The Role's.
    pub role: Vec<Right>,
}

impl OperatorRights {
    /// From the operator's `rbac.yaml` (`${NAMESPACE}`, its only placeholder, as `namespace`).
    pub fn parse(rbac_yaml: &str, namespace: &str) -> Self {
        let text = rbac_yaml.replace("${NAMESPACE}", namespace);
        assert!(!text.contains("${"), "only ${{NAMESPACE}} in rbac.yaml");
        let mut cluster = None;
        let mut role = None;
        for document in serde_yaml::Deserializer::from_str(&text) {
            let value =
                serde_json::to_value(serde_yaml::Value::deserialize(document).unwrap()).unwrap();
            match value["kind"].as_str().unwrap() {
                "ClusterRole" => cluster = Some(rights(&value["rules"])),
                "Role" => role = Some(rights(&value["rules"])),
                _ => {}
            }
        }
        OperatorRights {
            cluster: cluster.expect("a ClusterRole in rbac.yaml"),
            role: role.expect("a Role in rbac.yaml"),
        }
    }

    /// What it holds in its namespace: the ClusterRole's rights and the Role's.
    pub fn in_namespace(&self) -> Vec<Right> {
        self.cluster.iter().chain(&self.role).cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RBAC: &str = "\
kind: ClusterRole
rules:
  - apiGroups: [\"\"]
    resources: [persistentvolumes]
    verbs: [list]
---
kind: Role
metadata: {namespace: \"${NAMESPACE}\"}
rules:
  - apiGroups: [\"\", apps]
    resources: [\"*\"]
    verbs: [get, delete]
";

    #[test]
    fn rights_expand_rules_and_wildcards_allow_any() {
        let held = OperatorRights::parse(RBAC, "ns");
        assert_eq!(held.cluster, needs("", "persistentvolumes", &["list"]));
        assert_eq!(held.role.len(), 4);
        let local = held.in_namespace();
        assert!(missing(&local, &needs("apps", "deployments", &["get", "delete"])).is_empty());
        assert_eq!(
            missing(&local, &needs("apps", "deployments", &["patch"])),
            ["patch apps/deployments"]
        );
        assert_eq!(
            missing(&held.cluster, &needs("apps", "deployments", &["get"])),
            ["get apps/deployments"],
            "a Role's rights are not cluster-wide"
        );
    }
}
