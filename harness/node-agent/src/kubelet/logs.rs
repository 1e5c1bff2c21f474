//! `GET /containerLogs/{namespace}/{pod}/{container}`: a container's log as kubelet serves it
//! to `kubectl logs` (through the apiserver's `pods/log`).
//!
//! - Which attempt: the current one, or with `previous` the one before it; while the
//!   container waits to be restarted (`CrashLoopBackOff`), both are the last attempt that
//!   ran, as kubelet's `lastState.terminated`. No such attempt: `400` with kubelet's message
//!   (`previous terminated container "c" in pod "p" not found`, `container "c" in pod "p" is
//!   waiting to start: ContainerCreating`).
//! - `tailLines` (the last N lines), `limitBytes` (at most N bytes in all), `follow` (the
//!   body goes on as the container writes, and ends when the attempt ends or the client
//!   goes).
//! - `timestamps` (each line prefixed with the RFC 3339 time it began), `sinceSeconds` and
//!   `sinceTime` (only lines begun since), from the times the runtime's monitor notes for
//!   each line (`output.times`; a container started before they were kept has none: its
//!   lines are stamped with the Unix epoch and `since` does not filter them).

use std::io::{Read, Seek, SeekFrom};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use k8s_openapi::api::core::v1::Pod;

use super::http::{Query, Response, text};
use pod_runtime::Container;

/// How often a followed log is checked for more output.
const FOLLOW_POLL: Duration = Duration::from_millis(100);
/// The most read from the log file at once.
const CHUNK: usize = 64 * 1024;

/// The options of a log request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogOptions {
    /// The previous attempt.
    pub previous: bool,
    /// Stream on.
    pub follow: bool,
    /// The last N lines only.
    pub tail_lines: Option<usize>,
    /// At most N bytes.
    pub limit_bytes: Option<usize>,
    /// Each line prefixed with the time it began.
    pub timestamps: bool,
    /// Only lines begun at or after this Unix time (ns): `sinceSeconds` or `sinceTime`.
    pub since: Option<i128>,
}

impl LogOptions {
    /// From the query; `Err` is kubelet's 400 message.
    pub fn parse(query: &Query) -> Result<Self, String> {
        let non_negative = |key: &str| -> Result<Option<usize>, String> {
            match query.int(key)? {
                Some(n) if n < 0 => Err(format!("{key} must be non-negative, not {n}")),
                Some(n) => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
                None => Ok(None),
            }
        };
        let limit_bytes = non_negative("limitBytes")?;
        if limit_bytes == Some(0) {
            return Err("limitBytes must be a positive integer".into());
        }
        let now = k8s_openapi::jiff::Timestamp::now().as_nanosecond();
        let since = match (non_negative("sinceSeconds")?, query.get("sinceTime")) {
            (Some(_), Some(_)) => {
                return Err("at most one of sinceTime or sinceSeconds may be specified".into());
            }
            (Some(0), None) => return Err("sinceSeconds must be a positive integer".into()),
            (Some(seconds), None) => {
                Some(now - i128::try_from(seconds).unwrap_or(0) * 1_000_000_000)
            }
            (None, Some(time)) if !time.is_empty() => Some(
                time.parse::<k8s_openapi::jiff::Timestamp>()
                    .map_err(|e| format!("invalid sinceTime {time:?}: {e}"))?
                    .as_nanosecond(),
            ),
            (None, _) => None,
        };
        Ok(LogOptions {
            previous: query.flag("previous"),
            follow: query.flag("follow"),
            tail_lines: non_negative("tailLines")?,
            limit_bytes,
            timestamps: query.flag("timestamps"),
            since,
        })
    }
}

/// Picks the attempt to read in `attempts` (oldest first) of container `name` of `pod`.
pub fn pick<'a>(
    pod: &Pod,
    name: &str,
    attempts: &'a [Container],
    previous: bool,
) -> Result<&'a Container, String> {
    let pod_name = pod.metadata.name.as_deref().unwrap_or("");
    let status = pod.status.as_ref().and_then(|s| {
        s.container_statuses
            .iter()
            .chain(s.init_container_statuses.iter())
            .flatten()
            .find(|c| c.name == name)
    });
    let waiting = status
        .and_then(|s| s.state.as_ref())
        .and_then(|s| s.waiting.as_ref());
    // While waiting to restart, the last attempt is both "current" and "previous".
    let back = match (previous, waiting.is_some()) {
        (false, _) | (true, true) => 1,
        (true, false) => 2,
    };
    if let Some(attempt) = attempts
        .len()
        .checked_sub(back)
        .and_then(|i| attempts.get(i))
    {
        return Ok(attempt);
    }
    if previous {
        return Err(format!(
            "previous terminated container {name:?} in pod {pod_name:?} not found"
        ));
    }
    let reason = waiting
        .and_then(|w| w.reason.clone())
        .unwrap_or_else(|| "ContainerCreating".into());
    Err(format!(
        "container {name:?} in pod {pod_name:?} is waiting to start: {reason}"
    ))
}

