//! A pod's volumes as host directories, set up before its containers start: emptyDir,
//! hostPath, configMap, secret, downwardAPI and projected (service-account token via
//! TokenRequest, ConfigMaps, Secrets, downward API), with the pod's `fsGroup`, and CSI
//! volumes of claims (filesystem or block). Only the volumes its containers use are set up.
//! Containers bind-mount them at their `volumeMounts`, and get block volumes at their
//! `volumeDevices`' `devicePath`.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{
    DownwardAPIVolumeFile, HostPathVolumeSource, KeyToPath, Pod, ServiceAccount,
    ServiceAccountTokenProjection, Volume,
};
use kube::Client;
use kube::api::{Api, PostParams};
use kube_support::error::IoContext;

use super::downward::{NodeFacts, field_value, resource_value};
use super::sources::Sources;
use crate::config::NodeAgentConfig;
use crate::csi::VolumeManager;
use crate::error::{Error, Result};
use crate::layout;
use crate::ownership::{FsGroup, set_volume_ownership};

/// The default file mode of configMap, secret, downwardAPI and projected volumes.
const DEFAULT_MODE: i32 = 0o644;
/// The mode of a new emptyDir volume.
const EMPTY_DIR_MODE: u32 = 0o777;
/// The default lifetime of a projected service-account token.
const DEFAULT_TOKEN_SECONDS: i64 = 3600;

/// The host directory (or file) of each volume, by name, whether it is always mounted
/// read-only (configMap, secret, downwardAPI and projected volumes are) and whether it is a
/// block device (a CSI block volume, for `volumeDevices`).
#[derive(Debug, Clone, Default)]
pub struct Volumes(BTreeMap<String, (PathBuf, bool, bool)>);

impl Volumes {
    /// The host path of volume `name` and whether it must be mounted read-only; none for a
    /// block volume.
    pub fn get(&self, name: &str) -> Option<(&Path, bool)> {
        self.0
            .get(name)
            .filter(|(_, _, block)| !block)
            .map(|(p, ro, _)| (p.as_path(), *ro))
    }

    /// The host path of block volume `name` (a link to the device); none for other volumes.
    pub fn device(&self, name: &str) -> Option<&Path> {
        self.0
            .get(name)
            .filter(|(_, _, block)| *block)
            .map(|(p, _, _)| p.as_path())
    }
}

/// One file of a projection: its path relative to the volume, content and mode.
struct File {
    path: String,
    content: Vec<u8>,
    mode: i32,
}

/// Sets up the volumes of `pod` its containers use (as kubelet, which leaves a volume no
/// container or init container names in `volumeMounts` or `volumeDevices` alone: not
/// mounted, not in `volumesInUse`) under `pod_dir/volumes/`; `persistentVolumeClaim`
/// volumes (and inline `csi` ones, refused) through the CSI volume manager. With the pod's
/// `fsGroup`, a new emptyDir and the configMap, secret, downwardAPI and projected volumes get
/// it (see [`ownership`](crate::ownership); the volume manager decides for CSI volumes).
pub async fn prepare(
    client: &Client,
    config: &NodeAgentConfig,
    csi: &VolumeManager,
    sources: &mut Sources,
    pod: &Pod,
    pod_dir: &Path,
) -> Result<Volumes> {
    // The pod's directory, whatever its volumes (kubelet's makePodDataDirs); it is also how
    // `exec` and `logs` find the pod.
    std::fs::create_dir_all(pod_dir).map_err(Error::io("creating", pod_dir))?;
    let used = used_volumes(pod);
    let fs_group = FsGroup::of_pod(pod);
    let mut volumes = Volumes::default();
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        if !used.contains(volume.name.as_str()) {
            tracing::debug!(pod = ?pod.metadata.name, volume = %volume.name, "no container uses the volume; not mounted");
            continue;
        }
        if volume.persistent_volume_claim.is_some() || volume.csi.is_some() {
            let mounted = csi.mount(pod, volume).await?;
            volumes.0.insert(
                volume.name.clone(),
                (mounted.path, mounted.read_only, mounted.block),
            );
            continue;
        }
        let dir = pod_dir.join("volumes").join(&volume.name);
        // kubelet sets an emptyDir up once (its ownership too); the others on every setup.
        let new_empty_dir = volume.empty_dir.is_some() && !dir.exists();
        let path = prepare_one(client, config, sources, pod, volume, &dir).await?;
        if new_empty_dir {
            // Writable by any user, whatever the umask (kubelet's emptyDir is 0777).
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(EMPTY_DIR_MODE))
                .map_err(Error::io("setting the mode of", &path))?;
        }
        let read_only = volume.host_path.is_none() && volume.empty_dir.is_none();
        let owned = volume.host_path.is_none() && (read_only || new_empty_dir);
        if let Some(fs_group) = fs_group.filter(|_| owned) {
            set_volume_ownership::<Error>(&path, fs_group.always(), read_only).map_err(|e| {
                if new_empty_dir {
                    // Set up again next time (kubelet's emptyDir is ready only once owned).
                    let _ = std::fs::remove_dir_all(&path);
                }
                Error::volume(
                    &volume.name,
                    format!(
                        "applying fsGroup {}: {}",
                        fs_group.gid,
                        crate::error_chain(&e)
                    ),
                )
            })?;
        }
        volumes
            .0
            .insert(volume.name.clone(), (path, read_only, false));
    }
    Ok(volumes)
}

