//! [`parse`]: an upstream's JSON message parsed while its values are
//! counted, and given up on as soon as they pass the operator's bound.
//!
//! A message small on the wire can be dense in values (`[0,0,0,…]` takes
//! two bytes a value, its parsed form 32 or more), so what its parse may
//! build is bounded by its values, not its bytes. Counting them in a pass of
//! their own before the parse read every
//! answer twice: on an upstream's `echo`, 2,900 of the 105,000 instructions
//! a call cost the front server (#18, `loadtest/callgrind-tools-call.sh` with
//! `UPSTREAM=http1`). Counted as the parse builds them, they are read once,
//! and the parse stops at the first value over the bound, so it never holds
//! more than the bound allows.
//!
//! It also closes a hole the count before the parse had. With serde_json's
//! `raw_value` feature on (the workspace enables it), `Value`'s own parse
//! reads an object whose first key is serde_json's private raw-value token
//! as the JSON text of its string member, parsed again with no count: three
//! values by the count before, as many as the string held once parsed. Here
//! an object with that key is not JSON we take: kept, it would be parsed
//! that way wherever it goes next, as on another replica when a parked
//! call's turn crosses the bus inside a message whose event is a `Value`.
//!
//! One member is counted but not built: the upstream's description of
//! itself in its result's `_meta` (`serverInfo`), which no client of ours
//! is given (a 2026-era client reads ours there, `protocol::finished`; a
//! 2025-era one none). Built, taken out again and dropped, it was about
//! 1,500 of the 93,600 instructions an upstream `echo` cost the front (#18,
//! `loadtest/callgrind-tools-call.sh` with `UPSTREAM=http1`). Its values
//! still count, against the bound and in what the parse reports (so an
//! answer kept in the cache weighs a little more than what is kept of it),
//! and it must still be JSON; nothing in it is kept, so no raw-value key in
//! it is looked for.
//!
//! Three more members are not kept, each one no reader tells from its
//! absence, all built before only to be dropped again (#18):
//! - the message's `jsonrpc`, counted and read as JSON but not built, as
//!   `serverInfo` is (so no raw-value key in it is looked for either): nothing
//!   reads it (the relay rebuilds what it passes on, and a response is told
//!   by its `id`, `result` and `error`);
//! - the result's `resultType` when it is `"complete"`, which an absent one
//!   means: `input::outcome` took it out of every final result, and a task's
//!   result and the relayed task's are read from their own members;
//! - the result's `_meta` when nothing is left in it: the upstream's own
//!   `serverInfo` alone, or none. `input::outcome` dropped such a `_meta`
//!   too, and for every other result an empty `_meta` says nothing.
//!
//! The last two are built, as their values decide, and left out of their
//! object: what is saved is their key's `String`, the insert, and the
//! removal `outcome` made. A member's key is read borrowed from the text
//! (unless it holds an escape) and made a `String` only when the member is
//! kept.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use switchyard_protocol::meta::{META, SERVER_INFO};

/// The key by which serde_json's `Value` (with `raw_value` on) takes an
/// object for raw JSON text (module docs).
const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

/// Why a message was not parsed.
#[derive(Debug)]
pub(crate) enum Unparsed {
    /// It holds more values than the bound.
    Dense,
    /// It is not JSON.
    NotJson(serde_json::Error),
}

/// `text` as JSON (less the members the module docs name: the message's
/// `jsonrpc`, the upstream's `serverInfo` in its result's `_meta`, and its
/// result's `"complete"` `resultType` and empty `_meta`), with the values it
/// holds (every value, container or not,
/// and every member key, as the answer cache's `Weight::of` counts them;
/// only a key given twice, whose first member the second replaces, is
/// counted twice here); or [`Unparsed::Dense`] as soon as they pass
/// `max_values`.
///
/// The text is checked as UTF-8 whole, at once, and then read as a `str`:
/// read as bytes, serde_json checks each string in it on its own, which
/// made this parse of an upstream `echo`'s answer 9,609 instructions
/// rather than 8,302 (#18: a copy of this module in a scratch binary under
/// callgrind). Text that is not UTF-8 is read as bytes all the same, for
/// serde_json's own error (or [`Unparsed::Dense`], as before, if the bound
/// is passed before serde_json reaches the bad byte: a string value counts
/// before it is read).
pub(crate) fn parse(text: &[u8], max_values: usize) -> Result<(Value, usize), Unparsed> {
    match std::str::from_utf8(text) {
        Ok(text) => parse_text(text, max_values),
        Err(_) => parse_from(serde_json::Deserializer::from_slice(text), max_values),
    }
}

