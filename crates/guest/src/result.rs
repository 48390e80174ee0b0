//! [`ToolResult`]: what a tool returns, and the JSON the host reads of it.

use serde::Serialize;
use serde_json::{Map, Value, json};

/// What a tool returns: an MCP `CallToolResult`.
///
/// It is written for the host straight from its parts, not built as a
/// `Value` first: a structured result is serialised once, and that text is
/// both the text block's and `structuredContent` (#18: building the result as
/// a map and writing its value twice, once escaped inside the text block, was
/// the larger part of the units example's own work per call).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    content: Vec<Block>,
    /// `structuredContent` as the compact JSON text serde_json wrote.
    structured: Option<String>,
    is_error: bool,
    /// `ttlMs`, and whether `cacheScope` is `public`.
    reusable: Option<(u64, bool)>,
}

/// One content block.
#[derive(Debug, Clone, PartialEq)]
enum Block {
    /// `{"type": "text", "text": …}`, the block almost every result has.
    Text(String),
    /// Any other MCP `ContentBlock`, as given.
    Other(Value),
}

impl ToolResult {
    /// A text result.
    pub fn text(text: impl Into<String>) -> Self {
        Self { content: vec![Block::Text(text.into())], structured: None, is_error: false, reusable: None }
    }

    /// A structured result: `structuredContent` is `value` (a [`Value`], or
    /// any type that serialises to a JSON object, such as a struct deriving
    /// `serde::Serialize`), and the content carries the same value as JSON
    /// text for clients that read only text. A value that cannot be
    /// serialised, or is not an object (MCP's `structuredContent` is one),
    /// makes an `isError` result saying why.
    pub fn structured(value: impl Serialize) -> Self {
        match serde_json::to_string(&value) {
            // serde_json writes an object, and nothing else, starting with `{`.
            Ok(text) if text.starts_with('{') => {
                let mut result = Self::text(text.clone());
                result.structured = Some(text);
                result
            }
            Ok(_) => Self::error("the tool's structured result is not a JSON object"),
            Err(e) => Self::error(format!("the tool's structured result cannot be written as JSON: {e}")),
        }
    }

    /// A tool-level failure the model should see (`isError: true`).
    pub fn error(message: impl Into<String>) -> Self {
        Self { is_error: true, ..Self::text(message) }
    }

    /// A result with these content blocks (MCP `ContentBlock` objects).
    pub fn from_content(content: Vec<Value>) -> Self {
        Self {
            content: content.into_iter().map(Block::Other).collect(),
            structured: None,
            is_error: false,
            reusable: None,
        }
    }

    /// Says this result may be reused for `ttl_ms` milliseconds: by any
    /// caller when `public`, else by the same caller only. The host keeps
    /// it in its answer cache, for a tool annotated `readOnlyHint`, and
    /// answers the same call with it meanwhile, without running the module.
    #[must_use]
    pub fn reusable_for(mut self, ttl_ms: u64, public: bool) -> Self {
        self.reusable = Some((ttl_ms, public));
        self
    }

    /// The `CallToolResult` object.
    pub fn into_value(self) -> Value {
        let mut result = Map::new();
        let content = self.content.into_iter().map(|block| match block {
            Block::Text(text) => json!({"type": "text", "text": text}),
            Block::Other(value) => value,
        });
        result.insert("content".into(), Value::Array(content.collect()));
        if let Some(text) = self.structured {
            // serde_json wrote it, so it reads back as the value it was.
            result.insert("structuredContent".into(), serde_json::from_str(&text).unwrap_or_default());
        }
        if self.is_error {
            result.insert("isError".into(), json!(true));
        }
        if let Some((ttl_ms, public)) = self.reusable {
            result.insert("ttlMs".into(), json!(ttl_ms));
            result.insert("cacheScope".into(), json!(if public { "public" } else { "private" }));
        }
        Value::Object(result)
    }

    /// Appends the result's JSON to `out`: the same object
    /// [`ToolResult::into_value`] gives, each of its members once and no
    /// space between tokens. Within `structuredContent` and the text block
    /// that carries it, what a `Serialize` type writes is its own: a key given
    /// twice by a flattened field, or a raw value's spacing, is written as
    /// it is; the host checks the text and builds such a result as a value.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"content\":[");
        for (i, block) in self.content.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match block {
                Block::Text(text) => {
                    out.extend_from_slice(b"{\"type\":\"text\",\"text\":");
                    write_json(out, text);
                    out.push(b'}');
                }
                Block::Other(value) => write_json(out, value),
            }
        }
        out.push(b']');
        if let Some(text) = &self.structured {
            out.extend_from_slice(b",\"structuredContent\":");
            out.extend_from_slice(text.as_bytes());
        }
        if self.is_error {
            out.extend_from_slice(b",\"isError\":true");
        }
        if let Some((ttl_ms, public)) = self.reusable {
            out.extend_from_slice(b",\"ttlMs\":");
            write_json(out, &ttl_ms);
            out.extend_from_slice(if public { b",\"cacheScope\":\"public\"" } else { b",\"cacheScope\":\"private\"" });
        }
        out.push(b'}');
    }
}

