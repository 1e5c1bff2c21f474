//! The cloud configuration file(s) given with `--cloud-config`: upstream's INI format
//! (`[Global]` credentials, `[BlockStorage]` options, `[Metadata]` search order).
//!
//! Section and key names are case-insensitive, as in upstream's parser; values may be
//! double-quoted, with `\"` and `\\` escapes, and blanks inside the quotes are kept (as
//! upstream's gcfg keeps them); unquoted values lose their leading and trailing blanks. With several files a later file's key overrides the earlier one's. Errors
//! name the file, section and key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A secret read from the file: printed as `[redacted]`.
pub use openstack_client::Secret;

use crate::error::{Error, Result};

/// `[Global]`: how to authenticate with Keystone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Global {
    /// Keystone v3 URL (`auth-url`), required.
    pub auth_url: String,
    /// `username`.
    pub username: Option<String>,
    /// `user-id`.
    pub user_id: Option<String>,
    /// `password`.
    pub password: Option<Secret>,
    /// `tenant-name` (alias `project-name`).
    pub project_name: Option<String>,
    /// `tenant-id` (alias `project-id`).
    pub project_id: Option<String>,
    /// `domain-name`: the project's and (unless given) the user's domain.
    pub domain_name: Option<String>,
    /// `domain-id`.
    pub domain_id: Option<String>,
    /// `user-domain-name`.
    pub user_domain_name: Option<String>,
    /// `user-domain-id`.
    pub user_domain_id: Option<String>,
    /// `tenant-domain-name` / `project-domain-name`.
    pub project_domain_name: Option<String>,
    /// `tenant-domain-id` / `project-domain-id`.
    pub project_domain_id: Option<String>,
    /// `region`.
    pub region: Option<String>,
    /// `application-credential-id`.
    pub application_credential_id: Option<String>,
    /// `application-credential-name`.
    pub application_credential_name: Option<String>,
    /// `application-credential-secret`.
    pub application_credential_secret: Option<Secret>,
    /// `ca-file`: extra CA certificate(s) for the cloud's TLS.
    pub ca_file: Option<PathBuf>,
    /// `tls-insecure`: skip TLS verification.
    pub tls_insecure: bool,
    /// `interface` / `endpoint-type`: which catalog interface to use (default `public`).
    pub interface: String,
}

/// `[BlockStorage]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockStorage {
    /// `node-volume-attach-limit`: NodeGetInfo's `max_volumes_per_node` (default 256).
    pub node_volume_attach_limit: i64,
    /// `rescan-on-resize`: rescan the device before growing the file system.
    pub rescan_on_resize: bool,
    /// `ignore-volume-az`: do not report the volume's zone as its topology.
    pub ignore_volume_az: bool,
}

impl Default for BlockStorage {
    fn default() -> Self {
        BlockStorage {
            node_volume_attach_limit: 256,
            rescan_on_resize: false,
            ignore_volume_az: false,
        }
    }
}

/// Where the node service reads the instance metadata from, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetadataSource {
    /// The config drive (`configDrive`; not supported by this driver: reported as such).
    ConfigDrive,
    /// The metadata service (`metadataService`).
    MetadataService,
}

/// The whole configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloudConfig {
    /// `[Global]`.
    pub global: Global,
    /// `[BlockStorage]`.
    pub block_storage: BlockStorage,
    /// `[Metadata] search-order` (default `configDrive,metadataService`).
    pub search_order: Vec<MetadataSource>,
}

/// Merged `section.key` → (value, file it came from).
type Entries = BTreeMap<(String, String), (String, PathBuf)>;

