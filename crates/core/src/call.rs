//! One plugin call inside a request: parameter checks per method, the MRTR
//! plumbing (opening incoming state, sealing outgoing state, or asking a
//! legacy client over its response stream), and the call's deadline.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use switchyard_bus::marks::Marks;
use switchyard_protocol::capabilities::ClientCapability;
use switchyard_protocol::method::input;
use switchyard_protocol::version::Era;
use switchyard_protocol::{ErrorObject, Method, Params, Produced};
use switchyard_telemetry::ToolOutcome;

use crate::caching::{CachePolicy, CacheScope};
use crate::cancellation::Cancellation;
use crate::catalog::{Catalog, Snapshot, ToolEntry};
use crate::error::Error;
use crate::legacy::{self, LegacyAsk, Relay};
use crate::plugin::{CallContext, CompletionRef, InputRound, Notifier, Outcome, Plugin, PluginError, PluginResult};
use crate::request::{Answer, Prepared};
use crate::server::Config;
use crate::state::{Binding, OpenError, StateSealer};
use crate::tasks::{TaskSupport, Tasks};

/// Most completion values returned at once (the spec's cap).
const MAX_COMPLETIONS: usize = 100;

/// What a call may use of the server, named: a call reaches nothing else.
pub(crate) struct CallDeps<'a> {
    /// The call deadline, the caching of reads, whether a `requestState` opens once, the scope policy.
    pub(crate) config: &'a Config,
    /// Where a plugin reports list changes.
    pub(crate) catalog: &'a Arc<Catalog>,
    /// Seals and opens `requestState`.
    pub(crate) sealer: &'a StateSealer,
    /// Where the uses of `requestState` are marked.
    pub(crate) state_marks: &'a dyn Marks,
    /// The Tasks extension, when served.
    pub(crate) tasks: Option<&'a Arc<Tasks>>,
    /// Asks legacy clients for input; names this replica.
    pub(crate) relay: &'a Relay,
}

/// One call into a plugin, with everything the MRTR and context plumbing needs.
pub(crate) struct Call<'a> {
    pub(crate) deps: CallDeps<'a>,
    pub(crate) request: &'a Prepared,
    /// The request's parameters, which fit its method.
    pub(crate) params: &'a Params,
    pub(crate) snapshot: &'a Snapshot,
    pub(crate) notifier: Notifier,
    pub(crate) capabilities: Arc<Map<String, Value>>,
    pub(crate) cancel: Cancellation,
}

