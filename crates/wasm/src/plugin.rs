//! [`WasmPlugin`]: a loaded module as a `core::Plugin`.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{Map, Value};
use switchyard_answers::{Kept, PluginCache, Weight, named_target};
use switchyard_core::plugin::PluginResult;
use switchyard_core::{CallContext, Outcome, Plugin, PluginError};
use switchyard_protocol::method::request;
use switchyard_protocol::result_text::{Leaves, ToolResultText};
use tokio_util::sync::CancellationToken;
use wasmtime::Module;

use crate::runtime::{Entry, LoadError, Prepared, RunError, Runtime};
use crate::spec::WasmSpec;

/// A WASM module serving tools. Its tool names are the module's own; the
/// caller adds the namespace.
///
/// A result of a tool annotated `readOnlyHint` that the module marks with a
/// `ttlMs` (and `cacheScope`) is kept in the answer cache for that long, when
/// the plugin was given one ([`WasmPlugin::with_answers`]): the same call
/// from the same caller (any caller, for a `public` result) is then answered
/// without running the module.
pub struct WasmPlugin {
    id: String,
    runtime: Arc<Runtime>,
    prepared: Prepared,
    spec: WasmSpec,
    tools: Vec<Value>,
    /// The tools annotated `readOnlyHint`: only their results may be kept.
    read_only: HashSet<String>,
    answers: Option<PluginCache>,
    /// Whether the module ever marked a result with a `ttlMs`: until it
    /// does, its calls are not looked up in the cache.
    marks_results: AtomicBool,
}

/// What a call gives the module: the tool's name and its arguments.
#[derive(Serialize)]
struct CallInput<'a> {
    name: &'a str,
    arguments: &'a Map<String, Value>,
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
        let read_only = tools
            .iter()
            .filter(|tool| tool["annotations"]["readOnlyHint"] == true)
            .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
            .collect();
        Ok(Self {
            id: id.to_owned(),
            runtime: Arc::clone(runtime),
            prepared,
            spec,
            tools,
            read_only,
            answers: None,
            marks_results: AtomicBool::new(false),
        })
    }

    /// Keeps the results the module marks with a `ttlMs` in `answers`.
    #[must_use]
    pub fn with_answers(self, answers: PluginCache) -> Self {
        Self { answers: Some(answers), ..self }
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
            let answers = self.answers.as_ref().filter(|_| self.read_only.contains(name));
            let target =
                answers.filter(|_| self.marks_results.load(Ordering::Relaxed)).map(|_| named_target(name, &arguments));
            if let (Some(answers), Some(target)) = (answers, &target)
                && let Some(kept) = answers.get(request::TOOLS_CALL, target, &cx).await
            {
                return Ok(Outcome::Complete(Arc::unwrap_or_clone(kept)));
            }
            let generation = answers.map(PluginCache::generation);
            let input = serde_json::to_vec(&CallInput { name, arguments: &arguments })
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
                Ok(bytes) => {
                    // Passed on as the module wrote it, when it can be (#18).
                    if cx.takes_result_text()
                        && let Ok(text) = std::str::from_utf8(&bytes)
                        && let Ok(kept) = ToolResultText::read(text, Leaves::Nothing)
                    {
                        return Ok(Outcome::CompleteText(kept));
                    }
                    let result = parse_result(&bytes)?;
                    if let (Some(answers), Some(generation)) = (answers, generation)
                        && result.get("ttlMs").is_some()
                    {
                        // Marked: kept, and from now on this module's calls are looked up.
                        self.marks_results.store(true, Ordering::Relaxed);
                        let target = target.unwrap_or_else(|| named_target(name, &arguments));
                        let kept = Kept::new(result.clone(), Weight::of(&result, bytes.len()));
                        answers.keep(generation, (request::TOOLS_CALL, target), &cx, kept).await;
                    }
                    Ok(Outcome::Complete(result))
                }
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