impl CloudConfig {
    /// Reads and merges `files` in order.
    pub fn load(files: &[PathBuf]) -> Result<Self> {
        let mut texts = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(file).map_err(|e| Error::Config {
                file: file.display().to_string(),
                reason: format!("cannot read it: {e}"),
            })?;
            texts.push((file.clone(), text));
        }
        Self::parse(&texts)
    }

    /// Parses file contents given as (name, text), in order.
    pub fn parse(files: &[(PathBuf, String)]) -> Result<Self> {
        let mut entries = Entries::new();
        for (file, text) in files {
            let ini = ini::Ini::load_from_str(text).map_err(|e| Error::Config {
                file: file.display().to_string(),
                reason: format!("not an INI file: {e}"),
            })?;
            for (section, properties) in ini.iter() {
                let section = section.unwrap_or("").to_ascii_lowercase();
                for (key, value) in properties.iter() {
                    entries.insert(
                        (section.clone(), key.trim().to_ascii_lowercase()),
                        // rust-ini has already removed the quotes and escapes.
                        (value.to_string(), file.clone()),
                    );
                }
            }
        }
        let reader = Reader { entries: &entries };
        let all_files = files
            .iter()
            .map(|(f, _)| f.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let global = Global {
            auth_url: reader
                .string("global", &["auth-url"])
                .ok_or_else(|| Error::Config {
                    file: all_files.clone(),
                    reason: "[Global] auth-url is missing".into(),
                })?,
            username: reader.string("global", &["username"]),
            user_id: reader.string("global", &["user-id"]),
            password: reader.string("global", &["password"]).map(Secret::new),
            project_name: reader.string("global", &["tenant-name", "project-name"]),
            project_id: reader.string("global", &["tenant-id", "project-id"]),
            domain_name: reader.string("global", &["domain-name"]),
            domain_id: reader.string("global", &["domain-id"]),
            user_domain_name: reader.string("global", &["user-domain-name"]),
            user_domain_id: reader.string("global", &["user-domain-id"]),
            project_domain_name: reader
                .string("global", &["tenant-domain-name", "project-domain-name"]),
            project_domain_id: reader.string("global", &["tenant-domain-id", "project-domain-id"]),
            region: reader.string("global", &["region"]),
            application_credential_id: reader.string("global", &["application-credential-id"]),
            application_credential_name: reader.string("global", &["application-credential-name"]),
            application_credential_secret: reader
                .string("global", &["application-credential-secret"])
                .map(Secret::new),
            ca_file: reader.string("global", &["ca-file"]).map(PathBuf::from),
            tls_insecure: reader.boolean("global", "tls-insecure")?.unwrap_or(false),
            interface: reader
                .string("global", &["interface", "endpoint-type"])
                .unwrap_or_else(|| "public".into()),
        };
        let has_password =
            global.password.is_some() && (global.username.is_some() || global.user_id.is_some());
        let has_app_credential = global.application_credential_secret.is_some()
            && (global.application_credential_id.is_some()
                || global.application_credential_name.is_some());
        if !has_password && !has_app_credential {
            return Err(Error::Config {
                file: all_files,
                reason: "[Global] has no credentials: give username (or user-id) and password, \
                         or application-credential-id (or -name) and application-credential-secret"
                    .into(),
            });
        }
        let limit = reader.integer("blockstorage", "node-volume-attach-limit")?;
        if let Some((value, file)) = limit.as_ref().filter(|(v, _)| *v < 1 || *v > 10_000) {
            return Err(Error::Config {
                file: file.display().to_string(),
                reason: format!(
                    "[BlockStorage] node-volume-attach-limit = {value}: must be between 1 and 10000"
                ),
            });
        }
        let block_storage = BlockStorage {
            node_volume_attach_limit: limit.map(|(v, _)| v).unwrap_or(256),
            rescan_on_resize: reader
                .boolean("blockstorage", "rescan-on-resize")?
                .unwrap_or(false),
            ignore_volume_az: reader
                .boolean("blockstorage", "ignore-volume-az")?
                .unwrap_or(false),
        };
        let search_order = match entries.get(&("metadata".into(), "search-order".into())) {
            None => vec![MetadataSource::ConfigDrive, MetadataSource::MetadataService],
            Some((value, file)) => parse_search_order(value).map_err(|reason| Error::Config {
                file: file.display().to_string(),
                reason,
            })?,
        };
        Ok(CloudConfig {
            global,
            block_storage,
            search_order,
        })
    }
}

