//! The control socket of a running embedded cluster (`<run dir>/control.sock`): lets a process
//! that attached to the cluster ask its owner for what only the owner can do (restart a node
//! agent, whose process is the owner's child).
//!
//! Protocol: one request line, one answer line. `restart-node-agent <node>` → `ok` or
//! `error <message>`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kube_support::error::{IoContext, error_chain};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use super::super::error::{Error, Result};
use super::NodeAgents;
use super::description::CONTROL_SOCKET;

const RESTART: &str = "restart-node-agent";

/// Serves the control socket until stopped.
#[derive(Debug)]
pub(crate) struct ControlServer {
    task: JoinHandle<()>,
    path: PathBuf,
}

impl ControlServer {
    pub(crate) fn start(run_dir: &Path, agents: Arc<Mutex<NodeAgents>>) -> Result<Self> {
        let path = run_dir.join(CONTROL_SOCKET);
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).map_err(Error::io("listening on", &path))?;
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let agents = agents.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve(stream, &agents).await {
                        tracing::warn!("control connection: {e}");
                    }
                });
            }
        });
        Ok(Self { task, path })
    }

    pub(crate) fn stop(&self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(stream: UnixStream, agents: &Mutex<NodeAgents>) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    BufReader::new(read).read_line(&mut line).await?;
    let answer = match line.trim().split_once(' ') {
        Some((RESTART, node)) => match super::restart_node_agent(agents, node.trim()).await {
            Ok(()) => "ok".to_string(),
            Err(e) => format!("error {}", error_chain(&e)),
        },
        _ => format!("error unknown request {:?}", line.trim()),
    };
    write.write_all(format!("{answer}\n").as_bytes()).await?;
    write.shutdown().await
}

/// Asks the cluster owning `run_dir` to restart the agent of `node`.
pub(crate) async fn request_restart(run_dir: &Path, node: &str) -> Result<()> {
    request(run_dir, &format!("{RESTART} {node}")).await
}

async fn request(run_dir: &Path, request: &str) -> Result<()> {
    let failed = |message: String| Error::Control {
        request: request.into(),
        message,
    };
    let path = run_dir.join(CONTROL_SOCKET);
    let stream = UnixStream::connect(&path)
        .await
        .map_err(|e| failed(format!("connecting to {}: {e}", path.display())))?;
    let (read, mut write) = stream.into_split();
    write
        .write_all(format!("{request}\n").as_bytes())
        .await
        .map_err(|e| failed(format!("sending: {e}")))?;
    let mut answer = String::new();
    BufReader::new(read)
        .read_line(&mut answer)
        .await
        .map_err(|e| failed(format!("reading the answer: {e}")))?;
    match answer.trim() {
        "ok" => Ok(()),
        other => Err(failed(
            other.strip_prefix("error ").unwrap_or(other).to_string(),
        )),
    }
}
