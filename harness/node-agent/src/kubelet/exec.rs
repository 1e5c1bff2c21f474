//! `exec` and `attach` whatever the stream protocol: the command in the container, its
//! streams pumped to and from channels the protocol feeds ([`Streams`]), and its end as the
//! `Status` kubelet reports on the error stream (`v4.channel.k8s.io` and later).
//!
//! The command runs as a session of its own ([`ExecSession`]): when the client goes away
//! before it ends, it is killed with its process group, so no process outlives the stream.
//! `attach` has no process of its own to join here (container output goes to a log file):
//! it follows the container's output as a stream and ends with it, and writes to the
//! container's input through its monitor (`runtime::input`).

use std::time::Duration;

use bytes::Bytes;
use kube_support::error::error_chain;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

use pod_runtime::{Container, OutputStream, TerminalSize};

/// How long output is still read after the command ended (a background process may hold
/// its streams open forever).
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// What an exec request asks for (its query).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOptions {
    /// The command (`command=` repeated).
    pub command: Vec<String>,
    /// Standard input is streamed.
    pub stdin: bool,
    /// Standard output is streamed.
    pub stdout: bool,
    /// Standard error is streamed (never with a TTY).
    pub stderr: bool,
    /// A terminal.
    pub tty: bool,
    /// `attach` (to the container's own output) rather than `exec` of `command`.
    pub attach: bool,
}

impl ExecOptions {
    /// From the query, as kubelet validates it.
    pub fn parse(query: &super::http::Query, attach: bool) -> Result<Self, String> {
        let tty = query.flag("tty");
        let options = ExecOptions {
            command: query.all("command"),
            stdin: query.flag("stdin") || query.flag("input"),
            stdout: query.flag("stdout") || query.flag("output"),
            stderr: (query.flag("stderr") || query.flag("error")) && !tty,
            tty,
            attach,
        };
        if !attach && options.command.is_empty() {
            return Err("you must specify at least one command for the container".into());
        }
        if !options.stdin && !options.stdout && !options.stderr {
            return Err("you must specify at least 1 of stdin, stdout, stderr".into());
        }
        Ok(options)
    }
}

/// The channels between a protocol and a running command: `None` for a stream the request
/// did not ask for. Closing `stdin`'s sender closes the command's input.
#[derive(Debug, Default)]
pub struct Streams {
    /// To the command.
    pub stdin: Option<mpsc::Receiver<Bytes>>,
    /// From the command.
    pub stdout: Option<mpsc::Sender<Bytes>>,
    /// From the command.
    pub stderr: Option<mpsc::Sender<Bytes>>,
    /// Terminal sizes.
    pub resize: Option<mpsc::Receiver<TerminalSize>>,
}

/// How an exec ended, as the error stream reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The command exited with this code (128 + n: killed by signal n).
    Exited(i32),
    /// It could not run at all: the message.
    Failed(String),
}

impl Ended {
    /// The `v4.channel.k8s.io` error-stream `Status` (what kubectl turns into its exit code).
    pub fn status(&self, command: &[String]) -> serde_json::Value {
        match self {
            Ended::Exited(0) => json!({"metadata": {}, "status": "Success"}),
            Ended::Exited(code) => json!({
                "metadata": {},
                "status": "Failure",
                "message": format!(
                    "command terminated with non-zero exit code: error executing command {command:?}, exit code {code}"
                ),
                "reason": "NonZeroExitCode",
                "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
            }),
            Ended::Failed(message) => json!({
                "metadata": {},
                "status": "Failure",
                "message": message,
                "reason": "InternalError",
                "code": 500,
            }),
        }
    }

    /// What the error stream of channel protocol `version` carries at the end: the
    /// [`status`](Ended::status) from v4 on, before it the bare message (nothing on
    /// success).
    pub fn report(&self, version: u8, command: &[String]) -> bytes::Bytes {
        if version >= 4 {
            return bytes::Bytes::from(self.status(command).to_string());
        }
        match self {
            Ended::Exited(0) => bytes::Bytes::new(),
            Ended::Exited(code) => bytes::Bytes::from(format!(
                "command terminated with non-zero exit code: {code}"
            )),
            Ended::Failed(message) => bytes::Bytes::from(message.clone()),
        }
    }
}

