//! This workspace's binaries for tests, suites and benches: the drivers, the sidecars, the
//! node agent and its pod-sandbox helper, the `conformance` command, as cargo built them.
//!
//! A test executable of one package cannot ask cargo for another package's `[[bin]]` (cargo
//! builds those only for `cargo nextest run --workspace`, as CI runs it). [`binary`] therefore
//! looks next to the running executable (`target/<profile>/`) and, when the binary is missing
//! or older than the sources of its package and the workspace packages it depends on, builds
//! it once with `cargo build -p <package> --bins` for that profile ([`binaries`] builds all
//! the stale ones of a set with one cargo call). Concurrent callers
//! are safe: cargo serialises builds in one target directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

/// Why a binary is not available.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The running executable is not inside a cargo target directory.
    #[error("cannot locate the cargo target directory from {exe:?}")]
    NoTargetDir {
        /// The running executable.
        exe: PathBuf,
    },
    /// No workspace package has that name.
    #[error("no package {package:?} in the workspace at {root:?}")]
    UnknownPackage {
        /// The package asked for.
        package: String,
        /// The workspace root searched.
        root: PathBuf,
    },
    /// `cargo build` could not run or failed.
    #[error("`cargo build -p {packages} --bins` failed: {reason}")]
    Build {
        /// The packages built.
        packages: String,
        /// cargo's exit status or why it could not start.
        reason: String,
    },
    /// The build succeeded but the binary is not where cargo puts it.
    #[error("{path:?} is missing after `cargo build -p {package}`")]
    Missing {
        /// The package.
        package: String,
        /// Where the binary should be.
        path: PathBuf,
    },
}

/// The workspace root (the directory holding the workspace `Cargo.toml`): this crate lives in
/// `harness/workspace-binaries/`, two levels below it.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// The binary `name` of workspace package `package`, built when missing or stale (see the
/// module docs).
pub fn binary(package: &str, name: &str) -> Result<PathBuf, Error> {
    let mut paths = binaries(&[(package, name)])?;
    paths.pop().ok_or_else(|| Error::UnknownPackage {
        package: package.into(),
        root: root(),
    })
}

/// Binaries as `(package, binary name)` pairs, in the same order; those missing or stale are
/// built with one `cargo build -p … --bins` (see the module docs).
pub fn binaries(wanted: &[(&str, &str)]) -> Result<Vec<PathBuf>, Error> {
    let exe = std::env::current_exe().unwrap_or_default();
    let profile_dir = profile_dir(&exe).ok_or_else(|| Error::NoTargetDir { exe: exe.clone() })?;
    let root = root();
    let mut stale: Vec<(&str, &str)> = Vec::new();
    for &(package, name) in wanted {
        let package_dir = package_dir(&root, package).ok_or_else(|| Error::UnknownPackage {
            package: package.into(),
            root: root.clone(),
        })?;
        let built = std::fs::metadata(profile_dir.join(name))
            .and_then(|m| m.modified())
            .ok();
        if built.is_none_or(|built| built < newest_source(&package_dir)) {
            stale.push((package, name));
        }
    }
    if !stale.is_empty() {
        build(&root, &profile_dir, &stale)?;
    }
    wanted
        .iter()
        .map(|&(package, name)| {
            let path = profile_dir.join(name);
            if path.is_file() {
                Ok(path)
            } else {
                Err(Error::Missing {
                    package: package.into(),
                    path,
                })
            }
        })
        .collect()
}

/// `target/<profile>` from an executable in it or in its `deps/` (test executables) or
/// `examples/`.
fn profile_dir(exe: &Path) -> Option<PathBuf> {
    let dir = exe.parent()?;
    let dir = match dir.file_name()?.to_str()? {
        "deps" | "examples" | "build" => dir.parent()?,
        _ => dir,
    };
    Some(dir.to_path_buf())
}

