//! SPDY/3.1 as the Kubernetes stream protocols use it over an upgraded HTTP/1.1 connection
//! (what kubectl and client-go up to 1.29 speak for exec, attach and port-forward, and what
//! the apiserver passes through to the kubelet): the frames, the zlib-compressed header
//! blocks (with SPDY/3's dictionary, one compression context per direction), and a
//! [`Session`] that accepts the client's streams and writes to them.
//!
//! Flow control is not enforced in either direction: the Go implementation the clients use
//! sends no WINDOW_UPDATE, so a sender that waited for one would stall after 64 KiB.

use std::collections::HashMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

const VERSION: u16 = 3;
const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const FLAG_FIN: u8 = 0x01;
/// The largest frame payload accepted (SPDY's length field allows 16 MiB).
const MAX_PAYLOAD: usize = 1 << 24;
/// RST_STREAM status: the stream was refused (e.g. not expected).
pub const REFUSED_STREAM: u32 = 3;

/// SPDY/3's header-compression dictionary (draft 3, section 2.6.10.1): length-prefixed header
/// names and values, then common values run together.
pub fn dictionary() -> Vec<u8> {
    const WORDS: &[&str] = &[
        "options",
        "head",
        "post",
        "put",
        "delete",
        "trace",
        "accept",
        "accept-charset",
        "accept-encoding",
        "accept-language",
        "accept-ranges",
        "age",
        "allow",
        "authorization",
        "cache-control",
        "connection",
        "content-base",
        "content-encoding",
        "content-language",
        "content-length",
        "content-location",
        "content-md5",
        "content-range",
        "content-type",
        "date",
        "etag",
        "expect",
        "expires",
        "from",
        "host",
        "if-match",
        "if-modified-since",
        "if-none-match",
        "if-range",
        "if-unmodified-since",
        "last-modified",
        "location",
        "max-forwards",
        "pragma",
        "proxy-authenticate",
        "proxy-authorization",
        "range",
        "referer",
        "retry-after",
        "server",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
        "vary",
        "via",
        "warning",
        "www-authenticate",
        "method",
        "get",
        "status",
        "200 OK",
        "version",
        "HTTP/1.1",
        "url",
        "public",
        "set-cookie",
        "keep-alive",
        "origin",
    ];
    const TAIL: &[&str] = &[
        "100101201202205206300302303304305306307402405406407408409410411412413414415416417",
        "502504505",
        "203 Non-Authoritative Information",
        "204 No Content",
        "301 Moved Permanently",
        "400 Bad Request",
        "401 Unauthorized",
        "403 Forbidden",
        "404 Not Found",
        "500 Internal Server Error",
        "501 Not Implemented",
        "503 Service Unavailable",
        "Jan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 ",
        "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMT",
        "chunked,text/html,image/png,image/jpg,image/gif,application/xml,",
        "application/xhtml+xml,text/plain,text/javascript,public",
        "privatemax-age=gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.",
    ];
    let mut dictionary = Vec::with_capacity(1423);
    for word in WORDS {
        dictionary.put_u32(word.len() as u32);
        dictionary.extend_from_slice(word.as_bytes());
    }
    for text in TAIL {
        dictionary.extend_from_slice(text.as_bytes());
    }
    dictionary
}

/// Header name/value pairs (names lower-case).
pub type Headers = Vec<(String, String)>;

/// A frame as the session needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Stream data.
    Data {
        /// The stream.
        stream: u32,
        /// The last frame of the sender.
        fin: bool,
        /// The bytes.
        data: Bytes,
    },
    /// A new stream from the peer.
    SynStream {
        /// Its id.
        stream: u32,
        /// Its headers.
        headers: Headers,
        /// The sender sends nothing more.
        fin: bool,
    },
    /// The reply to a stream.
    SynReply {
        /// The stream.
        stream: u32,
        /// Its headers.
        headers: Headers,
        /// The replier sends nothing.
        fin: bool,
    },
    /// A stream's abrupt end.
    RstStream {
        /// The stream.
        stream: u32,
        /// Why.
        status: u32,
    },
    /// A ping (echoed).
    Ping(u32),
    /// The session ends.
    GoAway {
        /// The last stream the sender handled.
        last: u32,
    },
    /// Anything else (SETTINGS, WINDOW_UPDATE, HEADERS, …), ignored.
    Other(u16),
}

/// A SPDY protocol violation or a compression failure.
#[derive(Debug, thiserror::Error)]
pub enum SpdyError {
    /// The connection failed.
    #[error("SPDY connection: {0}")]
    Io(#[from] std::io::Error),
    /// A frame broke the protocol.
    #[error("SPDY protocol error: {0}")]
    Protocol(String),
}

/// Header-block compression state of one direction.
pub struct Deflater(Compress);

impl Deflater {
    /// A new context, primed with the dictionary.
    pub fn new() -> Result<Self, SpdyError> {
        let mut compress = Compress::new(Compression::default(), true);
        compress
            .set_dictionary(&dictionary())
            .map_err(|e| SpdyError::Protocol(format!("zlib dictionary: {e}")))?;
        Ok(Deflater(compress))
    }

