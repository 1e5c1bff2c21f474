//! Watching `plugins_registry`: a socket that appears is registered, one that disappears (or
//! is replaced by a new one at the same path) is deregistered.

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::Client;
use kube_support::error::IoContext;

use super::error::{Error, Result};
use super::{CsiDrivers, PluginPaths, csinode, plugin};

/// How often the directory is scanned (kubelet watches it with inotify and reconciles
/// every second; a scan of a directory of a few sockets costs microseconds).
pub const SCAN_INTERVAL: Duration = Duration::from_millis(100);
/// How soon a plugin whose registration failed is tried again while its socket stays.
pub const RETRY_INTERVAL: Duration = Duration::from_secs(1);

/// One socket file, told apart from a later one at the same path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SocketIdentity {
    device: u64,
    inode: u64,
    ctime: (i64, i64),
}

#[derive(Debug)]
enum Outcome {
    Registered(String),
    Failed { retry_at: Instant },
}

#[derive(Debug)]
struct Known {
    identity: SocketIdentity,
    outcome: Outcome,
}

/// Scans `paths.registry` forever, (de)registering plugins; `drivers` holds what is
/// registered. Errors are logged and retried.
pub async fn watch(client: Client, node_name: String, paths: PluginPaths, drivers: CsiDrivers) {
    let mut known: BTreeMap<PathBuf, Known> = BTreeMap::new();
    let mut csinode_ready = false;
    loop {
        if !csinode_ready {
            match csinode::ensure_csinode(&client, &node_name).await {
                Ok(()) => csinode_ready = true,
                Err(e) => {
                    tracing::warn!(node = %node_name, error = %crate::error_chain(&e), "cannot create the CSINode yet")
                }
            }
        }
        match scan(&paths.registry) {
            Ok(present) => {
                reconcile(&client, &node_name, &paths, &drivers, &mut known, present).await;
            }
            Err(e) => {
                tracing::warn!(error = %crate::error_chain(&e), "cannot scan the plugin registry")
            }
        }
        tokio::time::sleep(SCAN_INTERVAL).await;
    }
}

/// The sockets in `dir` (names starting with `.` are ignored, as kubelet does).
fn scan(dir: &Path) -> Result<BTreeMap<PathBuf, SocketIdentity>> {
    let io = |action| Error::io(action, dir);
    let mut sockets = BTreeMap::new();
    for entry in std::fs::read_dir(dir).map_err(io("reading"))? {
        let entry = entry.map_err(io("reading"))?;
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        // Gone between listing and stat: seen as absent.
        let Ok(metadata) = entry.metadata() else {
            continue;
        };
        if metadata.file_type().is_socket() {
            sockets.insert(
                entry.path(),
                SocketIdentity {
                    device: metadata.dev(),
                    inode: metadata.ino(),
                    ctime: (metadata.ctime(), metadata.ctime_nsec()),
                },
            );
        }
    }
    Ok(sockets)
}

async fn reconcile(
    client: &Client,
    node_name: &str,
    paths: &PluginPaths,
    drivers: &CsiDrivers,
    known: &mut BTreeMap<PathBuf, Known>,
    present: BTreeMap<PathBuf, SocketIdentity>,
) {
    // Gone or replaced: deregister first.
    let stale: Vec<PathBuf> = known
        .iter()
        .filter(|(path, k)| present.get(*path) != Some(&k.identity))
        .map(|(path, _)| path.clone())
        .collect();
    for path in stale {
        let Some(entry) = known.remove(&path) else {
            continue;
        };
        if let Outcome::Registered(driver) = entry.outcome {
            deregister(client, node_name, drivers, &path, &driver).await;
        }
    }
    let now = Instant::now();
    for (path, identity) in present {
        let due = match known.get(&path) {
            None => true,
            Some(Known {
                outcome: Outcome::Failed { retry_at },
                ..
            }) => *retry_at <= now,
            Some(_) => false,
        };
        if !due {
            continue;
        }
        let outcome = match plugin::register(client, node_name, paths, &path).await {
            Ok(driver) => {
                tracing::info!(driver = %driver.name, endpoint = %driver.endpoint.display(), node_id = %driver.node_id, socket = %path.display(), "registered CSI driver");
                let name = driver.name.clone();
                drivers.insert(driver);
                Outcome::Registered(name)
            }
            Err(e) => {
                tracing::warn!(socket = %path.display(), error = %crate::error_chain(&e), "CSI plugin registration failed");
                Outcome::Failed {
                    retry_at: Instant::now() + RETRY_INTERVAL,
                }
            }
        };
        known.insert(path, Known { identity, outcome });
    }
}

async fn deregister(
    client: &Client,
    node_name: &str,
    drivers: &CsiDrivers,
    socket: &Path,
    driver: &str,
) {
    drivers.remove(driver);
    // Retried a few times: the socket is gone, so there is no later scan to retry from.
    let mut delay = Duration::from_millis(100);
    for attempt in 1..=5 {
        match csinode::uninstall(client, node_name, driver).await {
            Ok(()) => {
                tracing::info!(%driver, socket = %socket.display(), "deregistered CSI driver");
                return;
            }
            Err(e) => {
                tracing::warn!(%driver, attempt, error = %crate::error_chain(&e), "removing the CSI driver from the node failed");
                tokio::time::sleep(delay).await;
                delay *= 2;
            }
        }
    }
}