/// [`parse`] of text already known to be UTF-8.
pub(crate) fn parse_text(text: &str, max_values: usize) -> Result<(Value, usize), Unparsed> {
    parse_from(serde_json::Deserializer::from_str(text), max_values)
}

/// The counted parse itself, from whichever reader `reader` reads.
fn parse_from<'de, R: serde_json::de::Read<'de>>(
    mut reader: serde_json::Deserializer<R>,
    max_values: usize,
) -> Result<(Value, usize), Unparsed> {
    let counter = Counter { values: Cell::new(0), max: max_values, passed: Cell::new(false) };
    let parsed =
        Counted(&counter, Place::Message).deserialize(&mut reader).and_then(|value| reader.end().map(|()| value));
    match parsed {
        Ok(value) => Ok((value, counter.values.get())),
        Err(_) if counter.passed.get() => Err(Unparsed::Dense),
        Err(error) => Err(Unparsed::NotJson(error)),
    }
}

/// The values counted so far in one parse, and its bound.
struct Counter {
    values: Cell<usize>,
    max: usize,
    /// Whether the parse stopped at the bound (rather than at bad JSON).
    passed: Cell<bool>,
}

impl Counter {
    /// Counts one more value, or stops the parse past the bound.
    fn one<E: de::Error>(&self) -> Result<(), E> {
        let values = self.values.get() + 1;
        self.values.set(values);
        if values > self.max {
            self.passed.set(true);
            return Err(E::custom(format_args!("more than {} JSON values", self.max)));
        }
        Ok(())
    }
}

/// Where a value sits in the message, as far as finding the members that
/// are counted but not built goes (module docs).
#[derive(Clone, Copy, PartialEq)]
enum Place {
    /// The message itself.
    Message,
    /// Its `result`.
    Result,
    /// The result's `_meta`.
    ResultMeta,
    /// Anywhere else.
    Inside,
}

impl Place {
    /// The place of this place's member `key`, or `None` for a member
    /// counted but never built.
    fn of_member(self, key: &str) -> Option<Self> {
        match (self, key) {
            (Self::Message, "jsonrpc") | (Self::ResultMeta, SERVER_INFO) => None,
            (Self::Message, "result") => Some(Self::Result),
            (Self::Result, META) => Some(Self::ResultMeta),
            _ => Some(Self::Inside),
        }
    }

    /// Whether the member `key`, built at this place as `value`, is left
    /// out of its object all the same: a result's `resultType` of
    /// `"complete"`, or its `_meta` left empty (module docs).
    fn leaves_out(self, key: &str, value: &Value) -> bool {
        match (self, key) {
            (Self::Result, "resultType") => value == "complete",
            (Self::Result, META) => value.as_object().is_some_and(Map::is_empty),
            _ => false,
        }
    }
}

/// One value of the message at its place, built as `serde_json::Value`
/// builds itself, and counted.
#[derive(Clone, Copy)]
struct Counted<'c>(&'c Counter, Place);

impl<'de> DeserializeSeed<'de> for Counted<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.0.one()?;
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Counted<'_> {
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

    fn visit_string<E>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<Value, A::Error> {
        let mut array = Vec::with_capacity(items.size_hint().unwrap_or(0));
        while let Some(item) = items.next_element_seed(Counted(self.0, Place::Inside))? {
            array.push(item);
        }
        Ok(Value::Array(array))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = members.next_key_seed(Key)? {
            if key == RAW_VALUE_TOKEN {
                return Err(de::Error::custom("an object member named by serde_json's private raw-value token"));
            }
            self.0.one()?;
            let Some(place) = self.1.of_member(&key) else {
                // Never built at this place, so no earlier member of the
                // key is in `object` to be replaced.
                members.next_value_seed(Skipped(self.0))?;
                continue;
            };
            let value = members.next_value_seed(Counted(self.0, place))?;
            if self.1.leaves_out(&key, &value) {
                // Of a key given twice, the last member is the one that stands.
                object.remove(&*key);
            } else {
                object.insert(key.into_owned(), value);
            }
        }
        Ok(Value::Object(object))
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

    fn visit_string<E>(self, key: String) -> Result<Cow<'de, str>, E> {
        Ok(Cow::Owned(key))
    }
}

