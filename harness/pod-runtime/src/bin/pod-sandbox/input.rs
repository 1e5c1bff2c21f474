//! The monitor's side of a container's standard input (see `pod_runtime::input`): it
//! holds the writing side (a pipe, or the terminal's master) and copies what attached clients
//! send on `input.sock` into it, on threads of their own, so the monitor's main thread keeps
//! copying output.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Mutex};

use anyhow::Context;
use pod_runtime::input::short_socket_path;
use pod_runtime::layout::ContainerDir;

/// The end-of-file character of a terminal in canonical mode (^D): how a terminal's input
/// is "closed" for the program reading it.
const END_OF_TRANSMISSION: u8 = 0x04;

/// The container's input as the monitor holds it.
pub struct Input {
    /// Where what clients send goes; `None` once closed.
    writer: Mutex<Option<File>>,
    /// Closed when the first client is done (`stdinOnce`).
    once: bool,
    /// It is a terminal (closing sends the end-of-file character; the master stays open
    /// for the output).
    terminal: bool,
    /// The socket path, removed when the input closes.
    dir: ContainerDir,
}

/// Serves the input of the container in `dir` on its socket until the input closes (or the
/// monitor exits with the container).
pub fn serve(
    dir: &ContainerDir,
    writer: OwnedFd,
    once: bool,
    terminal: bool,
) -> anyhow::Result<()> {
    let socket = dir.input_socket();
    let _ = std::fs::remove_file(&socket);
    let (dir_fd, path) = short_socket_path(&dir.0).context("opening the container directory")?;
    let listener = UnixListener::bind(&path).with_context(|| format!("listening on {socket:?}"))?;
    drop(dir_fd);
    let input = Arc::new(Input {
        writer: Mutex::new(Some(File::from(writer))),
        once,
        terminal,
        dir: dir.clone(),
    });
    std::thread::Builder::new()
        .name("input".into())
        .spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let input = input.clone();
                let spawned = std::thread::Builder::new()
                    .name("input-client".into())
                    .spawn(move || input.copy_from(client));
                if let Err(e) = spawned {
                    eprintln!("pod-sandbox: serving an input client: {e}");
                }
            }
        })
        .context("starting the input thread")?;
    Ok(())
}

impl Input {
    /// Copies what `client` sends until it shuts its side down or goes, then closes the
    /// input if it is `once`.
    fn copy_from(&self, mut client: UnixStream) {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match client.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let Ok(mut writer) = self.writer.lock() else {
                return;
            };
            let Some(file) = writer.as_mut() else {
                return;
            };
            if file.write_all(&buf[..n]).is_err() {
                // The container stopped reading (it ended): nothing more to deliver.
                *writer = None;
                return;
            }
        }
        if self.once {
            self.close();
        }
    }

    /// Closes the input for good: the socket goes, the container reads end of file.
    fn close(&self) {
        let _ = std::fs::remove_file(self.dir.input_socket());
        let Ok(mut writer) = self.writer.lock() else {
            return;
        };
        if let Some(mut file) = writer.take()
            && self.terminal
        {
            let _ = file.write_all(&[END_OF_TRANSMISSION]);
        }
    }
}
