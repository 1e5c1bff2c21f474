//! Images without pulls: the project's own images map to the binaries cargo built; generic
//! images (busybox-like) run their command with the host's tools.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::error::{Error, Result};
use super::spec::Mount;

/// Images whose default command is a shell: with no command given, they run `sh`.
const SHELL_IMAGES: &[&str] = &["busybox", "alpine", "debian", "ubuntu", "fedora", "centos"];

/// Maps image references to host binaries.
///
/// Lookup tries the full reference first (`registry/x/plugin:v1.2`, so two versions can map to
/// two builds), then the reference without tag or digest (`registry/x/plugin`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageMap {
    binaries: BTreeMap<String, PathBuf>,
}

impl ImageMap {
    /// An empty map: every image is generic.
    pub fn new() -> Self {
        ImageMap::default()
    }

    /// Maps `image` (with or without tag) to the host binary `binary` (its entrypoint).
    pub fn insert(&mut self, image: impl Into<String>, binary: impl Into<PathBuf>) -> &mut Self {
        self.binaries.insert(image.into(), binary.into());
        self
    }

    /// The binary `image` maps to, if any.
    pub fn binary(&self, image: &str) -> Option<&Path> {
        self.binaries
            .get(image)
            .or_else(|| self.binaries.get(strip_tag(image)))
            .map(PathBuf::as_path)
    }

    /// The argv a container runs, following Kubernetes' rules for `command` (entrypoint) and
    /// `args`:
    ///
    /// - mapped image, no command: `[binary, args…]`;
    /// - mapped image with a command whose program has the binary's file name (e.g.
    ///   `/bin/manila-csi-plugin`): that program is replaced by the binary;
    /// - any other command (mapped or not): `[command…, args…]`, run with the host's tools;
    /// - unmapped image, no command: `sh` for shell images (busybox, alpine, …), else an
    ///   [`Error::UnknownImage`] naming the image.
    pub fn resolve(
        &self,
        container: &str,
        image: &str,
        command: &[String],
        args: &[String],
    ) -> Result<Vec<String>> {
        let binary = self.binary(image);
        let mut argv: Vec<String> = match (binary, command.split_first()) {
            (Some(binary), None) => vec![binary.display().to_string()],
            (Some(binary), Some((program, rest)))
                if Path::new(program).file_name() == binary.file_name() =>
            {
                std::iter::once(binary.display().to_string())
                    .chain(rest.iter().cloned())
                    .collect()
            }
            (_, Some(_)) => command.to_vec(),
            (None, None) if is_shell_image(image) && args.is_empty() => vec!["sh".into()],
            (None, None) if is_shell_image(image) => Vec::new(),
            (None, None) => {
                return Err(Error::UnknownImage {
                    image: image.into(),
                    container: container.into(),
                });
            }
        };
        argv.extend(args.iter().cloned());
        Ok(argv)
    }

    /// When `argv` (from [`ImageMap::resolve`]) runs `image`'s binary, a read-only bind mount of
    /// that binary at its own path: a binary under the host's `/tmp` or `/run` (a workspace
    /// cloned there) is otherwise invisible in the sandbox, whose `/tmp` and `/run` are private.
    /// `None` for any other program.
    pub fn binary_mount(&self, image: &str, argv: &[String]) -> Option<Mount> {
        let binary = self.binary(image)?;
        let program = argv.first()?;
        (Path::new(program) == binary && binary.is_absolute())
            .then(|| Mount::read_only(binary, binary))
    }
}

/// `registry:5000/a/b:tag@sha256:…` → `registry:5000/a/b`.
fn strip_tag(image: &str) -> &str {
    let image = image.split_once('@').map_or(image, |(name, _)| name);
    match image.rfind(':') {
        Some(colon) if !image[colon..].contains('/') => &image[..colon],
        _ => image,
    }
}

fn is_shell_image(image: &str) -> bool {
    let name = strip_tag(image);
    let last = name.rsplit('/').next().unwrap_or(name);
    SHELL_IMAGES.contains(&last)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn map() -> ImageMap {
        let mut map = ImageMap::new();
        map.insert(
            "example.org/csi/manila-csi-plugin",
            "/build/manila-csi-plugin",
        )
        .insert("example.org/csi/operator:v1", "/build/old/operator");
        map
    }

    #[test]
    fn mapped_image_without_command_runs_its_binary_with_args() {
        let argv = map()
            .resolve(
                "c",
                "example.org/csi/manila-csi-plugin:v1.2",
                &[],
                &strings(&["--v=4"]),
            )
            .unwrap();
        assert_eq!(argv, strings(&["/build/manila-csi-plugin", "--v=4"]));
    }

    #[test]
    fn mapped_image_command_naming_the_binary_is_redirected_to_it() {
        let argv = map()
            .resolve(
                "c",
                "example.org/csi/manila-csi-plugin@sha256:abc",
                &strings(&["/bin/manila-csi-plugin", "--endpoint=x"]),
                &strings(&["--v=4"]),
            )
            .unwrap();
        assert_eq!(
            argv,
            strings(&["/build/manila-csi-plugin", "--endpoint=x", "--v=4"])
        );
    }

    #[test]
    fn exact_tag_wins_and_other_tags_are_unknown() {
        let m = map();
        assert_eq!(
            m.binary("example.org/csi/operator:v1"),
            Some(Path::new("/build/old/operator"))
        );
        assert_eq!(m.binary("example.org/csi/operator:v2"), None);
    }

    #[test]
    fn generic_image_runs_command_with_host_tools() {
        let argv = map()
            .resolve(
                "c",
                "busybox:1.36",
                &strings(&["sh", "-c"]),
                &strings(&["echo hi"]),
            )
            .unwrap();
        assert_eq!(argv, strings(&["sh", "-c", "echo hi"]));
        let argv = map()
            .resolve("c", "docker.io/library/busybox", &[], &[])
            .unwrap();
        assert_eq!(argv, strings(&["sh"]));
    }

    #[test]
    fn unknown_image_without_command_names_image_and_container() {
        let err = map()
            .resolve("web", "localhost:5000/nginx:1.25", &[], &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("localhost:5000/nginx:1.25") && err.contains("web"),
            "{err}"
        );
    }

    #[test]
    fn only_the_mapped_binary_gets_a_read_only_mount_at_its_path() {
        let m = map();
        let image = "example.org/csi/manila-csi-plugin:v1";
        let argv = m.resolve("c", image, &[], &[]).unwrap();
        assert_eq!(
            m.binary_mount(image, &argv),
            Some(Mount::read_only(
                "/build/manila-csi-plugin",
                "/build/manila-csi-plugin"
            ))
        );
        let shell = m
            .resolve("c", image, &strings(&["sh", "-c", "true"]), &[])
            .unwrap();
        assert_eq!(m.binary_mount(image, &shell), None);
        assert_eq!(m.binary_mount("busybox", &strings(&["sh"])), None);
    }

    #[test]
    fn registry_port_is_not_a_tag() {
        assert_eq!(strip_tag("localhost:5000/nginx"), "localhost:5000/nginx");
        assert_eq!(strip_tag("localhost:5000/nginx:1"), "localhost:5000/nginx");
    }
}
