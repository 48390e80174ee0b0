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
//!
//! The answer to a `tools/call` answered at once (not a task's, whose result
//! is stored as a value) is parsed by [`parse_keeping_text`], which keeps
//! its result as the text it came as, when it can be
//! (`protocol::result_text`): our client receives it as it is, rather than
//! built here and written again (#18). Its values are still counted, in one
//! pass over its text, against the same bound.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use switchyard_protocol::meta::{META, SERVER_INFO};
use switchyard_protocol::result_text::{Leaves, MemberKey, NotText, ToolResultText};
use switchyard_protocol::unbuilt::{NoRawValue, Unbuilt, Watch};

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

/// A message parsed by [`parse_keeping_text`].
pub(crate) struct Parsed {
    /// The message, without its `result` when that is kept as text.
    pub(crate) message: Value,
    /// Its `result`, kept as text.
    pub(crate) result: Option<ToolResultText>,
    /// The values it holds, as [`parse`] counts them.
    pub(crate) values: usize,
}

/// [`parse`], with the message's `result` kept as the text it came as when
/// it can be ([`ToolResultText`]): the answer to a `tools/call` answered at
/// once, whose result goes on to our client as it is, rather than built here and
/// written again (#18). The result's values are counted as [`parse`] counts
/// them, by one pass over its text, and against the same bound, but not
/// built.
///
/// Whatever goes otherwise (text that is not UTF-8, a result that is not
/// kept as text, JSON that is broken, the bound passed) is parsed again by
/// [`parse`], from the start: it gives what it always gave, result, error
/// or refusal. A message with no `result` is parsed once, as [`parse`]
/// parses it.
pub(crate) fn parse_keeping_text(text: &[u8], max_values: usize) -> Result<Parsed, Unparsed> {
    if let Ok(utf8) = std::str::from_utf8(text) {
        let counter = Counter::new(max_values, true);
        let mut reader = serde_json::Deserializer::from_str(utf8);
        let parsed =
            Counted(&counter, Place::Message).deserialize(&mut reader).and_then(|value| reader.end().map(|()| value));
        if let Ok(message) = parsed {
            return Ok(Parsed { message, result: counter.text.take(), values: counter.values.get() });
        }
    }
    parse_built(text, max_values)
}

/// [`parse`], as [`Parsed`].
pub(crate) fn parse_built(text: &[u8], max_values: usize) -> Result<Parsed, Unparsed> {
    parse(text, max_values).map(|(message, values)| Parsed { message, result: None, values })
}

/// The counted parse itself, from whichever reader `reader` reads.
fn parse_from<'de, R: serde_json::de::Read<'de>>(
    mut reader: serde_json::Deserializer<R>,
    max_values: usize,
) -> Result<(Value, usize), Unparsed> {
    let counter = Counter::new(max_values, false);
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
    /// Whether the message's `result` is kept as text ([`parse_keeping_text`]).
    keeps_text: bool,
    /// The `result` kept as text.
    text: Cell<Option<ToolResultText>>,
}

impl Counter {
    fn new(max: usize, keeps_text: bool) -> Self {
        Self { values: Cell::new(0), max, passed: Cell::new(false), keeps_text, text: Cell::new(None) }
    }

    /// Counts one more value, or stops the parse past the bound.
    fn one<E: de::Error>(&self) -> Result<(), E> {
        self.more(1)
    }

    /// Counts `values` more, or stops the parse past the bound.
    fn more<E: de::Error>(&self, values: usize) -> Result<(), E> {
        let values = self.values.get().saturating_add(values);
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
        while let Some(key) = members.next_key_seed(MemberKey)? {
            // Refused as any key, as a call's `clientInfo` refuses it.
            NoRawValue.key(&key)?;
            self.0.one()?;
            if self.0.keeps_text && self.1 == Place::Message && key == "result" {
                let kept = members.next_value_seed(ResultText)?.map_err(|_| de::Error::custom("a result to build"))?;
                self.0.more(kept.values())?;
                // Of a `result` given twice, the last would stand: built, as `parse` builds it.
                if self.0.text.replace(Some(kept)).is_some() {
                    return Err(de::Error::custom("a result given twice"));
                }
                continue;
            }
            let Some(place) = self.1.of_member(&key) else {
                // Never built at this place, so no earlier member of the
                // key is in `object` to be replaced.
                members.next_value_seed(Unbuilt(self.0))?;
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

/// The message's `result` read as [`ToolResultText`]: `Err` for one that
/// is built ([`parse_keeping_text`] parses it again).
struct ResultText;

impl<'de> DeserializeSeed<'de> for ResultText {
    type Value = Result<ToolResultText, NotText>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        // Left out of what the upstream answers, as `parse` leaves them out.
        ToolResultText::read_from(deserializer, Leaves::ServerMembers)
    }
}

/// A value read and counted like any other, but not built: each value
/// and each key is one more ([`Unbuilt`]); no key is looked at.
impl Watch for &Counter {
    fn value<E: de::Error>(self) -> Result<(), E> {
        self.one()
    }

    fn key<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.one()
    }
}

#[cfg(test)]
mod tests;
