//! A tool's final result kept as the JSON text its plugin wrote.
//!
//! A WASM module writes its `tools/call` result as JSON text, and an
//! upstream server answers with one. Built into a `Value` and written again
//! for our client, its every string, array and map was allocated, copied,
//! written out and freed, while the server reads three of its members (#18).
//! A [`ToolResultText`] keeps the object's text as it came (less, for an
//! upstream's answer, the members the server writes itself: [`Leaves`]),
//! and knows what the server reads of it: whether it has a `content` array,
//! whether it reports an error, and where its `structuredContent` is, which
//! a tool's output schema checks.
//!
//! Only a result that means to every client what its `Value` would mean can
//! be kept so, and only one the server would pass on as it is. Any other is
//! [`NotText::Builds`], and its producer builds a `Value` as before, so
//! what a client receives, or is refused, does not change:
//! - a `resultType` other than `"complete"`: the server reads an
//!   `input_required` or a task; and `_meta`: the server's own `serverInfo`
//!   goes into it (unless the reader leaves out a `"complete"` one and an
//!   `_meta` of nothing but a `serverInfo`, as an upstream's parse does);
//! - `ttlMs` or `cacheScope`: the server decides a result's caching;
//! - no `content` array: refused, as a `Value` it gets the error it always got;
//! - a key given twice in any object, an object of more than [`MAX_KEYS`]
//!   keys (each is compared with those before it), or a key inside a
//!   member's value written with an escape: a `Value` keeps the last of two
//!   members, and text would pass both on, for each client to choose;
//! - a `$`, or its escape `\u0024`, in any string: it might name an object
//!   by serde_json's private raw-value token, which a `Value` built from it
//!   ([`ToolResultText::into_value`]) would read as raw text, and which the
//!   upstream's parse refuses;
//! - what a `Value`'s parse refuses and a pass over the text does not see:
//!   a surrogate's escape (`\ud800` alone is refused; a pair is built), an
//!   integer no `i64` or `u64` holds, `-0`, and a number with an exponent or
//!   with a fraction and more than [`MAX_NUMBER_CHARS`] characters (out of
//!   range, or read as a nearby `f64`, or `0`, and written so);
//! - nesting deeper than [`MAX_DEPTH`]: a `Value`'s parse stops at 128
//!   levels (and counts the message's own two);
//! - a line break between its tokens: a result goes out on one line (stdio
//!   ends a message at a line break, SSE a data line).
//!
//! A built-in tool's answer of one text block is written as text by the
//! server itself ([`ToolResultText::text_block`]), as its `Value` would be
//! written, and needs none of these checks.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::meta::{META, SERVER_INFO};

/// The most keys an object in a result kept as text may have.
pub const MAX_KEYS: usize = 32;

/// The deepest nesting (the object itself counts one) a result kept as text
/// may have.
pub const MAX_DEPTH: usize = 100;

/// The longest number with a fraction a result kept as text may hold, in
/// characters: 15 digits at most, whose significand an `f64` holds exactly,
/// so that serde_json (dividing it by a power of ten) reads the nearest
/// `f64`, as a client's parser does. A longer one it may read one `f64`
/// off (`9.754525449570839` as `9.75452544957084`), and wrote so. (An
/// integer may be any an `i64` or a `u64` holds: a `Value` keeps it as it is.)
pub const MAX_NUMBER_CHARS: usize = 16;

/// Which of the members the server writes itself a result kept as text
/// leaves out; any other of them makes it [`NotText::Builds`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leaves {
    /// None: a WASM module's `_meta` goes, as it is, to a 2025-era client.
    Nothing,
    /// A `"complete"` `resultType`, and an `_meta` of nothing but a
    /// `serverInfo`, which no client of ours is given: an upstream's, which
    /// the upstream's parse leaves out of every answer.
    ServerMembers,
}

/// A complete `tools/call` result object as JSON text, with a `content`
/// array and none of the members the server writes (module docs).
#[derive(Clone, PartialEq)]
pub struct ToolResultText {
    /// `{…}`: the members as their producer wrote them, one after another.
    text: Box<str>,
    /// Whether `isError` is `true`.
    is_error: bool,
    /// Where `structuredContent`'s value is in `text`.
    structured: Option<Range<usize>>,
    /// The JSON values it came with ([`ToolResultText::values`]).
    values: usize,
}

