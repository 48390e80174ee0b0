//! An HTTP/1.1 exchange's bytes, without IO: the request written, the
//! answer's head parsed (httparse) and its framing decided ([`HeadReader`]),
//! its body decoded ([`Decoder`]: a length, the chunked coding, or until the
//! connection closes) from what has been read so far.
//!
//! The upstream is not trusted. Its head is bounded ([`MAX_HEAD`],
//! [`MAX_HEADERS`], [`MAX_INTERIM`] interim answers), a chunk's size line
//! too, and the extensions and trailers of a body together ([`MAX_EXTRAS`]:
//! the bounds on what an answer holds count its data alone). A size that
//! overflows or is not hex is refused, and so is an answer whose length is
//! ambiguous (a length and a coding, which RFC 9112 §6.3 lets a client
//! treat as an error, two lengths that differ, a coding in HTTP/1.0): it
//! would leave us reading the next answer from the middle of this one. A
//! line or a head that comes a byte at a time is looked through once.
//!
//! Of an answer's headers, only what frames its body and what an MCP client
//! reads ([`Head`]) is kept: they are looked at in the pass that finds the
//! framing, and no map of them all is built. Building a `HeaderMap` of an
//! answer's headers, whose names and values were checked again and hashed,
//! was about 3,000 of the 83,000 instructions an upstream call cost the
//! front (#18, `loadtest/callgrind-tools-call.sh` with `UPSTREAM=http1`).

use bytes::{Buf as _, Bytes, BytesMut};
use http::StatusCode;
use http::header::{CONNECTION, CONTENT_LENGTH, CONTENT_TYPE, HOST, HeaderName, HeaderValue, TRANSFER_ENCODING};
use switchyard_protocol::headers::SESSION_ID;

/// What an answer's head (its status line and headers) may take.
pub(super) const MAX_HEAD: usize = 64 * 1024;
/// How many headers an answer may have (hyper's bound).
pub(super) const MAX_HEADERS: usize = 100;
/// What a chunk's size line may take, extensions and all.
const MAX_SIZE_LINE: usize = 4 * 1024;

/// Writes into `out` a POST of `body` to `target` at `host`, with
/// `headers`. Those that frame the message or name the host are ours, and
/// one of the same name in `headers` is left out.
pub(super) fn write_request<'h>(
    out: &mut Vec<u8>,
    target: &str,
    host: &HeaderValue,
    headers: impl IntoIterator<Item = (&'h HeaderName, &'h HeaderValue)>,
    body: &[u8],
) {
    out.clear();
    out.extend_from_slice(b"POST ");
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(host.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        if [&HOST, &CONTENT_LENGTH, &TRANSFER_ENCODING, &CONNECTION].contains(&name) {
            continue;
        }
        // Neither can hold CR or LF: `http` checked both when they were made.
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"content-length: ");
    push_decimal(out, body.len());
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(body);
}

