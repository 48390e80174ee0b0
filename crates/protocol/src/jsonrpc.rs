//! The JSON-RPC 2.0 envelope: parsing one incoming message, writing responses
//! and notifications.
//!
//! Parsing is strict about the envelope (a batch, a response, a `null` id or a
//! missing `jsonrpc: "2.0"` is refused) and lenient about nothing else: `params`
//! stays a raw [`Value`] for the method's own parser.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::ErrorObject;
use crate::finished::Finished;

/// A request id: a string or an integer, never `null`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    /// An integer id; it stays a number when echoed.
    Number(i64),
    /// A string id.
    String(String),
}

impl RequestId {
    /// The id as a JSON value, keeping its type.
    pub fn to_value(&self) -> Value {
        match self {
            Self::Number(n) => Value::from(*n),
            Self::String(s) => Value::from(s.as_str()),
        }
    }

    fn from_value(value: &Value) -> Option<Self> {
        match value {
            Value::String(s) => Some(Self::String(s.clone())),
            Value::Number(n) => n.as_i64().map(Self::Number),
            _ => None,
        }
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::String(s) => f.write_str(s),
        }
    }
}

/// One message a client sent: a request (has an id) or a notification.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request, to be answered with a response carrying the same id.
    Request {
        /// The request id.
        id: RequestId,
        /// The method name as sent.
        method: String,
        /// The `params` object; an empty object when absent.
        params: Map<String, Value>,
    },
    /// A notification: no id, never answered.
    Notification {
        /// The method name as sent.
        method: String,
        /// The `params` object; an empty object when absent.
        params: Map<String, Value>,
    },
    /// A response to a request the server sent. Only legacy (2025) clients
    /// send these: they answer sampling and elicitation requests this way.
    Response {
        /// The id of the server's request.
        id: RequestId,
        /// The `result`, or the `error`.
        outcome: Result<Value, ErrorObject>,
    },
}

/// Why a body could not be read as one JSON-RPC message.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvelopeError {
    /// The id, when it could be read, so the error can echo it.
    pub id: Option<RequestId>,
    /// The error to answer with (`-32700` or `-32600`).
    pub error: ErrorObject,
}

impl Incoming {
    /// Parses one message from bytes.
    ///
    /// # Errors
    /// `-32700` when the bytes are not JSON (invalid UTF-8 included), `-32600`
    /// when the JSON is not a single request or notification object.
    pub fn parse(bytes: &[u8]) -> Result<Self, EnvelopeError> {
        // The body is checked as UTF-8 once, as a whole: parsing from bytes
        // checked every string of it on its own, which cost a `tools/call`
        // about 1,000 instructions (callgrind) for its dozen short strings.
        // JSON text is UTF-8 (RFC 8259), so invalid UTF-8 anywhere is a parse
        // error; from bytes, the fast path had let it pass in a member it
        // skipped.
        let text = std::str::from_utf8(bytes)
            .map_err(|e| EnvelopeError { id: None, error: ErrorObject::parse_error(e.to_string()) })?;
        // The fast path reads the envelope into a borrowed struct, without
        // building a map of its members; anything unusual (a batch, a
        // response, a wrongly typed member) takes the general path below, so
        // both paths give the same answer.
        let first = text.bytes().find(|b| !b.is_ascii_whitespace());
        if first == Some(b'{') {
            match serde_json::from_str::<Envelope<'_>>(text) {
                Ok(envelope) => {
                    if let Some(message) = envelope.into_message() {
                        return Ok(message);
                    }
                }
                Err(e) if !e.is_data() => {
                    return Err(EnvelopeError { id: None, error: ErrorObject::parse_error(e.to_string()) });
                }
                Err(_) => {}
            }
        }
        let value: Value = serde_json::from_str(text)
            .map_err(|e| EnvelopeError { id: None, error: ErrorObject::parse_error(e.to_string()) })?;
        Self::from_value(value)
    }

    /// Validates an already parsed JSON value as one message.
    ///
    /// # Errors
    /// `-32600` when the value is not a single request or notification object.
    pub fn from_value(value: Value) -> Result<Self, EnvelopeError> {
        let invalid = |id: Option<RequestId>, why: &str| EnvelopeError { id, error: ErrorObject::invalid_request(why) };
        let mut object = match value {
            Value::Object(object) => object,
            Value::Array(_) => return Err(invalid(None, "batches are not supported")),
            _ => return Err(invalid(None, "expected a JSON-RPC object")),
        };
        let id = match object.get("id") {
            None => None,
            Some(raw) => match RequestId::from_value(raw) {
                Some(id) => Some(id),
                None => return Err(invalid(None, "id must be a string or an integer")),
            },
        };
        if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(invalid(id, "jsonrpc must be \"2.0\""));
        }
        let method = match object.remove("method") {
            Some(Value::String(method)) => method,
            Some(_) => return Err(invalid(id, "method must be a string")),
            None => return Self::response(id, object),
        };
        let params = match object.remove("params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(params)) => params,
            Some(_) => return Err(invalid(id, "params must be an object")),
        };
        Ok(match id {
            Some(id) => Self::Request { id, method, params },
            None => Self::Notification { method, params },
        })
    }
}