/// Why a result was not kept as text.
#[derive(Debug)]
pub enum NotText {
    /// It is not one JSON object.
    NotJson(serde_json::Error),
    /// The server reads or changes more of it than text keeps, or text
    /// could mean something else than its `Value` (module docs): build it
    /// as a `Value`.
    Builds(&'static str),
}

impl ToolResultText {
    /// `text`, one JSON object, as a result kept as text.
    ///
    /// # Errors
    /// [`NotText::NotJson`] for text that is not one JSON object;
    /// [`NotText::Builds`] for a result that must be built (module docs).
    pub fn read(text: &str, leaves: Leaves) -> Result<Self, NotText> {
        let mut reader = serde_json::Deserializer::from_str(text);
        let members = reader.deserialize_map(Members).map_err(NotText::NotJson)?;
        reader.end().map_err(NotText::NotJson)?;
        Self::from_members(&members?, leaves)
    }

    /// A result of one text block and nothing else, written as serde_json
    /// writes the `Value` `{"content":[{"type":"text","text":text}]}` (its
    /// map sorts the keys): what a built-in tool answers with text, kept as
    /// text without the `Value` built, written, checked and freed (#18).
    ///
    /// Unlike text read from a plugin, it is kept whatever `text` holds:
    /// its keys are the server's own, so a `$` in it is a character of a
    /// string and nothing else, and a `str` holds no lone surrogate.
    pub fn text_block(text: &str) -> Self {
        const HEAD: &str = r#"{"content":[{"text":"#;
        const TAIL: &str = r#","type":"text"}]}"#;
        let mut written = String::with_capacity(HEAD.len() + text.len() + 2 + TAIL.len());
        written.push_str(HEAD);
        write_string(text, &mut written);
        written.push_str(TAIL);
        // The object, `content`, its array and object, `text`, its string,
        // `type` and its string.
        Self { text: written.into(), is_error: false, structured: None, values: 8 }
    }

    /// A result read from `deserializer` as [`ToolResultText::read`] reads
    /// its text: the outer `Err` is the deserializer's, for what is not JSON
    /// or not an object; the inner one a result that must be built.
    ///
    /// # Errors
    /// As the deserializer's errors.
    pub fn read_from<'de, D: Deserializer<'de>>(
        deserializer: D,
        leaves: Leaves,
    ) -> Result<Result<Self, NotText>, D::Error> {
        Ok(deserializer.deserialize_map(Members)?.and_then(|members| Self::from_members(&members, leaves)))
    }

    /// The result whose members are `members` (keys as read, without
    /// escapes, and each value's JSON text), in order.
    ///
    /// # Errors
    /// [`NotText::Builds`] for a result that must be built (module docs).
    pub fn from_members<K: AsRef<str>>(members: &[(K, &RawValue)], leaves: Leaves) -> Result<Self, NotText> {
        if members.len() > MAX_KEYS {
            return Err(NotText::Builds("an object of more keys than are compared"));
        }
        // Written once, at its full size: no copy as it grows.
        let size = members.iter().map(|(key, value)| key.as_ref().len() + value.get().len() + 4).sum::<usize>();
        let mut text = String::with_capacity(size + 2);
        let mut scanner = Scanner::new();
        let (mut content, mut is_error, mut structured) = (false, false, None);
        // The object itself.
        let mut values = 1;
        for (at, (key, value)) in members.iter().enumerate() {
            let (name, raw) = (key.as_ref(), value.get());
            if members[..at].iter().any(|(seen, _)| seen.as_ref() == name) {
                return Err(NotText::Builds("a key given twice"));
            }
            if name.bytes().any(|b| b == b'$') {
                return Err(NotText::Builds("a `$` in a key"));
            }
            // Every member, those left out too: they count, and must read as a `Value` would.
            let scanned = scanner.scan(raw)?;
            values += 1 + scanned.values;
            match (name, leaves) {
                ("resultType", Leaves::ServerMembers) if raw == "\"complete\"" => {}
                ("resultType", _) => return Err(NotText::Builds("a resultType the server reads")),
                (META, Leaves::ServerMembers) if scanned.names_only_server_info => {}
                (META, _) => return Err(NotText::Builds("an _meta the server adds to")),
                ("ttlMs" | "cacheScope", _) => return Err(NotText::Builds("caching the server decides")),
                _ => {
                    match name {
                        "content" => content = raw.starts_with('['),
                        "isError" => is_error = raw == "true",
                        _ => {}
                    }
                    text.push(if text.is_empty() { '{' } else { ',' });
                    write_string(name, &mut text);
                    text.push(':');
                    if name == "structuredContent" {
                        structured = Some(text.len()..text.len() + raw.len());
                    }
                    text.push_str(raw);
                }
            }
        }
        if !content {
            return Err(NotText::Builds("no content array"));
        }
        text.push('}');
        Ok(Self { text: text.into(), is_error, structured, values })
    }

    /// Whether the result reports an error (`isError: true`).
    pub fn is_error(&self) -> bool {
        self.is_error
    }