/// `n` in decimal at the end of `out`.
fn push_decimal(out: &mut Vec<u8>, mut n: usize) {
    let mut digits = [0; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// An answer's head: its status, how its body is read, and what an MCP
/// client reads of its headers (the first of each, as `HeaderMap::get` gives).
#[derive(Debug)]
pub(super) struct Head {
    pub(super) status: StatusCode,
    pub(super) framing: Framing,
    /// Whether the connection may carry another request once the body is read.
    pub(super) reusable: bool,
    /// Whether its `Content-Type` is `text/event-stream`.
    pub(super) event_stream: bool,
    /// Its `Mcp-Session-Id`, if that is text (visible ASCII or tab).
    pub(super) session: Option<String>,
}

/// How an answer's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// After this many bytes.
    Length(u64),
    /// With the chunked coding's last chunk (and trailers).
    Chunked,
    /// When the upstream closes the connection.
    UntilClose,
}

/// Reads an answer's head from what has come of it. A head nearly always
/// comes whole in the first read, so it is parsed at once. Only once a parse
/// found it partial are the bytes that come looked through (once) for the
/// head's end, and httparse runs again only once it is there: a head that
/// trickles in a byte at a time costs its length, not its square. Empty
/// lines before a status line, which httparse skips (as RFC 9112 §2.2 lets
/// a recipient), are taken off as they come, so that the look does not take
/// them for a head's end, and they count against [`MAX_HEAD`]. Interim
/// answers (1xx) are skipped, [`MAX_INTERIM`] at most.
#[derive(Debug, Default)]
pub(super) struct HeadReader {
    /// Whether a parse found this head partial, so that its end is looked
    /// for before parsing again.
    partial: bool,
    /// How far the bytes read have been looked through for the head's end.
    scanned: usize,
    /// The interim answers skipped.
    interim: usize,
    /// The bytes of empty lines taken off before a status line.
    blank: usize,
    /// How often httparse ran, for the test that a trickle stays linear.
    #[cfg(test)]
    parses: usize,
}

/// How many interim answers (1xx) may come before an answer.
const MAX_INTERIM: usize = 16;

impl HeadReader {
    /// Parses the answer's head at the start of `read`, and takes it from
    /// there: `Ok(None)` if it has not all come yet.
    ///
    /// # Errors
    /// Why the head cannot be read: not HTTP/1.x, too large, too many
    /// headers or interim answers, a switch of protocol, or a length that
    /// is not one number.
    pub(super) fn parse(&mut self, read: &mut BytesMut) -> Result<Option<Head>, String> {
        loop {
            while let Some(line) = [&b"\n"[..], b"\r\n"].into_iter().find(|line| read.starts_with(line)) {
                read.advance(line.len());
                self.scanned = self.scanned.saturating_sub(line.len());
                self.blank += line.len();
                if self.blank > MAX_HEAD {
                    return Err(format!("an answer's empty lines exceed {MAX_HEAD} bytes"));
                }
            }
            // Nothing yet (the first look, before a read; or after an
            // interim answer): a parse would only find it partial.
            if read.is_empty() {
                return Ok(None);
            }
            if self.partial && !self.end_seen(read) {
                return if read.len() < MAX_HEAD {
                    Ok(None)
                } else {
                    Err(format!("an answer's head exceeds {MAX_HEAD} bytes"))
                };
            }
            #[cfg(test)]
            {
                self.parses += 1;
            }
            let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut parsed = httparse::Response::new(&mut slots);
            let length = match parsed.parse(read) {
                Ok(httparse::Status::Complete(length)) if length <= MAX_HEAD => length,
                Ok(httparse::Status::Partial) if read.len() < MAX_HEAD => {
                    self.partial = true;
                    return Ok(None);
                }
                Ok(_) => return Err(format!("an answer's head exceeds {MAX_HEAD} bytes")),
                Err(httparse::Error::TooManyHeaders) => {
                    return Err(format!("an answer has over {MAX_HEADERS} headers"));
                }
                Err(e) => return Err(format!("an answer's head is not HTTP/1.1: {e}")),
            };
            let code = parsed.code.unwrap_or_default();
            let status = StatusCode::from_u16(code).map_err(|_| format!("an answer's status {code} is not one"))?;
            if status == StatusCode::SWITCHING_PROTOCOLS {
                return Err("the upstream switched protocols unasked".into());
            }
            if status.is_informational() {
                self.interim += 1;
                if self.interim > MAX_INTERIM {
                    return Err(format!("over {MAX_INTERIM} interim answers came"));
                }
                read.advance(length);
                self.partial = false;
                self.scanned = 0;
                continue;
            }
            let version_1_1 = parsed.version == Some(1);
            // httparse checked each name (a token) and value (no control
            // byte but tab), as `HeaderName` and `HeaderValue` would.
            let mut seen = HeaderFacts::default();
            for header in parsed.headers.iter() {
                seen.see(header.name.as_bytes(), header.value)?;
            }
            read.advance(length);
            let framing = seen.framing(status)?;
            if !version_1_1 && seen.coded.is_some() {
                // RFC 9112 §6.1: a transfer coding in an HTTP/1.0 message is faulty framing.
                return Err("an HTTP/1.0 answer has a transfer coding".into());
            }
            let reusable = version_1_1 && !seen.closes && framing != Framing::UntilClose;
            let HeaderFacts { event_stream, session, .. } = seen;
            return Ok(Some(Head {
                status,
                framing,
                reusable,
                event_stream: event_stream.unwrap_or(false),
                session: session.flatten(),
            }));
        }
    }

    /// Whether the end of a head (an empty line, after CRLF or LF) is in
    /// `read`, looking only at what was not looked at before (but for the
    /// last two bytes, where an end may have begun).
    fn end_seen(&mut self, read: &[u8]) -> bool {
        let from = self.scanned.min(read.len());
        let seen = read[from..].iter().enumerate().any(|(i, &byte)| {
            let rest = &read[from + i + 1..];
            byte == b'\n' && (rest.starts_with(b"\n") || rest.starts_with(b"\r\n"))
        });
        self.scanned = read.len().saturating_sub(2);
        seen
    }
}

/// What an answer's headers say of how its body ends and of its
/// connection, and what an MCP client reads of them.
#[derive(Default)]
struct HeaderFacts {
    /// The length, once given (the same however often).
    length: Option<u64>,
    /// Whether a transfer coding was given, and the last one is chunked.
    coded: Option<bool>,
    /// Whether `Connection` holds `close`.
    closes: bool,
    /// Whether the first `Content-Type` is an event stream (and text), once seen.
    event_stream: Option<bool>,
    /// The first `Mcp-Session-Id`, once seen, if it is text.
    session: Option<Option<String>>,
}

impl HeaderFacts {
    /// Takes in the header `name` (a token, any case) with `value`.
    fn see(&mut self, name: &[u8], value: &[u8]) -> Result<(), String> {
        let is = |known: &str| name.eq_ignore_ascii_case(known.as_bytes());
        if is(CONTENT_LENGTH.as_str()) {
            for part in value.split(|&b| b == b',') {
                let part = part.trim_ascii();
                if part.is_empty() || !part.iter().all(u8::is_ascii_digit) {
                    return Err(format!("an answer's length {:?} is not a number", String::from_utf8_lossy(part)));
                }
                let part: u64 = std::str::from_utf8(part)
                    .ok()
                    .and_then(|part| part.parse().ok())
                    .ok_or_else(|| format!("an answer's length {} is too large", String::from_utf8_lossy(part)))?;
                if self.length.is_some_and(|seen| seen != part) {
                    return Err("an answer has two lengths".into());
                }
                self.length = Some(part);
            }
        } else if is(TRANSFER_ENCODING.as_str()) {
            let last = value.rsplit(|&b| b == b',').next().unwrap_or_default();
            self.coded = Some(last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if is(CONNECTION.as_str()) {
            self.closes |= value.split(|&b| b == b',').any(|token| token.trim_ascii().eq_ignore_ascii_case(b"close"));
        } else if is(CONTENT_TYPE.as_str()) {
            self.event_stream.get_or_insert_with(|| is_text(value) && value.starts_with(b"text/event-stream"));
        } else if is(SESSION_ID) {
            self.session.get_or_insert_with(|| is_text(value).then(|| String::from_utf8_lossy(value).into_owned()));
        }
        Ok(())
    }

    /// How the body of an answer to a POST with `status` ends (RFC 9112
    /// §6.3), refusing what could be read two ways.
    fn framing(&self, status: StatusCode) -> Result<Framing, String> {
        if status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED {
            return Ok(Framing::Length(0));
        }
        match (self.coded, self.length) {
            (Some(_), Some(_)) => Err("an answer has both a length and a transfer coding".into()),
            (Some(true), None) => Ok(Framing::Chunked),
            (Some(false), None) | (None, None) => Ok(Framing::UntilClose),
            (None, Some(length)) => Ok(Framing::Length(length)),
        }
    }
}

/// Whether a header's `value` is text as `HeaderValue::to_str` reads it
/// (visible ASCII or tab), as the answers that come by reqwest or h2c are read.
fn is_text(value: &[u8]) -> bool {
    value.iter().all(|&b| b == b'\t' || (b' '..=b'~').contains(&b))
}

/// What [`Decoder::decode`] found in what was read.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Decoded {
    /// A piece of the body.
    Data(Bytes),
    /// More must be read first.
    More,
    /// The body has ended (what follows in the buffer is not its).
    End,
}

/// Where a body's reading stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// This many bytes of a body with a length are left.
    Length(u64),
    /// A chunk's size line comes next.
    Size,
    /// This many bytes of a chunk are left.
    Chunk(u64),
    /// The CRLF after a chunk's data comes next.
    ChunkEnd,
    /// The trailers come next.
    Trailers,
    /// The body goes on until the connection closes.
    UntilClose,
    /// The body has ended.
    Ended,
}

/// A body's reading: where it stands, how far the line it waits for has
/// been looked for, and how many bytes of the chunked coding were neither
/// data nor a size (extensions, trailers), which [`MAX_EXTRAS`] bounds for
/// the whole body, as the data's own bounds count only the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Decoder {
    state: State,
    scanned: usize,
    extras: usize,
}