/// The members of a request or notification, borrowed from the body.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<&'a str>,
    /// `Some(Value::Null)` for `"id": null`, which is not a notification.
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    #[serde(borrow, default)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    params: Option<Value>,
    #[serde(default)]
    result: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
}

/// A member read as `Some(value)` whenever it is there, `null` included
/// (with `#[serde(default)]`, an absent one is `None`).
pub(crate) fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

impl Envelope<'_> {
    /// The message, when the envelope is an ordinary, valid request or
    /// notification; `None` sends it down the general path.
    fn into_message(self) -> Option<Incoming> {
        if self.jsonrpc != Some("2.0") || self.result.is_some() || self.error.is_some() {
            return None;
        }
        let method = self.method?.into_owned();
        let params = match self.params {
            None => Map::new(),
            Some(Value::Object(params)) => params,
            Some(_) => return None,
        };
        match self.id {
            None => Some(Incoming::Notification { method, params }),
            Some(id) => RequestId::from_value(&id).map(|id| Incoming::Request { id, method, params }),
        }
    }
}

impl Incoming {
    fn response(id: Option<RequestId>, mut object: Map<String, Value>) -> Result<Self, EnvelopeError> {
        let invalid = |id: Option<RequestId>, why: &str| EnvelopeError { id, error: ErrorObject::invalid_request(why) };
        let Some(id) = id else { return Err(invalid(None, "method is missing")) };
        let outcome = match (object.remove("result"), object.remove("error")) {
            (Some(result), None) => Ok(result),
            (None, Some(error)) => Err(serde_json::from_value::<ErrorObject>(error)
                .map_err(|_| invalid(Some(id.clone()), "error must be a JSON-RPC error object"))?),
            _ => return Err(invalid(Some(id), "method is missing")),
        };
        Ok(Self::Response { id, outcome })
    }
}

/// Serialises a success response.
pub fn success(id: &RequestId, result: &Value) -> Vec<u8> {
    success_with(id, |out| crate::finished::write_value(result, out))
}

/// Serialises the success response carrying a finished result.
pub fn finished(id: &RequestId, result: &Finished) -> Vec<u8> {
    success_with(id, |out| result.write_json(out))
}

fn success_with(id: &RequestId, write_result: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    // Most answers are a few hundred bytes: start there rather than grow by doubling.
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    // An id is a string or an integer: writing it to memory cannot fail.
    if serde_json::to_writer(&mut out, id).is_err() {
        out.extend_from_slice(b"null");
    }
    out.extend_from_slice(br#","result":"#);
    write_result(&mut out);
    out.push(b'}');
    out
}

/// Serialises an error response; `id` is `None` only when it could not be read.
pub fn failure(id: Option<&RequestId>, error: &ErrorObject) -> Vec<u8> {
    #[derive(Serialize)]
    struct Failure<'a> {
        jsonrpc: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<&'a RequestId>,
        error: &'a ErrorObject,
    }
    to_bytes(&Failure { jsonrpc: "2.0", id, error })
}

/// Builds a notification message as a JSON value.
pub fn notification(method: &str, params: Value) -> Value {
    serde_json::json!({ "jsonrpc": "2.0", "method": method, "params": params })
}

