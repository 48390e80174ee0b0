//! The [`Plugin`] trait: what every kind of plugin (built-in, WASM, upstream
//! MCP server) implements so the catalog can list and call it.
//!
//! A plugin describes its tools, resources, resource templates and prompts as
//! MCP JSON objects, passed through verbatim to `*/list` (schemas are never run
//! through a lossy typed struct). Calls are async and fallible; each gets a
//! [`CallContext`] with its deadline, a cancellation token, the client's
//! capabilities for this request, a way to report progress and log messages,
//! and, on a multi-round retry, the client's answers and the opened state.

use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use switchyard_protocol::capabilities::ClientCapability;
use switchyard_protocol::logging::LoggingLevel;
use switchyard_protocol::method::notification;
use switchyard_protocol::result_text::ToolResultText;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::caching::CachePolicy;
use crate::cancellation::Cancellation;
use crate::catalog::ListKind;
use crate::policy::Caller;

/// What a plugin call produced.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The final result object (`CallToolResult`, `ReadResourceResult` or
    /// `GetPromptResult`), without `resultType`: the server adds it.
    Complete(Value),
    /// A final `tools/call` result kept as the text its plugin wrote
    /// ([`ToolResultText`]), which goes to the client as it is: only for a
    /// call whose context [takes text](CallContext::takes_result_text).
    CompleteText(ToolResultText),
    /// The call needs the client's input first (MRTR).
    InputRequired {
        /// Server-chosen keys to `{method, params}` input requests.
        requests: Map<String, Value>,
        /// Plugin state to carry to the next round; sealed by the server so
        /// the client cannot read it as anything but an opaque string, and
        /// cannot change it.
        state: Option<Value>,
    },
    /// The call became a task where the plugin's work runs (an upstream
    /// server that offers the Tasks extension): that task's fields as its
    /// server gave them. Only for a call whose context
    /// [accepts a task](CallContext::accepts_task); the server checks the
    /// fields and gives its client a task id of its own, by which the
    /// client's `tasks/*` requests come back to [`Plugin::task`].
    Task(Map<String, Value>),
}

impl Outcome {
    /// A complete `tools/call` result of one text block: kept as text
    /// ([`ToolResultText::text_block`]) where the call takes it, so the
    /// server writes it out as it is rather than building a `Value` to
    /// write, check and free (#18); built otherwise, as a task's call
    /// keeps its result.
    pub fn text_block(text: String, cx: &CallContext) -> Self {
        if cx.takes_result_text() {
            Self::CompleteText(ToolResultText::text_block(&text))
        } else {
            Self::Complete(json!({ "content": [{ "type": "text", "text": text }] }))
        }
    }
}

/// A client's request about a task a plugin's source keeps (see
/// [`Outcome::Task`]).
#[derive(Debug, Clone, Copy)]
pub enum TaskRequest<'a> {
    /// `tasks/get`: the detailed task.
    Get,
    /// `tasks/update`: the client's `inputResponses`.
    Update(&'a Map<String, Value>),
    /// `tasks/cancel`.
    Cancel,
}

/// How a plugin call can fail. `core::error` decides what the client sees.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The tool ran and failed in a way the model should see (`isError: true`).
    #[error("{0}")]
    Tool(String),
    /// The request's parameters are wrong (`-32602`).
    #[error("{0}")]
    InvalidParams(String),
    /// The resource does not exist (`-32602` with the URI).
    #[error("resource not found: {uri}")]
    ResourceNotFound {
        /// The URI that was asked for.
        uri: String,
    },
    /// The call cannot proceed without a capability the client did not declare (`-32021`).
    #[error("missing client capability {0:?}")]
    MissingCapability(ClientCapability),
    /// Something broke inside the plugin; logged, and `-32603` to the client.
    #[error("plugin failure")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// A result of a plugin call.
pub type PluginResult<T> = std::result::Result<T, PluginError>;

/// What a completion is for: a prompt by name, or a resource (or template) by URI.
pub use switchyard_protocol::params::CompletionTarget as CompletionRef;

