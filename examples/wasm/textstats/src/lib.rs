//! Text statistics as a Switchyard WASM plugin: counts and the most frequent
//! words, as structured output checked against the tool's `outputSchema`.

use std::collections::BTreeMap;

use switchyard_guest::{Plugin, Tool, ToolResult, Value, json};

fn plugin() -> Plugin {
    // Definitions are built when the host asks for the tools, not on every call.
    Plugin::new().deferred_tool("analyze", analyze_tool, analyze).deferred_tool("slugify", slugify_tool, slugify)
}

fn analyze_tool() -> Tool {
    Tool::new("analyze", "Counts characters, words, sentences and lines of a text, and lists its most frequent words.")
        .annotations(json!({"readOnlyHint": true, "idempotentHint": true}))
        .input_schema(json!({
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "top": {"type": "integer", "minimum": 1, "maximum": 50, "default": 5}
            },
            "required": ["text"]
        }))
        .output_schema(json!({
            "type": "object",
            "properties": {
                "characters": {"type": "integer"},
                "words": {"type": "integer"},
                "sentences": {"type": "integer"},
                "lines": {"type": "integer"},
                "top_words": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"word": {"type": "string"}, "count": {"type": "integer"}},
                        "required": ["word", "count"]
                    }
                }
            },
            "required": ["characters", "words", "sentences", "lines", "top_words"]
        }))
}

fn slugify_tool() -> Tool {
    Tool::new("slugify", "Turns a title into a URL slug.").input_schema(json!({
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"]
    }))
}

fn analyze(args: Value) -> Result<ToolResult, String> {
    let text = args["text"].as_str().ok_or("text must be a string")?;
    let top = args.get("top").and_then(Value::as_u64).unwrap_or(5) as usize;
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut words = 0;
    for word in text.split(|c: char| !c.is_alphanumeric() && c != '\'').filter(|w| !w.is_empty()) {
        words += 1;
        *counts.entry(word.to_lowercase()).or_default() += 1;
    }
    let mut ranked: Vec<(String, u64)> = counts.into_iter().collect();
    // Most frequent first; ties alphabetically, so the answer is deterministic.
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let sentences = text.split(['.', '!', '?']).filter(|s| s.chars().any(char::is_alphanumeric)).count();
    // The same text always has the same statistics, whoever asks: reusable.
    Ok(ToolResult::structured(json!({
        "characters": text.chars().count(),
        "words": words,
        "sentences": sentences,
        "lines": if text.is_empty() { 0 } else { text.lines().count() },
        "top_words": ranked.into_iter().take(top).map(|(word, count)| json!({"word": word, "count": count})).collect::<Vec<_>>(),
    }))
    .reusable_for(60_000, true))
}

fn slugify(args: Value) -> Result<ToolResult, String> {
    let text = args["text"].as_str().ok_or("text must be a string")?;
    let mut slug = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_alphanumeric() {
            slug.push(c);
        } else if !slug.ends_with('-') && !slug.is_empty() {
            slug.push('-');
        }
    }
    Ok(ToolResult::text(slug.trim_end_matches('-')))
}

switchyard_guest::export_plugin!(plugin);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analyzes() {
        let result = analyze(json!({"text": "The cat. The dog!\nA bird?", "top": 1})).unwrap().into_value();
        let stats = &result["structuredContent"];
        assert_eq!(stats["words"], 6);
        assert_eq!(stats["sentences"], 3);
        assert_eq!(stats["lines"], 2);
        assert_eq!(stats["top_words"], json!([{"word": "the", "count": 2}]));
        assert_eq!(
            slugify(json!({"text": "Hello, World!"})).unwrap().into_value()["content"][0]["text"],
            "hello-world"
        );
    }
}