/// The log of `attempt` as `options` ask.
pub fn serve(attempt: Container, options: &LogOptions) -> Response {
    let path = attempt.log_path();
    let mut file = match std::fs::File::open(&path) {
        Ok(file) => Some(file),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return text(
                http::StatusCode::INTERNAL_SERVER_ERROR,
                format!("reading the log: {e}"),
            );
        }
    };
    let mut start = 0u64;
    if let (Some(tail), Some(file)) = (options.tail_lines, file.as_mut()) {
        match tail_offset(file, tail) {
            Ok(offset) => start = offset,
            Err(e) => {
                return text(
                    http::StatusCode::INTERNAL_SERVER_ERROR,
                    format!("reading the log: {e}"),
                );
            }
        }
    }
    if let Some(since) = options.since {
        // The first line that began at or after `since` (none: nothing before now).
        let times = attempt.log_times();
        if !times.is_empty() {
            let first = times.partition_point(|(_, at)| *at < since);
            let since_offset = match times.get(first) {
                Some((offset, _)) => *offset,
                None => file
                    .as_ref()
                    .and_then(|f| f.metadata().ok())
                    .map_or(0, |m| m.len()),
            };
            start = start.max(since_offset);
        }
    }
    let limit = options.limit_bytes.unwrap_or(usize::MAX);
    let follow = options.follow;
    let timestamps = options.timestamps;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(4);
    tokio::spawn(async move {
        let mut offset = start;
        let mut sent = 0usize;
        let mut file = file;
        let mut stamper = Stamper::new(start);
        loop {
            // Checked before reading, so what was written before the end is sent.
            let ended = !follow || attempt.exit_status().ok().flatten().is_some();
            if file.is_none() {
                file = std::fs::File::open(attempt.log_path()).ok();
            }
            let chunk = match file.as_mut().map(|f| read_from(f, offset, CHUNK)) {
                Some(Ok(chunk)) => chunk,
                Some(Err(e)) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
                None => Vec::new(),
            };
            let read = chunk.len();
            offset += read as u64;
            let mut out = if timestamps {
                stamper.push(&chunk, &attempt, ended && read == 0)
            } else {
                chunk
            };
            if !out.is_empty() {
                out.truncate(limit - sent);
                sent += out.len();
                if tx.send(Ok(Frame::data(Bytes::from(out)))).await.is_err() {
                    return;
                }
                if sent >= limit {
                    return;
                }
            }
            if read > 0 {
                // There may be more already.
                continue;
            }
            if ended {
                if timestamps {
                    let rest = stamper.push(&[], &attempt, true);
                    if !rest.is_empty() {
                        let mut rest = rest;
                        rest.truncate(limit - sent);
                        let _ = tx.send(Ok(Frame::data(Bytes::from(rest)))).await;
                    }
                }
                return;
            }
            tokio::select! {
                () = tokio::time::sleep(FOLLOW_POLL) => {}
                () = tx.closed() => return,
            }
        }
    });
    let frames = futures::stream::unfold(rx, |mut rx| async move {
        let frame = rx.recv().await?;
        Some((frame, rx))
    });
    let mut response = http::Response::new(StreamBody::new(frames).boxed());
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain"),
    );
    response
}

/// Prefixes each line with the time it began (RFC 3339 with nanoseconds, as kubelet), from
/// the runtime's `output.times`; only whole lines, unless the log has ended.
struct Stamper {
    /// Bytes of a line not ended yet, and the offset where it began.
    pending: Vec<u8>,
    pending_offset: u64,
    times: Vec<(u64, i128)>,
}

impl Stamper {
    fn new(start: u64) -> Self {
        Stamper {
            pending: Vec::new(),
            pending_offset: start,
            times: Vec::new(),
        }
    }

