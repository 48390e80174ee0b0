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
//! same checks and not built ([`Unread`]). A third: the two members kept as
//! maps, `arguments` and `clientCapabilities`, are read as a `Value` and
//! taken only when it is an object, since a `Map` reads a first key of
//! serde_json's raw-value token as any key, where a `Value` parses its
//! string again as JSON ([`RAW_VALUE_TOKEN`]).

use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde_json::{Map, Value};

use crate::jsonrpc::{RequestId, present};
use crate::meta::{self, RequestMeta};

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
    /// not built ([`Unread`]).
    #[serde(rename = "io.modelcontextprotocol/clientInfo", default)]
    _client_info: Option<Unread>,
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

/// A JSON value read with every check the general path's parse into a
/// `Value` makes, and not built: `clientInfo`, which clients should send
/// with every request and which the server never reads. Built as a `Value`
/// and dropped, a name and a version cost a map, four strings and their
/// frees; skipped as [`serde::de::IgnoredAny`] skips, numbers out of range
/// and lone surrogates would pass. Read value by value through
/// `deserialize_any` instead, serde_json parses each number and string as
/// it does for a `Value` (and counts the nesting against the same limit),
/// and the visitor keeps nothing.
///
/// One thing a `Value` does that this must refuse instead: with serde_json's
/// `raw_value` feature on (the workspace enables it), an object whose first
/// key is serde_json's private raw-value token is read as the JSON text in
/// its string member, parsed again, which may fail. Here the token is
/// refused as a key wherever it stands (stricter than a `Value`, which
/// reads it as any key after the first), and the general path reads the
/// call and decides.
struct Unread;

/// The key by which serde_json's `Value` (with `raw_value` on) takes an
/// object, when it is its first, for raw JSON text to be parsed again. A
/// reader that keeps or skips JSON without building it refuses an object
/// with this key.
pub const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

impl<'de> Deserialize<'de> for Unread {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(Unread)
    }
}

impl<'de> Visitor<'de> for Unread {
    type Value = Self;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_unit<E>(self) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut items: A) -> Result<Self, A::Error> {
        while items.next_element::<Self>()?.is_some() {}
        Ok(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<Self, A::Error> {
        while members.next_key::<UnreadKey>()?.is_some() {
            members.next_value::<Self>()?;
        }
        Ok(self)
    }
}

/// A member's key read for [`Unread`]: any string but the raw-value token.
struct UnreadKey;

impl<'de> Deserialize<'de> for UnreadKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(UnreadKey)
    }
}

impl Visitor<'_> for UnreadKey {
    type Value = Self;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a member's key")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<Self, E> {
        if key == RAW_VALUE_TOKEN {
            return Err(E::custom("an object member named by serde_json's private raw-value token"));
        }
        Ok(self)
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
