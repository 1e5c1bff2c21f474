//! A container's environment as kubelet builds it: the node's own variables
//! ([`NodeAgentConfig::pod_env`], a stand-in for per-machine services), the `kubernetes` service variables, then
//! `envFrom`, then `env` (values with `$(VAR)` expansion, ConfigMap/Secret keys, downward API
//! fields and resources); and `$(VAR)` expansion of command and args.

use k8s_openapi::api::core::v1::{Container, Pod};

use super::downward::{NodeFacts, field_value, resource_value};
use super::sources::Sources;
use crate::config::NodeAgentConfig;
use crate::error::{Error, Result};

/// The environment of `container`, in definition order (a later definition replaces an earlier
/// one in place).
pub async fn build(
    config: &NodeAgentConfig,
    sources: &mut Sources,
    pod: &Pod,
    container: &Container,
) -> Result<Vec<(String, String)>> {
    let node = NodeFacts {
        node_ip: config.node_ip,
        capacity: &config.capacity,
    };
    let fail = |reason: String| Error::container(&container.name, reason);
    let mut env = Env::default();
    // The node's own variables first (see `NodeAgentConfig::pod_env`): the container's
    // definitions replace them.
    for (k, v) in &config.pod_env {
        env.set(k.clone(), v.clone());
    }
    // Of the service variables, only the `kubernetes` service's: no other service has an
    // address pods can reach.
    for (k, v) in service_env(
        &config.api_server_service_host,
        config.api_server_service_port,
    ) {
        env.set(k, v);
    }

    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let data = if let Some(cm) = &from.config_map_ref {
            match sources.config_map(&cm.name).await? {
                Some(data) => data,
                None if cm.optional == Some(true) => continue,
                None => return Err(fail(format!("configmap {:?} not found", cm.name))),
            }
        } else if let Some(secret) = &from.secret_ref {
            match sources.secret(&secret.name).await? {
                Some(data) => data,
                None if secret.optional == Some(true) => continue,
                None => return Err(fail(format!("secret {:?} not found", secret.name))),
            }
        } else {
            continue;
        };
        for (key, value) in data {
            let name = format!("{prefix}{key}");
            // kubelet skips keys that are not valid variable names (and says so in an event).
            if is_env_name(&name) {
                env.set(name, String::from_utf8_lossy(&value).into_owned());
            }
        }
    }

    for var in container.env.iter().flatten() {
        let value = match &var.value_from {
            None => expand(var.value.as_deref().unwrap_or(""), |k| env.get(k)),
            Some(from) => {
                if let Some(field) = &from.field_ref {
                    field_value(pod, node, field).map_err(&fail)?
                } else if let Some(resource) = &from.resource_field_ref {
                    resource_value(pod, node, Some(&container.name), resource).map_err(&fail)?
                } else if let Some(sel) = &from.config_map_key_ref {
                    let optional = sel.optional == Some(true);
                    match sources.config_map(&sel.name).await? {
                        Some(data) => match data.get(&sel.key) {
                            Some(v) => String::from_utf8_lossy(v).into_owned(),
                            None if optional => continue,
                            None => {
                                return Err(fail(format!(
                                    "couldn't find key {} in ConfigMap {}",
                                    sel.key, sel.name
                                )));
                            }
                        },
                        None if optional => continue,
                        None => return Err(fail(format!("configmap {:?} not found", sel.name))),
                    }
                } else if let Some(sel) = &from.secret_key_ref {
                    let optional = sel.optional == Some(true);
                    match sources.secret(&sel.name).await? {
                        Some(data) => match data.get(&sel.key) {
                            Some(v) => String::from_utf8_lossy(v).into_owned(),
                            None if optional => continue,
                            None => {
                                return Err(fail(format!(
                                    "couldn't find key {} in Secret {}",
                                    sel.key, sel.name
                                )));
                            }
                        },
                        None if optional => continue,
                        None => return Err(fail(format!("secret {:?} not found", sel.name))),
                    }
                } else {
                    String::new()
                }
            }
        };
        env.set(var.name.clone(), value);
    }
    Ok(env.0)
}

/// The variables of the `kubernetes` service, pointing at the real API server.
pub fn service_env(host: &str, port: u16) -> Vec<(String, String)> {
    let url = format!("tcp://{host}:{port}");
    let prefix = format!("KUBERNETES_PORT_{port}_TCP");
    vec![
        ("KUBERNETES_SERVICE_HOST".into(), host.into()),
        ("KUBERNETES_SERVICE_PORT".into(), port.to_string()),
        ("KUBERNETES_SERVICE_PORT_HTTPS".into(), port.to_string()),
        ("KUBERNETES_PORT".into(), url.clone()),
        (prefix.clone(), url),
        (format!("{prefix}_PROTO"), "tcp".into()),
        (format!("{prefix}_PORT"), port.to_string()),
        (format!("{prefix}_ADDR"), host.into()),
    ]
}

#[derive(Default)]
struct Env(Vec<(String, String)>);

impl Env {
    fn set(&mut self, key: String, value: String) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }
    fn get(&self, key: &str) -> Option<String> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    }
}

/// Whether `name` is a valid environment variable name for Kubernetes (C identifier-like,
/// dots and dashes allowed).
fn is_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

/// Kubernetes' `$(VAR)` expansion: defined references are replaced, `$$` is an escaped `$`,
/// anything else is left as written.
pub fn expand(input: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(inner) = after.strip_prefix('(') {
            match inner.find(')') {
                Some(end) => {
                    let name = &inner[..end];
                    match lookup(name) {
                        Some(value) => out.push_str(&value),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &inner[end + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = inner;
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(k: &str) -> Option<String> {
        (k == "A").then(|| "1".to_string())
    }

    #[test]
    fn expansion_follows_kubernetes_rules() {
        assert_eq!(expand("x$(A)y", lookup), "x1y");
        assert_eq!(expand("$(B)", lookup), "$(B)");
        assert_eq!(expand("$$(A)", lookup), "$(A)");
        assert_eq!(expand("cost $5 $(A", lookup), "cost $5 $(A");
    }

    #[test]
    fn env_names() {
        assert!(is_env_name("MY_VAR.x-1"));
        assert!(!is_env_name("1ABC"));
        assert!(!is_env_name("a b"));
    }
}
