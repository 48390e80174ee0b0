//! One plugin call inside a request: parameter checks per method, the MRTR
//! plumbing (opening incoming state, sealing outgoing state, or asking a
//! legacy client over its response stream), and the call's deadline.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use switchyard_protocol::capabilities::ClientCapability;
use switchyard_protocol::method::input;
use switchyard_protocol::version::Era;
use switchyard_protocol::{ErrorObject, RequestId};
use tokio_util::sync::CancellationToken;

use crate::caching::{CachePolicy, CacheScope};
use crate::catalog::{Snapshot, ToolEntry};
use crate::error::{Delivery, Error};
use crate::legacy;
use crate::plugin::{CallContext, CompletionRef, InputRound, Notifier, Outcome, Plugin, PluginError, PluginResult};
use crate::server::{Prepared, Server};
use crate::state::{Binding, OpenError};
use switchyard_telemetry::ToolOutcome;

use crate::tasks::{TaskRecord, TaskStatus, TaskSupport, Tasks, Transition, millis, now_ms};

/// Most completion values returned at once (the spec's cap).
const MAX_COMPLETIONS: usize = 100;

/// One call into a plugin, with everything the MRTR and context plumbing needs.
pub(crate) struct Call<'a> {
    pub(crate) server: &'a Server,
    pub(crate) request: &'a Prepared,
    pub(crate) snapshot: &'a Snapshot,
    pub(crate) notifier: Notifier,
    pub(crate) capabilities: Arc<Map<String, Value>>,
    pub(crate) cancel: CancellationToken,
}