fn to_bytes(value: &impl Serialize) -> Vec<u8> {
    // Most answers are a few hundred bytes: start there rather than grow by doubling.
    let mut out = Vec::with_capacity(512);
    // Serialising our own envelope of `Value`s cannot fail: every map key is a string.
    if serde_json::to_writer(&mut out, value).is_err() {
        out = b"{}".to_vec();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{INVALID_REQUEST, PARSE_ERROR};

    #[test]
    fn parses_request_and_notification() {
        let request = Incoming::parse(br#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#).unwrap();
        assert_eq!(
            request,
            Incoming::Request { id: RequestId::Number(7), method: "tools/list".into(), params: Map::new() }
        );
        let notification = Incoming::parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap();
        assert!(matches!(notification, Incoming::Notification { .. }));
    }

    #[test]
    fn refuses_malformed_envelopes_with_the_right_code() {
        let cases: [(&[u8], i32, Option<RequestId>); 10] = [
            (b"{not json", PARSE_ERROR, None),
            (b"\xff\xfe", PARSE_ERROR, None),
            (b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"a\":\"\xc3\x28\"}}", PARSE_ERROR, None),
            // In a member the envelope does not read, too.
            (b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"x\":\"\xff\"}", PARSE_ERROR, None),
            (br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, INVALID_REQUEST, None),
            (br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#, INVALID_REQUEST, None),
            (br#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#, INVALID_REQUEST, Some(RequestId::Number(3))),
            (br#"{"jsonrpc":"2.0","id":"a","method":5}"#, INVALID_REQUEST, Some(RequestId::String("a".into()))),
            (br#"{"jsonrpc":"2.0","id":4,"error":7}"#, INVALID_REQUEST, Some(RequestId::Number(4))),
            (br#"{"jsonrpc":"2.0","id":5,"method":"x","params":[1]}"#, INVALID_REQUEST, Some(RequestId::Number(5))),
        ];
        for (body, code, id) in cases {
            let err = Incoming::parse(body).unwrap_err();
            assert_eq!(err.error.code, code, "{}", String::from_utf8_lossy(body));
            assert_eq!(err.id, id, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn the_fast_path_agrees_with_the_general_one() {
        let bodies: [&[u8]; 10] = [
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"a":1}}}"#,
            br#"{"jsonrpc":"2.0","id":"x","method":"a\u002fb"}"#,
            br#"{"jsonrpc":"2\u002e0","id":1,"method":"m"}"#,
            br#"{"jsonrpc":"2.0","method":"notifications/initialized","params":null}"#,
            br#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#,
            br#"{"jsonrpc":"2.0","id":{},"method":"m"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"m","method":"n"}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"m","params":[]}"#,
            br#"{"jsonrpc":"2.0","id":1,"result":null}"#,
            br#"{"id":1,"method":"m"}"#,
        ];
        for body in bodies {
            let general =
                serde_json::from_slice(body).map_err(|_| ()).and_then(|v| Incoming::from_value(v).map_err(|_| ()));
            assert_eq!(Incoming::parse(body).map_err(|_| ()), general, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn parses_responses_to_server_requests() {
        let ok = Incoming::parse(br#"{"jsonrpc":"2.0","id":"s-1","result":{"action":"accept"}}"#).unwrap();
        assert_eq!(
            ok,
            Incoming::Response {
                id: RequestId::String("s-1".into()),
                outcome: Ok(serde_json::json!({"action":"accept"}))
            }
        );
        let err = Incoming::parse(br#"{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no"}}"#).unwrap();
        assert!(matches!(err, Incoming::Response { outcome: Err(ErrorObject { code: -32601, .. }), .. }));
        assert!(Incoming::parse(br#"{"jsonrpc":"2.0","result":{}}"#).is_err(), "a response needs an id");
    }

    #[test]
    fn ids_keep_their_type_when_echoed() {
        let out = success(&RequestId::Number(42), &serde_json::json!({}));
        assert_eq!(out, br#"{"jsonrpc":"2.0","id":42,"result":{}}"#);
        let out = failure(Some(&RequestId::String("x".into())), &ErrorObject::internal());
        assert_eq!(out, br#"{"jsonrpc":"2.0","id":"x","error":{"code":-32603,"message":"Internal error"}}"#);
    }
}