/// What a body's chunk extensions and trailers may take together (hyper's
/// bound for each).
const MAX_EXTRAS: usize = 16 * 1024;

impl Decoder {
    pub(super) fn new(framing: Framing) -> Self {
        let state = match framing {
            Framing::Length(0) => State::Ended,
            Framing::Length(length) => State::Length(length),
            Framing::Chunked => State::Size,
            Framing::UntilClose => State::UntilClose,
        };
        Self { state, scanned: 0, extras: 0 }
    }

    /// The body's next piece in `read`, taken from it; or whether more must
    /// be read first, or the body has ended.
    ///
    /// # Errors
    /// The chunked coding broken, or a line of it over its bound.
    pub(super) fn decode(&mut self, read: &mut BytesMut) -> Result<Decoded, String> {
        if !self.frame(read)? {
            return Ok(Decoded::More);
        }
        match self.state {
            State::Length(left) | State::Chunk(left) if !read.is_empty() => {
                let taken = usize::try_from(left).unwrap_or(usize::MAX).min(read.len());
                let left = left - taken as u64;
                self.state = match (self.state, left) {
                    (State::Length(_), 0) => State::Ended,
                    (State::Length(_), _) => State::Length(left),
                    (_, 0) => State::ChunkEnd,
                    _ => State::Chunk(left),
                };
                Ok(Decoded::Data(read.split_to(taken).freeze()))
            }
            State::UntilClose if !read.is_empty() => Ok(Decoded::Data(read.split().freeze())),
            State::Ended => Ok(Decoded::End),
            _ => Ok(Decoded::More),
        }
    }