/// A plugin: a named source of tools, resources and prompts.
///
/// Listing methods are synchronous and cheap: a plugin whose lists come from
/// elsewhere (an upstream server) keeps them cached and tells the catalog when
/// they change through [`CallContext::list_changed`] or a catalog rebuild.
pub trait Plugin: Send + Sync + 'static {
    /// The plugin id, unique in the catalog; used in logs and errors.
    fn id(&self) -> &str;

    /// `Tool` objects, each with `name` and `inputSchema`.
    fn tools(&self) -> Vec<Value> {
        Vec::new()
    }

    /// `Resource` objects, each with `uri` and `name`.
    fn resources(&self) -> Vec<Value> {
        Vec::new()
    }

    /// `ResourceTemplate` objects, each with `uriTemplate` and `name`.
    fn resource_templates(&self) -> Vec<Value> {
        Vec::new()
    }

    /// `Prompt` objects, each with `name`.
    fn prompts(&self) -> Vec<Value> {
        Vec::new()
    }

    /// Scopes a caller needs for every tool, resource and prompt of this
    /// plugin (the registry's per-plugin metadata); see [`crate::policy`].
    fn required_scopes(&self) -> &[String] {
        &[]
    }

    /// Whether `tool` may run as a task (the Tasks extension). Forbidden
    /// unless the plugin says otherwise.
    fn task_support(&self, tool: &str) -> crate::tasks::TaskSupport {
        let _ = tool;
        crate::tasks::TaskSupport::Forbidden
    }

    /// Whether each tool call gets a `plugin` span of its own, inside the
    /// MCP span. True (the default) for plugins whose calls do work worth
    /// timing apart from dispatch: a WASM guest, an upstream (whose client
    /// span is the plugin span's child). A built-in answers from the
    /// request's own code, where the span would say nothing the MCP span
    /// does not, and one span more cost a tenth of a whole built-in call
    /// (#18: 4,855 of the 18,035 instructions tracing then added to a call).
    fn own_span(&self) -> bool {
        true
    }

    /// How long this plugin's lists and reads may be cached, when it differs
    /// from the server's configured default.
    fn cache_policy(&self) -> Option<CachePolicy> {
        None
    }

    /// Calls a tool this plugin listed. Arguments were already validated
    /// against the tool's `inputSchema`.
    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Map<String, Value>,
        cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Outcome>> {
        let _ = (arguments, cx);
        Box::pin(async move { Err(PluginError::InvalidParams(format!("Unknown tool: {name}"))) })
    }

    /// Reads a resource this plugin listed, or one matching its templates.
    fn read_resource<'a>(&'a self, uri: &'a str, cx: CallContext) -> BoxFuture<'a, PluginResult<Outcome>> {
        let _ = cx;
        Box::pin(async move { Err(PluginError::ResourceNotFound { uri: uri.to_owned() }) })
    }

    /// Renders a prompt this plugin listed. Required arguments are present.
    fn get_prompt<'a>(
        &'a self,
        name: &'a str,
        arguments: Map<String, Value>,
        cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Outcome>> {
        let _ = (arguments, cx);
        Box::pin(async move { Err(PluginError::InvalidParams(format!("Unknown prompt: {name}"))) })
    }

    /// Suggests values for an argument of a prompt or resource template this
    /// plugin owns. Returns candidate values; the server caps and counts them.
    fn complete<'a>(
        &'a self,
        reference: &'a CompletionRef,
        argument: &'a str,
        value: &'a str,
        context: &'a Map<String, Value>,
        cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Vec<String>>> {
        let _ = (reference, argument, value, context, cx);
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Answers `request` about the task `id` (the id its source gave, in an
    /// [`Outcome::Task`] of this plugin's): the result object of `tasks/get`
    /// (the source's detailed task, which the server checks), or of
    /// `tasks/update` and `tasks/cancel` (an acknowledgement). The server
    /// has checked that the task is the caller's.
    fn task<'a>(
        &'a self,
        id: &'a str,
        request: TaskRequest<'a>,
        cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Value>> {
        let _ = (request, cx);
        Box::pin(async move { Err(PluginError::InvalidParams(format!("Unknown task: {id}"))) })
    }
}

/// The answers and state of a multi-round retry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InputRound {
    /// The client's `inputResponses`, by key.
    pub responses: Map<String, Value>,
    /// The state the plugin returned last round, verified and opened.
    pub state: Option<Value>,
}

