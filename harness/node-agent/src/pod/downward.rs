//! The downward API: pod fields (`fieldRef`) and container resources (`resourceFieldRef`) as
//! strings, shared by environment variables and downwardAPI volumes.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{ObjectFieldSelector, Pod, ResourceFieldSelector};

use crate::config::Capacity;

/// What a field reference may need besides the pod: the node's address (hostIP = podIP).
#[derive(Debug, Clone, Copy)]
pub struct NodeFacts<'a> {
    /// The node address.
    pub node_ip: IpAddr,
    /// The node capacity (the default for unset limits).
    pub capacity: &'a Capacity,
}

/// The value of a `fieldRef`; `Err` names an unsupported or malformed path.
pub fn field_value(
    pod: &Pod,
    node: NodeFacts<'_>,
    field: &ObjectFieldSelector,
) -> Result<String, String> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let path = field.field_path.as_str();
    let map_entry = |map: Option<&BTreeMap<String, String>>, prefix: &str| {
        let key = path
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix("['").or_else(|| rest.strip_prefix("[\"")))
            .and_then(|rest| rest.strip_suffix("']").or_else(|| rest.strip_suffix("\"]")));
        key.map(|k| map.and_then(|m| m.get(k)).cloned().unwrap_or_default())
    };
    Ok(match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "metadata.labels" => format_map(meta.labels.as_ref()),
        "metadata.annotations" => format_map(meta.annotations.as_ref()),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.hostIP" | "status.podIP" | "status.podIPs" | "status.hostIPs" => {
            node.node_ip.to_string()
        }
        _ => {
            if let Some(v) = map_entry(meta.labels.as_ref(), "metadata.labels") {
                v
            } else if let Some(v) = map_entry(meta.annotations.as_ref(), "metadata.annotations") {
                v
            } else {
                return Err(format!("unsupported fieldRef path {path:?}"));
            }
        }
    })
}

/// `key="value"` lines, sorted by key, as kubelet writes labels and annotations.
fn format_map(map: Option<&BTreeMap<String, String>>) -> String {
    map.map(|m| {
        m.iter()
            .map(|(k, v)| format!("{k}={v:?}"))
            .collect::<Vec<_>>()
            .join("\n")
    })
    .unwrap_or_default()
}

/// The value of a `resourceFieldRef` for `container` (or the selector's container).
pub fn resource_value(
    pod: &Pod,
    node: NodeFacts<'_>,
    default_container: Option<&str>,
    selector: &ResourceFieldSelector,
) -> Result<String, String> {
    let name = selector.container_name.as_deref().or(default_container);
    let container = crate::pod_containers(pod)
        .find(|c| Some(c.name.as_str()) == name)
        .ok_or_else(|| format!("resourceFieldRef names no container of the pod ({name:?})"))?;
    let resources = container.resources.as_ref();
    let (kind, resource) = selector
        .resource
        .split_once('.')
        .ok_or_else(|| format!("unsupported resource {:?}", selector.resource))?;
    let set = match kind {
        "limits" => resources.and_then(|r| r.limits.as_ref()),
        "requests" => resources.and_then(|r| r.requests.as_ref()),
        _ => return Err(format!("unsupported resource {:?}", selector.resource)),
    };
    let value = match set.and_then(|s| s.get(resource)) {
        Some(q) => parse_quantity(&q.0)?,
        // Unset limits default to the node's allocatable; unset requests to 0 (cpu/memory).
        None if kind == "limits" => match resource {
            "cpu" => parse_quantity(&node.capacity.cpu)?,
            "memory" => parse_quantity(&node.capacity.memory)?,
            "ephemeral-storage" => parse_quantity(&node.capacity.ephemeral_storage)?,
            _ => return Err(format!("unsupported resource {:?}", selector.resource)),
        },
        None => 0.0,
    };
    let divisor = match &selector.divisor {
        Some(d) => parse_quantity(&d.0)?,
        None => 1.0,
    };
    if divisor <= 0.0 {
        return Err("resourceFieldRef divisor must be positive".into());
    }
    Ok(format!("{}", (value / divisor).ceil() as i64))
}

/// A Kubernetes quantity (`500m`, `2`, `1Gi`, `1e3`) as a number, fractions kept: CPU
/// (`500m` is 0.5) and divisors (`1m`) need them. Byte counts (a PV's capacity) are
/// `kube_support::quantity::parse_bytes`, which rounds up to whole bytes.
pub fn parse_quantity(text: &str) -> Result<f64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("invalid quantity {text:?}"))?;
    let factor = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        s if s.starts_with(['e', 'E']) => {
            let exp: i32 = s[1..]
                .parse()
                .map_err(|_| format!("invalid quantity {text:?}"))?;
            10f64.powi(exp)
        }
        _ => return Err(format!("invalid quantity {text:?}")),
    };
    Ok(number * factor)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("500m").unwrap(), 0.5);
        assert_eq!(
            parse_quantity("2Gi").unwrap(),
            2.0 * 1024.0 * 1024.0 * 1024.0
        );
        assert_eq!(parse_quantity("1e3").unwrap(), 1000.0);
        assert!(parse_quantity("lots").is_err());
    }

    #[test]
    fn labels_are_formatted_sorted_and_quoted() {
        let map = BTreeMap::from([
            ("b".to_string(), "2".to_string()),
            ("a".to_string(), "x y".to_string()),
        ]);
        assert_eq!(format_map(Some(&map)), "a=\"x y\"\nb=\"2\"");
    }
}
