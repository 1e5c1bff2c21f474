//! A container's standard input, for attaching (`kubectl attach -i`, `kubectl run -i`).
//!
//! A container whose spec asks for `stdin` gets a pipe (or, with `tty`, its terminal) as
//! standard input. Its monitor holds the writing side, so the input survives a restart of the
//! node agent, and serves it on a unix socket in the container directory
//! ([`ContainerDir::input_socket`](super::layout::ContainerDir::input_socket)): what a client
//! writes on a connection reaches the container. With `stdinOnce`, the end of the first
//! connection closes the container's input (end of file; on a terminal, the end-of-file
//! character) and the socket goes away; otherwise the input stays open for the next client.
//! A container with a terminal has its terminal's path in
//! [`ContainerDir::terminal`](super::layout::ContainerDir::terminal), for resizes.

use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use super::layout::INPUT_SOCKET;

/// A path to the input socket of container directory `dir` that fits in a unix socket
/// address however deep `dir` is: `/proc/self/fd/<fd>/input.sock`, through the returned
/// descriptor of `dir`, which must stay open while the path is used.
pub fn short_socket_path(dir: &Path) -> io::Result<(OwnedFd, PathBuf)> {
    let fd = OwnedFd::from(std::fs::File::open(dir)?);
    let path = Path::new("/proc/self/fd")
        .join(std::os::fd::AsRawFd::as_raw_fd(&fd).to_string())
        .join(INPUT_SOCKET);
    Ok((fd, path))
}

/// Connects to the input socket of container directory `dir`; `None` when there is none to
/// connect to (the container has no open input: none asked for, closed after a `stdinOnce`
/// client, or the container ended).
pub(crate) async fn connect(dir: &Path) -> io::Result<Option<tokio::net::UnixStream>> {
    let (_dir_fd, path) = short_socket_path(dir)?;
    match tokio::net::UnixStream::connect(&path).await {
        Ok(stream) => Ok(Some(stream)),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}