    /// Reads past what frames the data in `read` (a chunk's size line, the
    /// CRLF after it, the trailers), as far as it has come: `true` once at
    /// data or at the end, `false` if more must be read first. Nothing of
    /// the data is taken, so that a connection whose body has all come is
    /// known to be free before the data's reader asks again.
    ///
    /// # Errors
    /// The chunked coding broken, or a line of it over its bound.
    pub(super) fn frame(&mut self, read: &mut BytesMut) -> Result<bool, String> {
        loop {
            match self.state {
                State::Length(_) | State::Chunk(_) | State::UntilClose | State::Ended => return Ok(true),
                State::Size => {
                    let Some(line) = line(read, &mut self.scanned, MAX_SIZE_LINE, "a chunk's size line")? else {
                        return Ok(false);
                    };
                    let (size, extension) = chunk_size(&line)?;
                    self.take_extras(extension)?;
                    self.state = if size == 0 { State::Trailers } else { State::Chunk(size) };
                }
                State::ChunkEnd => {
                    if read.len() < 2 {
                        return Ok(false);
                    }
                    if &read[..2] != b"\r\n" {
                        return Err("a chunk does not end where its size says".into());
                    }
                    read.advance(2);
                    self.state = State::Size;
                }
                State::Trailers => {
                    let most = MAX_EXTRAS - self.extras + 2;
                    let Some(line) = line(read, &mut self.scanned, most, "the trailers")? else {
                        return Ok(false);
                    };
                    // (Trailers carry nothing to hand on.)
                    self.take_extras(line.len())?;
                    if line.is_empty() {
                        self.state = State::Ended;
                    }
                }
            }
        }
    }

    /// Counts `bytes` more of extensions or trailers against [`MAX_EXTRAS`].
    fn take_extras(&mut self, bytes: usize) -> Result<(), String> {
        self.extras += bytes;
        if self.extras > MAX_EXTRAS {
            return Err(format!("the chunked coding's extensions and trailers exceed {MAX_EXTRAS} bytes"));
        }
        Ok(())
    }

    /// Whether the body has been read to its end.
    pub(super) fn ended(self) -> bool {
        self.state == State::Ended
    }

    /// Whether the body ends when its connection closes.
    pub(super) fn until_close(self) -> bool {
        self.state == State::UntilClose
    }

    /// The body ended with its connection.
    pub(super) fn closed(&mut self) {
        self.state = State::Ended;
    }
}

/// The line at the start of `read` without its CRLF, taken from it: `None`
/// if its end has not come yet (`scanned`: how far it has been looked for,
/// so that a line that comes a byte at a time costs its length, not its
/// square). What `bound` names may take `most` bytes, its CRLF included.
fn line(read: &mut BytesMut, scanned: &mut usize, most: usize, bound: &str) -> Result<Option<BytesMut>, String> {
    let window = &read[..read.len().min(most)];
    let from = (*scanned).min(window.len());
    match window[from..].iter().position(|&b| b == b'\n').map(|at| from + at) {
        Some(end) if end > 0 && read[end - 1] == b'\r' => {
            *scanned = 0;
            let mut line = read.split_to(end + 1);
            line.truncate(end - 1);
            Ok(Some(line))
        }
        Some(_) => Err(format!("{bound} hold a line not ended by CRLF")),
        None if read.len() >= most => Err(format!("{bound} exceed {most} bytes")),
        None => {
            *scanned = window.len();
            Ok(None)
        }
    }
}

/// A chunk's size (hex digits, leading zeros aside), and how many bytes of
/// its line are not (extensions after `;`).
fn chunk_size(line: &[u8]) -> Result<(u64, usize), String> {
    let digits = line.split(|&b| b == b';').next().unwrap_or_default();
    let extension = line.len() - digits.len();
    let digits = digits.trim_ascii();
    let significant =
        digits.iter().position(|&b| b != b'0').map_or(&digits[digits.len().saturating_sub(1)..], |at| &digits[at..]);
    if digits.is_empty() || significant.len() > 15 || !digits.iter().all(u8::is_ascii_hexdigit) {
        return Err(format!("a chunk's size {:?} is not one", String::from_utf8_lossy(digits)));
    }
    // Fifteen hex digits at most: the size fits in a u64 with room to add to it.
    let size =
        significant.iter().fold(0, |size, &digit| size * 16 + u64::from(char::from(digit).to_digit(16).unwrap_or(0)));
    Ok((size, extension))
}

#[cfg(test)]
mod tests;
