//! [`CallFacts`]: what a call to each of an upstream's tools needs of the
//! tool's definition, read once each time the lists are read.
//!
//! A call needs two things of its tool's definition: whether the tool says
//! it changes nothing (`annotations.readOnlyHint`, so its results may be
//! kept), and which arguments it mirrors into headers (SEP-2243:
//! `x-mcp-header` on an `inputSchema` property). Both were looked up on every
//! call, by a scan of the whole tool list for the name and then of the
//! tool's properties: a cost that grew with the upstream's tools (up to
//! `max_list_items`), paid by every call. They are now read when the lists
//! are, and a call finds its tool's by name.

use std::collections::HashMap;

use serde_json::{Map, Value};
use switchyard_core::catalog::{HeaderParam, header_params};
use switchyard_protocol::headers;

/// The call facts of an upstream's tools, by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct CallFacts(HashMap<String, Facts>);

/// What a call to one tool needs of its definition.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Facts {
    /// It says it changes nothing: its results may be kept for their `ttlMs`.
    pub(crate) read_only: bool,
    /// The arguments it mirrors into headers, as the catalog reads them.
    mirrored: Vec<HeaderParam>,
}

impl CallFacts {
    /// The facts of `tools` (tool definitions as the upstream listed them);
    /// of two tools of one name, the first's, as a call found it before.
    pub(crate) fn of(tools: &[Value]) -> Self {
        let mut calls = HashMap::with_capacity(tools.len());
        for tool in tools {
            let Some(name) = tool["name"].as_str() else { continue };
            calls.entry(name.to_owned()).or_insert_with(|| Facts::of(tool));
        }
        Self(calls)
    }

    /// The facts of the tool named `name`, if the upstream listed it.
    pub(crate) fn get(&self, name: &str) -> Option<&Facts> {
        self.0.get(name)
    }
}

impl Facts {
    fn of(tool: &Value) -> Self {
        // A tool whose mirroring is invalid is refused by the catalog, so
        // never called: it needs none.
        let name = tool["name"].as_str().unwrap_or_default();
        let mirrored = header_params(name, &tool["inputSchema"]).unwrap_or_default();
        Self { read_only: tool["annotations"]["readOnlyHint"] == true, mirrored }
    }

    /// The headers a call with `arguments` sends: each mirrored argument it
    /// has, its value encoded as a header value (a string as it is, any other
    /// value as its JSON text).
    pub(crate) fn headers(&self, arguments: &Map<String, Value>) -> Vec<(String, String)> {
        self.mirrored
            .iter()
            .filter_map(|HeaderParam { header, argument }| {
                let text = match arguments.get(argument)? {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                Some((header.clone(), headers::encode_value(&text)))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_call_finds_its_tool_s_facts_by_name() {
        let tools = [
            json!({"name": "read", "annotations": {"readOnlyHint": true}, "inputSchema": {"type": "object"}}),
            json!({"name": "write", "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "count": {"type": "integer", "x-mcp-header": "COUNT"},
                "body": {"type": "string"}
            }}}),
            json!({"name": "read", "annotations": {"readOnlyHint": false}}),
            json!({"title": "no name"}),
        ];
        let calls = CallFacts::of(&tools);
        assert!(calls.get("read").unwrap().read_only, "the first of two tools of one name");
        assert!(calls.get("unlisted").is_none());
        let write = calls.get("write").unwrap();
        assert!(!write.read_only);
        let arguments = json!({"region": "eu-west", "count": 3, "body": "x"});
        let mut sent = write.headers(arguments.as_object().unwrap());
        sent.sort();
        assert_eq!(
            sent,
            [("mcp-param-count".to_owned(), "3".to_owned()), ("mcp-param-region".to_owned(), "eu-west".to_owned())]
        );
        // An argument the call did not give sends no header.
        assert!(write.headers(&Map::new()).is_empty());
    }
}
