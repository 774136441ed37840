//! Chunked transfer coding, incrementally: where a chunked body ends (and whether bytes
//! follow it, which retires the node connection), and its data. The lean client decodes
//! buffered answers with it; the lean front's passthrough decodes a node's chunked body
//! with it and sends the data on in chunks of its own (extensions and trailers dropped).
//! Strict: a bare LF or control byte anywhere in the framing is an error, so where the
//! body ends never depends on which parser reads it (fuzz/: `chunked`).

/// Longest chunk-size line (size, extensions) accepted.
const MAX_SIZE_LINE: usize = 1024;
/// Most trailer bytes accepted after the last chunk (hyper's limit too).
const MAX_TRAILERS: usize = 16 * 1024;
/// Most trailer fields accepted.
const MAX_TRAILER_FIELDS: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Reading the hex size (then extensions) up to CRLF.
    Size {
        value: u64,
        digits: usize,
        /// Whitespace after the size: only more of it, `;` or CR may follow.
        space: bool,
        ext: bool,
        len: usize,
    },
    SizeLf {
        value: u64,
    },
    Data {
        left: u64,
    },
    DataCr,
    DataLf,
    /// After the last chunk: trailer lines up to an empty one.
    Trailer {
        line: usize,
        total: usize,
    },
    TrailerLf {
        line: usize,
        total: usize,
    },
    Done,
}

#[derive(Debug, PartialEq)]
pub enum Scan {
    /// Every byte given belongs to the body; more is to come.
    More,
    /// The body ends after this many bytes of the last input.
    Done(usize),
}

pub struct ChunkedScanner {
    state: State,
    /// The trailer section as it arrives, checked as header fields once complete (empty
    /// unless a node sends trailers).
    trailers: Vec<u8>,
}

impl Default for ChunkedScanner {
    fn default() -> Self {
        ChunkedScanner {
            trailers: Vec::new(),
            state: State::Size {
                value: 0,
                digits: 0,
                space: false,
                ext: false,
                len: 0,
            },
        }
    }
}

impl ChunkedScanner {
    /// Data bytes the current chunk has announced but not delivered yet (a size limit
    /// can refuse the body before they arrive).
    pub fn announced(&self) -> u64 {
        match self.state {
            State::Data { left } => left,
            _ => 0,
        }
    }

    /// Feed the next bytes of the body as they arrive; `on_data` gets each run of chunk
    /// data among them.
    pub fn feed(
        &mut self,
        bytes: &[u8],
        mut on_data: impl FnMut(&[u8]),
    ) -> Result<Scan, &'static str> {
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            self.state = match self.state {
                State::Done => return Ok(Scan::Done(i)),
                State::Data { left } => {
                    // Skip the chunk's data in one step.
                    let take = (bytes.len() - i).min(left.min(usize::MAX as u64) as usize);
                    on_data(&bytes[i..i + take]);
                    i += take;
                    let left = left - take as u64;
                    self.state = if left == 0 {
                        State::DataCr
                    } else {
                        State::Data { left }
                    };
                    continue;
                }
                State::Size {
                    value,
                    digits,
                    space,
                    ext,
                    len,
                } => size_line_byte(value, digits, space, ext, len, b)?,
                State::SizeLf { value } => match b {
                    b'\n' if value == 0 => State::Trailer { line: 0, total: 0 },
                    b'\n' => State::Data { left: value },
                    _ => return Err("bad chunk size line"),
                },
                State::DataCr => match b {
                    b'\r' => State::DataLf,
                    _ => return Err("chunk data longer than its size"),
                },
                State::DataLf => match b {
                    b'\n' => State::Size {
                        value: 0,
                        digits: 0,
                        space: false,
                        ext: false,
                        len: 0,
                    },
                    _ => return Err("chunk data longer than its size"),
                },
                State::Trailer { line, total } => {
                    if total >= MAX_TRAILERS {
                        return Err("trailers too large");
                    }
                    if b != b'\r' {
                        self.trailers.push(b);
                    }
                    match b {
                        b'\r' => State::TrailerLf {
                            line,
                            total: total + 1,
                        },
                        // Bare LF: where the body ends would depend on the reader.
                        c if is_ctl(c) => return Err("bad trailer line"),
                        _ => State::Trailer {
                            line: line + 1,
                            total: total + 1,
                        },
                    }
                }
                State::TrailerLf { line, total } => match b {
                    b'\n' if line == 0 => {
                        check_trailers(&self.trailers)?;
                        self.trailers = Vec::new();
                        self.state = State::Done;
                        return Ok(Scan::Done(i + 1));
                    }
                    b'\n' => {
                        self.trailers.extend_from_slice(b"\r\n");
                        State::Trailer {
                            line: 0,
                            total: total + 1,
                        }
                    }
                    _ => return Err("bad trailer line"),
                },
            };
            i += 1;
        }
        Ok(if self.state == State::Done {
            Scan::Done(bytes.len())
        } else {
            Scan::More
        })
    }
}

