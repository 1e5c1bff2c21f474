//! The kind nodes' cgroups: each node container's kubelet makes its own tree under the
//! host's hierarchies (`/sys/fs/cgroup/<hierarchy>/<container>`), which outlives the
//! container and is removed at the end ([`remove_cgroups`]).

use std::path::{Path, PathBuf};

/// Removes each node's cgroup tree (`/sys/fs/cgroup/<hierarchy>/<root>`, deepest first) once
/// its processes are gone; returns the directories that could not be removed.
pub(super) fn remove_cgroups(roots: &[String]) -> Vec<String> {
    let mut left = Vec::new();
    let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else {
        return left;
    };
    let hierarchies: Vec<PathBuf> = hierarchies.flatten().map(|e| e.path()).collect();
    for root in roots {
        for hierarchy in &hierarchies {
            let dir = hierarchy.join(root);
            if dir.is_dir() && remove_tree(&dir).is_err() {
                left.push(dir.display().to_string());
            }
        }
    }
    left
}

fn remove_tree(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)?.flatten() {
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            remove_tree(&entry.path())?;
        }
    }
    // A cgroup directory goes with rmdir (its files are the kernel's).
    std::fs::remove_dir(dir)
}
