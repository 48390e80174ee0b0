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
        cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Outcome>> {
        // The schema guarantees `text` is a string. It is written straight
        // into the result's text where the call takes one, and moved into
        // the result's `Value` where it does not (`Outcome::text_block`).
        let text = match arguments.remove("text") {
            Some(Value::String(text)) => text,
            _ => String::new(),
        };
        let outcome = Outcome::text_block(text, &cx);
        Box::pin(async move { Ok(outcome) })
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use serde_json::{Map, json};
    use switchyard_core::{CallContext, Outcome, Plugin};

    use super::Echo;

    #[tokio::test]
    async fn answers_as_text_where_the_call_takes_it_and_as_a_value_elsewhere() {
        let cx = CallContext::detached(Instant::now() + Duration::from_secs(5));
        let text = "a \"quoted\" line\nand $ 😀";
        let arguments = || Map::from_iter([("text".to_owned(), json!(text))]);
        let expected = json!({ "content": [{ "type": "text", "text": text }] });

        let built = Echo.call_tool("echo", arguments(), cx.clone()).await.unwrap();
        assert_eq!(built, Outcome::Complete(expected.clone()));

        let Outcome::CompleteText(kept) = Echo.call_tool("echo", arguments(), cx.taking_result_text()).await.unwrap()
        else {
            panic!("a tools/call's context takes text");
        };
        assert_eq!(kept.as_str(), serde_json::to_string(&expected).unwrap());
        assert_eq!(kept.into_value(), expected);
    }
}