/// A value read and counted like any other, but not built.
#[derive(Clone, Copy)]
struct Skipped<'c>(&'c Counter);

impl<'de> DeserializeSeed<'de> for Skipped<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        self.0.one()?;
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skipped<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
        while items.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<(), A::Error> {
        while members.next_key::<IgnoredAny>()?.is_some() {
            self.0.one()?;
            members.next_value_seed(self)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::client::Weight;

    #[test]
    fn a_message_parses_as_serde_json_parses_it_and_its_values_are_counted_as_the_cache_weighs_them() {
        for text in [
            r#"{"id":7,"result":{"content":[{"type":"text","text":"hé \"q\" \\ \u00e9"}],"isError":false}}"#,
            r#"[1,-2,3.5,1e300,18446744073709551615,-9223372036854775808,true,false,null,"x"]"#,
            r#"{"a":{"b":{"c":[{"d":0}]}},"e":"f,g:[{","h":[],"i":{}}"#,
            // Keys with escapes, which cannot be borrowed from the text.
            r#"{"k\"ey":{"\u00e9":1,"\n":[]},"plain":2}"#,
            "0",
            r#""just a string""#,
        ] {
            let (value, values) = parse(text.as_bytes(), usize::MAX).unwrap();
            assert_eq!(value, serde_json::from_str::<Value>(text).unwrap(), "{text}");
            assert_eq!(values, Weight::of(&value, 0).values, "{text}");
        }
    }

    #[test]
    fn what_no_reader_tells_from_its_absence_is_counted_but_not_built() {
        let cases = [
            // The message's `jsonrpc`, a result's `"complete"` and an `_meta`
            // that held only the upstream's `serverInfo`: an upstream `echo`.
            (
                r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"}},"resultType":"complete"}}"#,
                json!({"id": 1, "result": {"content": []}}),
            ),
            (r#"{"result":{"_meta":{},"resultType":"complete"}}"#, json!({"result": {}})),
            // Any other `resultType`, and an `_meta` with something in it, stay.
            (
                r#"{"result":{"resultType":"input_required","_meta":{"k":1}}}"#,
                json!({"result": {"resultType": "input_required", "_meta": {"k": 1}}}),
            ),
            (r#"{"result":{"resultType":5,"_meta":7}}"#, json!({"result": {"resultType": 5, "_meta": 7}})),
            (r#"{"result":{"resultType":"task"}}"#, json!({"result": {"resultType": "task"}})),
            // Only there: anywhere else these members are the upstream's to send.
            (
                r#"{"params":{"jsonrpc":"2.0","resultType":"complete","_meta":{}}}"#,
                json!({"params": {"jsonrpc": "2.0", "resultType": "complete", "_meta": {}}}),
            ),
            (
                r#"{"result":{"jsonrpc":"2.0","task":{"resultType":"complete","_meta":{}}}}"#,
                json!({"result": {"jsonrpc": "2.0", "task": {"resultType": "complete", "_meta": {}}}}),
            ),
            (
                r#"{"error":{"code":1,"message":"m","resultType":"complete"}}"#,
                json!({"error": {"code": 1, "message": "m", "resultType": "complete"}}),
            ),
            (
                r#"{"resultType":"complete","_meta":{},"result":{}}"#,
                json!({"resultType": "complete", "_meta": {}, "result": {}}),
            ),
            // Names written with escapes are the same names.
            (r#"{"json\u0072pc":1,"result":{"result\u0054ype":"complete","_met\u0061":{}}}"#, json!({"result": {}})),
        ];
        for (text, kept) in cases {
            let whole = serde_json::from_str::<Value>(text).unwrap();
            let (value, values) = parse(text.as_bytes(), usize::MAX).unwrap();
            assert_eq!(value, kept, "{text}");
            assert_eq!(values, Weight::of(&whole, 0).values, "counted as if built: {text}");
        }
        // Of a key given twice the last member stands, left out or not; both
        // are counted (the parse's doc): one key and one value more than
        // serde_json's map of the last keeps.
        for (text, kept) in [
            (r#"{"result":{"resultType":"task","resultType":"complete"}}"#, json!({"result": {}})),
            (r#"{"result":{"resultType":"complete","resultType":"task"}}"#, json!({"result": {"resultType": "task"}})),
            (r#"{"result":{"_meta":{"k":1},"_meta":{}}}"#, json!({"result": {}})),
            (
                r#"{"result":{"_meta":{"k":1},"_meta":{"io.modelcontextprotocol/serverInfo":{}}}}"#,
                json!({"result": {}}),
            ),
            (r#"{"result":{"_meta":{},"_meta":{"k":1}}}"#, json!({"result": {"_meta": {"k": 1}}})),
        ] {
            let (value, values) = parse(text.as_bytes(), usize::MAX).unwrap();
            assert_eq!(value, kept, "{text}");
            let last = serde_json::from_str::<Value>(text).unwrap();
            assert!(values > Weight::of(&last, 0).values, "both members counted: {text}");
        }
        // What is not built is still JSON, and still counts against the bound.
        let text = br#"{"jsonrpc":[1,2,3],"result":{}}"#;
        let (_, values) = parse(text, usize::MAX).unwrap();
        assert!(matches!(parse(text, values - 1), Err(Unparsed::Dense)));
        assert!(matches!(parse(br#"{"jsonrpc":[1,],"result":{}}"#, 1_000), Err(Unparsed::NotJson(_))));
    }

    #[test]
    fn the_upstream_s_server_info_is_counted_but_not_built() {
        let text = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up","version":"1","icons":[{"src":"a"}]},"k":"v"}}}"#;
        let whole = serde_json::from_str::<Value>(text).unwrap();
        let (value, values) = parse(text.as_bytes(), usize::MAX).unwrap();
        assert_eq!(value, json!({"id": 1, "result": {"content": [], "_meta": {"k": "v"}}}));
        assert_eq!(values, Weight::of(&whole, 0).values, "counted as if built");
        // Counted against the bound too, and read as JSON.
        assert!(matches!(parse(text.as_bytes(), values - 1), Err(Unparsed::Dense)));
        let broken = r#"{"result":{"_meta":{"io.modelcontextprotocol/serverInfo":[1,]}}}"#;
        assert!(matches!(parse(broken.as_bytes(), 1_000), Err(Unparsed::NotJson(_))));
        // Only there: elsewhere, a member of that name is the upstream's to send.
        for kept in [
            r#"{"result":{"io.modelcontextprotocol/serverInfo":1}}"#,
            r#"{"params":{"_meta":{"io.modelcontextprotocol/serverInfo":1}}}"#,
            r#"{"result":{"content":[{"_meta":{"io.modelcontextprotocol/serverInfo":1}}]}}"#,
        ] {
            assert_eq!(
                parse(kept.as_bytes(), 1_000).unwrap().0,
                serde_json::from_str::<Value>(kept).unwrap(),
                "{kept}"
            );
        }
    }

    #[test]
    fn a_message_over_the_bound_is_dense_at_the_value_that_passes_it() {
        let (_, values) = parse(br#"{"a":[1,2]}"#, 5).unwrap();
        assert_eq!(values, 5, "the object, its key, the array and its two elements");
        assert!(matches!(parse(br#"{"a":[1,2]}"#, 4), Err(Unparsed::Dense)));
        let dense = format!("[{}0]", "0,".repeat(100_000));
        assert!(matches!(parse(dense.as_bytes(), 1_000), Err(Unparsed::Dense)));
        // Keys count: an object of many empty-string members is no cheaper.
        let keys = format!("{{{}\"\":0}}", "\"\":0,".repeat(1_000));
        assert!(matches!(parse(keys.as_bytes(), 1_000), Err(Unparsed::Dense)));
    }

    #[test]
    fn serde_json_s_raw_value_token_is_refused_as_a_key() {
        // `Value`'s own parse (with `raw_value` on) would parse the string as
        // JSON: here 2,001 values from what the count before took for three.
        let smuggled = format!(r#"{{"$serde_json::private::RawValue":"[{}0]"}}"#, "0,".repeat(1_000));
        assert!(serde_json::from_str::<Value>(&smuggled).unwrap().is_array(), "what serde_json makes of it");
        assert!(matches!(parse(smuggled.as_bytes(), 10_000), Err(Unparsed::NotJson(_))));
        let nested = r#"{"result":{"content":[{"$serde_json::private::RawValue":"0"}]}}"#;
        assert!(matches!(parse(nested.as_bytes(), 10_000), Err(Unparsed::NotJson(_))));
        // Written with an escape, which serde_json's own parse reads as the token too.
        let escaped = r#"{"$serde_json::private::RawValu\u0065":"0"}"#;
        assert!(matches!(parse(escaped.as_bytes(), 10_000), Err(Unparsed::NotJson(_))));
    }

    #[test]
    fn text_is_read_as_str_exactly_as_it_was_read_as_bytes() {
        // `parse` reads valid text as a `str`; what the bytes' reader made of
        // it, values, counts and errors, must not change.
        let as_bytes = |text: &[u8], max: usize| parse_from(serde_json::Deserializer::from_slice(text), max);
        let summary = |parsed: Result<(Value, usize), Unparsed>| match parsed {
            Ok((value, values)) => format!("{value} {values}"),
            Err(Unparsed::Dense) => "dense".to_owned(),
            Err(Unparsed::NotJson(error)) => error.to_string(),
        };
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"}},"resultType":"complete"}}"#,
            r#"{"k\"ey":{"\u00e9":1,"\n":[]},"é\u00e9日":"é\u00e9日","s":"\ud83d\ude00"}"#,
            r#"{"$serde_json::private::RawValue":"0"}"#,
            r#"{"$serde_json::private::RawValu\u0065":"0"}"#,
            r#"["\ud800"]"#,
            r#"["\udc00"]"#,
            r#"["\ud800\u0041"]"#,
            r#"{"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"x":"\ud800"}}}}"#,
            "[1,]",
            "[0,0,0,0]",
        ] {
            for max in [3, 1_000] {
                assert_eq!(summary(parse(text.as_bytes(), max)), summary(as_bytes(text.as_bytes(), max)), "{text}");
            }
        }
    }

    #[test]
    fn text_that_is_not_utf8_is_not_json_and_a_bound_passed_before_it_is_still_found() {
        for text in [
            &b"{\"a\":\"\xff\"}"[..],
            b"\xff",
            b"{\"a\":1}\xc3",
            b"[\"\xed\xa0\x80\"]",
            b"{\"\xff\":1}",
            // In members counted but not built, too.
            b"{\"jsonrpc\":\"\xff\"}",
            b"{\"result\":{\"_meta\":{\"io.modelcontextprotocol/serverInfo\":{\"\xff\":1}}}}",
        ] {
            let unparsed = parse(text, 1_000).unwrap_err();
            let Unparsed::NotJson(error) = unparsed else { panic!("{text:?} is refused as not JSON") };
            let expected = serde_json::from_slice::<Value>(text).unwrap_err();
            assert_eq!(error.to_string(), expected.to_string(), "serde_json's own error for {text:?}");
        }
        assert!(matches!(parse(b"[0,0,0,\xff]", 2), Err(Unparsed::Dense)));
        // A string value counts before it is read: its bad byte comes after.
        assert!(matches!(parse(b"[0,0,\"\xff\"]", 2), Err(Unparsed::Dense)));
        let text = "{\"é\":\"日本\",\"k\":\"\\u00e9\"}";
        assert_eq!(parse(text.as_bytes(), 100).unwrap().0, json!({"é": "日本", "k": "é"}));
    }

    #[test]
    fn what_is_not_json_is_not_json_even_under_the_bound() {
        for text in ["{", "[1,]", r#"{"a":1} trailing"#, "", "nul"] {
            assert!(matches!(parse(text.as_bytes(), 1_000), Err(Unparsed::NotJson(_))), "{text:?}");
        }
        // Bad JSON found after the bound was passed is dense all the same.
        assert!(matches!(parse(b"[0,0,0,", 2), Err(Unparsed::Dense)));
        // Nesting is bounded by serde_json's own depth limit, whatever the count.
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(matches!(parse(deep.as_bytes(), usize::MAX), Err(Unparsed::NotJson(_))));
        assert_eq!(parse(b" {\"k\" : [ ] } ", 10).unwrap().0, json!({"k": []}));
    }
}