fn parse_search_order(value: &str) -> std::result::Result<Vec<MetadataSource>, String> {
    let mut order = Vec::new();
    for item in value.split(',').map(str::trim) {
        match item {
            "configDrive" => order.push(MetadataSource::ConfigDrive),
            "metadataService" => order.push(MetadataSource::MetadataService),
            other => {
                return Err(format!(
                    "[Metadata] search-order: {other:?} is not configDrive or metadataService"
                ));
            }
        }
    }
    if order.is_empty() || order.len() > 2 {
        return Err(format!(
            "[Metadata] search-order = {value:?}: give one or both of configDrive, metadataService"
        ));
    }
    Ok(order)
}

struct Reader<'a> {
    entries: &'a Entries,
}

impl Reader<'_> {
    fn get(&self, section: &str, key: &str) -> Option<&(String, PathBuf)> {
        self.entries.get(&(section.to_string(), key.to_string()))
    }

    fn string(&self, section: &str, keys: &[&str]) -> Option<String> {
        keys.iter()
            .find_map(|key| self.get(section, key))
            .map(|(v, _)| v.clone())
            .filter(|v| !v.is_empty())
    }

    fn boolean(&self, section: &str, key: &str) -> Result<Option<bool>> {
        let Some((value, file)) = self.get(section, key) else {
            return Ok(None);
        };
        match value.to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "1" => Ok(Some(true)),
            "false" | "no" | "off" | "0" => Ok(Some(false)),
            _ => Err(Error::Config {
                file: file.display().to_string(),
                reason: format!(
                    "[{}] {key} = {value:?}: expected true or false",
                    title(section)
                ),
            }),
        }
    }

    fn integer(&self, section: &str, key: &str) -> Result<Option<(i64, PathBuf)>> {
        let Some((value, file)) = self.get(section, key) else {
            return Ok(None);
        };
        value
            .parse::<i64>()
            .map(|v| Some((v, file.clone())))
            .map_err(|_| Error::Config {
                file: file.display().to_string(),
                reason: format!("[{}] {key} = {value:?}: expected a number", title(section)),
            })
    }
}

fn title(section: &str) -> &str {
    match section {
        "global" => "Global",
        "blockstorage" => "BlockStorage",
        "metadata" => "Metadata",
        other => other,
    }
}

