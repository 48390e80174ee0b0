//! A modern `tools/call`, the request a server answers most, read from the
//! body straight into its typed parts.
//!
//! The general path ([`Incoming::parse`](crate::Incoming::parse)) builds a
//! `serde_json` map of the parameters, then [`RequestMeta::take`] and
//! [`Params::take`](crate::Params::take) move the members out of it, and
//! what is left is dropped. Here only the tool's arguments and the client's
//! capabilities become maps: a `tools/call` of `echo` over HTTP costs the
//! server 44,300 to 45,400 instructions instead of 47,400 to 47,700
//! (`loadtest/callgrind-tools-call.sh`).
//!
//! Only a call whose every member is one the server reads, of the type it
//! reads, takes this path: another method, a notification, a later round
//! (`inputResponses`, `requestState`), a task, an unknown member, a
//! duplicate one, an escaped `jsonrpc` or `method`, a wrong type or a bad
//! value gives `None`, and the general path reads the body again and answers
//! it with its own errors. It is meant to agree with the general path on
//! everything it accepts and to decide nothing else; `tests/typed_call.rs`
//! checks that on named cases and on generated calls. Two ways it could
//! have accepted more are closed here: a derived struct also reads a JSON
//! array, member by member ([`Object`] refuses one), and an ignored value
//! is skipped without the checks a `Value` makes (numbers out of range,
//! lone surrogates), so every member this path does not type is read as a
//! `Value`, or, where the server never reads it (`clientInfo`), with the
//! same checks and not built ([`Unbuilt`]). A third: the two members kept as
//! maps, `arguments` and `clientCapabilities`, are read as a `Value` and
//! taken only when it is an object, since a `Map` reads a first key of
//! serde_json's raw-value token as any key, where a `Value` parses its
//! string again as JSON ([`RAW_VALUE_TOKEN`](crate::RAW_VALUE_TOKEN)).

use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde_json::{Map, Value};

use crate::jsonrpc::{RequestId, present};
use crate::meta::{self, RequestMeta};
use crate::unbuilt::{NoRawValue, Unbuilt};

/// A modern `tools/call`, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct ModernCall {
    /// The request id.
    pub id: RequestId,
    /// The tool.
    pub name: String,
    /// Its arguments; `None` when absent or `null`, as `Params::CallTool` has them.
    pub arguments: Option<Map<String, Value>>,
    /// The request's `_meta`, as [`RequestMeta::take`] reads it.
    pub meta: RequestMeta,
}

impl ModernCall {
    /// The call in `bytes`, when it is an ordinary modern `tools/call`;
    /// `None` for anything the general path must read.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(bytes).ok()?;
        // The parameters are read as a call's in the same pass as the
        // envelope, whatever the method: a body that does not name the
        // method as this literal cannot be read here (`method` is borrowed,
        // so an escaped one fails too), and is not tried.
        if !text.contains(r#""tools/call""#) {
            return None;
        }
        let Object(envelope) = serde_json::from_str::<Object<Envelope<'_>>>(text).ok()?;
        if envelope.jsonrpc != "2.0" || envelope.method != "tools/call" {
            return None;
        }
        let id = match envelope.id {
            Value::String(id) => RequestId::String(id),
            Value::Number(n) => RequestId::Number(n.as_i64()?),
            _ => return None,
        };
        let Object(params) = envelope.params;
        let arguments = match params.arguments {
            None => None,
            Some(Value::Object(arguments)) => Some(arguments),
            Some(_) => return None,
        };
        let meta = params.meta.0.into_request_meta()?;
        Some(Self { id, name: params.name, arguments, meta })
    }
}

/// A request's members, its parameters as a call's.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Envelope<'a> {
    jsonrpc: &'a str,
    id: Value,
    method: &'a str,
    params: Object<CallParams>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CallParams {
    name: String,
    /// An object, or `null`; a `Value`, as the general path reads it (module docs).
    #[serde(default)]
    arguments: Option<Value>,
    #[serde(rename = "_meta")]
    meta: Object<MetaMembers>,
}

/// The `_meta` members a modern request may carry that the server reads.
/// `present` keeps an explicit `null` apart from an absent member: the
/// general path refuses a `null` log level or progress token.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MetaMembers {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
    protocol_version: String,
    /// An object; a `Value`, as the general path reads it (module docs).
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities")]
    client_capabilities: Value,
    /// Not used: read with the checks the general path's `Value` makes, but
    /// not built ([`Unbuilt`]); an object keyed by the raw-value token
    /// anywhere in it is refused, and left to the general path ([`NoRawValue`]).
    #[serde(rename = "io.modelcontextprotocol/clientInfo", default)]
    _client_info: Option<Unbuilt<NoRawValue>>,
    #[serde(rename = "io.modelcontextprotocol/logLevel", default, deserialize_with = "present")]
    log_level: Option<Value>,
    #[serde(rename = "progressToken", default, deserialize_with = "present")]
    progress_token: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    traceparent: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    tracestate: Option<Value>,
}

/// `T` read from a JSON object and nothing else: a derived struct also
/// reads an array, its members in order, which the general path refuses.
struct Object<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Members<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Members<T> {
            type Value = T;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }
        deserializer.deserialize_map(Members(PhantomData)).map(Object)
    }
}

impl MetaMembers {
    /// What [`RequestMeta::take`] makes of the same members, by the same
    /// checks; `None` where it would refuse one.
    fn into_request_meta(self) -> Option<RequestMeta> {
        let Value::Object(client_capabilities) = self.client_capabilities else {
            return None;
        };
        let log_level = meta::log_level(self.log_level.as_ref()).ok()?;
        let progress_token = meta::progress_token(self.progress_token).ok()?;
        let trace_context = meta::trace_members(self.traceparent.as_ref(), self.tracestate.as_ref());
        Some(RequestMeta {
            protocol_version: self.protocol_version,
            client_capabilities,
            log_level,
            progress_token,
            trace_context,
        })
    }
}