    fn block(&mut self, headers: &Headers) -> Result<Vec<u8>, SpdyError> {
        let mut raw = Vec::new();
        raw.put_u32(headers.len() as u32);
        for (name, value) in headers {
            raw.put_u32(name.len() as u32);
            raw.extend_from_slice(name.as_bytes());
            raw.put_u32(value.len() as u32);
            raw.extend_from_slice(value.as_bytes());
        }
        let mut out = Vec::with_capacity(raw.len() + 64);
        let start = self.0.total_in();
        loop {
            let consumed = (self.0.total_in() - start) as usize;
            if out.capacity() - out.len() < 64 {
                out.reserve(256);
            }
            self.0
                .compress_vec(&raw[consumed..], &mut out, FlushCompress::Sync)
                .map_err(|e| SpdyError::Protocol(format!("compressing headers: {e}")))?;
            let consumed = (self.0.total_in() - start) as usize;
            // Done when everything is in and the flush fit in the room left.
            if consumed == raw.len() && out.len() < out.capacity() {
                return Ok(out);
            }
        }
    }
}

/// Header-block decompression state of one direction.
pub struct Inflater(Decompress);

impl Default for Inflater {
    fn default() -> Self {
        Inflater(Decompress::new(true))
    }
}

impl Inflater {
    fn block(&mut self, compressed: &[u8]) -> Result<Headers, SpdyError> {
        let mut out = Vec::with_capacity(compressed.len() * 4 + 256);
        let start = self.0.total_in();
        loop {
            let consumed = (self.0.total_in() - start) as usize;
            if out.capacity() - out.len() < 256 {
                out.reserve(out.capacity().max(1024));
            }
            match self
                .0
                .decompress_vec(&compressed[consumed..], &mut out, FlushDecompress::Sync)
            {
                Ok(Status::Ok | Status::BufError | Status::StreamEnd) => {}
                Err(e) if e.needs_dictionary().is_some() => {
                    self.0
                        .set_dictionary(&dictionary())
                        .map_err(|e| SpdyError::Protocol(format!("zlib dictionary: {e}")))?;
                }
                Err(e) => return Err(SpdyError::Protocol(format!("decompressing headers: {e}"))),
            }
            let consumed = (self.0.total_in() - start) as usize;
            if consumed == compressed.len() && out.len() < out.capacity() {
                break;
            }
        }
        parse_headers(&out)
    }
}

fn parse_headers(mut raw: &[u8]) -> Result<Headers, SpdyError> {
    let bad = || SpdyError::Protocol("truncated header block".into());
    let take = |raw: &mut &[u8]| -> Result<String, SpdyError> {
        if raw.remaining() < 4 {
            return Err(bad());
        }
        let len = raw.get_u32() as usize;
        if raw.remaining() < len {
            return Err(bad());
        }
        let text = String::from_utf8_lossy(&raw[..len]).into_owned();
        raw.advance(len);
        Ok(text)
    };
    if raw.remaining() < 4 {
        return Err(bad());
    }
    let count = raw.get_u32();
    let mut headers = Vec::new();
    for _ in 0..count {
        let name = take(&mut raw)?.to_ascii_lowercase();
        let value = take(&mut raw)?;
        headers.push((name, value));
    }
    Ok(headers)
}

/// Reads one frame.
pub async fn read_frame(
    reader: &mut (impl AsyncRead + Unpin),
    inflater: &mut Inflater,
) -> Result<Option<Frame>, SpdyError> {
    let mut head = [0u8; 8];
    match reader.read_exact(&mut head).await {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let flags = head[4];
    let length = u32::from_be_bytes([0, head[5], head[6], head[7]]) as usize;
    if length > MAX_PAYLOAD {
        return Err(SpdyError::Protocol(format!("frame of {length} bytes")));
    }
    let mut payload = vec![0u8; length];
    reader.read_exact(&mut payload).await?;
    let mut body = &payload[..];
    let fin = flags & FLAG_FIN != 0;
    if head[0] & 0x80 == 0 {
        let stream = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) & 0x7fff_ffff;
        return Ok(Some(Frame::Data {
            stream,
            fin,
            data: Bytes::from(payload),
        }));
    }
    let version = u16::from_be_bytes([head[0] & 0x7f, head[1]]);
    if version != VERSION {
        return Err(SpdyError::Protocol(format!("version {version}")));
    }
    let kind = u16::from_be_bytes([head[2], head[3]]);
    let short = || SpdyError::Protocol(format!("short frame of type {kind}"));
    Ok(Some(match kind {
        SYN_STREAM => {
            if body.len() < 10 {
                return Err(short());
            }
            let stream = body.get_u32() & 0x7fff_ffff;
            body.advance(6);
            Frame::SynStream {
                stream,
                headers: inflater.block(body)?,
                fin,
            }
        }
        SYN_REPLY => {
            if body.len() < 4 {
                return Err(short());
            }
            let stream = body.get_u32() & 0x7fff_ffff;
            Frame::SynReply {
                stream,
                headers: inflater.block(body)?,
                fin,
            }
        }
        RST_STREAM => {
            if body.len() < 8 {
                return Err(short());
            }
            Frame::RstStream {
                stream: body.get_u32() & 0x7fff_ffff,
                status: body.get_u32(),
            }
        }
        PING => {
            if body.len() < 4 {
                return Err(short());
            }
            Frame::Ping(body.get_u32())
        }
        GOAWAY => {
            if body.len() < 4 {
                return Err(short());
            }
            Frame::GoAway {
                last: body.get_u32() & 0x7fff_ffff,
            }
        }
        // HEADERS carry a header block: it must go through the inflater to keep the
        // compression context in step.
        8 => {
            if body.len() >= 4 {
                body.advance(4);
                inflater.block(body)?;
            }
            Frame::Other(8)
        }
        other => Frame::Other(other),
    }))
}

/// Encodes one frame.
pub fn encode_frame(frame: &Frame, deflater: &mut Deflater) -> Result<BytesMut, SpdyError> {
    let mut out = BytesMut::new();
    let control = |out: &mut BytesMut, kind: u16, flags: u8, payload: &[u8]| {
        out.put_u16(0x8000 | VERSION);
        out.put_u16(kind);
        out.put_u8(flags);
        let len = payload.len() as u32;
        out.put_slice(&len.to_be_bytes()[1..]);
        out.put_slice(payload);
    };
    match frame {
        Frame::Data { stream, fin, data } => {
            out.put_u32(stream & 0x7fff_ffff);
            out.put_u8(if *fin { FLAG_FIN } else { 0 });
            let len = data.len() as u32;
            out.put_slice(&len.to_be_bytes()[1..]);
            out.put_slice(data);
        }
        Frame::SynStream {
            stream,
            headers,
            fin,
        } => {
            let mut payload = Vec::new();
            payload.put_u32(*stream);
            payload.put_u32(0);
            payload.put_u16(0);
            payload.extend(deflater.block(headers)?);
            control(
                &mut out,
                SYN_STREAM,
                if *fin { FLAG_FIN } else { 0 },
                &payload,
            );
        }
        Frame::SynReply {
            stream,
            headers,
            fin,
        } => {
            let mut payload = Vec::new();
            payload.put_u32(*stream);
            payload.extend(deflater.block(headers)?);
            control(
                &mut out,
                SYN_REPLY,
                if *fin { FLAG_FIN } else { 0 },
                &payload,
            );
        }
        Frame::RstStream { stream, status } => {
            let mut payload = Vec::new();
            payload.put_u32(*stream);
            payload.put_u32(*status);
            control(&mut out, RST_STREAM, 0, &payload);
        }
        Frame::Ping(id) => control(&mut out, PING, 0, &id.to_be_bytes()),
        Frame::GoAway { last } => {
            let mut payload = Vec::new();
            payload.put_u32(*last);
            payload.put_u32(0);
            control(&mut out, GOAWAY, 0, &payload);
        }
        Frame::Other(_) => {}
    }
    Ok(out)
}

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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_dictionary_is_spdy3s() {
        let dictionary = dictionary();
        assert_eq!(dictionary.len(), 1423);
        assert_eq!(&dictionary[..11], b"\0\0\0\x07options");
        assert!(dictionary.ends_with(b"enq=0."));
    }

    #[tokio::test]
    async fn frames_round_trip_with_compressed_headers() {
        let mut deflater = Deflater::new().unwrap();
        let mut inflater = Inflater::default();
        let frames = [
            Frame::SynStream {
                stream: 1,
                headers: vec![("streamtype".into(), "error".into())],
                fin: false,
            },
            Frame::SynStream {
                stream: 3,
                headers: vec![
                    ("streamtype".into(), "stdout".into()),
                    ("port".into(), "8080".into()),
                ],
                fin: true,
            },
            Frame::Data {
                stream: 3,
                fin: true,
                data: Bytes::from_static(b"hello"),
            },
            Frame::Ping(7),
            Frame::RstStream {
                stream: 1,
                status: REFUSED_STREAM,
            },
        ];
        let mut wire = Vec::new();
        for frame in &frames {
            wire.extend_from_slice(&encode_frame(frame, &mut deflater).unwrap());
        }
        let mut reader = &wire[..];
        for want in &frames {
            let got = read_frame(&mut reader, &mut inflater)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(&got, want);
        }
        assert!(
            read_frame(&mut reader, &mut inflater)
                .await
                .unwrap()
                .is_none()
        );
    }
}
