//! The unix sockets a cluster has below its run directory, and the check, made before
//! anything starts, that their paths fit a socket address: [`MAX_SOCKET_PATH`] bytes
//! (`sun_path` holds 108 with the terminating NUL). Binding or connecting to a longer path
//! fails, late and far from the cause (a driver that never registers).
//!
//! Below a run directory:
//!
//! - `control.sock`, the cluster's control socket;
//! - per node, under `nodes/<node>/` (kubelet's root, see [`PluginPaths`]):
//!   `plugins_registry/<driver>-reg.sock` (node-driver-registrar's registration socket) and
//!   `plugins/<driver>/csi.sock` (the driver's own), which the node agent connects to.
//!
//! Driver names are only known once drivers are deployed, so room is kept for a name of up to
//! [`DRIVER_NAME_ROOM`] bytes (`manila.csi.openstack.org` has 24). The 63 bytes a CSI driver
//! name may have cannot fit below any run directory: `/nodes/node-1/plugins_registry/` and
//! `-reg.sock` alone take 40 of the 107. 32 bytes hold every driver this project deploys
//! (`cinder.csi.openstack.org` has 24 too) with a margin, and leave the run directory 35
//! (`/tmp/occ/cluster-XXXXXX` has 23).

use std::path::{Path, PathBuf};

use super::super::error::{Error, Result};
use super::NODES_DIR;
use super::description::CONTROL_SOCKET;
use node_agent::csi::PluginPaths;

/// The longest path a unix socket can have, in bytes.
pub const MAX_SOCKET_PATH: usize = 107;

/// The longest CSI driver name a cluster keeps room for in its socket paths, in bytes.
pub const DRIVER_NAME_ROOM: usize = 32;

/// The suffix node-driver-registrar gives a driver's registration socket.
const REGISTRATION_SUFFIX: &str = "-reg.sock";

/// Every socket path of a cluster with `nodes` run from `run_dir`, drivers named with
/// [`DRIVER_NAME_ROOM`] bytes.
fn socket_paths(run_dir: &Path, nodes: &[String]) -> Vec<PathBuf> {
    let driver = "d".repeat(DRIVER_NAME_ROOM);
    let mut paths = vec![run_dir.join(CONTROL_SOCKET)];
    for node in nodes {
        let plugins = PluginPaths::new(run_dir.join(NODES_DIR).join(node));
        paths.push(
            plugins
                .registry
                .join(format!("{driver}{REGISTRATION_SUFFIX}")),
        );
        paths.push(plugins.driver_socket(&driver));
    }
    paths
}

/// `Err(SocketPathTooLong)`, naming the longest path, if a socket of a cluster with `nodes`
/// run from `run_dir` would not fit [`MAX_SOCKET_PATH`]. `run_dir` is resolved as the
/// processes will see it (absolute, symbolic links of its existing part followed).
pub(crate) fn check(run_dir: &Path, nodes: &[String]) -> Result<()> {
    let run_dir = resolve(run_dir);
    let longest = socket_paths(&run_dir, nodes)
        .into_iter()
        .max_by_key(|p| p.as_os_str().len());
    match longest {
        Some(path) if path.as_os_str().len() > MAX_SOCKET_PATH => Err(Error::SocketPathTooLong {
            length: path.as_os_str().len(),
            path,
            limit: MAX_SOCKET_PATH,
            driver_name_room: DRIVER_NAME_ROOM,
        }),
        _ => Ok(()),
    }
}

/// `path` made absolute, with its longest existing ancestor canonicalised.
fn resolve(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    for ancestor in absolute.ancestors() {
        if let Ok(real) = ancestor.canonicalize() {
            let rest = absolute.strip_prefix(ancestor).unwrap_or(Path::new(""));
            return if rest.as_os_str().is_empty() {
                real
            } else {
                real.join(rest)
            };
        }
    }
    absolute
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn nodes(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("node-{i}")).collect()
    }

    /// A run directory of exactly `len` bytes below `/` (its parents need not exist).
    fn run_dir_of(len: usize) -> PathBuf {
        PathBuf::from(format!("/{}", "r".repeat(len - 1)))
    }

    #[test]
    fn the_registration_socket_is_the_longest() {
        let paths = socket_paths(Path::new("/run"), &nodes(1));
        let longest = paths.iter().max_by_key(|p| p.as_os_str().len()).unwrap();
        assert_eq!(
            longest,
            &PathBuf::from(format!(
                "/run/nodes/node-1/plugins_registry/{}-reg.sock",
                "d".repeat(DRIVER_NAME_ROOM)
            ))
        );
    }

    #[test]
    fn a_run_dir_that_leaves_exactly_the_room_passes() {
        // `/nodes/node-1/plugins_registry/` + name + `-reg.sock`.
        let below = 31 + DRIVER_NAME_ROOM + 9;
        check(&run_dir_of(MAX_SOCKET_PATH - below), &nodes(9)).unwrap();
    }

    #[test]
    fn a_run_dir_one_byte_too_long_is_refused_with_path_and_limit() {
        let below = 31 + DRIVER_NAME_ROOM + 9;
        let err = check(&run_dir_of(MAX_SOCKET_PATH - below + 1), &nodes(1)).unwrap_err();
        let Error::SocketPathTooLong {
            path,
            length,
            limit,
            ..
        } = &err
        else {
            panic!("{err}");
        };
        assert_eq!((*length, *limit), (MAX_SOCKET_PATH + 1, MAX_SOCKET_PATH));
        assert!(path.ends_with(
            "plugins_registry/{}-reg.sock".replace("{}", &"d".repeat(DRIVER_NAME_ROOM))
        ));
        let message = err.to_string();
        assert!(
            message.contains(&path.display().to_string())
                && message.contains("107")
                && message.contains("names of up to 32 bytes"),
            "{message}"
        );
    }

    #[test]
    fn a_tenth_node_needs_one_byte_more() {
        let below = 31 + DRIVER_NAME_ROOM + 9;
        let run_dir = run_dir_of(MAX_SOCKET_PATH - below);
        check(&run_dir, &nodes(9)).unwrap();
        check(&run_dir, &nodes(10)).unwrap_err();
    }

    #[test]
    fn a_relative_run_dir_is_measured_from_the_working_directory() {
        let cwd = std::env::current_dir().unwrap().canonicalize().unwrap();
        let resolved = resolve(Path::new("not-there/run"));
        assert_eq!(resolved, cwd.join("not-there/run"));
    }
}
