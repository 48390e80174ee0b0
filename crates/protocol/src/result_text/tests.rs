use super::*;
use serde_json::json;

fn kept_leaving(text: &str, leaves: Leaves) -> ToolResultText {
    ToolResultText::read(text, leaves).unwrap_or_else(|e| panic!("{text}: {e:?}"))
}

fn kept(text: &str) -> ToolResultText {
    kept_leaving(text, Leaves::ServerMembers)
}

fn builds(text: &str) -> bool {
    matches!(ToolResultText::read(text, Leaves::ServerMembers), Err(NotText::Builds(_)))
}

#[test]
fn a_result_is_kept_as_it_came_less_what_the_server_writes() {
    let text = r#"{"content":[{"type":"text","text":"hi"}],"isError":false}"#;
    let result = kept_leaving(text, Leaves::Nothing);
    assert_eq!(result.as_str(), text);
    assert!(!result.is_error());
    let text = r#" { "resultType" : "complete", "content" : [ 1 ] , "_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"}}, "isError":true } "#;
    let result = kept(text);
    assert_eq!(result.as_str(), r#"{"content":[ 1 ],"isError":true}"#);
    assert!(result.is_error());
    assert_eq!(kept(r#"{"_meta":{},"content":[]}"#).as_str(), r#"{"content":[]}"#);
    // A top-level key with an escape is written with it.
    let escaped = kept(r#"{"content":[],"a\"b\u00e9":1,"t\u0065xt":2}"#);
    assert_eq!(escaped.clone().into_value(), json!({"content": [], "a\"bé": 1, "text": 2}));
    // What a WASM module wrote is all kept, or built.
    for text in [r#"{"content":[],"resultType":"complete"}"#, r#"{"content":[],"_meta":{}}"#] {
        assert!(matches!(ToolResultText::read(text, Leaves::Nothing), Err(NotText::Builds(_))), "{text}");
    }
}

#[test]
fn what_the_server_reads_or_changes_or_a_client_could_read_otherwise_is_built() {
    for text in [
        r#"{"content":[],"resultType":"input_required"}"#,
        r#"{"content":[],"resultType":"task"}"#,
        r#"{"content":[],"resultType":"compl\u0065te"}"#,
        r#"{"content":[],"_meta":{"k":1}}"#,
        r#"{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{},"k":1}}"#,
        r#"{"content":[],"_meta":5}"#,
        r#"{"content":[],"ttlMs":1000}"#,
        r#"{"content":[],"cacheScope":"public"}"#,
        r#"{"isError":true}"#,
        r#"{"content":{}}"#,
        r#"{"content":[],"content":[]}"#,
        r#"{"content":[],"_meta":{},"_meta":{"k":1}}"#,
        r#"{"content":[],"resultType":"complete","resultType":"task"}"#,
        r#"{"content":[],"c\u006fntent":5}"#,
        // Keys given twice, or written with an escape, inside.
        r#"{"content":[{"type":"text","type":"image"}]}"#,
        r#"{"content":[],"structuredContent":{"n":[{"a":1,"b":{"a":2},"a":3}]}}"#,
        r#"{"content":[{"t\u0079pe":"text"}]}"#,
        // The raw-value token, or a `$`.
        r#"{"content":["$5"]}"#,
        r#"{"content":["a string longer than a word, then $"]}"#,
        r#"{"content":["a string longer than a word, then \u0024"]}"#,
        r#"{"content":["0123456789abcdef\ud800"]}"#,
        r#"{"content":["\u0024serde_json::private::RawValue"]}"#,
        r#"{"content":[{"$serde_json::private::RawValue":"0"}]}"#,
        r#"{"content":[],"$k":1}"#,
        // What a `Value`'s parse refuses, or reads otherwise.
        r#"{"content":["\ud800"]}"#,
        r#"{"content":["\uDC00 alone"]}"#,
        r#"{"content":["\ud83d\ude00"]}"#,
        r#"{"content":[1e400]}"#,
        r#"{"content":[1E2]}"#,
        r#"{"content":[1.0000000000000000001]}"#,
        r#"{"content":[123456789012345678901234567890]}"#,
        r#"{"content":[18446744073709551616]}"#,
        r#"{"content":[-9223372036854775809]}"#,
        r#"{"content":[-0]}"#,
        r#"{"content":[0.30000000000000004]}"#,
        r#"{"content":[9.754525449570839]}"#,
        r#"{"content":[-92435890523192.5]}"#,
        // Line breaks between tokens.
        "{\"content\":[\n1]}",
        "{\"content\":[1,\r\n2]}",
        // The upstream's own serverInfo is checked too, though left out.
        r#"{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"n":"\ud800"}}}"#,
        r#"{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"$k":1}}}"#,
    ] {
        assert!(builds(text), "{text}");
    }
    let many: Vec<String> = (0..=MAX_KEYS).map(|i| format!(r#""m{i}":{i}"#)).collect();
    assert!(builds(&format!(r#"{{"content":[],{}}}"#, many.join(","))));
    assert!(builds(&format!(r#"{{"content":[{{{}}}]}}"#, many.join(","))), "an object inside");
    let keys = |prefix: &str| (0..30).map(|i| format!(r#""{prefix}{i}":0"#)).collect::<Vec<_>>().join(",");
    let open = format!(r#"{{"content":[{{{},"x":{{{},"y":{{{}}}}}}}]}}"#, keys("a"), keys("b"), keys("c"));
    assert!(builds(&open), "more keys open at once than are kept");
    let closed = format!(r#"{{"content":[{{{}}},{{{}}},{{{}}}]}}"#, keys("a"), keys("b"), keys("c"));
    assert!(ToolResultText::read(&closed, Leaves::Nothing).is_ok(), "as many, one object after another");
    let deep = |levels: usize| format!(r#"{{"content":[{}{}]}}"#, "[".repeat(levels), "]".repeat(levels));
    assert!(ToolResultText::read(&deep(MAX_DEPTH - 2), Leaves::Nothing).is_ok(), "the object, content and its levels");
    assert!(builds(&deep(MAX_DEPTH - 1)));
    let meta_deep = format!(
        r#"{{"content":[],"_meta":{{"io.modelcontextprotocol/serverInfo":{}{}}}}}"#,
        "[".repeat(MAX_DEPTH),
        "]".repeat(MAX_DEPTH)
    );
    assert!(builds(&meta_deep), "a left-out member is checked as deeply");
}

#[test]
fn what_is_alike_as_text_and_as_a_value_is_kept() {
    for text in [
        // Escapes that are not `$` or a surrogate, and a backslash before a `u` that is not one.
        r#"{"content":["\u0025","\\u0024","a\"[[[\n\t\u00e9\uffff"]}"#,
        // The same key in different objects, and keys that only start alike.
        r#"{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"structuredContent":{"a":{"a":1},"ab":2}}"#,
        r#"{"content":["0123456789abcdef\"0123456789abcdef\\","01234567","0123456789abcdefé"]}"#,
        r#"{"content":[-9223372036854775808,18446744073709551615,0.1,1.50,-0.0,0,9.75452544957083,true,false,null]}"#,
        "{\"content\":[\t1 ,\t2]}",
    ] {
        let result = ToolResultText::read(text, Leaves::Nothing).unwrap_or_else(|e| panic!("{text}: {e:?}"));
        assert_eq!(result.into_value(), serde_json::from_str::<Value>(text).unwrap(), "{text}");
    }
}

#[test]
fn what_is_not_one_json_object_is_not_json() {
    for text in [r#"[1]"#, r#"{"content":[]"#, r#"{"content":[]} {}"#, r#"{"content":[1,]}"#, "5"] {
        assert!(matches!(ToolResultText::read(text, Leaves::Nothing), Err(NotText::NotJson(_))), "{text}");
    }
}

#[test]
fn structured_content_is_read_as_a_value() {
    let result = kept(r#"{"content":[],"structuredContent":{"value":4.5,"unit":"km","n":[1,{"a":null}]}}"#);
    assert_eq!(result.structured_content(), Some(json!({"value": 4.5, "unit": "km", "n": [1, {"a": null}]})));
    assert_eq!(kept(r#"{"content":[]}"#).structured_content(), None);
}

#[test]
fn the_text_reads_as_the_value_it_came_from() {
    let text = r#"{"content":[{"type":"text","text":"h\u00e9 \"q\" \\ \u00e9"}],"structuredContent":{"x":-1.5},"isError":false}"#;
    assert_eq!(kept(text).into_value(), serde_json::from_str::<Value>(text).unwrap());
}

/// Values as the upstream's bound counts them: every value and every key.
fn count(value: &Value) -> usize {
    1 + match value {
        Value::Array(items) => items.iter().map(count).sum(),
        Value::Object(members) => members.values().map(|v| 1 + count(v)).sum(),
        _ => 0,
    }
}

#[test]
fn its_values_are_counted_as_a_parse_counts_them() {
    for text in [
        r#"{"content":[]}"#,
        r#"{"content":[{"type":"text","text":"a, b: [c] {d} \"e\" 1 true"}],"isError":false}"#,
        r#"{ "content" : [ 1 , -2.5 , true , false , null , "" , [ ] , { } ] , "structuredContent" : { "a" : [ 0 ] } }"#,
        r#"{"resultType":"complete","content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up","n":[1,2]}}}"#,
    ] {
        assert_eq!(kept(text).values(), count(&serde_json::from_str(text).unwrap()), "{text}");
    }
}

#[test]
fn its_debug_form_holds_no_text() {
    let result = kept(r#"{"content":[{"type":"text","text":"secret"}]}"#);
    assert!(!format!("{result:?}").contains("secret"));
}

#[test]
fn a_text_block_is_written_as_its_value_is_and_counted_as_read() {
    for text in
        ["hello world", "", "a \"quoted\" \\ line\nbreak\t\u{1}\u{7f}", "é ✓ 😀", "$serde_json::private::RawValue"]
    {
        let block = ToolResultText::text_block(text);
        let value = json!({ "content": [{ "type": "text", "text": text }] });
        assert_eq!(block.as_str(), serde_json::to_string(&value).unwrap(), "{text:?}");
        assert_eq!(block.clone().into_value(), value);
        assert!(!block.is_error() && block.structured_content().is_none());
        if !text.contains('$') {
            // What a plugin writing the same text would have kept.
            assert_eq!(block, kept_leaving(block.as_str(), Leaves::Nothing), "{text:?}");
        }
    }
}