/// The names of the volumes some container or init container of `pod` mounts or maps
/// (kubelet's `GetPodVolumeNames`).
fn used_volumes(pod: &Pod) -> BTreeSet<&str> {
    crate::pod_containers(pod)
        .flat_map(|c| {
            let mounts = c.volume_mounts.iter().flatten().map(|m| m.name.as_str());
            let devices = c.volume_devices.iter().flatten().map(|d| d.name.as_str());
            mounts.chain(devices)
        })
        .collect()
}

async fn prepare_one(
    client: &Client,
    config: &NodeAgentConfig,
    sources: &mut Sources,
    pod: &Pod,
    volume: &Volume,
    dir: &Path,
) -> Result<PathBuf> {
    let name = &volume.name;
    let fail = |reason: String| Error::volume(name, reason);
    if let Some(host) = &volume.host_path {
        return host_path(name, host, &config.run_dir);
    }
    std::fs::create_dir_all(dir).map_err(Error::io("creating", dir))?;
    if volume.empty_dir.is_some() {
        return Ok(dir.to_path_buf());
    }
    let node = NodeFacts {
        node_ip: config.node_ip,
        capacity: &config.capacity,
    };
    let files = if let Some(cm) = &volume.config_map {
        let mode = cm.default_mode.unwrap_or(DEFAULT_MODE);
        match sources.config_map(&cm.name).await? {
            Some(data) => project(&data, cm.items.as_deref(), mode, cm.optional == Some(true))
                .map_err(fail)?,
            None if cm.optional == Some(true) => Vec::new(),
            None => return Err(fail(format!("configmap {:?} not found", cm.name))),
        }
    } else if let Some(secret) = &volume.secret {
        let mode = secret.default_mode.unwrap_or(DEFAULT_MODE);
        let secret_name = secret.secret_name.clone().unwrap_or_default();
        match sources.secret(&secret_name).await? {
            Some(data) => project(
                &data,
                secret.items.as_deref(),
                mode,
                secret.optional == Some(true),
            )
            .map_err(fail)?,
            None if secret.optional == Some(true) => Vec::new(),
            None => return Err(fail(format!("secret {secret_name:?} not found"))),
        }
    } else if let Some(downward) = &volume.downward_api {
        let mode = downward.default_mode.unwrap_or(DEFAULT_MODE);
        downward_files(pod, node, downward.items.iter().flatten(), mode).map_err(fail)?
    } else if let Some(projected) = &volume.projected {
        let mode = projected.default_mode.unwrap_or(DEFAULT_MODE);
        let mut files = Vec::new();
        for source in projected.sources.iter().flatten() {
            if let Some(token) = &source.service_account_token {
                files.push(
                    service_account_token(client, pod, token, mode)
                        .await
                        .map_err(|e| {
                            fail(format!(
                                "requesting a service account token: {}",
                                crate::error_chain(&e)
                            ))
                        })?,
                );
            } else if let Some(cm) = &source.config_map {
                match sources.config_map(&cm.name).await? {
                    Some(data) => files
                        .extend(project(&data, cm.items.as_deref(), mode, false).map_err(fail)?),
                    None if cm.optional == Some(true) => {}
                    // The controller-manager publishes the root CA shortly after a namespace
                    // appears; the agent knows the same CA meanwhile.
                    None if cm.name == "kube-root-ca.crt" => {
                        let ca = std::fs::read(&config.cluster_ca)
                            .map_err(Error::io("reading", &config.cluster_ca))?;
                        let data = BTreeMap::from([("ca.crt".to_string(), ca)]);
                        files
                            .extend(project(&data, cm.items.as_deref(), mode, false).map_err(fail)?)
                    }
                    None => return Err(fail(format!("configmap {:?} not found", cm.name))),
                }
            } else if let Some(secret) = &source.secret {
                match sources.secret(&secret.name).await? {
                    Some(data) => files.extend(
                        project(&data, secret.items.as_deref(), mode, false).map_err(fail)?,
                    ),
                    None if secret.optional == Some(true) => {}
                    None => return Err(fail(format!("secret {:?} not found", secret.name))),
                }
            } else if let Some(downward) = &source.downward_api {
                files.extend(
                    downward_files(pod, node, downward.items.iter().flatten(), mode)
                        .map_err(fail)?,
                );
            } else {
                return Err(fail("unsupported projected volume source".into()));
            }
        }
        files
    } else {
        return Err(fail(
            "volume type not supported by the node agent (supported: emptyDir, hostPath, configMap, secret, downwardAPI, projected, persistentVolumeClaim of CSI volumes)"
                .into(),
        ));
    };
    write_files(dir, &files).map_err(fail)?;
    Ok(dir.to_path_buf())
}

