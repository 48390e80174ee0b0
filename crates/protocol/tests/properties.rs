//! Properties of what parses untrusted bytes: the JSON-RPC envelope and the
//! header value encoding. Arbitrary input never panics, and never parses
//! into something it does not say.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use serde_json::{Value, json};
use switchyard_protocol::headers::{decode_value, encode_value};
use switchyard_protocol::jsonrpc::Incoming;
use switchyard_protocol::{Method, ModernCall, Params, RequestMeta};

/// JSON values of a few levels, with the members a JSON-RPC envelope has.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
        Just(json!("2.0")),
        "[a-z/_.0-9]{0,12}".prop_map(Value::String),
        any::<String>().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        let member = prop_oneof![
            Just("jsonrpc".to_owned()),
            Just("id".to_owned()),
            Just("method".to_owned()),
            Just("params".to_owned()),
            Just("result".to_owned()),
            Just("error".to_owned()),
            "[a-z]{1,6}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(member, inner, 0..6).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// What a parse says, comparable across two parses.
fn verdict(bytes: &[u8]) -> String {
    match Incoming::parse(bytes) {
        Ok(message) => format!("{message:?}"),
        Err(envelope) => format!("error {}", envelope.error.code),
    }
}

/// Changes to an ordinary `tools/call`: where in the body (the envelope,
/// `params` or `params._meta`), which member, and its new value (`None`
/// removes it).
const CHANGES: &[(&str, &str, Option<&str>)] = &[
    ("", "jsonrpc", Some(r#""1.0""#)),
    ("", "id", Some("null")),
    ("", "id", Some("1.5")),
    ("", "id", Some("18446744073709551615")),
    ("", "id", Some(r#""a""#)),
    ("", "id", None),
    ("", "method", Some(r#""tools/list""#)),
    ("", "method", None),
    ("", "result", Some("{}")),
    ("params", "name", Some("5")),
    ("params", "name", None),
    ("params", "arguments", Some("null")),
    ("params", "arguments", Some("[1]")),
    ("params", "arguments", None),
    ("params", "requestState", Some(r#""s""#)),
    ("params", "task", Some("{}")),
    ("params", "_meta", Some("null")),
    ("params", "_meta", None),
    ("meta", "io.modelcontextprotocol/protocolVersion", Some("5")),
    ("meta", "io.modelcontextprotocol/protocolVersion", Some(r#""2099-01-01""#)),
    ("meta", "io.modelcontextprotocol/protocolVersion", None),
    ("meta", "io.modelcontextprotocol/clientCapabilities", Some("null")),
    ("meta", "io.modelcontextprotocol/clientCapabilities", Some(r#"{"sampling":{}}"#)),
    ("meta", "io.modelcontextprotocol/clientCapabilities", None),
    ("meta", "io.modelcontextprotocol/clientInfo", Some(r#"{"name":"c"}"#)),
    ("meta", "io.modelcontextprotocol/logLevel", Some(r#""debug""#)),
    ("meta", "io.modelcontextprotocol/logLevel", Some(r#""loud""#)),
    ("meta", "io.modelcontextprotocol/logLevel", Some("null")),
    ("meta", "io.modelcontextprotocol/other", Some("1")),
    ("meta", "progressToken", Some(r#""p""#)),
    ("meta", "progressToken", Some("3")),
    ("meta", "progressToken", Some("1.5")),
    ("meta", "progressToken", Some("null")),
    ("meta", "traceparent", Some(r#""00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01""#)),
    ("meta", "traceparent", Some("5")),
    ("meta", "tracestate", Some(r#""a=b""#)),
];

/// An ordinary `tools/call` with up to three of [`CHANGES`] made to it.
fn call_body() -> impl Strategy<Value = Value> {
    prop::collection::vec(0..CHANGES.len(), 0..4).prop_map(|changes| {
        let mut body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "echo", "arguments": {"text": "hi"},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}}}});
        for change in changes {
            let (place, key, value) = CHANGES[change];
            let object = match place {
                "" => Some(&mut body),
                "params" => body.get_mut("params"),
                _ => body.get_mut("params").and_then(|p| p.get_mut("_meta")),
            };
            if let Some(Value::Object(object)) = object {
                match value {
                    Some(value) => object.insert(key.to_owned(), serde_json::from_str(value).unwrap()),
                    None => object.remove(key),
                };
            }
        }
        body
    })
}

/// The general path's reading of a modern `tools/call` it reads whole.
fn general_call(bytes: &[u8]) -> Option<ModernCall> {
    let Ok(Incoming::Request { id, method, mut params }) = Incoming::parse(bytes) else { return None };
    if method != "tools/call" || RequestMeta::claimed_version(&params).is_none() {
        return None;
    }
    let meta = RequestMeta::take(&mut params).ok()?;
    let Ok(Params::CallTool { name, arguments, retry }) = Params::take(&Method::CallTool, &mut params) else {
        return None;
    };
    (!retry.is_retry() && params.is_empty()).then_some(ModernCall { id, name, arguments, meta })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// A `tools/call` read typed is read as the general path reads it; and
    /// every call the general path reads whole, with no member the typed
    /// reading does not know, is read typed.
    #[test]
    fn a_call_read_typed_is_the_call_the_general_path_reads(body in call_body()) {
        let bytes = serde_json::to_vec(&body).unwrap();
        let (typed, general) = (ModernCall::parse(&bytes), general_call(&bytes));
        if typed.is_some() {
            prop_assert_eq!(&typed, &general);
        }
        let known = |value: &Value, keys: &[&str]| value.as_object().is_some_and(|o| o.keys().all(|k| keys.contains(&k.as_str())));
        let all_known = known(&body, &["jsonrpc", "id", "method", "params"])
            && known(&body["params"], &["name", "arguments", "_meta"])
            && known(&body["params"]["_meta"], &[
                "io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities",
                "io.modelcontextprotocol/clientInfo", "io.modelcontextprotocol/logLevel",
                "progressToken", "traceparent", "tracestate",
            ]);
        if general.is_some() && all_known {
            prop_assert!(typed.is_some(), "not read typed: {}", body);
        }
    }
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic_the_parser(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = Incoming::parse(&bytes);
    }

    /// The same JSON reads the same however it is spelled, and what parses
    /// as a request says exactly what the JSON says: `jsonrpc` 2.0, its
    /// method, its id and its params.
    #[test]
    fn a_parse_says_what_the_json_says(value in json_value()) {
        let compact = serde_json::to_vec(&value).unwrap();
        let pretty = serde_json::to_vec_pretty(&value).unwrap();
        prop_assert_eq!(verdict(&compact), verdict(&pretty));
        if let Ok(Incoming::Request { id, method, params }) = Incoming::parse(&compact) {
            prop_assert_eq!(&value["jsonrpc"], &json!("2.0"));
            prop_assert_eq!(&value["method"], &json!(method));
            prop_assert_eq!(&value["id"], &id.to_value());
            match value.get("params") {
                Some(Value::Object(given)) => prop_assert_eq!(given, &params),
                _ => prop_assert!(params.is_empty()),
            }
        }
    }

    /// A request parses as exactly the request it is.
    #[test]
    fn a_request_parses_as_itself(id in any::<i64>(), method in any::<String>(), key in "[a-z]{1,8}", text in any::<String>()) {
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": { key.clone(): text } });
        match Incoming::parse(&serde_json::to_vec(&body).unwrap()) {
            Ok(Incoming::Request { id: parsed, method: parsed_method, params }) => {
                prop_assert_eq!(parsed.to_value(), json!(id));
                prop_assert_eq!(parsed_method, method);
                prop_assert_eq!(&params[&key], &json!(text));
            }
            other => prop_assert!(false, "{:?}", other.map(|m| format!("{m:?}")).map_err(|e| e.error.code)),
        }
    }

    #[test]
    fn a_header_value_decodes_to_what_was_encoded(value in any::<String>()) {
        prop_assert_eq!(decode_value(&encode_value(&value)).unwrap(), value);
    }

    #[test]
    fn arbitrary_header_values_never_panic(raw in any::<String>(), payload in "[A-Za-z0-9+/=]{0,40}") {
        let _ = decode_value(&raw);
        let _ = decode_value(&format!("=?base64?{payload}?="));
    }
}