/// Whether `path` looks like a file that exists (for start-up checks of `ca-file`).
pub fn check_ca_file(path: &Path) -> Result<()> {
    if path.is_file() {
        Ok(())
    } else {
        Err(Error::Config {
            file: path.display().to_string(),
            reason: "[Global] ca-file does not exist".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<CloudConfig> {
        CloudConfig::parse(&[(PathBuf::from("/etc/cloud.conf"), text.to_string())])
    }

    const GOOD: &str = r#"
[Global]
auth-url = "http://keystone:5000/v3"
username = alice
password = "s3cret pass"
tenant-name = demo
domain-name = Default
region = RegionOne
tls-insecure = true

[BlockStorage]
node-volume-attach-limit = 60
rescan-on-resize = yes
ignore-volume-az = false

[Metadata]
search-order = metadataService
"#;

    #[test]
    fn quoted_values_keep_their_blanks_and_quotes_inside_them() -> Result<()> {
        let text = "[Global]\nauth-url = http://k:5000/v3 \nusername = \"  alice \"\n\
                    password = \"\\\"quoted\\\"\"\n";
        let config = parse(text)?;
        assert_eq!(config.global.auth_url, "http://k:5000/v3");
        assert_eq!(config.global.username.as_deref(), Some("  alice "));
        assert_eq!(
            config.global.password.as_ref().map(Secret::expose),
            Some("\"quoted\"")
        );
        Ok(())
    }

    #[test]
    fn a_full_file_parses() -> Result<()> {
        let config = parse(GOOD)?;
        assert_eq!(config.global.auth_url, "http://keystone:5000/v3");
        assert_eq!(config.global.username.as_deref(), Some("alice"));
        assert_eq!(
            config.global.password.as_ref().map(Secret::expose),
            Some("s3cret pass")
        );
        assert_eq!(config.global.project_name.as_deref(), Some("demo"));
        assert_eq!(config.global.region.as_deref(), Some("RegionOne"));
        assert!(config.global.tls_insecure);
        assert_eq!(config.block_storage.node_volume_attach_limit, 60);
        assert!(config.block_storage.rescan_on_resize);
        assert_eq!(config.search_order, vec![MetadataSource::MetadataService]);
        Ok(())
    }

    #[test]
    fn defaults_apply_when_sections_are_missing() -> Result<()> {
        let config = parse(
            "[Global]\nauth-url=http://k/v3\napplication-credential-id=abc\napplication-credential-secret=x\n",
        )?;
        assert_eq!(config.block_storage, BlockStorage::default());
        assert_eq!(config.block_storage.node_volume_attach_limit, 256);
        assert_eq!(
            config.search_order,
            vec![MetadataSource::ConfigDrive, MetadataSource::MetadataService]
        );
        assert_eq!(config.global.interface, "public");
        Ok(())
    }

    #[test]
    fn secrets_do_not_print() -> Result<()> {
        let config = parse(GOOD)?;
        let printed = format!("{config:?}");
        assert!(!printed.contains("s3cret"), "{printed}");
        assert!(printed.contains("[redacted]"));
        Ok(())
    }

    #[test]
    fn missing_auth_url_is_named() {
        let error = parse("[Global]\nusername=a\npassword=b\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("auth-url is missing"), "{error}");
        assert!(error.contains("/etc/cloud.conf"), "{error}");
    }

    #[test]
    fn missing_credentials_are_named() {
        let error = parse("[Global]\nauth-url=http://k/v3\nusername=a\n")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("no credentials"), "{error}");
    }

    #[test]
    fn bad_values_name_the_key_and_file() {
        let base = "[Global]\nauth-url=http://k/v3\nusername=a\npassword=b\n";
        for (extra, key) in [
            (
                "[BlockStorage]\nnode-volume-attach-limit = many\n",
                "node-volume-attach-limit",
            ),
            (
                "[BlockStorage]\nnode-volume-attach-limit = 0\n",
                "node-volume-attach-limit",
            ),
            (
                "[BlockStorage]\nrescan-on-resize = maybe\n",
                "rescan-on-resize",
            ),
            ("[Metadata]\nsearch-order = floppy\n", "search-order"),
        ] {
            let error = parse(&format!("{base}{extra}"))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(error.contains(key), "{extra}: {error}");
            assert!(error.contains("/etc/cloud.conf"), "{extra}: {error}");
        }
    }

    #[test]
    fn later_files_override_earlier_ones() -> Result<()> {
        let config = CloudConfig::parse(&[
            (
                PathBuf::from("/a.conf"),
                "[Global]\nauth-url=http://a/v3\nusername=a\npassword=b\n".into(),
            ),
            (
                PathBuf::from("/b.conf"),
                "[Global]\nauth-url=http://b/v3\n[BlockStorage]\nnode-volume-attach-limit=5\n"
                    .into(),
            ),
        ])?;
        assert_eq!(config.global.auth_url, "http://b/v3");
        assert_eq!(config.global.username.as_deref(), Some("a"));
        assert_eq!(config.block_storage.node_volume_attach_limit, 5);
        Ok(())
    }

    #[test]
    fn a_bad_value_in_the_second_file_names_that_file() {
        let error = CloudConfig::parse(&[
            (
                PathBuf::from("/a.conf"),
                "[Global]\nauth-url=http://a/v3\nusername=a\npassword=b\n".into(),
            ),
            (
                PathBuf::from("/b.conf"),
                "[Global]\ntls-insecure=perhaps\n".into(),
            ),
        ])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(
            error.contains("/b.conf") && error.contains("tls-insecure"),
            "{error}"
        );
    }

    #[test]
    fn an_unreadable_file_is_named() {
        let error = CloudConfig::load(&[PathBuf::from("/no/such/cloud.conf")])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("/no/such/cloud.conf"), "{error}");
    }
}