/// A hostPath volume's directory or file; kubelet's own `/var/lib/kubelet/…` is this node's
/// run directory (several nodes share the machine).
fn host_path(name: &str, host: &HostPathVolumeSource, run_dir: &Path) -> Result<PathBuf> {
    let path = layout::host_path(run_dir, Path::new(&host.path));
    let fail = |reason: String| Error::volume(name, format!("hostPath {:?}: {reason}", host.path));
    if !path.is_absolute() {
        return Err(fail("must be absolute".into()));
    }
    let meta = std::fs::metadata(&path).ok();
    use std::os::unix::fs::FileTypeExt;
    match host.type_.as_deref().unwrap_or("") {
        "" => {}
        "DirectoryOrCreate" => {
            std::fs::create_dir_all(&path).map_err(|e| fail(e.to_string()))?;
        }
        "Directory" if meta.as_ref().is_some_and(|m| m.is_dir()) => {}
        "FileOrCreate" => {
            if meta.is_none() {
                if let Some(parent) = path.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| fail(e.to_string()))?;
                }
                std::fs::write(&path, b"").map_err(|e| fail(e.to_string()))?;
            }
        }
        "File" if meta.as_ref().is_some_and(|m| m.is_file()) => {}
        "Socket" if meta.as_ref().is_some_and(|m| m.file_type().is_socket()) => {}
        "CharDevice"
            if meta
                .as_ref()
                .is_some_and(|m| m.file_type().is_char_device()) => {}
        "BlockDevice"
            if meta
                .as_ref()
                .is_some_and(|m| m.file_type().is_block_device()) => {}
        other => return Err(fail(format!("is not of type {other}"))),
    }
    if !path.exists() {
        return Err(fail("does not exist".into()));
    }
    Ok(path)
}

/// The files of a ConfigMap/Secret projection: every key, or only `items` (each must exist
/// unless `optional`).
fn project(
    data: &BTreeMap<String, Vec<u8>>,
    items: Option<&[KeyToPath]>,
    mode: i32,
    optional: bool,
) -> std::result::Result<Vec<File>, String> {
    match items {
        None => Ok(data
            .iter()
            .map(|(k, v)| File {
                path: k.clone(),
                content: v.clone(),
                mode,
            })
            .collect()),
        Some(items) => {
            let mut files = Vec::new();
            for item in items {
                match data.get(&item.key) {
                    Some(v) => files.push(File {
                        path: item.path.clone(),
                        content: v.clone(),
                        mode: item.mode.unwrap_or(mode),
                    }),
                    None if optional => {}
                    None => return Err(format!("references non-existent key {:?}", item.key)),
                }
            }
            Ok(files)
        }
    }
}

