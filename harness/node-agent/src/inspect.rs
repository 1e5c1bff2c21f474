//! Reaching a node's pods from any process through its run directory: exec into a container
//! and read its logs (what `kubectl exec` and `kubectl logs` do through a real kubelet).
//!
//! A pod is found by its directory (see [`layout`](super::layout)); its sandbox is the
//! runtime's sandbox with the pod UID as id.

use std::path::Path;

use pod_runtime::{Container, ExecOutput, Runtime, RuntimeConfig};

use super::error::{Error, Result};
use super::layout::pod_uids;

/// The attempts of `container` in pod `namespace/pod`, oldest first (of the running pod
/// instance when a pod of that name ran several times).
fn attempts(run_dir: &Path, namespace: &str, pod: &str, container: &str) -> Result<Vec<Container>> {
    let not_found = |what: String| Error::NotFound {
        what,
        run_dir: run_dir.to_path_buf(),
    };
    let runtime = Runtime::new(RuntimeConfig::new(run_dir.join("runtime")))?;
    let mut sandboxes = Vec::new();
    for uid in pod_uids(run_dir, namespace, pod) {
        if let Some(sandbox) = runtime.sandbox(&uid)? {
            sandboxes.push(sandbox);
        }
    }
    // Prefer the running instance, then the most recent.
    sandboxes.sort_by_key(|s| {
        let modified = std::fs::metadata(s.dir()).and_then(|m| m.modified()).ok();
        (s.is_running(), modified)
    });
    let sandbox = sandboxes
        .pop()
        .ok_or_else(|| not_found(format!("pod {namespace}/{pod}")))?;
    let attempts: Vec<Container> = sandbox
        .containers()?
        .into_iter()
        .filter(|c| c.name() == container)
        .collect();
    if attempts.is_empty() {
        return Err(not_found(format!(
            "container {container:?} of pod {namespace}/{pod}"
        )));
    }
    Ok(attempts)
}

/// Runs `argv` in the current attempt of `container` of pod `namespace/pod` on the node whose
/// run directory is `run_dir`.
pub async fn exec(
    run_dir: &Path,
    namespace: &str,
    pod: &str,
    container: &str,
    argv: &[String],
) -> Result<ExecOutput> {
    let attempts = attempts(run_dir, namespace, pod, container)?;
    let Some(current) = attempts.last() else {
        return Err(Error::NotFound {
            what: format!("container {container:?} of pod {namespace}/{pod}"),
            run_dir: run_dir.to_path_buf(),
        });
    };
    Ok(current.exec(argv).await?)
}

/// The log of the current attempt of `container` (or, with `previous`, of the attempt before).
pub fn logs(
    run_dir: &Path,
    namespace: &str,
    pod: &str,
    container: &str,
    previous: bool,
) -> Result<String> {
    let attempts = attempts(run_dir, namespace, pod, container)?;
    let index = attempts.len().checked_sub(if previous { 2 } else { 1 });
    let Some(attempt) = index.and_then(|i| attempts.get(i)) else {
        return Err(Error::NotFound {
            what: format!("previous terminated container {container:?} in pod {namespace}/{pod}"),
            run_dir: run_dir.to_path_buf(),
        });
    };
    Ok(attempt.logs()?)
}
