//! Properties of what parses untrusted bytes: the JSON-RPC envelope and the
//! header value encoding. Arbitrary input never panics, and never parses
//! into something it does not say.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use serde_json::{Value, json};
use switchyard_protocol::headers::{decode_value, encode_value};
use switchyard_protocol::jsonrpc::Incoming;

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
