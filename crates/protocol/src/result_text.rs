//! A tool's final result kept as the JSON text its plugin wrote.
//!
//! A WASM module writes its `tools/call` result as JSON text, and an
//! upstream server answers with one. Built into a `Value` and written again
//! for our client, its every string, array and map was allocated, copied,
//! written out and freed, while the server reads three of its members (#18).
//! A [`ToolResultText`] keeps the object's text as it came, less the members
//! the server writes itself, and knows what the server reads of it: whether
//! it has a `content` array, whether it reports an error, and where its
//! `structuredContent` is, which a tool's output schema checks.
//!
//! Only a result the server would pass on as it is can be kept so. Any
//! other is [`NotText::Builds`], and its producer builds a `Value` as
//! before, so what a client receives, or is refused, does not change:
//! - a `resultType` other than `"complete"`: the server reads an
//!   `input_required` or a task (a `"complete"` one is left out, as the
//!   server writes its own);
//! - an `_meta` that holds more than a `serverInfo`: the server's own
//!   `serverInfo` goes into it (an `_meta` of nothing more is left out);
//! - `ttlMs` or `cacheScope`: the server decides a result's caching;
//! - no `content` array: refused, as a `Value` it gets the error it always got;
//! - a key given twice in the object, or more than [`MAX_MEMBERS`] members:
//!   a `Value` keeps the last of two, and text would pass both on for each
//!   client to choose from;
//! - a `$`, or its escape `\u0024`, anywhere in the text: it might name an
//!   object by serde_json's private raw-value token, which a `Value` built
//!   from it later ([`ToolResultText::into_value`]) would read as raw text,
//!   and which the upstream's parse refuses;
//! - nesting deeper than [`MAX_DEPTH`]: a `Value`'s parse stops at 128
//!   levels (and counts the message's own two), and text deeper than that
//!   passed on could take a client's parser down.
//!
//! Keys given twice inside a member's value are passed on as they came: the
//! server reads nothing there, except in `structuredContent`, whose value is
//! read ([`ToolResultText::structured_content`]) refusing a key given twice,
//! so that what was checked is what every client reads.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Number, Value};

use crate::meta::{META, SERVER_INFO};

/// The most members a result kept as text may have: each key is compared
/// with those before it, to find a key given twice.
pub const MAX_MEMBERS: usize = 32;

/// The deepest nesting (the object itself counts one) a result kept as text
/// may have.
pub const MAX_DEPTH: usize = 100;

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
    /// The server reads or changes more of it than text keeps (the module
    /// docs list what): build it as a `Value`.
    Builds(&'static str),
}

impl ToolResultText {
    /// `text`, one JSON object, as a result kept as text.
    ///
    /// # Errors
    /// [`NotText::NotJson`] for text that is not one JSON object;
    /// [`NotText::Builds`] for a result that must be built (module docs).
    pub fn read(text: &str) -> Result<Self, NotText> {
        let mut reader = serde_json::Deserializer::from_str(text);
        let members = reader.deserialize_map(Members).map_err(NotText::NotJson)?;
        reader.end().map_err(NotText::NotJson)?;
        Self::from_members(members?)
    }

    /// A result read from `deserializer` as [`ToolResultText::read`] reads
    /// its text: the outer `Err` is the deserializer's, for what is not JSON
    /// or not an object; the inner one a result that must be built.
    ///
    /// # Errors
    /// As the deserializer's errors.
    pub fn read_from<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Result<Self, NotText>, D::Error> {
        Ok(deserializer.deserialize_map(Members)?.and_then(Self::from_members))
    }