    fn push(&mut self, chunk: &[u8], attempt: &Container, ended: bool) -> Vec<u8> {
        self.pending.extend_from_slice(chunk);
        let mut out = Vec::new();
        let mut line_start = 0usize;
        while let Some(newline) = self.pending[line_start..].iter().position(|b| *b == b'\n') {
            let end = line_start + newline + 1;
            let offset = self.pending_offset + line_start as u64;
            self.stamp(offset, attempt, &mut out);
            out.extend_from_slice(&self.pending[line_start..end]);
            line_start = end;
        }
        if ended && line_start < self.pending.len() {
            let offset = self.pending_offset + line_start as u64;
            self.stamp(offset, attempt, &mut out);
            out.extend_from_slice(&self.pending[line_start..]);
            line_start = self.pending.len();
        }
        self.pending.drain(..line_start);
        self.pending_offset += line_start as u64;
        out
    }

    fn stamp(&mut self, offset: u64, attempt: &Container, out: &mut Vec<u8>) {
        if self.times.last().is_none_or(|(last, _)| *last < offset) {
            self.times = attempt.log_times();
        }
        let index = self.times.partition_point(|(o, _)| *o <= offset);
        let nanos = index
            .checked_sub(1)
            .and_then(|i| self.times.get(i))
            .map(|(_, at)| *at)
            .unwrap_or(0);
        let time = k8s_openapi::jiff::Timestamp::from_nanosecond(nanos)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        out.extend_from_slice(format!("{time} ").as_bytes());
    }
}

/// Reads at most `CHUNK` (and `max`) bytes from `offset`.
fn read_from(file: &mut std::fs::File, offset: u64, max: usize) -> std::io::Result<Vec<u8>> {
    file.seek(SeekFrom::Start(offset))?;
    let mut buf = vec![0; CHUNK.min(max)];
    let n = file.read(&mut buf)?;
    buf.truncate(n);
    Ok(buf)
}

/// The offset where the last `lines` lines start (a last line without its newline counts).
fn tail_offset(file: &mut std::fs::File, lines: usize) -> std::io::Result<u64> {
    let len = file.seek(SeekFrom::End(0))?;
    if lines == 0 {
        return Ok(len);
    }
    let mut newlines = 0usize;
    let mut pos = len;
    let mut buf = vec![0u8; 8192];
    let mut first = true;
    while pos > 0 {
        let size = (buf.len() as u64).min(pos) as usize;
        pos -= size as u64;
        file.seek(SeekFrom::Start(pos))?;
        file.read_exact(&mut buf[..size])?;
        for i in (0..size).rev() {
            if buf[i] != b'\n' {
                first = false;
                continue;
            }
            // A newline ending the file closes the last line, it does not start one.
            if first && pos + i as u64 == len - 1 {
                first = false;
                continue;
            }
            newlines += 1;
            if newlines == lines {
                return Ok(pos + i as u64 + 1);
            }
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use rstest::rstest;
    use std::io::Write;

    use super::*;

    #[rstest]
    #[case(b"a\nb\nc\n", 2, b"b\nc\n")]
    #[case(b"a\nb\nc", 2, b"b\nc")]
    #[case(b"a\nb\nc\n", 5, b"a\nb\nc\n")]
    #[case(b"a\nb\nc\n", 0, b"")]
    #[case(b"", 3, b"")]
    fn tail_lines_as_kubelet(#[case] content: &[u8], #[case] lines: usize, #[case] want: &[u8]) {
        let mut file = tempfile::Builder::new().prefix("logs-").tempfile().unwrap();
        file.write_all(content).unwrap();
        let mut f = file.reopen().unwrap();
        let offset = tail_offset(&mut f, lines).unwrap() as usize;
        assert_eq!(&content[offset..], want);
    }

    #[test]
    fn bad_options_are_refused() {
        let q = Query::parse(Some("tailLines=-1"));
        assert!(LogOptions::parse(&q).unwrap_err().contains("tailLines"));
        let q = Query::parse(Some("limitBytes=x"));
        assert!(LogOptions::parse(&q).unwrap_err().contains("limitBytes"));
        let q = Query::parse(Some("follow=true&tailLines=3&limitBytes=10"));
        assert_eq!(
            LogOptions::parse(&q).unwrap(),
            LogOptions {
                previous: false,
                follow: true,
                tail_lines: Some(3),
                limit_bytes: Some(10),
                timestamps: false,
                since: None,
            }
        );
    }
}
