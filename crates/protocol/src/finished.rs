//! A result on its way out: the object a method produced and the members the
//! server adds to every modern result.
//!
//! Every modern result carries `"resultType": "complete"` (unless it says
//! otherwise) and `_meta` naming the server. Built into each result's map,
//! they cost a `tools/call` about 1,200 of its 53,700 instructions in
//! allocations, map inserts and a copy of the server's description, and more
//! to serialise and free them (callgrind). [`ServerStamp`] writes them as text
//! once, and a [`Finished`] result that has neither member appends that text
//! when it is serialised.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::meta::{META, SERVER_INFO};
use crate::result_text::ToolResultText;

/// What a method produced: a result object as a `Value`, or a tool's
/// result kept as the text its plugin wrote ([`ToolResultText`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Produced {
    /// A result built as a value.
    Value(Value),
    /// A tool's complete result, passed on as its text.
    ToolText(ToolResultText),
}

impl Produced {
    /// Whether the result is a tool's reporting an error (`isError: true`).
    pub fn is_error(&self) -> bool {
        match self {
            Self::Value(value) => value.get("isError").and_then(Value::as_bool) == Some(true),
            Self::ToolText(text) => text.is_error(),
        }
    }

    /// The result's `resultType`, if it names one (a result kept as text
    /// is complete and names none).
    pub fn result_type(&self) -> Option<&str> {
        match self {
            Self::Value(value) => value.get("resultType").and_then(Value::as_str),
            Self::ToolText(_) => None,
        }
    }

    /// The result as a `Value`.
    pub fn into_value(self) -> Value {
        match self {
            Self::Value(value) => value,
            Self::ToolText(text) => text.into_value(),
        }
    }
}

impl From<Value> for Produced {
    fn from(value: Value) -> Self {
        Self::Value(value)
    }
}

impl From<ToolResultText> for Produced {
    fn from(text: ToolResultText) -> Self {
        Self::ToolText(text)
    }
}

/// The members the server adds to a modern result that lacks them:
/// `resultType: "complete"` and `_meta` carrying `serverInfo`.
#[derive(Debug, PartialEq)]
pub struct ServerStamp {
    /// `_meta` with `serverInfo`, and `resultType: "complete"`.
    members: Map<String, Value>,
    /// `"_meta":{"io.modelcontextprotocol/serverInfo":…},"resultType":"complete"`:
    /// the members as JSON text (in the map's order), without the braces around them.
    text: Box<str>,
}

impl ServerStamp {
    /// The stamp of a server describing itself as `server_info`.
    pub fn new(server_info: Value) -> Self {
        let mut members = Map::new();
        Self::apply(&server_info, &mut members);
        let text = serde_json::to_string(&members).unwrap_or_default();
        let text = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')).unwrap_or_default().into();
        Self { members, text }
    }

    /// The server's description, as `_meta` names it.
    pub fn server_info(&self) -> &Value {
        &self.members[META][SERVER_INFO]
    }

    /// Adds the members to `object`: `resultType` unless it has one, and
    /// `serverInfo` in its `_meta` (made when absent, left alone when not an
    /// object).
    fn apply(server_info: &Value, object: &mut Map<String, Value>) {
        object.entry("resultType").or_insert_with(|| Value::from("complete"));
        if let Value::Object(meta) = object.entry(META).or_insert_with(|| Value::Object(Map::new())) {
            meta.insert(SERVER_INFO.into(), server_info.clone());
        }
    }
}

/// A result object ready to send, with the [`ServerStamp`]'s members either
/// in it or still to be appended when it is written.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    object: Produced,
    /// Set when `object` has neither `resultType` nor `_meta` (a map
    /// without them, or a result kept as text): the stamp's members then go
    /// at its end as text.
    stamp: Option<Arc<ServerStamp>>,
}

impl Finished {
    /// `object` as it is (a legacy result, or one already complete).
    pub fn plain(object: impl Into<Produced>) -> Self {
        Self { object: object.into(), stamp: None }
    }

    /// `object` with `stamp`'s members. Only an object that has neither
    /// member defers them to serialisation; any other gets them in its map
    /// now, as the rules in [`ServerStamp`] say, so both give the same JSON
    /// (up to the order of members).
    pub fn stamped(object: impl Into<Produced>, stamp: &Arc<ServerStamp>) -> Self {
        let mut object = match object.into() {
            Produced::Value(object) => object,
            // Text holds neither member.
            text @ Produced::ToolText(_) => return Self { object: text, stamp: Some(Arc::clone(stamp)) },
        };
        let Value::Object(map) = &mut object else { return Self::plain(object) };
        if map.contains_key("resultType") || map.contains_key(META) {
            ServerStamp::apply(stamp.server_info(), map);
            return Self::plain(object);
        }
        Self { object: Produced::Value(object), stamp: Some(Arc::clone(stamp)) }
    }

    /// Whether the result is a tool's reporting an error (`isError: true`).
    pub fn is_error(&self) -> bool {
        self.object.is_error()
    }

    /// The whole result as one value, the stamp's members included.
    pub fn into_value(self) -> Value {
        let mut object = self.object.into_value();
        if let (Some(stamp), Value::Object(map)) = (&self.stamp, &mut object) {
            ServerStamp::apply(stamp.server_info(), map);
        }
        object
    }

