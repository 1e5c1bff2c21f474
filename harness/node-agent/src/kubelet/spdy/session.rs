//! A server-side SPDY session ([`Session`]): the client's streams as they open
//! ([`IncomingStream`]) and writing to them ([`Writer`]).

use std::collections::HashMap;

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::Headers;
use super::SpdyError;
use super::compression::{Deflater, Inflater};
use super::frame::{Frame, encode_frame, read_frame};

/// A stream the client opened: its headers and the data it sends (the receiver ends with
/// the client's FIN or RST_STREAM).
#[derive(Debug)]
pub struct IncomingStream {
    /// The stream id.
    pub id: u32,
    /// Its headers.
    pub headers: Headers,
    /// What the client sends on it.
    pub data: mpsc::Receiver<Bytes>,
}

impl IncomingStream {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Writing to a session's streams. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Writer(mpsc::Sender<Frame>);

impl Writer {
    /// Sends `data` on `stream`; `false` when the connection is gone.
    pub async fn data(&self, stream: u32, data: Bytes) -> bool {
        self.0
            .send(Frame::Data {
                stream,
                fin: false,
                data,
            })
            .await
            .is_ok()
    }

    /// Ends the server's side of `stream`.
    pub async fn finish(&self, stream: u32) {
        let _ = self
            .0
            .send(Frame::Data {
                stream,
                fin: true,
                data: Bytes::new(),
            })
            .await;
    }

    /// Resets `stream`.
    pub async fn reset(&self, stream: u32, status: u32) {
        let _ = self.0.send(Frame::RstStream { stream, status }).await;
    }
}

/// A server-side SPDY session on an upgraded connection: the client's new streams arrive on
/// [`Session::streams`] (each already answered with a SYN_REPLY); [`Session::writer`]
/// writes to them. The session ends when the client closes the connection (the streams'
/// receivers end) or [`Session::close`] is called.
pub struct Session {
    /// The client's streams, as they are opened.
    pub streams: mpsc::Receiver<IncomingStream>,
    writer: Writer,
    writing: tokio::task::JoinHandle<()>,
    reading: tokio::task::JoinHandle<()>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.reading.abort();
    }
}

impl Session {
    /// Starts reading and writing `io`.
    pub fn start<IO>(io: IO) -> Result<Self, SpdyError>
    where
        IO: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (mut reader, mut writer) = tokio::io::split(io);
        let (frames_tx, mut frames_rx) = mpsc::channel::<Frame>(64);
        let (streams_tx, streams_rx) = mpsc::channel::<IncomingStream>(16);
        let mut deflater = Deflater::new()?;
        let writing = tokio::spawn(async move {
            while let Some(frame) = frames_rx.recv().await {
                let bytes = match encode_frame(&frame, &mut deflater) {
                    Ok(bytes) => bytes,
                    Err(e) => {
                        tracing::debug!(error = %e, "encoding a SPDY frame failed");
                        break;
                    }
                };
                if writer.write_all(&bytes).await.is_err() {
                    break;
                }
                // Frames are flushed as soon as nothing else is queued.
                if frames_rx.is_empty() && writer.flush().await.is_err() {
                    break;
                }
                // GOAWAY is the server's last word.
                if matches!(frame, Frame::GoAway { .. }) {
                    break;
                }
            }
            let _ = writer.shutdown().await;
        });
        let replies = frames_tx.clone();
        let reading = tokio::spawn(async move {
            let mut inflater = Inflater::default();
            let mut open: HashMap<u32, mpsc::Sender<Bytes>> = HashMap::new();
            loop {
                let frame = match read_frame(&mut reader, &mut inflater).await {
                    Ok(Some(frame)) => frame,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!(error = %e, "SPDY session ended");
                        break;
                    }
                };
                match frame {
                    Frame::SynStream {
                        stream,
                        headers,
                        fin,
                    } => {
                        let (tx, rx) = mpsc::channel(64);
                        if !fin {
                            open.insert(stream, tx);
                        }
                        let reply = Frame::SynReply {
                            stream,
                            headers: Vec::new(),
                            fin: false,
                        };
                        if replies.send(reply).await.is_err() {
                            break;
                        }
                        let incoming = IncomingStream {
                            id: stream,
                            headers,
                            data: rx,
                        };
                        if streams_tx.send(incoming).await.is_err() {
                            break;
                        }
                    }
                    Frame::Data { stream, fin, data } => {
                        if let Some(tx) = open.get(&stream)
                            && !data.is_empty()
                            && tx.send(data).await.is_err()
                        {
                            open.remove(&stream);
                        }
                        if fin {
                            open.remove(&stream);
                        }
                    }
                    Frame::RstStream { stream, .. } => {
                        open.remove(&stream);
                    }
                    Frame::Ping(id) => {
                        let _ = replies.send(Frame::Ping(id)).await;
                    }
                    Frame::GoAway { .. } => break,
                    Frame::SynReply { .. } | Frame::Other(_) => {}
                }
            }
        });
        Ok(Session {
            streams: streams_rx,
            writer: Writer(frames_tx),
            writing,
            reading,
        })
    }

    /// A writer to the session's streams.
    pub fn writer(&self) -> Writer {
        self.writer.clone()
    }

    /// Says goodbye (GOAWAY) after the frames queued so far, and closes the connection.
    pub async fn close(mut self) {
        let _ = self.writer.0.send(Frame::GoAway { last: 0 }).await;
        let writing = &mut self.writing;
        if tokio::time::timeout(std::time::Duration::from_secs(5), writing)
            .await
            .is_err()
        {
            self.writing.abort();
        }
    }
}