impl Call<'_> {
    /// What a `requestState` sealed or opened in this call is bound to.
    pub(crate) fn binding(&self) -> Binding<'_> {
        Binding {
            method: self.request.method.as_str(),
            params: self.params,
            rest: &self.request.rest,
            principal: self.request.caller.principal.as_deref(),
        }
    }

    pub(crate) async fn call_tool(
        &self,
        name: &str,
        arguments: Option<&Map<String, Value>>,
    ) -> Result<Produced, Error> {
        let tool = self.snapshot.tool(name).ok_or_else(|| Error::UnknownTool(name.to_owned()))?;
        self.deps.config.policy.authorize(&self.request.caller, tool)?;
        // The schema validator reads a `Value`; the plugin is handed this one's map.
        let checked = Value::Object(arguments.cloned().unwrap_or_default());
        tool.input_schema
            .validate(&checked)
            .map_err(|problems| Error::InvalidArguments { tool: name.to_owned(), problems })?;
        let Value::Object(validated) = checked else { unreachable!("made an object above") };
        let declared_tasks =
            self.request.era == Era::Modern && ClientCapability::Tasks.is_declared_in(&self.capabilities);
        match (tool.plugin.task_support(name), &self.deps.tasks) {
            (TaskSupport::Required, _) if !declared_tasks => {
                return Err(ErrorObject::missing_capability(ClientCapability::Tasks.as_required()).into());
            }
            (TaskSupport::Optional | TaskSupport::Required, Some(tasks)) if declared_tasks => {
                let result = self.call_tool_as_task(tool, tasks, validated).await.map(Produced::from);
                tool.calls.record(tool_outcome(&result));
                return result;
            }
            _ => {}
        }
        // The first round is handed the validated copy; only a legacy
        // client's further rounds (after its answers) copy the request's again.
        let mut first = Some(validated);
        let result = self
            .run(&tool.plugin, name, |plugin, cx| {
                let arguments = first.take().unwrap_or_else(|| arguments.cloned().unwrap_or_default());
                plugin.call_tool(name, arguments, cx)
            })
            .await
            .and_then(|result| check_tool_result(tool, result));
        // The series is the catalog entry's: a metric label never carries client input.
        tool.calls.record(tool_outcome(&result));
        result
    }

    pub(crate) async fn read_resource(&self, uri: &str) -> Result<Answer, Error> {
        let owner = self.snapshot.serving(uri).ok_or_else(|| Error::ResourceNotFound(uri.to_owned()))?;
        let gated = self.deps.config.policy.authorize(&self.request.caller, owner)?;
        let result = self.run(&owner.plugin, uri, |plugin, cx| plugin.read_resource(uri, cx)).await?.into_value();
        if result.get("resultType").is_some_and(|t| t != "complete") {
            return Ok(result.into());
        }
        // SEP-2164: a missing resource is an error, never an empty `contents`.
        if result.get("contents").and_then(Value::as_array).is_none_or(|c| c.is_empty()) {
            return Err(Error::ResourceNotFound(uri.to_owned()));
        }
        let policy =
            owner.plugin.cache_policy().map_or(self.deps.config.read_cache, |p| self.deps.config.read_cache.combine(p));
        // Who may read it depends on the caller: no shared cache may reuse it.
        let policy = if gated { CachePolicy { scope: CacheScope::Private, ..policy } } else { policy };
        Ok(Answer::cached(result, policy))
    }

    pub(crate) async fn get_prompt(&self, name: &str, arguments: Option<&Map<String, Value>>) -> Result<Value, Error> {
        let prompt = self.snapshot.prompt(name).ok_or_else(|| Error::UnknownPrompt(name.to_owned()))?;
        self.deps.config.policy.authorize(&self.request.caller, prompt)?;
        let given = |argument: &String| arguments.is_some_and(|a| a.contains_key(argument));
        let missing: Vec<String> = prompt.required_arguments.iter().filter(|a| !given(a)).cloned().collect();
        if !missing.is_empty() {
            return Err(Error::MissingPromptArguments { prompt: name.to_owned(), missing });
        }
        // Copied for each round that asks the plugin, as before: not once more up front.
        self.run(&prompt.plugin, name, |plugin, cx| plugin.get_prompt(name, arguments.cloned().unwrap_or_default(), cx))
            .await
            .map(Produced::into_value)
    }

    pub(crate) async fn complete(
        &self,
        reference: &CompletionRef,
        argument: &str,
        value: &str,
        context: &Map<String, Value>,
    ) -> Result<Value, Error> {
        let plugin = match reference {
            CompletionRef::Prompt(name) => {
                let prompt = self.snapshot.prompt(name).ok_or_else(|| Error::UnknownPrompt(name.clone()))?;
                self.deps.config.policy.authorize(&self.request.caller, prompt)?;
                Arc::clone(&prompt.plugin)
            }
            CompletionRef::Resource(uri) => {
                let owner =
                    self.snapshot.templates.iter().find(|t| &t.key == uri).or_else(|| self.snapshot.resource(uri));
                let owner = owner.ok_or_else(|| Error::ResourceNotFound(uri.clone()))?;
                self.deps.config.policy.authorize(&self.request.caller, owner)?;
                Arc::clone(&owner.plugin)
            }
        };
        let timeout = self.deps.config.call_timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        let asking = plugin.complete(reference, argument, value, context, self.context(deadline, None));
        let mut values = tokio::time::timeout_at(deadline, asking)
            .await
            .map_err(|_| {
                let (CompletionRef::Prompt(target) | CompletionRef::Resource(target)) = reference;
                Error::Timeout { tool: format!("completion for {target}"), seconds: timeout.as_secs() }
            })?
            .map_err(|source| Error::Plugin { plugin: plugin.id().to_owned(), source })?;
        let total = values.len();
        values.truncate(MAX_COMPLETIONS);
        Ok(json!({ "completion": { "values": values, "total": total, "hasMore": total > MAX_COMPLETIONS } }))
    }

    /// Runs a plugin call with MRTR: opens the incoming state, bounds the call
    /// by its deadline, and seals the outgoing state of an `input_required`.
    /// For a legacy client, which cannot retry with answers, the input
    /// requests go out on the response stream instead and the plugin is
    /// called again with the answers, up to [`MAX_LEGACY_ROUNDS`] times.
    async fn run<'p, F>(&self, plugin: &'p Arc<dyn Plugin>, target: &str, mut call: F) -> Result<Produced, Error>
    where
        F: FnMut(&'p dyn Plugin, CallContext) -> BoxFuture<'p, PluginResult<Outcome>>,
    {
        let request = self.request;
        let binding = self.binding();
        let mut input = self.input_round(binding).await?;
        let timeout = self.deps.config.call_timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        let plugin_error = |source| Error::Plugin { plugin: plugin.id().to_owned(), source };
        let timed_out = || Error::Timeout { tool: target.to_owned(), seconds: timeout.as_secs() };
        for _ in 0..=MAX_LEGACY_ROUNDS {
            let cx = self.context(deadline, input.take());
            let span = if plugin.own_span() {
                tracing::info_span!(
                    "plugin",
                    otel.name = %format_args!("plugin {}", plugin.id()),
                    otel.kind = "internal",
                    switchyard.plugin.id = plugin.id(),
                )
            } else {
                tracing::Span::none()
            };
            let mut running = tracing::Instrument::instrument(call(plugin.as_ref(), cx), span);
            // Most built-in calls finish on their first poll: only a call that
            // has to wait pays for a timer (the timer wheel is shared by every
            // worker thread, so this matters on the hot path).
            let outcome = match futures::FutureExt::now_or_never(&mut running) {
                Some(outcome) => outcome,
                None => match tokio::time::timeout_at(deadline, running).await {
                    Ok(outcome) => outcome,
                    Err(_) => {
                        self.cancel.cancel();
                        return Err(timed_out());
                    }
                },
            }
            .map_err(plugin_error)?;
            let (requests, state) = match outcome {
                Outcome::Complete(result) => return Ok(result.into()),
                Outcome::CompleteText(text) => return Ok(text.into()),
                Outcome::InputRequired { requests, state } => (requests, state),
                Outcome::Task(fields) => {
                    return self.relayed_task_created(plugin.as_ref(), target, fields).map(Produced::from);
                }
            };
            if request.era == Era::Modern {
                return self.ask_modern_client(plugin.id(), requests, state, binding).map(Produced::from);
            }
            let principal = request.caller.principal.as_deref();
            // Boxed: a legacy client's round of questions is rare, and its
            // future inline made every call's future 776 bytes larger (#18).
            let asking = self.deps.relay.ask(self.deps.sealer, &self.notifier, principal, requests, deadline);
            let asked = Box::pin(asking).await;
            let responses = asked.map_err(|e| match e {
                LegacyAsk::Unavailable => plugin_error(PluginError::Tool(legacy::input_unavailable())),
                LegacyAsk::Refused(message) => plugin_error(PluginError::Tool(message)),
                LegacyAsk::TimedOut => timed_out(),
            })?;
            input = Some(InputRound { responses, state });
        }
        Err(plugin_error(PluginError::Tool(format!("{target} asked for input more than {MAX_LEGACY_ROUNDS} times"))))
    }

    /// What a plugin called for this request may use, until `deadline`.
    pub(crate) fn context(&self, deadline: tokio::time::Instant, input: Option<InputRound>) -> CallContext {
        CallContext {
            caller: self.request.caller.clone(),
            client_capabilities: Arc::clone(&self.capabilities),
            asks_on_stream: self.request.era != Era::Modern,
            accepts_task: self.accepts_task(),
            takes_text: self.request.method == Method::CallTool,
            deadline: deadline.into_std(),
            // The request's own token: a timeout ends the whole request.
            cancel: self.cancel.clone(),
            input,
            notifier: self.notifier.clone(),
            changes: Some(self.deps.catalog.change_sink()),
        }
    }

    /// Whether this request may be answered with a task: a modern
    /// `tools/call` (or a request about a task) that declared the
    /// extension, to a server that serves it.
    pub(crate) fn accepts_task(&self) -> bool {
        matches!(self.request.method, Method::CallTool | Method::GetTask | Method::UpdateTask | Method::CancelTask)
            && self.deps.tasks.is_some()
            && self.request.era == Era::Modern
            && ClientCapability::Tasks.is_declared_in(&self.capabilities)
    }

    /// The `input_required` result of a modern request: every input request
    /// must need only capabilities the request declared, and the plugin's
    /// state goes out sealed.
    pub(crate) fn ask_modern_client(
        &self,
        plugin: &str,
        requests: Map<String, Value>,
        state: Option<Value>,
        binding: Binding<'_>,
    ) -> Result<Value, Error> {
        for input_request in requests.values() {
            let needed = required_capability(input_request).ok_or_else(|| Error::Plugin {
                plugin: plugin.to_owned(),
                source: PluginError::Internal(format!("malformed input request: {input_request}").into()),
            })?;
            if !needed.is_declared_in(&self.capabilities) {
                return Err(ErrorObject::missing_capability(needed.as_required()).into());
            }
        }
        let sealed = self.deps.sealer.seal(binding, state);
        Ok(json!({ "resultType": "input_required", "inputRequests": requests, "requestState": sealed }))
    }

    /// Reads `inputResponses` and opens `requestState` on a retry. A state
    /// that comes with answers is used once: a second retry with it (a
    /// replay, or a client's duplicate) is refused on every replica.
    pub(crate) async fn input_round(&self, binding: Binding<'_>) -> Result<Option<InputRound>, Error> {
        let Some(retry) = self.params.retry() else { return Ok(None) };
        let responses = retry.input_responses.clone();
        let state = match &retry.request_state {
            None => None,
            Some(sealed) => {
                let opened = self.deps.sealer.open(sealed, binding).map_err(Error::RequestState)?;
                if responses.is_some() && self.deps.config.state_single_use {
                    match self.deps.state_marks.first_use(&opened.id, opened.expires_at).await {
                        Ok(true) => {}
                        Ok(false) => return Err(Error::RequestState(OpenError::Replayed)),
                        Err(error) => {
                            // Fail closed: a use that cannot be recorded could be repeated.
                            tracing::warn!(%error, "cannot record the use of a requestState; refused");
                            return Err(Error::Protocol(ErrorObject::internal()));
                        }
                    }
                }
                Some(opened.state)
            }
        };
        Ok(match (responses, state) {
            (None, None) => None,
            (responses, state) => Some(InputRound { responses: responses.unwrap_or_default(), state: state.flatten() }),
        })
    }
}