/// Everything a plugin call may use besides its arguments.
#[derive(Clone)]
pub struct CallContext {
    pub(crate) caller: Caller,
    pub(crate) client_capabilities: Arc<Map<String, Value>>,
    /// A 2025-era request: it declares no capabilities per request, and
    /// input is asked of its client on its response stream.
    pub(crate) asks_on_stream: bool,
    /// The request may be answered with a task (see [`Outcome::Task`]).
    pub(crate) accepts_task: bool,
    /// A final result may come back as its text ([`Outcome::CompleteText`]).
    pub(crate) takes_text: bool,
    pub(crate) deadline: Instant,
    pub(crate) cancel: Cancellation,
    pub(crate) input: Option<InputRound>,
    pub(crate) notifier: Notifier,
    pub(crate) changes: Option<Arc<dyn ChangeSink>>,
}

impl CallContext {
    /// A context for calling a plugin outside a request (tests, warm-up).
    pub fn detached(deadline: Instant) -> Self {
        Self {
            caller: Caller::default(),
            client_capabilities: Arc::new(Map::new()),
            asks_on_stream: false,
            accepts_task: false,
            takes_text: false,
            deadline,
            cancel: Cancellation::default(),
            input: None,
            notifier: Notifier::default(),
            changes: None,
        }
    }

    /// This context, taking a final result as text, as a `tools/call`'s
    /// does ([`CallContext::takes_result_text`]): for calling a plugin as
    /// a request would, outside one.
    #[must_use]
    pub fn taking_result_text(mut self) -> Self {
        self.takes_text = true;
        self
    }

    /// The caller.
    pub fn caller(&self) -> &Caller {
        &self.caller
    }

    /// When the call must be finished; the server stops waiting then.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Cancelled when the client goes away or the deadline passes; a plugin
    /// doing blocking or long work should watch it.
    pub fn cancellation(&self) -> &CancellationToken {
        self.cancel.token()
    }

    /// Whether the client declared `capability` on this request.
    pub fn client_supports(&self, capability: ClientCapability) -> bool {
        capability.is_declared_in(&self.client_capabilities)
    }

    /// What the client may be asked for (its `elicitation`, `sampling` and
    /// `roots`), as a server this call relays to is told: what the request
    /// declared; for a 2025-era request, which declares nothing per request
    /// and is asked on its response stream, each of them (its client answers
    /// there, or refuses).
    pub fn input_capabilities(&self) -> Map<String, Value> {
        if self.asks_on_stream {
            let all = json!({ "elicitation": { "form": {}, "url": {} }, "sampling": {}, "roots": {} });
            return all.as_object().cloned().unwrap_or_default();
        }
        ["elicitation", "sampling", "roots"]
            .into_iter()
            .filter_map(|key| Some((key.to_owned(), self.client_capabilities.get(key)?.clone())))
            .collect()
    }

    /// Whether this call may become a task at the plugin's source
    /// ([`Outcome::Task`]): a `tools/call` (or a request about a task) of a
    /// client that declared the Tasks extension, to a server that serves
    /// it. A server this call relays to is told the extension only then.
    pub fn accepts_task(&self) -> bool {
        self.accepts_task
    }

    /// Whether a final result may come back as the text its plugin wrote
    /// ([`Outcome::CompleteText`]): a `tools/call` answered at once, whose
    /// result goes to its client as it is. A task's call does not: its
    /// result is kept as a `Value`, which the plugin builds under its own
    /// bounds.
    pub fn takes_result_text(&self) -> bool {
        self.takes_text
    }