fn build(root: &Path, profile_dir: &Path, stale: &[(&str, &str)]) -> Result<(), Error> {
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev".to_owned(),
        Some(other) => other.to_owned(),
    };
    let target_dir = profile_dir.parent().unwrap_or(profile_dir);
    let mut packages: Vec<&str> = stale.iter().map(|(package, _)| *package).collect();
    packages.sort_unstable();
    packages.dedup();
    let names: Vec<&str> = stale.iter().map(|(_, name)| *name).collect();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    eprintln!(
        "building {} (packages {}, {profile} profile)",
        names.join(", "),
        packages.join(", ")
    );
    let fail = |reason: String| Error::Build {
        packages: packages.join(" -p "),
        reason,
    };
    let mut command = Command::new(&cargo);
    command.args(["build", "--profile", &profile]);
    for package in &packages {
        command.args(["-p", package]);
    }
    let status = command
        .arg("--bins")
        .arg("--target-dir")
        .arg(target_dir)
        .current_dir(root)
        .status()
        .map_err(|e| fail(format!("cannot run {cargo}: {e}")))?;
    if !status.success() {
        return Err(fail(status.to_string()));
    }
    Ok(())
}

/// The directory of workspace package `package` (its `Cargo.toml` says `name = "<package>"`).
fn package_dir(root: &Path, package: &str) -> Option<PathBuf> {
    let mut candidates = vec![root.join(package)];
    for group in ["drivers", "sidecars", "operators", "harness"] {
        candidates.extend(
            std::fs::read_dir(root.join(group))
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path()),
        );
    }
    candidates
        .into_iter()
        .find(|dir| manifest_name(&dir.join("Cargo.toml")).as_deref() == Some(package))
}

fn manifest_name(manifest: &Path) -> Option<String> {
    let text = std::fs::read_to_string(manifest).ok()?;
    let package = text.split("[package]").nth(1)?;
    package.lines().find_map(|line| {
        let value = line.trim().strip_prefix("name")?.trim().strip_prefix('=')?;
        Some(value.trim().trim_matches('"').to_owned())
    })
}

/// The newest modification time among the package's `src/`, `Cargo.toml`, `build.rs`,
/// `proto/`, `assets/` (manifests compiled in) and those of its path dependencies,
/// recursively.
fn newest_source(package_dir: &Path) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    let mut packages = vec![package_dir.to_path_buf()];
    let mut seen = Vec::new();
    while let Some(dir) = packages.pop() {
        let Ok(dir) = dir.canonicalize() else {
            continue;
        };
        if seen.contains(&dir) {
            continue;
        }
        seen.push(dir.clone());
        for entry in ["src", "Cargo.toml", "build.rs", "proto", "assets"] {
            newest = newest.max(newest_under(&dir.join(entry)));
        }
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
        // Only [dependencies]: dev-dependencies do not go into the binary.
        let dependencies = manifest
            .split("\n[")
            .find(|section| section.starts_with("dependencies]"))
            .unwrap_or_default();
        for line in dependencies.lines() {
            if let Some(rest) = line.split("path = \"").nth(1)
                && let Some(path) = rest.split('"').next()
            {
                packages.push(dir.join(path));
            }
        }
    }
    newest
}

fn newest_under(path: &Path) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    let mut stack = vec![path.to_path_buf()];
    while let Some(path) = stack.pop() {
        let Ok(meta) = std::fs::metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            stack.extend(
                std::fs::read_dir(&path)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .map(|e| e.path()),
            );
        } else if let Ok(modified) = meta.modified() {
            newest = newest.max(modified);
        }
    }
    newest
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn packages_are_found_by_manifest_name() {
        let root = root();
        assert_eq!(
            package_dir(&root, "manila-csi-plugin").unwrap(),
            root.join("drivers/manila-csi-plugin")
        );
        assert_eq!(
            package_dir(&root, "csi-provisioner").unwrap(),
            root.join("sidecars/csi-provisioner")
        );
        assert_eq!(
            package_dir(&root, "node-agent").unwrap(),
            root.join("harness/node-agent")
        );
        assert_eq!(package_dir(&root, "suites").unwrap(), root.join("suites"));
        assert_eq!(
            package_dir(&root, "manila-operator").unwrap(),
            root.join("operators/manila-operator")
        );
        assert!(package_dir(&root, "no-such-package").is_none());
    }

    #[test]
    fn path_dependencies_count_as_sources() {
        let root = root();
        let proto = newest_under(&root.join("drivers/csi-proto/src"));
        assert!(newest_source(&root.join("sidecars/csi-provisioner")) >= proto);
    }

    #[test]
    fn the_profile_dir_is_found_from_test_and_binary_paths() {
        assert_eq!(
            profile_dir(Path::new("/t/target/debug/deps/cluster-1234")).unwrap(),
            Path::new("/t/target/debug")
        );
        assert_eq!(
            profile_dir(Path::new("/t/target/debug/conformance")).unwrap(),
            Path::new("/t/target/debug")
        );
    }
}
