//! SPDY/3.1 frames as the session needs them ([`Frame`]): read from and encoded to the
//! wire ([`read_frame`], [`encode_frame`]), header blocks through the direction's
//! compression context.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::compression::{Deflater, Inflater};
use super::{Headers, SpdyError};

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
#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

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
