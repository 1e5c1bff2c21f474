//! The user's INI cloud configuration (the `config` key of the `cloud-provider-config`
//! ConfigMap, as OpenShift's installer writes it for the in-tree Cinder plugin and the
//! cloud provider), read into sections and filtered for the driver:
//!
//! - `[Global] secret-name`, `secret-namespace`, `kubeconfig-path` (the in-tree plugin's way
//!   to credentials) are **refused**, naming the key: the operator takes credentials from
//!   clouds.yaml, and silently dropping them would hide that the user's setting is ignored;
//! - `[Global]` credential keys (`auth-url`, `username`, `password`, …) are refused too:
//!   credentials belong in the credentials Secret, never in a ConfigMap;
//! - `[Global] use-clouds`, `clouds-file`, `cloud` (upstream's clouds.yaml mode) and
//!   `ca-file` (a path on another machine) are dropped: the operator writes the credentials
//!   and the CA path itself;
//! - `[BlockStorage] trust-device-path` (removed from the driver upstream) is dropped;
//! - everything else is kept, section by section, the last of repeated keys winning as in
//!   the driver.
//!
//! Section and key names are case-insensitive, as the driver reads them.

use ini::{Ini, ParseOption};

/// Keys of `[Global]` that name where the in-tree plugin found its credentials.
pub const LEGACY_GLOBAL_KEYS: &[&str] = &["secret-name", "secret-namespace", "kubeconfig-path"];

/// Keys of `[Global]` that carry credentials or say whom they authenticate.
pub const CREDENTIAL_GLOBAL_KEYS: &[&str] = &[
    "auth-url",
    "username",
    "user-id",
    "password",
    "tenant-name",
    "project-name",
    "tenant-id",
    "project-id",
    "domain-name",
    "domain-id",
    "user-domain-name",
    "user-domain-id",
    "tenant-domain-name",
    "project-domain-name",
    "tenant-domain-id",
    "project-domain-id",
    "application-credential-id",
    "application-credential-name",
    "application-credential-secret",
    "trust-id",
];

/// Keys of `[Global]` the operator writes itself, so the user's are dropped.
pub const REPLACED_GLOBAL_KEYS: &[&str] = &["use-clouds", "clouds-file", "cloud", "ca-file"];

/// Keys of `[BlockStorage]` the driver no longer reads, dropped.
pub const DROPPED_BLOCK_STORAGE_KEYS: &[&str] = &["trust-device-path"];

/// Why the user's configuration cannot be used (the caller adds the ConfigMap and key).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UserConfigError {
    /// Not an INI file.
    #[error("not an INI file: {0}")]
    NotIni(String),
    /// A legacy key of `[Global]`.
    #[error(
        "[Global] {0} is a legacy key of the in-tree Cinder plugin, which this operator does not read; remove it (the credentials come from the credentials Secret's clouds.yaml)"
    )]
    LegacyKey(String),
    /// A credential in `[Global]`.
    #[error(
        "[Global] {0} is a credential, and credentials belong in the credentials Secret's clouds.yaml, never in a ConfigMap; remove it"
    )]
    CredentialKey(String),
    /// A key outside any section.
    #[error("{0} is outside any section; put it under [Global], [BlockStorage] or [Metadata]")]
    NoSection(String),
}

/// One section: its name as the driver knows it (`Global`, `BlockStorage`, `Metadata`) or as
/// written, and its keys, lowercased, in first-seen order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Section {
    /// The section's name.
    pub name: String,
    /// `(key, value)`, keys lowercased and unique.
    pub entries: Vec<(String, String)>,
}

impl Section {
    /// A section without keys.
    pub fn named(name: impl Into<String>) -> Self {
        Section {
            name: name.into(),
            entries: Vec::new(),
        }
    }

    /// The value of `key` (lowercase).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Sets `key` (lowercase), replacing an earlier value in place.
    pub fn set(&mut self, key: &str, value: impl Into<String>) {
        let value = value.into();
        match self.entries.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value,
            None => self.entries.push((key.to_owned(), value)),
        }
    }

    /// Removes `key` (lowercase).
    pub fn remove(&mut self, key: &str) {
        self.entries.retain(|(k, _)| k != key);
    }
}

/// The name the driver gives a section (case-insensitive match), or `name` as written.
fn canonical(name: &str) -> String {
    match name.trim().to_ascii_lowercase().as_str() {
        "global" => "Global".into(),
        "blockstorage" => "BlockStorage".into(),
        "metadata" => "Metadata".into(),
        _ => name.trim().to_owned(),
    }
}