/// Appends `value`'s JSON to `out`. Writing a string, a number or a `Value`
/// into a `Vec` cannot fail.
fn write_json(out: &mut Vec<u8>, value: &(impl Serialize + ?Sized)) {
    let _ = serde_json::to_writer(out, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A result's members, each taken once: serde refuses a member given
    /// twice, and, here, one it does not name.
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    #[allow(dead_code, reason = "read only to refuse a member given twice or unknown")]
    struct Members {
        content: Vec<Value>,
        structured_content: Option<Value>,
        is_error: Option<bool>,
        ttl_ms: Option<u64>,
        cache_scope: Option<String>,
    }

    /// What the host reads: the written bytes, parsed, after checking that
    /// they give each member once and are compact (as long as serde_json's
    /// own writing of the value they parse to).
    fn written(result: &ToolResult) -> Value {
        let mut out = Vec::new();
        result.write(&mut out);
        let shown = String::from_utf8_lossy(&out).into_owned();
        if let Err(e) = serde_json::from_slice::<Members>(&out) {
            panic!("{e}: {shown}");
        }
        let value: Value = serde_json::from_slice(&out).expect("the written result is JSON");
        assert_eq!(out.len(), serde_json::to_vec(&value).map(|v| v.len()).unwrap_or_default(), "{shown}");
        value
    }

    #[derive(Serialize)]
    struct Reading<'a> {
        value: f64,
        unit: &'a str,
        note: &'a str,
    }

    #[test]
    fn what_is_written_is_the_value_the_result_stands_for() {
        let results = [
            ToolResult::text("plain \"quoted\"\n"),
            ToolResult::error("no such unit"),
            ToolResult::structured(json!({"value": 1.5, "unit": "km"})),
            ToolResult::structured(Reading { value: -0.25, unit: "°C", note: "a \"quote\" and a \u{1}" }),
            ToolResult::from_content(vec![
                json!({"type": "image", "data": "AA==", "mimeType": "image/png"}),
                json!({"type": "text", "text": "t"}),
            ]),
            ToolResult::text("kept").reusable_for(60_000, true),
            ToolResult::structured(json!({"n": 2})).reusable_for(5, false),
            ToolResult::from_content(Vec::new()),
        ];
        for result in results {
            assert_eq!(written(&result), result.clone().into_value(), "{result:?}");
        }
    }

    #[test]
    fn a_structured_result_is_its_value_and_that_value_as_text() {
        let result = ToolResult::structured(Reading { value: 2.0, unit: "m", note: "" }).reusable_for(10, false);
        let value = written(&result);
        assert_eq!(value["structuredContent"], json!({"value": 2.0, "unit": "m", "note": ""}));
        let text = value["content"][0]["text"].as_str().expect("a text block");
        assert_eq!(serde_json::from_str::<Value>(text).expect("JSON text"), value["structuredContent"]);
        assert_eq!(value["content"][0]["type"], "text");
        assert_eq!((value["ttlMs"].as_u64(), value["cacheScope"].as_str()), (Some(10), Some("private")));
        assert!(value.get("isError").is_none());
        let mut out = Vec::new();
        result.write(&mut out);
        assert!(!out.contains(&b'\n') && !out.contains(&b' '), "compact: {}", String::from_utf8_lossy(&out));
    }

    #[test]
    fn a_value_that_cannot_be_json_makes_an_error_result() {
        let mut keys = std::collections::BTreeMap::new();
        keys.insert((1, 2), "a map whose keys are not strings");
        let result = ToolResult::structured(keys);
        let value = written(&result);
        assert_eq!(value["isError"], true);
        assert!(value.get("structuredContent").is_none());
        assert!(value["content"][0]["text"].as_str().is_some_and(|t| t.contains("cannot be written as JSON")));
    }

    #[test]
    fn a_structured_value_that_is_not_an_object_makes_an_error_result() {
        let results = [
            ToolResult::structured(42),
            ToolResult::structured(()),
            ToolResult::structured(None::<Value>),
            ToolResult::structured(vec![1, 2]),
            ToolResult::structured("text"),
            ToolResult::structured(json!([{"a": 1}])),
        ];
        for result in results {
            let value = written(&result);
            assert_eq!(value["isError"], true, "{value}");
            assert!(value.get("structuredContent").is_none(), "{value}");
            assert_eq!(value["content"][0]["text"], "the tool's structured result is not a JSON object");
        }
        assert!(written(&ToolResult::structured(json!({}))).get("isError").is_none());
    }
}
