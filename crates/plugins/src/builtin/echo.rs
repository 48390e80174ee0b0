//! `echo`: returns its text. The cheapest useful tool, and the one the
//! throughput benchmark calls.

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use switchyard_core::plugin::PluginResult;
use switchyard_core::{CallContext, Outcome, Plugin};

/// The echo plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct Echo;

impl Plugin for Echo {
    fn id(&self) -> &str {
        "builtin.echo"
    }

    /// Answered in the request's own code: the MCP span times it.
    fn own_span(&self) -> bool {
        false
    }

    fn tools(&self) -> Vec<Value> {
        vec![json!({
            "name": "echo",
            "title": "Echo",
            "description": "Returns the given text unchanged.",
            "inputSchema": {
                "type": "object",
                "properties": { "text": { "type": "string", "description": "The text to return." } },
                "required": ["text"],
                "additionalProperties": false
            },
            "annotations": { "readOnlyHint": true, "openWorldHint": false, "idempotentHint": true }
        })]
    }

    fn call_tool<'a>(
        &'a self,
        _name: &'a str,
        mut arguments: Map<String, Value>,
        _cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Outcome>> {
        // The schema guarantees `text` is a string; it is moved, not copied.
        let text = match arguments.remove("text") {
            Some(Value::String(text)) => text,
            _ => String::new(),
        };
        Box::pin(async move { Ok(Outcome::Complete(json!({ "content": [{ "type": "text", "text": text }] }))) })
    }
}
