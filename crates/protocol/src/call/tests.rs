use serde_json::{Value, json};

use super::ModernCall;
use crate::jsonrpc::{Incoming, RequestId};
use crate::meta::{CLIENT_CAPABILITIES, CLIENT_INFO, LOG_LEVEL, PROGRESS_TOKEN, PROTOCOL_VERSION, RequestMeta};
use crate::{Method, Params};

/// What the general path makes of `body`, when it is a modern `tools/call`
/// whose parameters it reads whole (nothing left over, no later round).
pub(super) fn general(body: &[u8]) -> Option<ModernCall> {
    let Ok(Incoming::Request { id, method, mut params }) = Incoming::parse(body) else { return None };
    if method != "tools/call" || RequestMeta::claimed_version(&params).is_none() {
        return None;
    }
    let meta = RequestMeta::take(&mut params).ok()?;
    let Ok(Params::CallTool { name, arguments, retry }) = Params::take(&Method::CallTool, &mut params) else {
        return None;
    };
    (!retry.is_retry() && params.is_empty()).then_some(ModernCall { id, name, arguments, meta })
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
    assert_eq!(Some(&call), general(body).as_ref(), "{}", String::from_utf8_lossy(body));
    call
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
    ] {
        falls_back(&body);
    }
}