fn downward_files<'a>(
    pod: &Pod,
    node: NodeFacts<'_>,
    items: impl Iterator<Item = &'a DownwardAPIVolumeFile>,
    mode: i32,
) -> std::result::Result<Vec<File>, String> {
    items
        .map(|item| {
            let value = if let Some(field) = &item.field_ref {
                field_value(pod, node, field)?
            } else if let Some(resource) = &item.resource_field_ref {
                resource_value(pod, node, None, resource)?
            } else {
                return Err(format!(
                    "item {:?} has no fieldRef or resourceFieldRef",
                    item.path
                ));
            };
            Ok(File {
                path: item.path.clone(),
                content: value.into_bytes(),
                mode: item.mode.unwrap_or(mode),
            })
        })
        .collect()
}

/// A bound token for the pod's service account (TokenRequest, bound to the pod as kubelet
/// asks for it, so NodeRestriction accepts it).
async fn service_account_token(
    client: &Client,
    pod: &Pod,
    source: &ServiceAccountTokenProjection,
    mode: i32,
) -> Result<File> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let account = pod
        .spec
        .as_ref()
        .and_then(|s| s.service_account_name.clone())
        .unwrap_or_else(|| "default".into());
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: source.audience.iter().cloned().collect(),
            expiration_seconds: Some(source.expiration_seconds.unwrap_or(DEFAULT_TOKEN_SECONDS)),
            bound_object_ref: Some(BoundObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
            }),
        },
        ..TokenRequest::default()
    };
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let issued = accounts
        .create_token_request(&account, &PostParams::default(), &request)
        .await
        .map_err(Error::api(format!(
            "requesting a token for ServiceAccount {namespace}/{account}"
        )))?;
    let token = issued.status.map(|s| s.token).unwrap_or_default();
    Ok(File {
        path: source.path.clone(),
        content: token.into_bytes(),
        mode,
    })
}

fn write_files(dir: &Path, files: &[File]) -> std::result::Result<(), String> {
    for file in files {
        let relative = Path::new(&file.path);
        let safe = !file.path.is_empty()
            && relative
                .components()
                .all(|c| matches!(c, Component::Normal(_)));
        if !safe {
            return Err(format!(
                "file path {:?} must be relative without \"..\"",
                file.path
            ));
        }
        let path = dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("creating {parent:?}: {e}"))?;
        }
        std::fs::write(&path, &file.content).map_err(|e| format!("writing {path:?}: {e}"))?;
        let mode = u32::try_from(file.mode).unwrap_or(0o644) & 0o7777;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| format!("setting the mode of {path:?}: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn items_select_keys_and_a_missing_key_is_named() {
        let data = BTreeMap::from([("a".to_string(), b"1".to_vec())]);
        let items = [KeyToPath {
            key: "a".into(),
            path: "sub/x".into(),
            mode: Some(0o600),
        }];
        let files = project(&data, Some(&items), 0o644, false).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!((files[0].path.as_str(), files[0].mode), ("sub/x", 0o600));
        let missing = [KeyToPath {
            key: "b".into(),
            path: "y".into(),
            mode: None,
        }];
        let err = project(&data, Some(&missing), 0o644, false).err().unwrap();
        assert!(err.contains("\"b\""), "{err}");
    }

    #[test]
    fn only_volumes_a_container_or_init_container_names_are_used() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "spec": {
                "initContainers": [{"name": "init", "volumeMounts": [
                    {"name": "seeded", "mountPath": "/seed"}
                ]}],
                "containers": [{"name": "app",
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    "volumeDevices": [{"name": "raw", "devicePath": "/dev/xvda"}]
                }],
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "a"}},
                    {"name": "seeded", "emptyDir": {}},
                    {"name": "raw", "persistentVolumeClaim": {"claimName": "b"}},
                    {"name": "unused", "persistentVolumeClaim": {"claimName": "c"}}
                ]
            }
        }))
        .unwrap();
        assert_eq!(
            used_volumes(&pod),
            BTreeSet::from(["data", "raw", "seeded"])
        );
    }

    #[test]
    fn escaping_paths_are_refused() {
        let dir = tempfile::Builder::new()
            .prefix("volumes-")
            .tempdir()
            .unwrap();
        let files = [File {
            path: "../x".into(),
            content: vec![],
            mode: 0o644,
        }];
        assert!(write_files(dir.path(), &files).is_err());
    }
}