/// How a tool call ended, for `switchyard.tool.calls`.
fn tool_outcome(result: &Result<Produced, Error>) -> ToolOutcome {
    match result {
        Ok(result) => match result.result_type() {
            Some("task") => ToolOutcome::Task,
            Some("input_required") => ToolOutcome::InputRequired,
            _ if result.is_error() => ToolOutcome::ToolError,
            _ => ToolOutcome::Ok,
        },
        Err(Error::Timeout { .. }) => ToolOutcome::Timeout,
        Err(Error::Plugin { source: PluginError::Tool(_), .. }) => ToolOutcome::ToolError,
        Err(_) => ToolOutcome::PluginError,
    }
}

/// Checks a tool's complete result: an object with `content`, and
/// `structuredContent` matching the `outputSchema` unless it reports an error.
/// An `input_required` result passes as it is.
pub(crate) fn check_tool_result(tool: &ToolEntry, result: Produced) -> Result<Produced, Error> {
    let text = match result {
        Produced::Value(value) => return check_tool_value(tool, value).map(Produced::Value),
        Produced::ToolText(text) => text,
    };
    // Text has a `content` array and no `resultType` (`result_text`).
    if tool.output_schema.is_some() && !text.is_error() {
        check_structured(tool, text.structured_content().as_ref())?;
    }
    Ok(Produced::ToolText(text))
}

