//! The mount and staging paths of a case: created and removed here, or by csi-sanity's
//! path commands ([`PathCommands`]) when they are configured; and what is at a path.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use super::config::{PathCommands, PathKind};

/// A path made for one case, and how to remove it afterwards.
#[derive(Debug, Clone)]
pub(crate) struct MadePath {
    pub(crate) path: PathBuf,
    /// The remove command, or `None` to remove the (empty) directory here.
    pub(crate) remove: Option<PathBuf>,
}

/// Runs `<command> <path>` (no shell) with `timeout`; its stdout, or why it failed (its
/// stderr included). The command is killed when it outlasts the timeout.
pub(crate) async fn run_path_command(
    what: &str,
    command: &Path,
    path: &Path,
    timeout: Duration,
) -> Result<String, String> {
    let shown = || format!("{what} command `{} {}`", command.display(), path.display());
    let child = tokio::process::Command::new(command)
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("{} cannot start: {e}", shown()))?;
    let output = match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return Err(format!("{} failed: {e}", shown())),
        Err(_) => return Err(format!("{} timed out after {timeout:?}", shown())),
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stderr = stderr.trim();
        return Err(format!(
            "{} failed ({}){}",
            shown(),
            output.status,
            if stderr.is_empty() {
                String::new()
            } else {
                format!(": {stderr}")
            }
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Makes one of a case's directories: with `create` (its stdout is the path to use), or
/// here when `dir` does not exist yet. Returns the path to use and what to remove later.
pub(crate) async fn make_dir(
    what: &str,
    dir: &Path,
    create: Option<&Path>,
    remove: Option<&Path>,
    commands: &PathCommands,
) -> Result<(PathBuf, Option<MadePath>), String> {
    let made = |path: PathBuf| MadePath {
        path,
        remove: remove.map(Path::to_path_buf),
    };
    if let Some(create) = create {
        let printed = run_path_command(
            &format!("{what} path creation"),
            create,
            dir,
            commands.create_timeout,
        )
        .await?;
        let printed = printed.trim();
        if printed.is_empty() {
            return Err(format!(
                "{what} path creation command `{} {}` printed no path",
                create.display(),
                dir.display()
            ));
        }
        let path = PathBuf::from(printed);
        return Ok((path.clone(), Some(made(path))));
    }
    if dir.is_dir() {
        return Ok((dir.to_path_buf(), None));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create directory {}: {e}", dir.display()))?;
    Ok((dir.to_path_buf(), Some(made(dir.to_path_buf()))))
}

/// Removes what [`make_dir`] made, newest first; one problem per path that could not be
/// removed (a directory left non-empty means the plugin left something behind).
pub(crate) async fn remove_made(made: &[MadePath], commands: &PathCommands) -> Vec<String> {
    let mut problems = Vec::new();
    for made in made.iter().rev() {
        let result = match &made.remove {
            Some(command) => {
                run_path_command("path removal", command, &made.path, commands.remove_timeout)
                    .await
                    .map(|_| ())
            }
            None => std::fs::remove_dir(&made.path).map_err(|e| {
                format!(
                    "cannot remove {}: {e}{}",
                    made.path.display(),
                    entries(&made.path)
                )
            }),
        };
        if let Err(problem) = result {
            problems.push(problem);
        }
    }
    problems
}

fn entries(dir: &Path) -> String {
    match std::fs::read_dir(dir) {
        Ok(read) => {
            let names: Vec<String> = read
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            if names.is_empty() {
                String::new()
            } else {
                format!(" (left inside: {})", names.join(", "))
            }
        }
        Err(_) => String::new(),
    }
}

/// What is at `path`: by the check command when configured, else looked up here (a
/// symbolic link is not followed).
pub(crate) async fn path_kind(path: &Path, commands: &PathCommands) -> Result<PathKind, String> {
    if let Some(check) = &commands.check {
        let printed = run_path_command("path check", check, path, commands.check_timeout).await?;
        return printed.parse().map_err(|e: String| {
            format!(
                "path check command `{} {}` {e}",
                check.display(),
                path.display()
            )
        });
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(PathKind::Directory),
        Ok(meta) if meta.is_file() => Ok(PathKind::File),
        Ok(_) => Ok(PathKind::Other),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(PathKind::NotFound),
        Err(e) => Err(format!("cannot look at {}: {e}", path.display())),
    }
}
