//! Where things live in a node agent's run directory, which stands for kubelet's own root
//! directory `/var/lib/kubelet` (several nodes share one machine, so each gets its own):
//!
//! - `<run_dir>/pods/<namespace>_<name>_<uid>/`: the agent's directory of a pod (its
//!   emptyDir, configMap, secret, … volumes), [`pod_dir`];
//! - `<run_dir>/pods/<uid>/`: kubelet's directory of a pod, `/var/lib/kubelet/pods/<uid>`
//!   ([`kubelet_pod_dir`]), where the CSI volume manager publishes volumes
//!   (`volumes/kubernetes.io~csi/<pv>/mount`) and containers' subPaths are bind-mounted
//!   (`volume-subpaths/<volume>/<container>/<mount index>`);
//! - `<run_dir>/plugins/`, `<run_dir>/plugins_registry/`: CSI plugins (see
//!   [`PluginPaths`](super::csi::PluginPaths)).
//!
//! Namespaces and pod names cannot contain `_` and UIDs do not, which tells the two kinds of
//! pod directory apart.

use std::path::{Path, PathBuf};

/// kubelet's root directory, which [`host_path`] maps to the run directory.
pub const KUBELET_ROOT: &str = "/var/lib/kubelet";

/// A path as kubelet sees it, on the node whose run directory is `run_dir`:
/// `/var/lib/kubelet/x` → `<run_dir>/x`; other paths unchanged.
pub fn host_path(run_dir: &Path, kubelet_path: &Path) -> PathBuf {
    match kubelet_path.strip_prefix(KUBELET_ROOT) {
        Ok(rest) => run_dir.join(rest),
        Err(_) => kubelet_path.to_owned(),
    }
}

/// `<run_dir>/pods`: where both kinds of pod directory live.
pub fn pods_dir(run_dir: &Path) -> PathBuf {
    run_dir.join("pods")
}

/// The agent's directory of a pod on a node: `<run_dir>/pods/<namespace>_<name>_<uid>`.
pub fn pod_dir(run_dir: &Path, namespace: &str, name: &str, uid: &str) -> PathBuf {
    pods_dir(run_dir).join(format!("{namespace}_{name}_{uid}"))
}

/// kubelet's directory of a pod, as kubelet (and a node plugin) names it:
/// `/var/lib/kubelet/pods/<uid>` (map it with [`host_path`]).
pub fn kubelet_pod_dir(uid: &str) -> PathBuf {
    Path::new(KUBELET_ROOT).join("pods").join(uid)
}

/// One directory found in `<run_dir>/pods`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundPodDir {
    /// The pod UID.
    pub uid: String,
    /// The directory.
    pub path: PathBuf,
    /// Whether it is kubelet's `<uid>` directory rather than the agent's
    /// `<namespace>_<name>_<uid>`.
    pub kubelet_style: bool,
}

/// Every pod directory of a node, both kinds.
pub fn pod_dirs(run_dir: &Path) -> Vec<FoundPodDir> {
    let Ok(entries) = std::fs::read_dir(pods_dir(run_dir)) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let uid = name.rsplit('_').next()?.to_string();
            Some(FoundPodDir {
                kubelet_style: !name.contains('_'),
                uid,
                path: e.path(),
            })
        })
        .collect()
}

/// The UIDs of the pods `namespace/name` whose agent directory is on this node.
pub fn pod_uids(run_dir: &Path, namespace: &str, name: &str) -> Vec<String> {
    let prefix = format!("{namespace}_{name}_");
    pod_dirs(run_dir)
        .into_iter()
        .filter(|found| {
            found
                .path
                .file_name()
                .is_some_and(|f| f.to_string_lossy().starts_with(&prefix))
        })
        .map(|found| found.uid)
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn kubelet_paths_map_into_the_run_dir() {
        let run = Path::new("/run/node-a");
        assert_eq!(
            host_path(run, Path::new("/var/lib/kubelet/plugins/d/csi.sock")),
            Path::new("/run/node-a/plugins/d/csi.sock")
        );
        assert_eq!(
            host_path(run, Path::new("/elsewhere/csi.sock")),
            Path::new("/elsewhere/csi.sock")
        );
        assert_eq!(
            host_path(run, &kubelet_pod_dir("u-1")),
            Path::new("/run/node-a/pods/u-1")
        );
    }

    #[test]
    fn both_kinds_of_pod_directory_are_found_and_told_apart() {
        let run = tempfile::Builder::new()
            .prefix("layout-")
            .tempdir()
            .unwrap();
        let agent = pod_dir(run.path(), "ns", "web", "u-1");
        let kubelet = host_path(run.path(), &kubelet_pod_dir("u-1"));
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::create_dir_all(&kubelet).unwrap();
        std::fs::create_dir_all(pod_dir(run.path(), "ns", "web-2", "u-2")).unwrap();
        let mut found = pod_dirs(run.path());
        found.sort_by(|a, b| a.path.cmp(&b.path));
        assert_eq!(
            found,
            [
                // `ns_web-2_…` sorts before `ns_web_…`.
                FoundPodDir {
                    uid: "u-2".into(),
                    path: pod_dir(run.path(), "ns", "web-2", "u-2"),
                    kubelet_style: false
                },
                FoundPodDir {
                    uid: "u-1".into(),
                    path: agent,
                    kubelet_style: false
                },
                FoundPodDir {
                    uid: "u-1".into(),
                    path: kubelet,
                    kubelet_style: true
                },
            ]
        );
        assert_eq!(pod_uids(run.path(), "ns", "web"), ["u-1"]);
    }
}
