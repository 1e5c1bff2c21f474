//! SPDY/3's header blocks: name/value pairs, zlib-compressed with SPDY/3's dictionary
//! ([`dictionary`]), one compression context per direction ([`Deflater`], [`Inflater`]).

use bytes::{Buf, BufMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::{Headers, SpdyError};

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

    pub(super) fn block(&mut self, headers: &Headers) -> Result<Vec<u8>, SpdyError> {
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
    pub(super) fn block(&mut self, compressed: &[u8]) -> Result<Headers, SpdyError> {
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
}