    /// The object's JSON text, on one line.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The JSON values it came with, counted as an upstream's answer is
    /// counted against the operator's bound: every value, container or not,
    /// and every member key; the object itself, and the members left out,
    /// included.
    pub fn values(&self) -> usize {
        self.values
    }

    /// `structuredContent`, if any, as a `Value` to check: what every client
    /// reads there, as no key in it is given twice.
    pub fn structured_content(&self) -> Option<Value> {
        let range = self.structured.clone()?;
        Some(read_value(&self.text[range]))
    }

    /// The result as a `Value`.
    pub fn into_value(self) -> Value {
        read_value(&self.text)
    }
}

/// `text`, JSON that a `Value`'s parse takes (it was checked as it was
/// kept, module docs), as a `Value`.
fn read_value(text: &str) -> Value {
    // `Null` only if that check were wrong.
    serde_json::from_str(text).unwrap_or(Value::Null)
}

impl fmt::Debug for ToolResultText {
    /// Its size and what the server reads of it, never its text: a result
    /// is not recorded.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolResultText")
            .field("bytes", &self.text.len())
            .field("is_error", &self.is_error)
            .field("structured", &self.structured.is_some())
            .finish()
    }
}

/// Writes `text` as a JSON string, as serde_json writes it: as it is,
/// unless it holds a character JSON escapes.
fn write_string(text: &str, out: &mut String) {
    if text.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
        out.push_str(&serde_json::to_string(text).unwrap_or_default());
    } else {
        out.push('"');
        out.push_str(text);
        out.push('"');
    }
}

/// The most keys of the objects open at once a [`Scanner`] keeps: text
/// with more is built.
const MAX_OPEN_KEYS: usize = 64;

/// What [`Scanner::scan`] found in a member's text.
struct Scanned {
    /// Its values, counted as [`ToolResultText::values`] counts them.
    values: usize,
    /// Whether it is an object of nothing but a `serverInfo` (or of nothing).
    names_only_server_info: bool,
}

/// One pass over a member's JSON text: its values counted, and what text
/// must not hold looked for (module docs). It allocates nothing: its stacks
/// are as deep as text may nest, and as long as the keys it compares.
struct Scanner {
    /// Where the keys of the objects open are in the text, innermost last.
    keys: [(usize, usize); MAX_OPEN_KEYS],
    /// How many of `keys` are in use.
    open_keys: usize,
    /// For each container open, innermost last: where its keys start in
    /// `keys` for an object, [`Scanner::ARRAY`] for an array.
    containers: [u8; MAX_DEPTH],
    /// How many of `containers` are open.
    depth: usize,
}

impl Scanner {
    /// In `containers`: an array, which has no keys.
    const ARRAY: u8 = u8::MAX;

    fn new() -> Self {
        Self { keys: [(0, 0); MAX_OPEN_KEYS], open_keys: 0, containers: [0; MAX_DEPTH], depth: 0 }
    }

    /// What `raw`, valid JSON, holds, or [`NotText::Builds`]. Outside its
    /// strings there are only the structural characters, white space, and
    /// runs of a number's or a literal's characters: each string, container
    /// and run starts one value.
    fn scan(&mut self, raw: &str) -> Result<Scanned, NotText> {
        let bytes = raw.as_bytes();
        (self.open_keys, self.depth) = (0, 0);
        let mut scanned = Scanned { values: 0, names_only_server_info: bytes.first() == Some(&b'{') };
        let (mut at, mut expects_key) = (0, false);
        while let Some(&byte) = bytes.get(at) {
            match byte {
                b'"' => {
                    let (end, escaped) = string_end(bytes, at + 1)?;
                    if expects_key {
                        if escaped {
                            return Err(NotText::Builds("a key written with an escape"));
                        }
                        self.key(bytes, at + 1, end)?;
                        if self.depth == 1 && &bytes[at + 1..end] != SERVER_INFO.as_bytes() {
                            scanned.names_only_server_info = false;
                        }
                        expects_key = false;
                    }
                    scanned.values += 1;
                    at = end;
                }
                b'{' | b'[' => {
                    scanned.values += 1;
                    // The result object, the containers open, and this one.
                    if 1 + self.depth + 1 > MAX_DEPTH {
                        return Err(NotText::Builds("nesting deeper than text is kept"));
                    }
                    expects_key = byte == b'{';
                    // `open_keys` is at most `MAX_OPEN_KEYS`, below `ARRAY`.
                    self.containers[self.depth] = if expects_key { self.open_keys as u8 } else { Self::ARRAY };
                    self.depth += 1;
                }
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    let first = self.containers[self.depth];
                    if first != Self::ARRAY {
                        self.open_keys = usize::from(first);
                    }
                    expects_key = false;
                }
                b',' => expects_key = self.depth > 0 && self.containers[self.depth - 1] != Self::ARRAY,
                b':' | b' ' | b'\t' => {}
                b'\n' | b'\r' => return Err(NotText::Builds("a line break")),
                _ => {
                    scanned.values += 1;
                    let start = at;
                    while let Some(&next) = bytes.get(at + 1) {
                        if matches!(next, b',' | b']' | b'}' | b':' | b' ' | b'\t' | b'\n' | b'\r') {
                            break;
                        }
                        at += 1;
                    }
                    if (byte == b'-' || byte.is_ascii_digit()) && !written_as_read(&raw[start..=at]) {
                        return Err(NotText::Builds("a number a value would read otherwise"));
                    }
                }
            }
            at += 1;
        }
        Ok(scanned)
    }

    /// The key at `start..end` of the innermost object, unless one before
    /// it in that object is the same, or too many keys are open.
    fn key(&mut self, bytes: &[u8], start: usize, end: usize) -> Result<(), NotText> {
        let first = self.depth.checked_sub(1).map_or(0, |open| usize::from(self.containers[open]));
        let key = &bytes[start..end];
        let own = &self.keys[first..self.open_keys];
        if own.len() == MAX_KEYS || self.open_keys == MAX_OPEN_KEYS {
            return Err(NotText::Builds("an object of more keys than are compared"));
        }
        if own.iter().any(|&(from, to)| &bytes[from..to] == key) {
            return Err(NotText::Builds("a key given twice"));
        }
        self.keys[self.open_keys] = (start, end);
        self.open_keys += 1;
        Ok(())
    }
}