/// Runs `options.command` in `container`, streaming through `streams`, until it ends or
/// `cancelled` completes (the client went away: the command is killed).
pub async fn run(
    container: &Container,
    options: &ExecOptions,
    mut streams: Streams,
    cancelled: impl std::future::Future<Output = ()>,
) -> Ended {
    if options.attach {
        return attach(container, streams, cancelled).await;
    }
    let size = TerminalSize {
        width: 80,
        height: 24,
    };
    let mut session = match container
        .exec_session(&options.command, options.tty.then_some(size))
        .await
    {
        Ok(session) => session,
        Err(e) => return Ended::Failed(error_chain(&e)),
    };
    let stdin_pump = {
        let input = session.take_stdin();
        let rx = streams.stdin.take();
        async move {
            let (Some(mut input), Some(mut rx)) = (input, rx) else {
                return;
            };
            while let Some(data) = rx.recv().await {
                if input.write_all(&data).await.is_err() {
                    return;
                }
            }
            let _ = input.shutdown().await;
        }
    };
    let stdout_pump = pump(session.take_stdout(), streams.stdout.take());
    let stderr_pump = pump(session.take_stderr(), streams.stderr.take());
    let mut outputs = tokio::task::JoinSet::new();
    outputs.spawn(stdout_pump);
    outputs.spawn(stderr_pump);
    let stdin_task = tokio::spawn(stdin_pump);
    let mut resize = streams.resize.take();
    tokio::pin!(cancelled);
    let mut client_gone = false;
    let ended = loop {
        tokio::select! {
            status = session.wait() => break status,
            size = async { match resize.as_mut() { Some(rx) => rx.recv().await, None => std::future::pending().await } } => {
                match size {
                    Some(size) => {
                        if let Err(e) = session.resize(size) {
                            tracing::debug!(error = %error_chain(&e), "resizing a terminal failed");
                        }
                    }
                    None => resize = None,
                }
            }
            () = &mut cancelled, if !client_gone => {
                client_gone = true;
                session.terminate();
            }
        }
    };
    stdin_task.abort();
    // What the command wrote before it ended is still delivered.
    let drained = tokio::time::timeout(DRAIN_GRACE, async {
        while outputs.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        outputs.abort_all();
    }
    match ended {
        Ok(status) => Ended::Exited(status.code()),
        Err(pod_runtime::Error::CannotExecute {
            command, reason, ..
        }) => {
            // runc's words, which kubectl prints.
            Ended::Failed(format!(
                "OCI runtime exec failed: exec failed: unable to start container process: exec: {command:?}: {reason}: unknown"
            ))
        }
        Err(pod_runtime::Error::NotRunning { .. }) => {
            Ended::Failed(format!("container not running ({:?})", container.name()))
        }
        Err(e) => Ended::Failed(error_chain(&e)),
    }
}

/// How often an attached container's output is checked.
const ATTACH_POLL: Duration = Duration::from_millis(50);

/// Attaches to `container`: its output from now on (the runtime keeps stdout and stderr
/// together in the log, so all of it goes to stdout), until it ends (then `Success`, as
/// kubelet's attach) or the client goes. What the client sends reaches the container's
/// input when it has one (`stdin` in its spec; the end of the client's input or of the
/// session closes it with `stdinOnce`), and is dropped otherwise, as kubelet drops it;
/// resizes reach its terminal.
async fn attach(
    container: &Container,
    mut streams: Streams,
    cancelled: impl std::future::Future<Output = ()>,
) -> Ended {
    use std::io::{Read, Seek, SeekFrom};
    let path = container.log_path();
    let mut offset = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let output = streams.stdout.take().or(streams.stderr.take());
    let input = match streams.stdin.take() {
        Some(rx) => match container.attach_input().await {
            Ok(socket) => Some(tokio::spawn(forward_input(rx, socket))),
            Err(e) => return Ended::Failed(error_chain(&e)),
        },
        None => None,
    };
    let resizes = streams.resize.take().map(|mut rx| {
        let container = container.clone();
        tokio::spawn(async move {
            while let Some(size) = rx.recv().await {
                if let Err(e) = container.resize_terminal(size) {
                    tracing::debug!(error = %error_chain(&e), "resizing a terminal failed");
                }
            }
        })
    });
    // The input and resize tasks end with the attach, however it ends.
    let _tasks = AbortOnDrop([input, resizes]);
    tokio::pin!(cancelled);
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        let ended = container.exit_status().ok().flatten().is_some();
        let mut read = 0;
        if let Ok(mut file) = std::fs::File::open(&path)
            && file.seek(SeekFrom::Start(offset)).is_ok()
        {
            read = file.read(&mut buf).unwrap_or(0);
        }
        if read > 0 {
            offset += read as u64;
            if let Some(tx) = &output
                && tx.send(Bytes::copy_from_slice(&buf[..read])).await.is_err()
            {
                return Ended::Exited(0);
            }
            continue;
        }
        if ended {
            return Ended::Exited(0);
        }
        tokio::select! {
            () = tokio::time::sleep(ATTACH_POLL) => {}
            () = &mut cancelled => return Ended::Exited(0),
        }
    }
}