/// [`check_tool_result`] of a result built as a value.
pub(crate) fn check_tool_value(tool: &ToolEntry, result: Value) -> Result<Value, Error> {
    let name = &tool.name;
    let Value::Object(map) = &result else {
        return Err(Error::InvalidOutput { tool: name.clone(), problems: vec!["result is not an object".into()] });
    };
    if map.get("resultType").is_some_and(|t| t != "complete") {
        return Ok(result); // input_required
    }
    if !map.get("content").is_some_and(Value::is_array) {
        return Err(Error::InvalidOutput { tool: name.clone(), problems: vec!["content is missing".into()] });
    }
    if map.get("isError").and_then(Value::as_bool) != Some(true) {
        check_structured(tool, map.get("structuredContent"))?;
    }
    Ok(result)
}

/// Checks a result's `structuredContent` against the tool's `outputSchema`,
/// if it declares one: present, and matching it.
fn check_structured(tool: &ToolEntry, structured: Option<&Value>) -> Result<(), Error> {
    let Some(schema) = &tool.output_schema else { return Ok(()) };
    let invalid = |problems| Error::InvalidOutput { tool: tool.name.clone(), problems };
    let structured = structured.ok_or_else(|| invalid(vec!["structuredContent is missing".into()]))?;
    schema.validate(structured).map_err(invalid)
}

/// The most times a legacy client is asked for input within one request.
const MAX_LEGACY_ROUNDS: usize = 8;

/// The first capability one of `requests` (input requests, by key) needs
/// that `declared` (a request's client capabilities) does not hold.
pub(crate) fn undeclared_need(
    requests: &Map<String, Value>,
    declared: &Map<String, Value>,
) -> Option<ClientCapability> {
    requests.values().filter_map(required_capability).find(|needed| !needed.is_declared_in(declared))
}

/// The client capability an embedded input request needs.
pub fn required_capability(request: &Value) -> Option<ClientCapability> {
    let params = request.get("params");
    match request.get("method")?.as_str()? {
        input::ELICIT if params.and_then(|p| p.get("mode")).and_then(Value::as_str) == Some("url") => {
            Some(ClientCapability::ElicitationUrl)
        }
        input::ELICIT => Some(ClientCapability::ElicitationForm),
        input::CREATE_MESSAGE if params.and_then(|p| p.get("tools")).is_some() => Some(ClientCapability::SamplingTools),
        input::CREATE_MESSAGE => Some(ClientCapability::Sampling),
        input::LIST_ROOTS => Some(ClientCapability::Roots),
        _ => None,
    }
}