/// Whether `number`, a JSON number, is written back as it is read into a
/// `Value`, or as the same `f64` (module docs).
fn written_as_read(number: &str) -> bool {
    if number.bytes().any(|b| b | 0x20 == b'e') {
        return false;
    }
    if number.contains('.') {
        return number.len() <= MAX_NUMBER_CHARS;
    }
    // Shorter integers fit an `i64`.
    number != "-0" && (number.len() < 16 || number.parse::<i64>().is_ok() || number.parse::<u64>().is_ok())
}

/// Where the string whose text starts at `at` ends (its closing quote), and
/// whether it holds an escape; or [`NotText::Builds`] for a `$`, `\u0024`,
/// or a surrogate's escape in it (module docs).
fn string_end(bytes: &[u8], mut at: usize) -> Result<(usize, bool), NotText> {
    let mut escaped = false;
    // A byte at a time: a result's strings are mostly short, and reading
    // eight at a time while none is looked for made the scan of an upstream
    // echo's answer 2,850 instructions rather than 1,920 (callgrind).
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'"' => return Ok((at, escaped)),
            b'$' => return Err(NotText::Builds("a `$` in a string")),
            b'\\' => {
                escaped = true;
                at += 1;
                if bytes.get(at) == Some(&b'u') {
                    let hex = bytes.get(at + 1..at + 5).unwrap_or_default();
                    if hex == b"0024" {
                        return Err(NotText::Builds("a `$` in a string"));
                    }
                    if let [first, second, ..] = hex
                        && first | 0x20 == b'd'
                        && matches!(second | 0x20, b'8'..=b'9' | b'a'..=b'f')
                    {
                        return Err(NotText::Builds("a surrogate's escape"));
                    }
                    at += 4;
                }
            }
            _ => {}
        }
        at += 1;
    }
    Ok((at, escaped))
}

/// An object's members: each key without escapes, and its value's text.
struct Members;

impl<'de> Visitor<'de> for Members {
    /// `Err` for an object that must be built (more members than compared).
    type Value = Result<Vec<(Cow<'de, str>, &'de RawValue)>, NotText>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a result object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::with_capacity(4);
        while let Some(key) = map.next_key_seed(MemberKey)? {
            if members.len() == MAX_KEYS {
                // Read to its end, for the JSON's sake; not kept as text.
                map.next_value::<IgnoredAny>()?;
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                return Ok(Err(NotText::Builds("an object of more keys than are compared")));
            }
            members.push((key, map.next_value::<&'de RawValue>()?));
        }
        Ok(Ok(members))
    }
}

/// A member's key, read borrowed from the text unless it holds an escape
/// (`Cow<str>`'s own `Deserialize` always copies it): what a reader that
/// looks at keys, and keeps few of them, reads them with.
pub struct MemberKey;

impl<'de> serde::de::DeserializeSeed<'de> for MemberKey {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Cow<'de, str>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for MemberKey {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object member's key")
    }

    fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Borrowed(key))
    }

    fn visit_str<E>(self, key: &str) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(key.to_owned()))
    }

    fn visit_string<E>(self, key: String) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(key))
    }
}

#[cfg(test)]
mod tests;