    /// The result whose members are `members` (keys as read, without
    /// escapes, and each value's JSON text), in order.
    ///
    /// # Errors
    /// [`NotText::Builds`] for a result that must be built (module docs).
    pub fn from_members<'a, K: AsRef<str>>(
        members: impl IntoIterator<Item = (K, &'a RawValue)>,
    ) -> Result<Self, NotText> {
        let mut text = String::new();
        let mut keys: Vec<K> = Vec::new();
        let (mut content, mut is_error, mut structured) = (false, false, None);
        // The object itself.
        let mut values = 1;
        for (key, value) in members {
            let (name, raw) = (key.as_ref(), value.get());
            let scanned = Scanned::of(raw);
            values += 1 + scanned.values;
            if keys.len() == MAX_MEMBERS {
                return Err(NotText::Builds("more members than are compared for a key given twice"));
            }
            if keys.iter().any(|seen| seen.as_ref() == name) {
                return Err(NotText::Builds("a key given twice"));
            }
            if name.contains('$') {
                return Err(NotText::Builds("a `$` in a key"));
            }
            match name {
                "resultType" if raw == "\"complete\"" => {}
                "resultType" => return Err(NotText::Builds("a resultType the server reads")),
                META if names_only_server_info(raw) => {}
                META => return Err(NotText::Builds("an _meta the server adds to")),
                "ttlMs" | "cacheScope" => return Err(NotText::Builds("caching the server decides")),
                _ => {
                    if scanned.dollar {
                        return Err(NotText::Builds("a `$` in a string"));
                    }
                    if 1 + scanned.depth > MAX_DEPTH {
                        return Err(NotText::Builds("nesting deeper than text is kept"));
                    }
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
            keys.push(key);
        }
        if !content {
            return Err(NotText::Builds("no content array"));
        }
        text.push('}');
        Ok(Self { text: text.into(), is_error, structured, values })
    }

    /// The JSON values it came with, counted as an upstream's answer is
    /// counted against the operator's bound: every value, container or not,
    /// and every member key; the object itself, and the members left out,
    /// included.
    pub fn values(&self) -> usize {
        self.values
    }

    /// Whether the result reports an error (`isError: true`).
    pub fn is_error(&self) -> bool {
        self.is_error
    }

    /// The object's JSON text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// `structuredContent`, if any, as a `Value` to check.
    ///
    /// # Errors
    /// [`NotText::Builds`] when a key in it is given twice (module docs):
    /// build the whole result, so that what is checked is what is sent.
    pub fn structured_content(&self) -> Result<Option<Value>, NotText> {
        let Some(range) = &self.structured else { return Ok(None) };
        let mut reader = serde_json::Deserializer::from_str(&self.text[range.clone()]);
        match Unique.deserialize(&mut reader) {
            Ok(value) => Ok(Some(value)),
            Err(_) => Err(NotText::Builds("a key given twice in structuredContent")),
        }
    }

    /// The result as a `Value`.
    pub fn into_value(self) -> Value {
        // JSON that was read once already, nested less deeply than a
        // `Value`'s parse allows: it reads again.
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }
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

/// Whether `raw`, an `_meta` value, is an object of nothing but the
/// producer's `serverInfo` (or of nothing).
fn names_only_server_info(raw: &str) -> bool {
    let mut reader = serde_json::Deserializer::from_str(raw);
    reader.deserialize_map(OnlyServerInfo).unwrap_or(false)
}

/// What one pass over a value's JSON text finds.
struct Scanned {
    /// Its values, counted as [`ToolResultText::values`] counts them.
    values: usize,
    /// How deeply its arrays and objects nest (0 for a scalar).
    depth: usize,
    /// Whether a string in it holds a `$` or its escape `\u0024`.
    dollar: bool,
}

impl Scanned {
    /// `raw`, which is valid JSON, read byte by byte: outside its strings
    /// there are only the structural characters, white space, and the
    /// characters of numbers and literals, so each string, container and
    /// run of scalar characters starts one value.
    fn of(raw: &str) -> Self {
        let bytes = raw.as_bytes();
        let mut scanned = Self { values: 0, depth: 0, dollar: false };
        let (mut level, mut in_string, mut in_scalar, mut at) = (0usize, false, false, 0);
        while at < bytes.len() {
            let byte = bytes[at];
            if in_string {
                match byte {
                    b'"' => in_string = false,
                    b'$' => scanned.dollar = true,
                    b'\\' => {
                        // The escape's letter; `\u0024` is `$`.
                        at += 1;
                        if bytes.get(at) == Some(&b'u') && bytes.get(at + 1..at + 5) == Some(b"0024") {
                            scanned.dollar = true;
                        }
                    }
                    _ => {}
                }
            } else {
                let scalar =
                    !matches!(byte, b'"' | b'[' | b']' | b'{' | b'}' | b',' | b':' | b' ' | b'\t' | b'\n' | b'\r');
                if scalar && !in_scalar {
                    scanned.values += 1;
                }
                in_scalar = scalar;
                match byte {
                    b'"' => {
                        in_string = true;
                        scanned.values += 1;
                    }
                    b'[' | b'{' => {
                        scanned.values += 1;
                        level += 1;
                        scanned.depth = scanned.depth.max(level);
                    }
                    b']' | b'}' => level = level.saturating_sub(1),
                    _ => {}
                }
            }
            at += 1;
        }
        scanned
    }
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
        while let Some(key) = map.next_key_seed(Key)? {
            if members.len() == MAX_MEMBERS {
                // Read to its end, for the JSON's sake; not kept as text.
                map.next_value::<IgnoredAny>()?;
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                return Ok(Err(NotText::Builds("more members than are compared for a key given twice")));
            }
            members.push((key, map.next_value::<&'de RawValue>()?));
        }
        Ok(Ok(members))
    }
}

/// A member's key, borrowed from the text unless it holds an escape.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Cow<'de, str>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
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
}

/// Whether an object's keys are all the `serverInfo` key.
struct OnlyServerInfo;

impl<'de> Visitor<'de> for OnlyServerInfo {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an _meta object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while let Some(key) = map.next_key_seed(Key)? {
            if key != SERVER_INFO {
                return Ok(false);
            }
            map.next_value::<IgnoredAny>()?;
        }
        Ok(true)
    }
}

/// A value built as `serde_json::Value` builds itself, refusing an object
/// with a key given twice.
#[derive(Clone, Copy)]
struct Unique;

impl<'de> DeserializeSeed<'de> for Unique {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Unique {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E>(self, value: i64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_u64<E>(self, value: u64) -> Result<Value, E> {
        Ok(Value::Number(value.into()))
    }

    fn visit_f64<E>(self, value: f64) -> Result<Value, E> {
        Ok(Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_owned()))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Value, A::Error> {
        let mut array = Vec::with_capacity(items.size_hint().unwrap_or(0));
        while let Some(item) = items.next_element_seed(Unique)? {
            array.push(item);
        }
        Ok(Value::Array(array))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = members.next_key::<String>()? {
            let value = members.next_value_seed(Unique)?;
            if object.insert(key, value).is_some() {
                return Err(de::Error::custom("a key given twice"));
            }
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kept(text: &str) -> ToolResultText {
        ToolResultText::read(text).unwrap_or_else(|e| panic!("{text}: {e:?}"))
    }

    fn builds(text: &str) -> bool {
        matches!(ToolResultText::read(text), Err(NotText::Builds(_)))
    }

    #[test]
    fn a_result_is_kept_as_it_came_less_what_the_server_writes() {
        let text = r#"{"content":[{"type":"text","text":"hi"}],"isError":false}"#;
        let result = kept(text);
        assert_eq!(result.as_str(), text);
        assert!(!result.is_error());
        let text = r#" { "resultType" : "complete", "content" : [ 1 ] , "_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"}}, "isError":true } "#;
        let result = kept(text);
        assert_eq!(result.as_str(), r#"{"content":[ 1 ],"isError":true}"#);
        assert!(result.is_error());
        assert_eq!(kept(r#"{"_meta":{},"content":[]}"#).as_str(), r#"{"content":[]}"#);
        // A key with an escape is written with it.
        let escaped = kept(r#"{"content":[],"a\"b\u00e9":1,"t\u0065xt":2}"#);
        assert_eq!(escaped.clone().into_value(), json!({"content": [], "a\"bé": 1, "text": 2}));
    }

    #[test]
    fn what_the_server_reads_or_changes_is_built() {
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
            r#"{"content":["$5"]}"#,
            r#"{"content":["\u0024serde_json::private::RawValue"]}"#,
            r#"{"content":[{"$serde_json::private::RawValue":"0"}]}"#,
            r#"{"content":[],"$k":1}"#,
        ] {
            assert!(builds(text), "{text}");
        }
        let many: Vec<String> = (0..=MAX_MEMBERS).map(|i| format!(r#""m{i}":{i}"#)).collect();
        assert!(builds(&format!(r#"{{"content":[],{}}}"#, many.join(","))));
        let deep = |levels: usize| format!(r#"{{"content":[{}{}]}}"#, "[".repeat(levels), "]".repeat(levels));
        assert!(ToolResultText::read(&deep(MAX_DEPTH - 2)).is_ok(), "the object, content and its levels");
        assert!(builds(&deep(MAX_DEPTH - 1)));
        // An escape that is not `$`, or a backslash before a `u` that is not one.
        assert!(ToolResultText::read(r#"{"content":["\u0025","\\u0024","a\"[[["]}"#).is_ok());
    }

    #[test]
    fn what_is_not_one_json_object_is_not_json() {
        for text in [r#"[1]"#, r#"{"content":[]"#, r#"{"content":[]} {}"#, r#"{"content":[1,]}"#, "5"] {
            assert!(matches!(ToolResultText::read(text), Err(NotText::NotJson(_))), "{text}");
        }
    }

    #[test]
    fn structured_content_is_read_refusing_a_key_given_twice() {
        let result = kept(r#"{"content":[],"structuredContent":{"value":4.5,"unit":"km","n":[1,{"a":null}]}}"#);
        let structured = result.structured_content().unwrap();
        assert_eq!(structured, Some(json!({"value": 4.5, "unit": "km", "n": [1, {"a": null}]})));
        assert_eq!(kept(r#"{"content":[]}"#).structured_content().unwrap(), None);
        let twice = kept(r#"{"content":[],"structuredContent":{"n":[{"a":1,"a":2}]}}"#);
        assert!(matches!(twice.structured_content(), Err(NotText::Builds(_))));
    }

    #[test]
    fn the_text_reads_as_the_value_it_came_from() {
        let text = r#"{"content":[{"type":"text","text":"h\u00e9 \"q\" \\ \ud83d\ude00"}],"structuredContent":{"x":-1.5e3},"isError":false}"#;
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
            r#"{ "content" : [ 1 , -2.5e-3 , true , false , null , "" , [ ] , { } ] , "structuredContent" : { "a" : [ 0 ] } }"#,
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
