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
        (r#"{"result":{"_meta":{"k":1},"_meta":{"io.modelcontextprotocol/serverInfo":{}}}}"#, json!({"result": {}})),
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
        assert_eq!(parse(kept.as_bytes(), 1_000).unwrap().0, serde_json::from_str::<Value>(kept).unwrap(), "{kept}");
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

/// What `parse_keeping_text` gives, as the message `parse` would build.
fn kept_whole(text: &str, max_values: usize) -> Result<(Value, usize, bool), Unparsed> {
    let parsed = parse_keeping_text(text.as_bytes(), max_values)?;
    let as_text = parsed.result.is_some();
    let mut message = parsed.message;
    if let (Some(result), Value::Object(members)) = (parsed.result, &mut message) {
        members.insert("result".into(), result.into_value());
    }
    Ok((message, parsed.values, as_text))
}

#[test]
fn a_result_kept_as_text_is_the_result_parse_builds_counted_alike() {
    let echo = r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"hi"}],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up","version":"1"}},"resultType":"complete"}}"#;
    let parsed = parse_keeping_text(echo.as_bytes(), 1_000).unwrap();
    assert_eq!(parsed.message, json!({"id": 3}), "the result is not in the message");
    assert_eq!(
        parsed.result.as_ref().map(ToolResultText::as_str),
        Some(r#"{"content":[{"type":"text","text":"hi"}]}"#)
    );
    for (text, as_text) in [
        (echo, true),
        (r#"{"id":1,"result":{"content":[1,[2,{"a":"b"}]],"isError":true,"structuredContent":{"x":null}}}"#, true),
        // Built: what the server reads or changes, and a result given twice.
        (r#"{"id":1,"result":{"resultType":"input_required","inputRequests":{}}}"#, false),
        (r#"{"id":1,"result":{"content":[],"_meta":{"k":1}}}"#, false),
        (r#"{"id":1,"result":{"content":[],"ttlMs":5}}"#, false),
        (r#"{"id":1,"result":{"content":["$"]}}"#, false),
        (r#"{"id":1,"result":[1]}"#, false),
        (r#"{"id":1,"result":{"content":[]},"result":{"content":[1]}}"#, false),
        // No result: parsed once, as `parse` parses it.
        (r#"{"id":1,"error":{"code":-32602,"message":"no"}}"#, false),
    ] {
        let (message, values, kept) = kept_whole(text, 1_000).unwrap();
        let (built, built_values) = parse(text.as_bytes(), 1_000).unwrap();
        assert_eq!(message, built, "{text}");
        assert_eq!(values, built_values, "{text}");
        assert_eq!(kept, as_text, "{text}");
    }
}

#[test]
fn what_parse_refuses_it_refuses_alike() {
    let dense = format!(r#"{{"id":1,"result":{{"content":[{}]}}}}"#, vec!["0"; 50].join(","));
    assert!(matches!(parse_keeping_text(dense.as_bytes(), 40), Err(Unparsed::Dense)));
    let (_, values, kept) = kept_whole(&dense, 60).unwrap();
    assert!(kept && values == parse(dense.as_bytes(), 60).unwrap().1);
    for broken in [
        &br#"{"id":1,"result":{"content":[]}"#[..],
        br#"{"id":1,"result":{"content":[1,]}}"#,
        br#"{"id":1,"result":{"content":[]}} x"#,
        b"{\"id\":1,\"result\":{\"content\":[\"\xff\"]}}",
        // What a pass over the text does not see, and a `Value`'s parse refuses.
        br#"{"id":1,"result":{"content":["\ud800"]}}"#,
        br#"{"id":1,"result":{"content":[1e400]}}"#,
        br#"{"id":1,"result":{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":"\udc00"}}}"#,
    ] {
        assert!(matches!(parse_keeping_text(broken, 1_000), Err(Unparsed::NotJson(_))));
    }
    let deep = format!(r#"{{"id":1,"result":{{"content":[{}{}]}}}}"#, "[".repeat(200), "]".repeat(200));
    assert!(matches!(parse_keeping_text(deep.as_bytes(), 1_000), Err(Unparsed::NotJson(_))), "too deep for a Value");
    let deep_meta = format!(
        r#"{{"id":1,"result":{{"content":[],"_meta":{{"io.modelcontextprotocol/serverInfo":{}{}}}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    assert!(
        matches!(parse_keeping_text(deep_meta.as_bytes(), 1_000), Err(Unparsed::NotJson(_))),
        "however deep it is left"
    );
}
