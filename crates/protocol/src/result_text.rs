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
                    write_key(name, &mut text);
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

/// Writes `key` as a JSON string: as it is, unless it holds a character
/// JSON escapes.
fn write_key(key: &str, out: &mut String) {
    if key.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
        out.push_str(&serde_json::to_string(key).unwrap_or_default());
    } else {
        out.push('"');
        out.push_str(key);
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
mod tests {
    use super::*;
    use serde_json::json;

    fn kept_leaving(text: &str, leaves: Leaves) -> ToolResultText {
        ToolResultText::read(text, leaves).unwrap_or_else(|e| panic!("{text}: {e:?}"))
    }

    fn kept(text: &str) -> ToolResultText {
        kept_leaving(text, Leaves::ServerMembers)
    }

    fn builds(text: &str) -> bool {
        matches!(ToolResultText::read(text, Leaves::ServerMembers), Err(NotText::Builds(_)))
    }

    #[test]
    fn a_result_is_kept_as_it_came_less_what_the_server_writes() {
        let text = r#"{"content":[{"type":"text","text":"hi"}],"isError":false}"#;
        let result = kept_leaving(text, Leaves::Nothing);
        assert_eq!(result.as_str(), text);
        assert!(!result.is_error());
        let text = r#" { "resultType" : "complete", "content" : [ 1 ] , "_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"}}, "isError":true } "#;
        let result = kept(text);
        assert_eq!(result.as_str(), r#"{"content":[ 1 ],"isError":true}"#);
        assert!(result.is_error());
        assert_eq!(kept(r#"{"_meta":{},"content":[]}"#).as_str(), r#"{"content":[]}"#);
        // A top-level key with an escape is written with it.
        let escaped = kept(r#"{"content":[],"a\"b\u00e9":1,"t\u0065xt":2}"#);
        assert_eq!(escaped.clone().into_value(), json!({"content": [], "a\"bé": 1, "text": 2}));
        // What a WASM module wrote is all kept, or built.
        for text in [r#"{"content":[],"resultType":"complete"}"#, r#"{"content":[],"_meta":{}}"#] {
            assert!(matches!(ToolResultText::read(text, Leaves::Nothing), Err(NotText::Builds(_))), "{text}");
        }
    }

    #[test]
    fn what_the_server_reads_or_changes_or_a_client_could_read_otherwise_is_built() {
        for text in [
            r#"{"content":[],"resultType":"input_required"}"#,
            r#"{"content":[],"resultType":"task"}"#,
            r#"{"content":[],"resultType":"compl\u0065te"}"#,
            r#"{"content":[],"_meta":{"k":1}}"#,
            r#"{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{},"k":1}}"#,
            r#"{"content":[],"_meta":5}"#,
            r#"{"content":[],"ttlMs":1000}"#,
            r#"{"content":[],"cacheScope":"public"}"#,
            r#"{"isError":true}"#,
            r#"{"content":{}}"#,
            r#"{"content":[],"content":[]}"#,
            r#"{"content":[],"_meta":{},"_meta":{"k":1}}"#,
            r#"{"content":[],"resultType":"complete","resultType":"task"}"#,
            r#"{"content":[],"c\u006fntent":5}"#,
            // Keys given twice, or written with an escape, inside.
            r#"{"content":[{"type":"text","type":"image"}]}"#,
            r#"{"content":[],"structuredContent":{"n":[{"a":1,"b":{"a":2},"a":3}]}}"#,
            r#"{"content":[{"t\u0079pe":"text"}]}"#,
            // The raw-value token, or a `$`.
            r#"{"content":["$5"]}"#,
            r#"{"content":["a string longer than a word, then $"]}"#,
            r#"{"content":["a string longer than a word, then \u0024"]}"#,
            r#"{"content":["0123456789abcdef\ud800"]}"#,
            r#"{"content":["\u0024serde_json::private::RawValue"]}"#,
            r#"{"content":[{"$serde_json::private::RawValue":"0"}]}"#,
            r#"{"content":[],"$k":1}"#,
            // What a `Value`'s parse refuses, or reads otherwise.
            r#"{"content":["\ud800"]}"#,
            r#"{"content":["\uDC00 alone"]}"#,
            r#"{"content":["\ud83d\ude00"]}"#,
            r#"{"content":[1e400]}"#,
            r#"{"content":[1E2]}"#,
            r#"{"content":[1.0000000000000000001]}"#,
            r#"{"content":[123456789012345678901234567890]}"#,
            r#"{"content":[18446744073709551616]}"#,
            r#"{"content":[-9223372036854775809]}"#,
            r#"{"content":[-0]}"#,
            r#"{"content":[0.30000000000000004]}"#,
            r#"{"content":[9.754525449570839]}"#,
            r#"{"content":[-92435890523192.5]}"#,
            // Line breaks between tokens.
            "{\"content\":[\n1]}",
            "{\"content\":[1,\r\n2]}",
            // The upstream's own serverInfo is checked too, though left out.
            r#"{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"n":"\ud800"}}}"#,
            r#"{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"$k":1}}}"#,
        ] {
            assert!(builds(text), "{text}");
        }
        let many: Vec<String> = (0..=MAX_KEYS).map(|i| format!(r#""m{i}":{i}"#)).collect();
        assert!(builds(&format!(r#"{{"content":[],{}}}"#, many.join(","))));
        assert!(builds(&format!(r#"{{"content":[{{{}}}]}}"#, many.join(","))), "an object inside");
        let keys = |prefix: &str| (0..30).map(|i| format!(r#""{prefix}{i}":0"#)).collect::<Vec<_>>().join(",");
        let open = format!(r#"{{"content":[{{{},"x":{{{},"y":{{{}}}}}}}]}}"#, keys("a"), keys("b"), keys("c"));
        assert!(builds(&open), "more keys open at once than are kept");
        let closed = format!(r#"{{"content":[{{{}}},{{{}}},{{{}}}]}}"#, keys("a"), keys("b"), keys("c"));
        assert!(ToolResultText::read(&closed, Leaves::Nothing).is_ok(), "as many, one object after another");
        let deep = |levels: usize| format!(r#"{{"content":[{}{}]}}"#, "[".repeat(levels), "]".repeat(levels));
        assert!(
            ToolResultText::read(&deep(MAX_DEPTH - 2), Leaves::Nothing).is_ok(),
            "the object, content and its levels"
        );
        assert!(builds(&deep(MAX_DEPTH - 1)));
        let meta_deep = format!(
            r#"{{"content":[],"_meta":{{"io.modelcontextprotocol/serverInfo":{}{}}}}}"#,
            "[".repeat(MAX_DEPTH),
            "]".repeat(MAX_DEPTH)
        );
        assert!(builds(&meta_deep), "a left-out member is checked as deeply");
    }

    #[test]
    fn what_is_alike_as_text_and_as_a_value_is_kept() {
        for text in [
            // Escapes that are not `$` or a surrogate, and a backslash before a `u` that is not one.
            r#"{"content":["\u0025","\\u0024","a\"[[[\n\t\u00e9\uffff"]}"#,
            // The same key in different objects, and keys that only start alike.
            r#"{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"structuredContent":{"a":{"a":1},"ab":2}}"#,
            r#"{"content":["0123456789abcdef\"0123456789abcdef\\","01234567","0123456789abcdefé"]}"#,
            r#"{"content":[-9223372036854775808,18446744073709551615,0.1,1.50,-0.0,0,9.75452544957083,true,false,null]}"#,
            "{\"content\":[\t1 ,\t2]}",
        ] {
            let result = ToolResultText::read(text, Leaves::Nothing).unwrap_or_else(|e| panic!("{text}: {e:?}"));
            assert_eq!(result.into_value(), serde_json::from_str::<Value>(text).unwrap(), "{text}");
        }
    }

    #[test]
    fn what_is_not_one_json_object_is_not_json() {
        for text in [r#"[1]"#, r#"{"content":[]"#, r#"{"content":[]} {}"#, r#"{"content":[1,]}"#, "5"] {
            assert!(matches!(ToolResultText::read(text, Leaves::Nothing), Err(NotText::NotJson(_))), "{text}");
        }
    }

    #[test]
    fn structured_content_is_read_as_a_value() {
        let result = kept(r#"{"content":[],"structuredContent":{"value":4.5,"unit":"km","n":[1,{"a":null}]}}"#);
        assert_eq!(result.structured_content(), Some(json!({"value": 4.5, "unit": "km", "n": [1, {"a": null}]})));
        assert_eq!(kept(r#"{"content":[]}"#).structured_content(), None);
    }

    #[test]
    fn the_text_reads_as_the_value_it_came_from() {
        let text = r#"{"content":[{"type":"text","text":"h\u00e9 \"q\" \\ \u00e9"}],"structuredContent":{"x":-1.5},"isError":false}"#;
        assert_eq!(kept(text).into_value(), serde_json::from_str::<Value>(text).unwrap());
    }

    /// Values as the upstream's bound counts them: every value and every key.
    fn count(value: &Value) -> usize {
        1 + match value {
            Value::Array(items) => items.iter().map(count).sum(),
            Value::Object(members) => members.values().map(|v| 1 + count(v)).sum(),
            _ => 0,
        }
    }

    #[test]
    fn its_values_are_counted_as_a_parse_counts_them() {
        for text in [
            r#"{"content":[]}"#,
            r#"{"content":[{"type":"text","text":"a, b: [c] {d} \"e\" 1 true"}],"isError":false}"#,
            r#"{ "content" : [ 1 , -2.5 , true , false , null , "" , [ ] , { } ] , "structuredContent" : { "a" : [ 0 ] } }"#,
            r#"{"resultType":"complete","content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up","n":[1,2]}}}"#,
        ] {
            assert_eq!(kept(text).values(), count(&serde_json::from_str(text).unwrap()), "{text}");
        }
    }

    #[test]
    fn its_debug_form_holds_no_text() {
        let result = kept(r#"{"content":[{"type":"text","text":"secret"}]}"#);
        assert!(!format!("{result:?}").contains("secret"));
    }
}