impl Call<'_> {
    fn string_param(&self, name: &str) -> Result<&str, Error> {
        match self.request.params.get(name) {
            Some(Value::String(s)) => Ok(s),
            Some(_) => Err(Error::InvalidParams(format!("params.{name} must be a string"))),
            None => Err(Error::InvalidParams(format!("params.{name} is required"))),
        }
    }

    fn object_param(&self, name: &str) -> Result<Map<String, Value>, Error> {
        match self.request.params.get(name) {
            None | Some(Value::Null) => Ok(Map::new()),
            Some(Value::Object(map)) => Ok(map.clone()),
            Some(_) => Err(Error::InvalidParams(format!("params.{name} must be an object"))),
        }
    }

    pub(crate) async fn call_tool(&self) -> Result<Value, Error> {
        let name = self.string_param("name")?;
        let empty = Value::Object(Map::new());
        let arguments = match self.request.params.get("arguments") {
            None | Some(Value::Null) => &empty,
            Some(arguments @ Value::Object(_)) => arguments,
            Some(_) => return Err(Error::InvalidParams("params.arguments must be an object".into())),
        };
        let tool = self.snapshot.tool(name).ok_or_else(|| Error::UnknownTool(name.to_owned()))?;
        self.server.authorize(&self.request.caller, tool)?;
        tool.input_schema
            .validate(arguments)
            .map_err(|problems| Error::InvalidArguments { tool: name.to_owned(), problems })?;
        let arguments = arguments.as_object().cloned().unwrap_or_default();
        let declared_tasks =
            self.request.era == Era::Modern && ClientCapability::Tasks.is_declared_in(&self.capabilities);
        match (tool.plugin.task_support(name), &self.server.tasks) {
            (TaskSupport::Required, _) if !declared_tasks => {
                return Err(ErrorObject::missing_capability(ClientCapability::Tasks.as_required()).into());
            }
            (TaskSupport::Optional | TaskSupport::Required, Some(tasks)) if declared_tasks => {
                let result = self.call_tool_as_task(tool, tasks, arguments).await;
                let outcome = match &result {
                    Ok(result) if result.get("resultType").and_then(Value::as_str) == Some("task") => ToolOutcome::Task,
                    other => tool_outcome(other),
                };
                switchyard_telemetry::metrics().tool_call(&tool.name, outcome);
                return result;
            }
            _ => {}
        }
        let result = self
            .run(&tool.plugin, name, |plugin, cx| plugin.call_tool(name, arguments.clone(), cx))
            .await
            .and_then(|result| check_tool_result(tool, result));
        // The name is the catalog's: a metric label never carries client input.
        switchyard_telemetry::metrics().tool_call(&tool.name, tool_outcome(&result));
        result
    }

    /// A `tools/call` that may become a task: the call is polled once; an
    /// answer it has at once (a result, an MRTR `input_required`) goes back
    /// as for any call. Otherwise the task is stored before its
    /// `CreateTaskResult` is returned, and the call goes on in the
    /// background, where its end is recorded.
    async fn call_tool_as_task(
        &self,
        tool: &ToolEntry,
        tasks: &Arc<Tasks>,
        arguments: Map<String, Value>,
    ) -> Result<Value, Error> {
        let request = self.request;
        let binding = Binding {
            method: request.method.as_str(),
            params: &request.params,
            principal: request.caller.principal.as_deref(),
        };
        let input = self.input_round(binding).await?;
        let token = CancellationToken::new();
        let cx = CallContext {
            caller: request.caller.clone(),
            client_capabilities: Arc::clone(&self.capabilities),
            // A task may run as long as it is kept.
            deadline: std::time::Instant::now() + tasks.config.ttl,
            cancel: token.clone(),
            input: None,
            // Tasks send no progress or log notifications (the extension defines none).
            notifier: Notifier::default(),
            changes: Some(self.server.catalog.change_sink()),
        };
        let call = TaskCall { plugin: Arc::clone(&tool.plugin), name: tool.name.clone(), arguments, template: cx };
        // An MRTR retry's answers go to the first round.
        let mut running = call.start(input);
        if let Some(outcome) = futures::FutureExt::now_or_never(&mut running) {
            let plugin_error = |source| Error::Plugin { plugin: tool.plugin.id().to_owned(), source };
            return match outcome.map_err(plugin_error)? {
                Outcome::Complete(result) => check_tool_result(tool, result),
                Outcome::InputRequired { requests, state } => {
                    self.ask_modern_client(tool.plugin.id(), requests, state, binding)
                }
            };
        }
        let now = now_ms();
        let task = TaskRecord {
            id: Tasks::new_id(),
            principal: request.caller.principal.clone(),
            status: TaskStatus::Working,
            status_message: None,
            created_at_ms: now,
            updated_at_ms: now,
            ttl_ms: millis(tasks.config.ttl),
            owner: self.server.replica.clone(),
            lease_until_ms: now + millis(tasks.config.lease),
            result: None,
            error: None,
            input: None,
            version: 0,
        };
        // Durable before the client hears of it: an immediate tasks/get on
        // any replica must find it.
        tasks.store.create(&task).await.map_err(Error::TaskStore)?;
        tasks.track(&task.id, token.clone());
        let (tasks_handle, catalog) = (Arc::clone(tasks), Arc::clone(&self.server.catalog));
        tokio::spawn(run_task(tasks_handle, catalog, task.clone(), call, running, token));
        let mut created = crate::tasks::wire(&task, tasks.config.poll_interval, false);
        created.insert("resultType".into(), json!("task"));
        Ok(Value::Object(created))
    }

    pub(crate) async fn read_resource(&self) -> Result<Value, Error> {
        let uri = self.string_param("uri")?;
        let owner = self
            .snapshot
            .resource(uri)
            .or_else(|| self.snapshot.template_for(uri))
            .ok_or_else(|| Error::ResourceNotFound(uri.to_owned()))?;
        let gated = self.server.authorize(&self.request.caller, owner)?;
        let result = self.run(&owner.plugin, uri, |plugin, cx| plugin.read_resource(uri, cx)).await?;
        if result.get("resultType").is_some_and(|t| t != "complete") {
            return Ok(result);
        }
        // SEP-2164: a missing resource is an error, never an empty `contents`.
        if result.get("contents").and_then(Value::as_array).is_none_or(|c| c.is_empty()) {
            return Err(Error::ResourceNotFound(uri.to_owned()));
        }
        let policy = owner
            .plugin
            .cache_policy()
            .map_or(self.server.config.read_cache, |p| self.server.config.read_cache.combine(p));
        // Who may read it depends on the caller: no shared cache may reuse it.
        let policy = if gated { CachePolicy { scope: CacheScope::Private, ..policy } } else { policy };
        Ok(self.server.cached(result, policy))
    }

    pub(crate) async fn get_prompt(&self) -> Result<Value, Error> {
        let name = self.string_param("name")?;
        let arguments = self.object_param("arguments")?;
        if let Some((key, _)) = arguments.iter().find(|(_, v)| !v.is_string()) {
            return Err(Error::InvalidParams(format!("prompt argument {key} must be a string")));
        }
        let prompt = self.snapshot.prompt(name).ok_or_else(|| Error::UnknownPrompt(name.to_owned()))?;
        self.server.authorize(&self.request.caller, prompt)?;
        let missing: Vec<&str> =
            prompt.required_arguments.iter().filter(|a| !arguments.contains_key(*a)).map(String::as_str).collect();
        if !missing.is_empty() {
            return Err(Error::InvalidParams(format!("prompt {name} requires argument(s): {}", missing.join(", "))));
        }
        self.run(&prompt.plugin, name, |plugin, cx| plugin.get_prompt(name, arguments.clone(), cx)).await
    }

    pub(crate) async fn complete(&self) -> Result<Value, Error> {
        let params = &self.request.params;
        let reference = params.get("ref").ok_or_else(|| Error::InvalidParams("params.ref is required".into()))?;
        let text = |v: Option<&Value>, what: &str| {
            v.and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| Error::InvalidParams(format!("{what} must be a string")))
        };
        let (reference, plugin) = match reference.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => {
                let name = text(reference.get("name"), "ref.name")?;
                let prompt = self.snapshot.prompt(&name).ok_or_else(|| Error::UnknownPrompt(name.clone()))?;
                self.server.authorize(&self.request.caller, prompt)?;
                (CompletionRef::Prompt(name), Arc::clone(&prompt.plugin))
            }
            Some("ref/resource") => {
                let uri = text(reference.get("uri"), "ref.uri")?;
                let owner =
                    self.snapshot.templates.iter().find(|t| t.key == uri).or_else(|| self.snapshot.resource(&uri));
                let owner = owner.ok_or_else(|| Error::ResourceNotFound(uri.clone()))?;
                self.server.authorize(&self.request.caller, owner)?;
                (CompletionRef::Resource(uri), Arc::clone(&owner.plugin))
            }
            _ => return Err(Error::InvalidParams("ref.type must be ref/prompt or ref/resource".into())),
        };
        let argument = params.get("argument");
        let argument_name = text(argument.and_then(|a| a.get("name")), "argument.name")?;
        let value = text(argument.and_then(|a| a.get("value")), "argument.value")?;
        let context = params
            .get("context")
            .and_then(|c| c.get("arguments"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut values = plugin
            .complete(&reference, &argument_name, &value, &context)
            .await
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
    async fn run<'p, F>(&self, plugin: &'p Arc<dyn Plugin>, target: &str, call: F) -> Result<Value, Error>
    where
        F: Fn(&'p dyn Plugin, CallContext) -> BoxFuture<'p, PluginResult<Outcome>>,
    {
        let request = self.request;
        let binding = Binding {
            method: request.method.as_str(),
            params: &request.params,
            principal: request.caller.principal.as_deref(),
        };
        let mut input = self.input_round(binding).await?;
        let timeout = self.server.config.call_timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        let plugin_error = |source| Error::Plugin { plugin: plugin.id().to_owned(), source };
        let timed_out = || Error::Timeout { tool: target.to_owned(), seconds: timeout.as_secs() };
        for _ in 0..=MAX_LEGACY_ROUNDS {
            let cx = CallContext {
                caller: request.caller.clone(),
                client_capabilities: Arc::clone(&self.capabilities),
                deadline: deadline.into_std(),
                // The request's own token: a timeout ends the whole request.
                cancel: self.cancel.clone(),
                input: input.take(),
                notifier: self.notifier.clone(),
                changes: Some(self.server.catalog.change_sink()),
            };
            let span = tracing::info_span!(
                "plugin",
                otel.name = %format_args!("plugin {}", plugin.id()),
                otel.kind = "internal",
                switchyard.plugin.id = plugin.id(),
            );
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
                Outcome::Complete(result) => return Ok(result),
                Outcome::InputRequired { requests, state } => (requests, state),
            };
            if request.era == Era::Modern {
                return self.ask_modern_client(plugin.id(), requests, state, binding);
            }
            let responses = self.ask_legacy_client(requests, deadline).await.map_err(|e| match e {
                LegacyAsk::Unavailable => plugin_error(PluginError::Tool(legacy::input_unavailable())),
                LegacyAsk::Refused(message) => plugin_error(PluginError::Tool(message)),
                LegacyAsk::TimedOut => timed_out(),
            })?;
            input = Some(InputRound { responses, state });
        }
        Err(plugin_error(PluginError::Tool(format!("{target} asked for input more than {MAX_LEGACY_ROUNDS} times"))))
    }

    /// The `input_required` result of a modern request: every input request
    /// must need only capabilities the request declared, and the plugin's
    /// state goes out sealed.
    fn ask_modern_client(
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
        let sealed = self.server.sealer.seal(binding, state);
        Ok(json!({ "resultType": "input_required", "inputRequests": requests, "requestState": sealed }))
    }

    /// Sends input requests to a legacy client as JSON-RPC requests on this
    /// request's response stream and waits for its answers, which arrive as
    /// separate POSTs and reach us through [`Server::deliver_response`].
    async fn ask_legacy_client(
        &self,
        requests: Map<String, Value>,
        deadline: tokio::time::Instant,
    ) -> std::result::Result<Map<String, Value>, LegacyAsk> {
        let pending = &self.server.legacy_pending;
        let mut waiting = Vec::with_capacity(requests.len());
        let registered = Unregister {
            pending,
            ids: requests
                .keys()
                .map(|_| {
                    let principal = self.request.caller.principal.as_deref();
                    RequestId::String(legacy::request_id(&self.server.sealer, &self.server.replica, principal))
                })
                .collect(),
        };
        for ((key, input_request), id) in requests.into_iter().zip(&registered.ids) {
            let (sender, receiver) = tokio::sync::oneshot::channel();
            pending.lock().unwrap_or_else(|p| p.into_inner()).insert(id.clone(), sender);
            let method = input_request.get("method").and_then(Value::as_str).unwrap_or("input").to_owned();
            let mut message = input_request;
            message["jsonrpc"] = json!("2.0");
            message["id"] = id.to_value();
            if !self.notifier.send(message).await {
                return Err(LegacyAsk::Unavailable);
            }
            waiting.push((key, method, receiver));
        }
        let mut responses = Map::new();
        for (key, method, receiver) in waiting {
            match tokio::time::timeout_at(deadline, receiver).await {
                Ok(Ok(Ok(answer))) => {
                    responses.insert(key, answer);
                }
                Ok(Ok(Err(error))) => {
                    return Err(LegacyAsk::Refused(format!("The client could not answer {method}: {}", error.message)));
                }
                Ok(Err(_)) | Err(_) => return Err(LegacyAsk::TimedOut),
            }
        }
        Ok(responses)
    }

    /// Reads `inputResponses` and opens `requestState` on a retry. A state
    /// that comes with answers is used once: a second retry with it (a
    /// replay, or a client's duplicate) is refused on every replica.
    async fn input_round(&self, binding: Binding<'_>) -> Result<Option<InputRound>, Error> {
        let params = &self.request.params;
        let responses = match params.get("inputResponses") {
            None | Some(Value::Null) => None,
            Some(Value::Object(responses)) => {
                if let Some((key, _)) = responses.iter().find(|(_, v)| !v.is_object()) {
                    return Err(Error::InvalidParams(format!("inputResponses.{key} must be an object")));
                }
                Some(responses.clone())
            }
            Some(_) => return Err(Error::InvalidParams("inputResponses must be an object".into())),
        };
        let state = match params.get("requestState") {
            None | Some(Value::Null) => None,
            Some(Value::String(sealed)) => {
                let opened = self.server.sealer.open(sealed, binding).map_err(Error::RequestState)?;
                if responses.is_some() && self.server.config.state_single_use {
                    match self.server.state_marks.first_use(&opened.id, opened.expires_at).await {
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
            Some(_) => return Err(Error::InvalidParams("requestState must be a string".into())),
        };
        Ok(match (responses, state) {
            (None, None) => None,
            (responses, state) => Some(InputRound { responses: responses.unwrap_or_default(), state: state.flatten() }),
        })
    }
}

/// Checks a tool's complete result: an object with `content`, and
/// `structuredContent` matching the `outputSchema` unless it reports an error.
/// An `input_required` result passes as it is.
/// How a tool call ended, for `switchyard.tool.calls`.
fn tool_outcome(result: &Result<Value, Error>) -> ToolOutcome {
    match result {
        Ok(result) if result.get("resultType").and_then(Value::as_str) == Some("input_required") => {
            ToolOutcome::InputRequired
        }
        Ok(result) if result.get("isError").and_then(Value::as_bool) == Some(true) => ToolOutcome::ToolError,
        Ok(_) => ToolOutcome::Ok,
        Err(Error::Timeout { .. }) => ToolOutcome::Timeout,
        Err(Error::Plugin { source: PluginError::Tool(_), .. }) => ToolOutcome::ToolError,
        Err(_) => ToolOutcome::PluginError,
    }
}

fn check_tool_result(tool: &ToolEntry, result: Value) -> Result<Value, Error> {
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
    let is_error = map.get("isError").and_then(Value::as_bool) == Some(true);
    if let (Some(schema), false) = (&tool.output_schema, is_error) {
        let structured = map.get("structuredContent").ok_or_else(|| Error::InvalidOutput {
            tool: name.clone(),
            problems: vec!["structuredContent is missing".into()],
        })?;
        schema.validate(structured).map_err(|problems| Error::InvalidOutput { tool: name.clone(), problems })?;
    }
    Ok(result)
}

/// What it takes to call a task's tool again with the client's answers.
struct TaskCall {
    plugin: Arc<dyn Plugin>,
    name: String,
    arguments: Map<String, Value>,
    /// The context of the first call; later rounds get its copy with their input.
    template: CallContext,
}

type Running = BoxFuture<'static, PluginResult<Outcome>>;

impl TaskCall {
    fn start(&self, input: Option<InputRound>) -> Running {
        let (plugin, name, arguments) = (Arc::clone(&self.plugin), self.name.clone(), self.arguments.clone());
        let cx = CallContext { input, ..self.template.clone() };
        Box::pin(async move { plugin.call_tool(&name, arguments, cx).await })
    }
}

/// The most input rounds one task may ask for.
const MAX_TASK_ROUNDS: u64 = 16;

/// A task's call in the background: run it; when it asks for input, park the
/// task as `input_required` with the requests (keyed `r{round}.{key}`, so a
/// key is never reused), wait for the client's answers (`tasks/update`, on
/// any replica, lands them in the store) and call again; record the end.
async fn run_task(
    tasks: Arc<Tasks>,
    catalog: Arc<crate::catalog::Catalog>,
    mut task: TaskRecord,
    call: TaskCall,
    mut running: Running,
    token: CancellationToken,
) {
    let bus = Arc::clone(catalog.bus());
    let mut round = 0;
    loop {
        let outcome = tokio::select! {
            // Cancellation first: a call that ends because it saw the
            // cancellation must not be recorded as its result.
            biased;
            // tasks/cancel (or shutdown) recorded the end already.
            () = token.cancelled() => break,
            outcome = &mut running => outcome,
        };
        let (requests, state) = match outcome {
            Ok(Outcome::InputRequired { requests, state }) if round < MAX_TASK_ROUNDS => (requests, state),
            outcome => {
                tasks.untrack(&task.id);
                let transition = task_end(&catalog.snapshot(), &call.name, outcome);
                record_task_end(&tasks, bus.as_ref(), &task, &transition).await;
                return;
            }
        };
        if let Some(missing) = requests
            .values()
            .filter_map(required_capability)
            .find(|needed| !needed.is_declared_in(&call.template.client_capabilities))
        {
            tasks.untrack(&task.id);
            let error = ErrorObject::missing_capability(missing.as_required());
            let transition = Transition {
                status: TaskStatus::Failed,
                status_message: None,
                result: None,
                error: Some(json!(error)),
            };
            record_task_end(&tasks, bus.as_ref(), &task, &transition).await;
            return;
        }
        round += 1;
        let pending: Map<String, Value> = requests.into_iter().map(|(key, r)| (format!("r{round}.{key}"), r)).collect();
        let input = json!({ "round": round, "pending": pending, "answered": {}, "state": state });
        let now = now_ms();
        match tasks.store.change_input(&task.id, task.version, TaskStatus::InputRequired, &input, now).await {
            Ok(true) => {
                task.status = TaskStatus::InputRequired;
                task.input = Some(input);
                task.version += 1;
                task.updated_at_ms = now;
                crate::tasks::announce(bus.as_ref(), &task, tasks.config.poll_interval).await;
            }
            // Cancelled meanwhile, or the store failed: the lease decides.
            Ok(false) | Err(_) => break,
        }
        let Some((answers, state, current)) = wait_for_answers(&tasks, &task.id, round, &token).await else { break };
        task = current;
        running = call.start(Some(InputRound { responses: answers, state }));
    }
    tasks.untrack(&task.id);
}

/// Polls the store until every input request of `round` is answered (then
/// the answers under the plugin's own keys, the plugin's state, and the
/// task), or the task ends or is cancelled (`None`).
async fn wait_for_answers(
    tasks: &Tasks,
    id: &str,
    round: u64,
    token: &CancellationToken,
) -> Option<(Map<String, Value>, Option<Value>, TaskRecord)> {
    let prefix = format!("r{round}.");
    loop {
        tokio::select! {
            () = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
            () = token.cancelled() => return None,
        }
        let task = match tasks.store.get(id).await {
            Ok(Some(task)) => task,
            Ok(None) => return None,
            Err(_) => continue,
        };
        if task.status.is_terminal() {
            return None;
        }
        let input = task.input.clone().unwrap_or_default();
        let complete = task.status == TaskStatus::Working
            && input["round"].as_u64() == Some(round)
            && input["pending"].as_object().is_none_or(Map::is_empty);
        if complete {
            let answers = input["answered"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(key, answer)| key.strip_prefix(&prefix).map(|k| (k.to_owned(), answer.clone())))
                .collect();
            let state = Some(input["state"].clone()).filter(|s| !s.is_null());
            return Some((answers, state, task));
        }
    }
}

/// How a task's call ended, as the task records it: a result (a tool error
/// is a result with `isError`, so `completed`), or a protocol-level error
/// (`failed`).
fn task_end(snapshot: &Snapshot, tool: &str, outcome: PluginResult<Outcome>) -> Transition {
    let checked = match (outcome, snapshot.tool(tool)) {
        (Ok(Outcome::Complete(result)), Some(entry)) => check_tool_result(entry, result),
        (Ok(Outcome::Complete(_)), None) => Err(Error::UnknownTool(tool.to_owned())),
        (Ok(Outcome::InputRequired { .. }), _) => Err(Error::Plugin {
            plugin: tool.to_owned(),
            source: PluginError::Internal("input requests during a task are not supported yet".into()),
        }),
        (Err(source), entry) => {
            Err(Error::Plugin { plugin: entry.map_or_else(|| tool.to_owned(), |e| e.plugin.id().to_owned()), source })
        }
    };
    let (status, result, error) = match checked {
        Ok(mut result) => {
            if let Value::Object(map) = &mut result {
                map.remove("resultType");
            }
            (TaskStatus::Completed, Some(result), None)
        }
        Err(error) => match error.delivery() {
            Delivery::ToolError(message) => (TaskStatus::Completed, Some(Delivery::tool_result(&message)), None),
            Delivery::Rpc(error) => (TaskStatus::Failed, None, Some(json!(error))),
        },
    };
    Transition { status, status_message: None, result, error }
}

/// Records a task's end, retrying a store that is briefly unavailable, and
/// announces it to listen streams.
async fn record_task_end(
    tasks: &Tasks,
    bus: &dyn switchyard_bus::NotificationBus,
    task: &TaskRecord,
    transition: &Transition,
) {
    let id = &task.id;
    let mut wait = std::time::Duration::from_millis(100);
    for attempt in 1..=6 {
        let now = now_ms();
        match tasks.store.transition(id, transition, now).await {
            Ok(true) => {
                return crate::tasks::announce(bus, &task.after(transition, now), tasks.config.poll_interval).await;
            }
            // Cancelled (or failed by a reader) first: that end stands.
            Ok(false) => return,
            Err(error) if attempt == 6 => {
                // No longer tracked, its lease is not renewed: readers fail it
                // when the lease runs out, so it does not stay `working`.
                tracing::error!(task = %id, %error, "could not record the end of a task; it fails when its lease runs out");
                return;
            }
            Err(error) => tracing::warn!(task = %id, %error, attempt, "could not record the end of a task; retrying"),
        }
        tokio::time::sleep(wait).await;
        wait *= 2;
    }
}

/// The most times a legacy client is asked for input within one request.
const MAX_LEGACY_ROUNDS: usize = 8;

/// Why a legacy client could not be asked.
enum LegacyAsk {
    /// The transport cannot stream requests to the client.
    Unavailable,
    /// The client answered with an error.
    Refused(String),
    /// No answer before the deadline.
    TimedOut,
}

/// Removes this request's pending input requests however the wait ends.
struct Unregister<'a> {
    pending: &'a PendingResponses,
    ids: Vec<RequestId>,
}

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        for id in &self.ids {
            pending.remove(id);
        }
    }
}

/// Answers awaited from legacy clients, by the id of the request we sent.
pub(crate) type PendingResponses =
    std::sync::Mutex<HashMap<RequestId, tokio::sync::oneshot::Sender<std::result::Result<Value, ErrorObject>>>>;

/// The client capability an embedded input request needs.
fn required_capability(request: &Value) -> Option<ClientCapability> {
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