/// The next state after one byte of a chunk-size line (`value` in hex `digits`, then
/// optional whitespace or a `;` extension, up to CRLF).
#[inline]
fn size_line_byte(
    value: u64,
    digits: usize,
    space: bool,
    ext: bool,
    len: usize,
    b: u8,
) -> Result<State, &'static str> {
    if len >= MAX_SIZE_LINE {
        return Err("chunk size line too long");
    }
    let next = |space, ext| State::Size {
        value,
        digits,
        space,
        ext,
        len: len + 1,
    };
    Ok(match b {
        b'\r' if digits > 0 => State::SizeLf { value },
        // A bare LF or other control byte in an extension could end the
        // line for one parser and not another.
        c if ext && is_ctl(c) => return Err("bad chunk extension"),
        _ if ext => next(false, true),
        b';' if digits > 0 => next(false, true),
        b' ' | b'\t' if digits > 0 => next(true, false),
        _ if space => return Err("bad chunk size line"),
        _ => {
            let d = (b as char).to_digit(16).ok_or("bad chunk size")?;
            if digits >= 15 {
                return Err("chunk size too large");
            }
            State::Size {
                value: value * 16 + d as u64,
                digits: digits + 1,
                space,
                ext,
                len: len + 1,
            }
        }
    })
}

/// A trailer section (field lines, each ending in CRLF) must be header fields as
/// httparse and `http`'s types read them, as hyper checks them: a line without a colon,
/// a bad name or value, too many fields, is an error rather than data to skip.
fn check_trailers(section: &[u8]) -> Result<(), &'static str> {
    if section.is_empty() {
        return Ok(());
    }
    let mut fields = [httparse::EMPTY_HEADER; MAX_TRAILER_FIELDS];
    let mut whole = Vec::with_capacity(section.len() + 2);
    whole.extend_from_slice(section);
    whole.extend_from_slice(b"\r\n");
    match httparse::parse_headers(&whole, &mut fields) {
        Ok(httparse::Status::Complete((_, fields))) => {
            for f in fields.iter() {
                http::HeaderName::from_bytes(f.name.as_bytes()).map_err(|_| "bad trailer name")?;
                http::HeaderValue::from_bytes(f.value).map_err(|_| "bad trailer value")?;
            }
            Ok(())
        }
        _ => Err("bad trailer section"),
    }
}

/// Control bytes other than HTAB, never valid in a chunk line or a trailer field.
fn is_ctl(c: u8) -> bool {
    (c < 0x20 && c != b'\t') || c == 0x7f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_all(parts: &[&[u8]]) -> Result<Option<(usize, usize)>, &'static str> {
        let mut s = ChunkedScanner::default();
        for (n, p) in parts.iter().enumerate() {
            if let Scan::Done(at) = s.feed(p, |_| {})? {
                return Ok(Some((n, at)));
            }
        }
        Ok(None)
    }

    #[test]
    fn finds_the_end_across_any_split() {
        let body = b"4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-Trailer: a\r\n\r\nNEXT";
        let end = body.len() - 4;
        for cut in 0..body.len() {
            let (a, b) = body.split_at(cut);
            let got = scan_all(&[a, b]).unwrap().unwrap();
            let at = if got.0 == 0 { got.1 } else { cut + got.1 };
            assert_eq!(at, end, "cut at {cut}");
        }
    }

    #[test]
    fn decodes_the_data_across_any_split() {
        let body = b"4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\n\r\n";
        for cut in 0..body.len() {
            let (a, b) = body.split_at(cut);
            let mut s = ChunkedScanner::default();
            let mut data = Vec::new();
            for part in [a, b] {
                let _ = s.feed(part, |d| data.extend_from_slice(d)).unwrap();
            }
            assert_eq!(data, b"Wikipedia in\r\n\r\nchunks.", "cut at {cut}");
        }
    }

    #[test]
    fn incomplete_bodies_ask_for_more() {
        assert_eq!(scan_all(&[b"5\r\nhel"]).unwrap(), None);
        assert_eq!(scan_all(&[b"0\r\n"]).unwrap(), None);
        assert_eq!(scan_all(&[b"0\r\n\r\n"]).unwrap(), Some((0, 5)));
    }

    #[test]
    fn malformed_framing_is_an_error() {
        assert!(scan_all(&[b"zz\r\n"]).is_err());
        assert!(scan_all(&[b"\r\n"]).is_err());
        assert!(scan_all(&[b"2\r\nabc\r\n"]).is_err());
        assert!(scan_all(&[b"ffffffffffffffff\r\n"]).is_err());
        assert!(scan_all(&[&[b'1'; 2000]]).is_err());
        // A bare LF in an extension or after the last chunk (a response smuggled in).
        assert!(scan_all(&[b"1;a\nb\r\nx\r\n0\r\n\r\n"]).is_err());
        assert!(scan_all(&[b"0\r\n\nHTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n"]).is_err());
        assert!(scan_all(&[b"0\r\nX-T: a\nb\r\n\r\n"]).is_err());
        // Trailers are header fields or an error (hyper refuses these too).
        assert!(scan_all(&[b"0\r\nhello\r\n\r\n"]).is_err());
        assert!(scan_all(&[b"0\r\nBad Name: v\r\n\r\n"]).is_err());
        assert!(scan_all(&[b"0\r\n folded: v\r\n\r\n"]).is_err());
        // Whitespace after the size only before an extension or the line's end.
        assert!(scan_all(&[b"0 ch\r\n\r\n"]).is_err());
        assert!(scan_all(&[b"1 1\r\nx\r\n"]).is_err());
        assert_eq!(scan_all(&[b"0 \t;a=b\r\n\r\n"]).unwrap(), Some((0, 11)));
        assert_eq!(scan_all(&[b"0  \r\n\r\n"]).unwrap(), Some((0, 7)));
        assert_eq!(
            scan_all(&[b"0\r\nA: 1\r\nB:2\r\n\r\n"]).unwrap(),
            Some((0, 16))
        );
    }
}