/// Sends what the client writes to the container's input `socket` (dropping it when there
/// is none), then shuts the socket down when the client's input ends.
async fn forward_input(mut rx: mpsc::Receiver<Bytes>, socket: Option<tokio::net::UnixStream>) {
    let Some(mut socket) = socket else {
        while rx.recv().await.is_some() {}
        return;
    };
    while let Some(data) = rx.recv().await {
        if socket.write_all(&data).await.is_err() {
            return;
        }
    }
    let _ = socket.shutdown().await;
}

/// Aborts its tasks when dropped.
struct AbortOnDrop<const N: usize>([Option<tokio::task::JoinHandle<()>>; N]);

impl<const N: usize> Drop for AbortOnDrop<N> {
    fn drop(&mut self) {
        for task in self.0.iter().flatten() {
            task.abort();
        }
    }
}

/// Copies `output` to `tx` until the end (or the receiver is gone).
async fn pump(output: Option<OutputStream>, tx: Option<mpsc::Sender<Bytes>>) {
    let Some(output) = output else {
        return;
    };
    copy_chunks(output, |chunk| {
        let tx = tx.clone();
        async move {
            match tx {
                Some(tx) => tx.send(chunk).await.is_ok(),
                None => true,
            }
        }
    })
    .await;
}

/// Reads `reader` in chunks of up to 32 KiB, as they come, and hands each to `each` until
/// the end, a read error, or `each` answers `false` (its receiver is gone): the copy of a
/// command's output or a forwarded port's data to the client.
pub(super) async fn copy_chunks<F, Fut>(mut reader: impl tokio::io::AsyncRead + Unpin, mut each: F)
where
    F: FnMut(Bytes) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if !each(Bytes::copy_from_slice(&buf[..n])).await {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::kubelet::http::Query;

    #[test]
    fn statuses_are_what_kubectl_reads() {
        let command = vec!["sh".to_string(), "-c".into(), "exit 3".into()];
        assert_eq!(Ended::Exited(0).status(&command)["status"], "Success");
        let failed = Ended::Exited(3).status(&command);
        assert_eq!(failed["reason"], "NonZeroExitCode");
        assert_eq!(failed["details"]["causes"][0]["message"], "3");
        assert_eq!(Ended::Exited(3).report(4, &command), failed.to_string());
        assert_eq!(
            Ended::Exited(3).report(3, &command),
            "command terminated with non-zero exit code: 3"
        );
        assert!(Ended::Exited(0).report(2, &command).is_empty());
        assert_eq!(Ended::Failed("no".into()).report(1, &command), "no");
    }

    #[test]
    fn options_need_a_command_and_a_stream() {
        let q = Query::parse(Some("command=ls&command=-l&stdout=1&stderr=1&tty=1"));
        let options = ExecOptions::parse(&q, false).unwrap();
        assert_eq!(options.command, ["ls", "-l"]);
        assert!(!options.stderr, "no stderr with a TTY");
        assert!(ExecOptions::parse(&Query::parse(Some("stdout=1")), false).is_err());
        assert!(ExecOptions::parse(&Query::parse(Some("command=ls")), false).is_err());
    }
}