    /// Appends the result's JSON to `out`.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        let start = out.len();
        match &self.object {
            Produced::Value(value) => write_value(value, out),
            Produced::ToolText(text) => out.extend_from_slice(text.as_str().as_bytes()),
        }
        if let Some(stamp) = &self.stamp {
            // The object's text ends with its closing brace: the stamp's
            // members go before it, after a comma unless the object is `{}`.
            out.pop();
            if out.len() - start > 1 {
                out.push(b',');
            }
            out.extend_from_slice(stamp.text.as_bytes());
            out.push(b'}');
        }
    }

    /// Appends the whole result's canonical JSON (for an `ETag`: the same
    /// for the same result, whichever way it holds the stamp's members).
    pub fn write_canonical(&self, out: &mut Vec<u8>) {
        match (&self.stamp, &self.object) {
            // The object has neither of the stamp's members: the two maps
            // are written as one, without copying the result.
            (Some(stamp), Produced::Value(Value::Object(map))) => {
                crate::canonical::write_members(map.iter().chain(&stamp.members), out);
            }
            (None, Produced::Value(value)) => crate::canonical::write(value, out),
            // Text is read as a value for this (a tool's result has no ETag).
            (_, Produced::ToolText(_)) | (Some(_), Produced::Value(_)) => {
                crate::canonical::write(&self.clone().into_value(), out);
            }
        }
    }
}

/// Writes `value` as JSON. Serialising a `Value` into memory cannot fail:
/// every map key is a string and writing to a `Vec` has no IO error.
pub(crate) fn write_value(value: &Value, out: &mut Vec<u8>) {
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.extend_from_slice(b"null");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result_text::Leaves;
    use serde_json::json;

    fn stamp() -> Arc<ServerStamp> {
        Arc::new(ServerStamp::new(json!({"name": "switchyard", "version": "1.2.3"})))
    }

    fn written(result: &Finished) -> Value {
        let mut out = Vec::new();
        result.write_json(&mut out);
        serde_json::from_slice(&out).expect("the written result is JSON")
    }

    #[test]
    fn a_deferred_stamp_writes_what_the_map_would_hold() {
        let info = json!({"name": "switchyard", "version": "1.2.3"});
        let cases = [
            json!({"content": [{"type": "text", "text": "hi"}]}),
            json!({}),
            json!({"resultType": "input_required", "inputRequests": {}}),
            json!({"_meta": {"mine": 1, SERVER_INFO: "forged"}}),
            json!({"_meta": 5}),
            json!([1, 2]),
        ];
        for case in cases {
            let result = Finished::stamped(case.clone(), &stamp());
            let mut expected = case.clone();
            if let Value::Object(map) = &mut expected {
                ServerStamp::apply(&info, map);
            }
            assert_eq!(written(&result), expected, "{case}");
            assert_eq!(result.clone().into_value(), expected, "{case}");
        }
        let deferred = Finished::stamped(json!({"isError": true}), &stamp());
        assert!(deferred.stamp.is_some(), "an ordinary result defers the stamp");
        assert!(deferred.is_error());
    }

    #[test]
    fn a_result_kept_as_text_is_written_as_its_value_would_be() {
        let texts = [r#"{"content":[{"type":"text","text":"hi"}],"isError":true}"#, r#"{"content":[]}"#];
        for text in texts {
            let value: Value = serde_json::from_str(text).unwrap();
            let kept = || ToolResultText::read(text, Leaves::Nothing).unwrap();
            let (as_text, as_value) = (Finished::stamped(kept(), &stamp()), Finished::stamped(value.clone(), &stamp()));
            assert_eq!(written(&as_text), written(&as_value), "{text}");
            assert_eq!(as_text.is_error(), as_value.is_error());
            assert_eq!(as_text.clone().into_value(), as_value.clone().into_value());
            let canonical = |result: &Finished| {
                let mut out = Vec::new();
                result.write_canonical(&mut out);
                out
            };
            assert_eq!(canonical(&as_text), canonical(&as_value));
            assert_eq!(written(&Finished::plain(kept())), value, "a legacy result: the text alone");
        }
    }

    #[test]
    fn a_plain_result_is_written_as_it_is() {
        let result = Finished::plain(json!({"content": []}));
        assert_eq!(written(&result), json!({"content": []}));
    }

    #[test]
    fn the_canonical_form_is_the_whole_results() {
        let canonical = |result: &Finished| {
            let mut out = Vec::new();
            result.write_canonical(&mut out);
            out
        };
        let whole = |value: &Value| {
            let mut out = Vec::new();
            crate::canonical::write(value, &mut out);
            out
        };
        let a = Finished::stamped(json!({"tools": []}), &stamp());
        assert_eq!(canonical(&a), whole(&a.clone().into_value()));
        let in_map = Finished::stamped(json!({"tools": [], "resultType": "complete"}), &stamp());
        assert_eq!(canonical(&a), canonical(&in_map), "the same result, however its stamp is held");
        let other_server = Arc::new(ServerStamp::new(json!({"name": "switchyard", "version": "1.2.4"})));
        assert_ne!(canonical(&a), canonical(&Finished::stamped(json!({"tools": [1]}), &stamp())));
        assert_ne!(canonical(&a), canonical(&Finished::stamped(json!({"tools": []}), &other_server)));
    }
}