    /// The client's answers and the opened state, on a multi-round retry.
    pub fn input(&self) -> Option<&InputRound> {
        self.input.as_ref()
    }

    /// Whether the request asked for progress (it gave a `progressToken`). A
    /// plugin that relays another server's progress asks for it only then.
    pub fn wants_progress(&self) -> bool {
        self.notifier.inner.as_ref().is_some_and(|inner| inner.progress_token.is_some())
    }

    /// The log level the request set, if any: log messages below it, or any
    /// without it, are not sent.
    pub fn log_level(&self) -> Option<LoggingLevel> {
        self.notifier.inner.as_ref().and_then(|inner| inner.log_level)
    }

    /// Reports progress; sent only when the request asked for it, and only
    /// when `progress` increases.
    pub async fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        self.notifier.progress(progress, total, message).await;
    }

    /// Sends a log message; sent only when the request set a log level at or
    /// below `level`. Never log secrets or personal data.
    pub async fn log(&self, level: LoggingLevel, logger: Option<&str>, data: Value) {
        self.notifier.log(level, logger, data).await;
    }

    /// Tells the catalog that this plugin's list of `kind` changed; the
    /// catalog rebuilds and every listen stream that opted in hears of it.
    pub async fn list_changed(&self, kind: ListKind) {
        if let Some(changes) = &self.changes {
            changes.changed(kind).await;
        }
    }
}

/// Where the catalog learns that a plugin's lists changed.
pub(crate) trait ChangeSink: Send + Sync {
    fn changed(&self, kind: ListKind) -> BoxFuture<'_, ()>;
    /// A resource of `plugin`'s changed, as this replica learned by itself.
    fn resource_updated(&self, plugin: &str, uri: &str);
    /// Any resource of `plugin`'s may have changed, unknown which.
    fn resources_may_have_changed(&self, plugin: &str);
}

/// Sends a request's own notifications (progress, log messages) to the
/// transport, which puts them on that request's response stream.
#[derive(Clone, Default)]
pub(crate) struct Notifier {
    inner: Option<Arc<NotifierInner>>,
}

struct NotifierInner {
    outbox: mpsc::Sender<Value>,
    progress_token: Option<Value>,
    log_level: Option<LoggingLevel>,
    last_progress: std::sync::Mutex<Option<f64>>,
}

impl Notifier {
    pub(crate) fn new(
        outbox: mpsc::Sender<Value>,
        progress_token: Option<Value>,
        log_level: Option<LoggingLevel>,
    ) -> Self {
        Self {
            inner: Some(Arc::new(NotifierInner {
                outbox,
                progress_token,
                log_level,
                last_progress: Default::default(),
            })),
        }
    }

    /// Sends a message to the client on this request's stream; false when
    /// the transport cannot stream.
    pub(crate) async fn send(&self, message: Value) -> bool {
        match &self.inner {
            Some(inner) => inner.outbox.send(message).await.is_ok(),
            None => false,
        }
    }

    async fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        let Some(inner) = &self.inner else { return };
        let Some(token) = &inner.progress_token else { return };
        {
            // The lock is never held across an await.
            let mut last = inner.last_progress.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|l| progress <= l) {
                return; // progress MUST increase
            }
            *last = Some(progress);
        }
        let mut params = json!({ "progressToken": token, "progress": progress });
        if let Some(total) = total {
            params["total"] = json!(total);
        }
        if let Some(message) = message {
            params["message"] = json!(message);
        }
        let _ = inner.outbox.send(switchyard_protocol::jsonrpc::notification(notification::PROGRESS, params)).await;
    }

    async fn log(&self, level: LoggingLevel, logger: Option<&str>, data: Value) {
        let Some(inner) = &self.inner else { return };
        if inner.log_level.is_none_or(|threshold| level < threshold) {
            return;
        }
        let mut params = json!({ "level": level.as_str(), "data": data });
        if let Some(logger) = logger {
            params["logger"] = json!(logger);
        }
        let _ = inner.outbox.send(switchyard_protocol::jsonrpc::notification(notification::MESSAGE, params)).await;
    }
}
