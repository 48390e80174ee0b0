//! [`WasmPlugin`]: a loaded module as a `core::Plugin`.

use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use switchyard_core::plugin::PluginResult;
use switchyard_core::{CallContext, Outcome, Plugin, PluginError};
use tokio_util::sync::CancellationToken;
use wasmtime::Module;

use crate::runtime::{Entry, LoadError, Prepared, RunError, Runtime};
use crate::spec::WasmSpec;

/// A WASM module serving tools. Its tool names are the module's own; the
/// caller adds the namespace.
pub struct WasmPlugin {
    id: String,
    runtime: Arc<Runtime>,
    prepared: Prepared,
    spec: WasmSpec,
    tools: Vec<Value>,
}

impl std::fmt::Debug for WasmPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmPlugin")
            .field("id", &self.id)
            .field("artifact", &self.spec.artifact)
            .finish_non_exhaustive()
    }
}

impl WasmPlugin {
    /// Links `module`, checks its interface, and reads its tool list (one
    /// run, under the spec's limits).
    ///
    /// # Errors
    /// When the module does not link, lacks the interface, or cannot describe itself.
    pub async fn load(runtime: &Arc<Runtime>, id: &str, module: &Module, spec: WasmSpec) -> Result<Self, LoadError> {
        let prepared = runtime.prepare(module)?;
        let deadline = Instant::now() + spec.limits.timeout;
        let described = runtime
            .run(&prepared, spec.limits, &spec.grants, deadline, &CancellationToken::new(), Entry::Describe)
            .await
            .map_err(|e| LoadError::Describe(e.to_string()))?;
        let document: Value =
            serde_json::from_slice(&described).map_err(|e| LoadError::Describe(format!("not JSON: {e}")))?;
        let tools = document
            .get("tools")
            .and_then(Value::as_array)
            .ok_or_else(|| LoadError::Describe("no \"tools\" array".into()))?
            .clone();
        Ok(Self { id: id.to_owned(), runtime: Arc::clone(runtime), prepared, spec, tools })
    }

    /// The spec this plugin was loaded with.
    pub fn spec(&self) -> &WasmSpec {
        &self.spec
    }
}

impl Plugin for WasmPlugin {
    fn id(&self) -> &str {
        &self.id
    }

    fn tools(&self) -> Vec<Value> {
        self.tools.clone()
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Map<String, Value>,
        cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Outcome>> {
        Box::pin(async move {
            let input = serde_json::to_vec(&json!({"name": name, "arguments": arguments}))
                .map_err(|e| PluginError::Internal(Box::new(e)))?;
            let output = self
                .runtime
                .run(
                    &self.prepared,
                    self.spec.limits,
                    &self.spec.grants,
                    cx.deadline(),
                    cx.cancellation(),
                    Entry::Call(&input),
                )
                .await;
            match output {
                Ok(bytes) => parse_result(&bytes).map(Outcome::Complete),
                Err(error) => {
                    // The kind of failure, never the arguments or the module's output.
                    tracing::warn!(plugin = %self.id, tool = name, %error, "WASM tool call failed");
                    Err(PluginError::Tool(match error {
                        RunError::Cancelled => "the call was cancelled".into(),
                        other => format!("tool {name} {other}"),
                    }))
                }
            }
        })
    }
}

/// Checks that the module handed back a `CallToolResult` shape.
fn parse_result(bytes: &[u8]) -> PluginResult<Value> {
    let result: Value = serde_json::from_slice(bytes)
        .map_err(|e| PluginError::Tool(format!("the plugin returned a result that is not JSON: {e}")))?;
    if !result.get("content").is_some_and(Value::is_array) {
        return Err(PluginError::Tool("the plugin returned a result without a content array".into()));
    }
    Ok(result)
}