/// Reads `text` into its sections (in first-seen order, names as [`canonical`] gives them)
/// and filters it as the module documentation says.
pub fn read(text: &str) -> Result<Vec<Section>, UserConfigError> {
    let ini = Ini::load_from_str_opt(text, ParseOption::default())
        .map_err(|e| UserConfigError::NotIni(e.to_string()))?;
    let mut sections: Vec<Section> = Vec::new();
    for (name, properties) in ini.iter() {
        let Some(name) = name else {
            if let Some((key, _)) = properties.iter().next() {
                return Err(UserConfigError::NoSection(key.trim().to_owned()));
            }
            continue;
        };
        let name = canonical(name);
        let index = match sections.iter().position(|s| s.name == name) {
            Some(i) => i,
            None => {
                sections.push(Section::named(name.clone()));
                sections.len() - 1
            }
        };
        for (key, value) in properties.iter() {
            let key = key.trim().to_ascii_lowercase();
            let keep = match name.as_str() {
                "Global" => {
                    if LEGACY_GLOBAL_KEYS.contains(&key.as_str()) {
                        return Err(UserConfigError::LegacyKey(key));
                    }
                    if CREDENTIAL_GLOBAL_KEYS.contains(&key.as_str()) {
                        return Err(UserConfigError::CredentialKey(key));
                    }
                    !REPLACED_GLOBAL_KEYS.contains(&key.as_str())
                }
                "BlockStorage" => !DROPPED_BLOCK_STORAGE_KEYS.contains(&key.as_str()),
                _ => true,
            };
            if keep {
                sections[index].set(&key, value.trim());
            }
        }
    }
    Ok(sections)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case("secret-name")]
    #[case("secret-namespace")]
    #[case("kubeconfig-path")]
    fn legacy_global_keys_are_refused_by_name(#[case] key: &str) {
        let text = format!("[Global]\nregion = R1\n{key} = openstack-credentials\n");
        let err = read(&text).unwrap_err();
        assert_eq!(err, UserConfigError::LegacyKey(key.into()));
        assert!(
            err.to_string()
                .starts_with(&format!("[Global] {key} is a legacy key"))
        );
    }

    #[test]
    fn legacy_keys_are_found_in_any_case() {
        let err = read("[global]\nSecret-Name = x\n").unwrap_err();
        assert_eq!(err, UserConfigError::LegacyKey("secret-name".into()));
    }

    #[test]
    fn credentials_in_the_config_map_are_refused() {
        let err = read("[Global]\npassword = hunter2\n").unwrap_err();
        assert_eq!(err, UserConfigError::CredentialKey("password".into()));
        assert!(!err.to_string().contains("hunter2"));
    }

    #[test]
    fn replaced_and_dropped_keys_go_and_the_rest_stays() {
        let sections = read(
            "[Global]\nuse-clouds = true\nclouds-file = /etc/openstack/clouds.yaml\ncloud = openstack\nca-file = /etc/kubernetes/ca.pem\nregion = R1\n\
             [BlockStorage]\ntrust-device-path = false\nnode-volume-attach-limit = 25\n\
             [LoadBalancer]\nuse-octavia = true\n",
        )
        .unwrap();
        assert_eq!(
            sections,
            [
                Section {
                    name: "Global".into(),
                    entries: vec![("region".into(), "R1".into())],
                },
                Section {
                    name: "BlockStorage".into(),
                    entries: vec![("node-volume-attach-limit".into(), "25".into())],
                },
                Section {
                    name: "LoadBalancer".into(),
                    entries: vec![("use-octavia".into(), "true".into())],
                },
            ]
        );
    }

    #[test]
    fn section_names_merge_case_insensitively_and_the_last_key_wins() {
        let sections = read(
            "[blockstorage]\nIgnore-Volume-AZ = true\n[BLOCKSTORAGE]\nignore-volume-az = false\n",
        )
        .unwrap();
        assert_eq!(sections.len(), 1);
        assert_eq!(sections[0].name, "BlockStorage");
        assert_eq!(sections[0].get("ignore-volume-az"), Some("false"));
    }

    #[test]
    fn keys_outside_a_section_and_broken_files_are_refused() {
        assert_eq!(
            read("region = R1\n[Global]\n").unwrap_err(),
            UserConfigError::NoSection("region".into())
        );
        assert!(matches!(
            read("[Global\nregion = R1\n").unwrap_err(),
            UserConfigError::NotIni(_)
        ));
    }
}
