//! The typed reading of a modern `tools/call` (`ModernCall`) against the
//! general path: what it reads, it reads as the general path does, and it
//! reads every ordinary call.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use serde_json::{Value, json};
use switchyard_protocol::jsonrpc::{Incoming, RequestId};
use switchyard_protocol::meta::{CLIENT_CAPABILITIES, CLIENT_INFO, LOG_LEVEL, PROGRESS_TOKEN, PROTOCOL_VERSION};
use switchyard_protocol::{Method, ModernCall, Params, RequestMeta};

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
    ("", "params", Some(r#"["echo",{"text":"hi"},["2026-07-28",{}]]"#)),
    ("params", "_meta", Some("null")),
    ("params", "_meta", Some(r#"["2026-07-28",{}]"#)),
    ("params", "_meta", Some(r#""2026-07-28""#)),
    ("params", "_meta", None),
    ("meta", "io.modelcontextprotocol/protocolVersion", Some("5")),
    ("meta", "io.modelcontextprotocol/protocolVersion", Some(r#""2099-01-01""#)),
    ("meta", "io.modelcontextprotocol/protocolVersion", None),
    ("meta", "io.modelcontextprotocol/clientCapabilities", Some("null")),
    ("meta", "io.modelcontextprotocol/clientCapabilities", Some(r#"{"sampling":{}}"#)),
    ("meta", "io.modelcontextprotocol/clientCapabilities", None),
    ("meta", "io.modelcontextprotocol/clientInfo", Some(r#"{"name":"c"}"#)),
    ("meta", "io.modelcontextprotocol/clientInfo", Some(r#"["c"]"#)),
    ("meta", "io.modelcontextprotocol/clientInfo", Some("null")),
    ("meta", "io.modelcontextprotocol/logLevel", Some(r#""debug""#)),
    ("meta", "io.modelcontextprotocol/logLevel", Some(r#""loud""#)),
    ("meta", "io.modelcontextprotocol/logLevel", Some("null")),
    ("meta", "io.modelcontextprotocol/other", Some("1")),
    ("meta", "progressToken", Some(r#""p""#)),
    ("meta", "progressToken", Some("3")),
    ("meta", "progressToken", Some("1.5")),
    ("meta", "progressToken", Some("null")),
    ("meta", "progressToken", Some("-1")),
    ("meta", "progressToken", Some("18446744073709551615")),
    ("meta", "traceparent", Some(r#""00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01""#)),
    ("meta", "traceparent", Some("5")),
    ("meta", "tracestate", Some(r#""a=b""#)),
    ("meta", "tracestate", Some("[1]")),
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

fn call(params: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params})).unwrap()
}

fn meta(extra: Value) -> Value {
    let mut meta = json!({PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: {"sampling": {}}});
    for (key, value) in extra.as_object().unwrap() {
        meta[key] = value.clone();
    }
    meta
}

/// Read typed, and the same as the general path reads it.
fn fast(body: &[u8]) -> ModernCall {
    let call = ModernCall::parse(body).unwrap_or_else(|| panic!("not read typed: {}", String::from_utf8_lossy(body)));
    assert_eq!(Some(&call), general_call(body).as_ref(), "{}", String::from_utf8_lossy(body));
    call
}

/// An ordinary call whose `clientInfo` is `raw`, as written.
fn call_with_client_info(raw: &str) -> Vec<u8> {
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}},"io.modelcontextprotocol/clientInfo":{raw}}}}}}}"#
    )
    .into_bytes()
}

fn falls_back(body: &[u8]) {
    assert_eq!(ModernCall::parse(body), None, "{}", String::from_utf8_lossy(body));
}

#[test]
fn ordinary_calls_are_read_typed_as_the_general_path_reads_them() {
    let plain = fast(&call(json!({"name": "echo", "arguments": {"text": "hi"}, "_meta": meta(json!({}))})));
    assert_eq!((plain.id, plain.name.as_str()), (RequestId::Number(7), "echo"));
    assert_eq!(plain.arguments.unwrap()["text"], "hi");
    assert_eq!(plain.meta.client_capabilities["sampling"], json!({}));
    fast(br#"{"params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"ech\u006f"},"method":"tools/call","id":"a","jsonrpc":"2.0"}"#);
    assert_eq!(fast(&call(json!({"name": "t", "arguments": null, "_meta": meta(json!({}))}))).arguments, None);
    assert_eq!(fast(&call(json!({"name": "t", "_meta": meta(json!({}))}))).arguments, None);
    let full = meta(json!({
        LOG_LEVEL: "debug", PROGRESS_TOKEN: 5, CLIENT_INFO: {"name": "c", "version": "1"},
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "a=b",
    }));
    let full = fast(&call(json!({"name": "t", "arguments": {}, "_meta": full})));
    assert!(full.meta.log_level.is_some() && full.meta.progress_token == Some(json!(5)));
    assert_eq!(full.meta.trace_context.unwrap().1.as_deref(), Some("a=b"));
    fast(&call(json!({"name": "t", "_meta": meta(json!({PROGRESS_TOKEN: "p", "traceparent": 5}))})));
    // `clientInfo` is read with a `Value`'s checks but not built: JSON of
    // every kind, at any depth, read typed as the general path reads it.
    for info in [
        r#"{"name":"c\u00e9","version":"1","icons":[{"src":"x","sizes":["1x1"]}],"n":-1,"f":1.5e3,"b":true,"z":null}"#,
        r#"[1,"a",[],{},null,false,18446744073709551615]"#,
        r#""\ud83d\ude00""#,
        r#"{"a":1,"a":2}"#,
    ] {
        fast(&call_with_client_info(info));
    }
    // The members kept as maps are read as a `Value` reads them: one whose
    // first key is serde_json's raw-value token is the JSON in its string.
    let token = r#"{"$serde_json::private::RawValue":"{\"x\":1}"}"#;
    let raw = |arguments: &str, capabilities: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{arguments},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{capabilities}}}}}}}"#
        )
        .into_bytes()
    };
    assert_eq!(fast(&raw(token, "{}")).arguments.unwrap()["x"], 1);
    assert_eq!(fast(&raw("{}", token)).meta.client_capabilities["x"], 1);
    // The version is `prepare`'s to check, as on the general path.
    fast(&call(json!({"name": "t", "_meta": {PROTOCOL_VERSION: "2099-01-01", CLIENT_CAPABILITIES: {}}})));
}

#[test]
fn anything_else_is_left_to_the_general_path() {
    let ok = json!({"name": "t", "_meta": meta(json!({}))});
    let with = |key: &str, value: Value| {
        let mut params = ok.clone();
        params[key] = value;
        call(params)
    };
    let with_meta = |extra: Value| call(json!({"name": "t", "_meta": meta(extra)}));
    for body in [
        with("requestState", json!("s")),
        with("inputResponses", json!({})),
        with("task", json!({})),
        with("name", json!(5)),
        with("arguments", json!([1])),
        with("_meta", json!(null)),
        with_meta(json!({LOG_LEVEL: "loud"})),
        with_meta(json!({LOG_LEVEL: null})),
        with_meta(json!({PROGRESS_TOKEN: 1.5})),
        with_meta(json!({PROGRESS_TOKEN: null})),
        with_meta(json!({"io.modelcontextprotocol/other": 1})),
        with_meta(json!({PROTOCOL_VERSION: 2026})),
        with_meta(json!({CLIENT_CAPABILITIES: null})),
        call(json!({"name": "t"})),
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "method": "tools/call", "params": ok})).unwrap(),
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": null, "method": "tools/call", "params": ok})).unwrap(),
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1.5, "method": "tools/call", "params": ok})).unwrap(),
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": u64::MAX, "method": "tools/call", "params": ok})).unwrap(),
        serde_json::to_vec(&json!({"jsonrpc": "1.0", "id": 1, "method": "tools/call", "params": ok})).unwrap(),
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": ok})).unwrap(),
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": ok, "result": {}})).unwrap(),
        br#"{"jsonrpc":"2.0","id":1,"method":"tools\/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#.to_vec(),
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","name":"u","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#.to_vec(),
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"\xff\"}}".to_vec(),
        b"[]".to_vec(),
        // A derived struct reads an array member by member; the general path
        // refuses an array where an object belongs.
        br#"["2.0",1,"tools/call",["echo",{"text":"hi"},["2026-07-28",{}]]]"#.to_vec(),
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["echo",{"text":"hi"},["2026-07-28",{}]]}"#.to_vec(),
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","_meta":["2026-07-28",{}]}}"#.to_vec(),
        // Values the general path's `Value` refuses, in a member this path
        // does not use.
        call_with_client_info("1e400"),
        call_with_client_info(r#""\udc00""#),
        call_with_client_info(&format!("{}{}", "[".repeat(130), "]".repeat(130))),
        call_with_client_info(&format!("{}{}", "{\"a\":".repeat(130), "}".repeat(130))),
        call_with_client_info(r#"{"\udc00":1}"#),
        call_with_client_info(r#"{"n":[1e400]}"#),
        // A `Value` reads this as the JSON text in its string, which is not
        // JSON; one whose text is JSON it takes, and the general path decides.
        call_with_client_info(r#"{"$serde_json::private::RawValue":"nope"}"#),
        call_with_client_info(r#"{"$serde_json::private::RawValue":"{}"}"#),
        // Text a `Value` reads as something other than an object, or not as JSON.
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"$serde_json::private::RawValue":"5"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#.to_vec(),
        br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"$serde_json::private::RawValue":"nope"}}}}"#.to_vec(),
    ] {
        falls_back(&body);
    }
}
