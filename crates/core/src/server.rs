//! [`Server`]: validates a request's era, `_meta` and version ([`Server::prepare`]),
//! then dispatches it by method ([`Server::execute`]).
//!
//! The split lets a transport slot its own checks between the two steps, as the
//! validation order of DIGEST §8.6 needs: HTTP checks its mirrored headers
//! after the version gate and before dispatch.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use switchyard_protocol::capabilities::ClientCapability;
use switchyard_protocol::meta::{META, SERVER_INFO};
use switchyard_protocol::method::input;
use switchyard_protocol::version::{self, Era};
use switchyard_protocol::{ErrorObject, Method, RequestId, RequestMeta};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::caching::CachePolicy;
use crate::catalog::{Catalog, HeaderParam, Snapshot};
use crate::error::{Delivery, Error};
use crate::listen::{Filter, ListenHub, ListenStream};
use crate::plugin::{
    CallContext, Caller, CompletionRef, InputRound, Notifier, Outcome, Plugin, PluginError, PluginResult,
};
use crate::state::{Binding, StateKey, StateSealer};
use crate::{cursor, legacy};

/// Most completion values returned at once (the spec's cap).
const MAX_COMPLETIONS: usize = 100;

/// What the data layer needs to know; composed into the binary's `Config`.
#[derive(Debug, Clone)]
pub struct Config {
    /// `serverInfo.name`.
    pub server_name: String,
    /// `serverInfo.version`.
    pub server_version: String,
    /// `instructions` in `server/discover` (and legacy `initialize`).
    pub instructions: Option<String>,
    /// Items per page of `*/list`. Default 100.
    pub page_size: usize,
    /// Caching of `server/discover`. Default 1 hour, public.
    pub discover_cache: CachePolicy,
    /// Caching of `resources/read` unless the plugin says otherwise. Default 60 s, public.
    pub read_cache: CachePolicy,
    /// How long a plugin call may run before the client gets a timeout. Default 60 s.
    pub call_timeout: Duration,
    /// Keys for sealing `requestState`; the first signs.
    pub state_keys: Vec<StateKey>,
    /// How long a sealed `requestState` stays valid. Default 10 minutes.
    pub state_lifetime: Duration,
}

/// A request that passed era, `_meta` and version validation.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The request id.
    pub id: RequestId,
    /// The method.
    pub method: Method,
    /// The parameters.
    pub params: Map<String, Value>,
    /// Modern or legacy.
    pub era: Era,
    /// The validated `_meta` (modern requests only).
    pub meta: Option<RequestMeta>,
    /// Who is calling.
    pub caller: Caller,
}

impl Prepared {
    /// Whether running this request may send anything before its result
    /// (progress, log messages, requests to a legacy client). When it cannot,
    /// a transport may skip the machinery for streaming.
    pub fn may_stream(&self) -> bool {
        match &self.meta {
            Some(meta) => meta.progress_token.is_some() || meta.log_level.is_some(),
            None => true,
        }
    }
}

/// What a request produced.
pub enum Execution {
    /// A result object (already carrying `resultType` and `_meta` as the era wants).
    Result(Value),
    /// A JSON-RPC error.
    Error(ErrorObject),
    /// A listen stream (`subscriptions/listen`).
    Listen(ListenStream),
}

impl std::fmt::Debug for Execution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Result(v) => f.debug_tuple("Result").field(v).finish(),
            Self::Error(e) => f.debug_tuple("Error").field(e).finish(),
            Self::Listen(_) => f.write_str("Listen"),
        }
    }
}

/// The MCP server: the catalog, the listen hub and the rules between them.
pub struct Server {
    catalog: Arc<Catalog>,
    hub: ListenHub,
    sealer: StateSealer,
    config: Config,
    server_info: Value,
    legacy_pending: PendingResponses,
}

impl Server {
    /// A server over `catalog`, feeding listen streams from `hub`.
    pub fn new(catalog: Arc<Catalog>, hub: ListenHub, config: Config) -> Self {
        let server_info = json!({ "name": config.server_name, "version": config.server_version });
        let sealer = StateSealer::new(config.state_keys.clone(), config.state_lifetime);
        Self { catalog, hub, sealer, config, server_info, legacy_pending: Default::default() }
    }

    /// Hands a legacy client's answer to the request that asked for it.
    /// Returns false when no request here is waiting for that id (it ended,
    /// or it runs on another replica: TODO(#5) carry answers over the bus).
    pub fn deliver_response(&self, id: &RequestId, outcome: std::result::Result<Value, ErrorObject>) -> bool {
        let waiting = self.legacy_pending.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
        waiting.is_some_and(|sender| sender.send(outcome).is_ok())
    }

    /// The catalog.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// The listen hub.
    pub fn listen_hub(&self) -> &ListenHub {
        &self.hub
    }

    /// The `x-mcp-header` arguments of a tool, for the HTTP header check.
    pub fn header_params(&self, tool: &str) -> Vec<HeaderParam> {
        self.catalog.snapshot().tool(tool).map(|t| t.header_params.clone()).unwrap_or_default()
    }

    /// Classifies the era and validates `_meta` and the protocol version.
    ///
    /// `modern_hint` is the transport's evidence that the client speaks the
    /// modern protocol even if `_meta` lacks the version (HTTP: a non-legacy
    /// `MCP-Protocol-Version` header), so that a modern request with a broken
    /// `_meta` gets `-32602` rather than legacy treatment.
    ///
    /// # Errors
    /// `-32602` for a missing or malformed `_meta`, `-32022` for a version we
    /// do not serve.
    pub fn prepare(
        &self,
        id: RequestId,
        method: &str,
        params: Map<String, Value>,
        modern_hint: bool,
        caller: Caller,
    ) -> Result<Prepared, ErrorObject> {
        let method = Method::parse(method);
        let claims_modern = RequestMeta::claimed_version(&params).is_some();
        if !claims_modern && !modern_hint {
            return Ok(Prepared { id, method, params, era: Era::Legacy, meta: None, caller });
        }
        let meta = RequestMeta::parse(&params)?;
        if switchyard_protocol::ProtocolVersion::parse_modern(&meta.protocol_version).is_none() {
            return Err(ErrorObject::unsupported_version(&version::MODERN, &meta.protocol_version));
        }
        Ok(Prepared { id, method, params, era: Era::Modern, meta: Some(meta), caller })
    }

    /// Runs a prepared request. `outbox`, when given, receives the request's
    /// own notifications (progress, log messages) while it runs; a transport
    /// that cannot stream passes `None` and they are dropped.
    ///
    /// Dropping the returned future cancels the request: the plugin's
    /// cancellation token fires.
    pub async fn execute(&self, request: Prepared, outbox: Option<mpsc::Sender<Value>>) -> Execution {
        let cancel = CancellationToken::new();
        let _cancel_on_drop = cancel.clone().drop_guard();
        let era = request.era;
        let method = request.method.clone();
        let outcome = match era {
            Era::Modern => self.dispatch_modern(request, outbox, cancel).await,
            Era::Legacy => self.dispatch_legacy(request, outbox, cancel).await,
        };
        match outcome {
            Ok(Dispatched::Listen(stream)) => Execution::Listen(stream),
            Ok(Dispatched::Result(result)) => Execution::Result(self.finish(result, era)),
            Err(error) => match error.delivery() {
                Delivery::Rpc(error) => Execution::Error(error),
                Delivery::ToolError(result) if method == Method::CallTool => {
                    Execution::Result(self.finish(result, era))
                }
                Delivery::ToolError(result) => {
                    // Only tools report failures in-band; elsewhere it is an internal error.
                    let text = result["content"][0]["text"].as_str().unwrap_or("Internal error").to_owned();
                    Execution::Error(ErrorObject::new(switchyard_protocol::error::INTERNAL_ERROR, text))
                }
            },
        }
    }

    async fn dispatch_modern(
        &self,
        mut request: Prepared,
        outbox: Option<mpsc::Sender<Value>>,
        cancel: CancellationToken,
    ) -> Result<Dispatched, Error> {
        let snapshot = self.catalog.snapshot();
        let mut meta = request.meta.take().ok_or_else(|| Error::InvalidParams("params._meta is required".into()))?;
        let notifier = match outbox {
            Some(outbox) => Notifier::new(outbox, meta.progress_token.take(), meta.log_level),
            None => Notifier::default(),
        };
        let capabilities = Arc::new(std::mem::take(&mut meta.client_capabilities));
        let call = Call { server: self, request: &request, snapshot: &snapshot, notifier, capabilities, cancel };
        let result = match &request.method {
            Method::Discover => self.discover(),
            Method::ListTools => {
                self.list(&request.params, &snapshot.tools, |t| &t.name, |t| &t.definition, "tools", &snapshot)?
            }
            Method::ListPrompts => {
                self.list(&request.params, &snapshot.prompts, |p| &p.name, |p| &p.definition, "prompts", &snapshot)?
            }
            Method::ListResources => {
                self.list(&request.params, &snapshot.resources, |r| &r.key, |r| &r.definition, "resources", &snapshot)?
            }
            Method::ListResourceTemplates => self.list(
                &request.params,
                &snapshot.templates,
                |r| &r.key,
                |r| &r.definition,
                "resourceTemplates",
                &snapshot,
            )?,
            Method::CallTool => call.call_tool().await?,
            Method::ReadResource => call.read_resource().await?,
            Method::GetPrompt => call.get_prompt().await?,
            Method::Complete => call.complete().await?,
            Method::Listen => return self.listen(&request, &call.capabilities).map(Dispatched::Listen),
            Method::GetTask | Method::UpdateTask | Method::CancelTask => {
                if !ClientCapability::Tasks.is_declared_in(&call.capabilities) {
                    return Err(ErrorObject::missing_capability(ClientCapability::Tasks.as_required()).into());
                }
                // TODO(#5): the Tasks extension; until then it is not advertised.
                return Err(ErrorObject::method_not_found(request.method.as_str()).into());
            }
            Method::Initialize
            | Method::Ping
            | Method::SetLogLevel
            | Method::Subscribe
            | Method::Unsubscribe
            | Method::Unknown(_) => {
                return Err(ErrorObject::method_not_found(request.method.as_str()).into());
            }
        };
        Ok(Dispatched::Result(result))
    }

    async fn dispatch_legacy(
        &self,
        request: Prepared,
        outbox: Option<mpsc::Sender<Value>>,
        cancel: CancellationToken,
    ) -> Result<Dispatched, Error> {
        let snapshot = self.catalog.snapshot();
        let progress_token = request.params.get(META).and_then(|m| m.get("progressToken")).cloned();
        let notifier = match outbox {
            Some(outbox) => Notifier::new(outbox, progress_token, Some(legacy::LOG_THRESHOLD)),
            None => Notifier::default(),
        };
        // Legacy clients declared their capabilities in `initialize`, which we
        // did not keep; assume none, so no input request is ever sent to them.
        let capabilities = Arc::new(Map::new());
        let call = Call { server: self, request: &request, snapshot: &snapshot, notifier, capabilities, cancel };
        let result = match &request.method {
            Method::Initialize => {
                legacy::initialize_result(&request.params, &self.server_info, self.config.instructions.as_deref())
            }
            Method::Ping | Method::SetLogLevel | Method::Subscribe | Method::Unsubscribe => json!({}),
            Method::ListTools => {
                self.list(&request.params, &snapshot.tools, |t| &t.name, |t| &t.definition, "tools", &snapshot)?
            }
            Method::ListPrompts => {
                self.list(&request.params, &snapshot.prompts, |p| &p.name, |p| &p.definition, "prompts", &snapshot)?
            }
            Method::ListResources => {
                self.list(&request.params, &snapshot.resources, |r| &r.key, |r| &r.definition, "resources", &snapshot)?
            }
            Method::ListResourceTemplates => self.list(
                &request.params,
                &snapshot.templates,
                |r| &r.key,
                |r| &r.definition,
                "resourceTemplates",
                &snapshot,
            )?,
            Method::CallTool => call.call_tool().await?,
            Method::ReadResource => call.read_resource().await?,
            Method::GetPrompt => call.get_prompt().await?,
            Method::Complete => call.complete().await?,
            _ => return Err(ErrorObject::method_not_found(request.method.as_str()).into()),
        };
        Ok(Dispatched::Result(result))
    }

    /// Adds `resultType` and `serverInfo` (modern), or strips modern members (legacy).
    fn finish(&self, mut result: Value, era: Era) -> Value {
        match era {
            Era::Modern => {
                if let Value::Object(map) = &mut result {
                    map.entry("resultType").or_insert_with(|| json!("complete"));
                    let meta = map.entry(META).or_insert_with(|| json!({}));
                    if let Value::Object(meta) = meta {
                        meta.insert(SERVER_INFO.into(), self.server_info.clone());
                    }
                }
            }
            Era::Legacy => legacy::shape_result(&mut result),
        }
        result
    }

    fn discover(&self) -> Value {
        let mut result = json!({
            "supportedVersions": version::MODERN,
            "capabilities": {
                "tools": { "listChanged": true },
                "resources": { "subscribe": true, "listChanged": true },
                "prompts": { "listChanged": true },
                "completions": {},
                "logging": {},
            },
        });
        if let Some(instructions) = &self.config.instructions {
            result["instructions"] = json!(instructions);
        }
        self.cached(result, self.config.discover_cache)
    }

    fn cached(&self, mut result: Value, policy: CachePolicy) -> Value {
        if let Value::Object(map) = &mut result {
            policy.apply(map);
        }
        result
    }

    #[allow(clippy::too_many_arguments)]
    fn list<T>(
        &self,
        params: &Map<String, Value>,
        items: &[T],
        key: impl Fn(&T) -> &String,
        definition: impl Fn(&T) -> &Value,
        member: &str,
        snapshot: &Snapshot,
    ) -> Result<Value, Error> {
        let after = match params.get("cursor") {
            None | Some(Value::Null) => None,
            Some(Value::String(cursor)) => {
                cursor::decode(cursor).map_err(|()| Error::InvalidParams("Invalid cursor".into()))?
            }
            Some(_) => return Err(Error::InvalidParams("cursor must be a string".into())),
        };
        let (page, next) = cursor::page(items, |t| key(t).as_str(), after.as_deref(), self.config.page_size);
        let mut result = json!({ member: page.iter().map(|t| definition(t).clone()).collect::<Vec<_>>() });
        if let Some(next) = next {
            result["nextCursor"] = json!(next);
        }
        Ok(self.cached(result, snapshot.list_policy))
    }

    fn listen(&self, request: &Prepared, capabilities: &Map<String, Value>) -> Result<ListenStream, Error> {
        let notifications = match request.params.get("notifications") {
            Some(Value::Object(n)) => n,
            _ => {
                return Err(Error::InvalidParams(
                    "params.notifications (a SubscriptionFilter object) is required".into(),
                ));
            }
        };
        let flag = |key: &str| -> Result<bool, Error> {
            match notifications.get(key) {
                None => Ok(false),
                Some(Value::Bool(b)) => Ok(*b),
                Some(_) => Err(Error::InvalidParams(format!("notifications.{key} must be a boolean"))),
            }
        };
        let resource_uris = match notifications.get("resourceSubscriptions") {
            None => Vec::new(),
            Some(Value::Array(uris)) => uris
                .iter()
                .map(|u| u.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| Error::InvalidParams("notifications.resourceSubscriptions must be strings".into()))?,
            Some(_) => return Err(Error::InvalidParams("notifications.resourceSubscriptions must be an array".into())),
        };
        if notifications.contains_key("taskIds") && !ClientCapability::Tasks.is_declared_in(capabilities) {
            return Err(ErrorObject::missing_capability(ClientCapability::Tasks.as_required()).into());
        }
        // `taskIds` is left out of the acknowledgement: tasks are not served yet (#5).
        let filter = Filter {
            tools: flag("toolsListChanged")?,
            prompts: flag("promptsListChanged")?,
            resources: flag("resourcesListChanged")?,
            resource_uris,
        };
        Ok(self.hub.open(request.id.to_value(), filter))
    }
}

enum Dispatched {
    Result(Value),
    Listen(ListenStream),
}

/// One call into a plugin, with everything the MRTR and context plumbing needs.
struct Call<'a> {
    server: &'a Server,
    request: &'a Prepared,
    snapshot: &'a Snapshot,
    notifier: Notifier,
    capabilities: Arc<Map<String, Value>>,
    cancel: CancellationToken,
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

    async fn call_tool(&self) -> Result<Value, Error> {
        let name = self.string_param("name")?;
        let empty = Value::Object(Map::new());
        let arguments = match self.request.params.get("arguments") {
            None | Some(Value::Null) => &empty,
            Some(arguments @ Value::Object(_)) => arguments,
            Some(_) => return Err(Error::InvalidParams("params.arguments must be an object".into())),
        };
        let tool = self.snapshot.tool(name).ok_or_else(|| Error::UnknownTool(name.to_owned()))?;
        tool.input_schema
            .validate(arguments)
            .map_err(|problems| Error::InvalidArguments { tool: name.to_owned(), problems })?;
        let arguments = arguments.as_object().cloned().unwrap_or_default();
        let result = self.run(&tool.plugin, name, |plugin, cx| plugin.call_tool(name, arguments.clone(), cx)).await?;
        let Value::Object(map) = &result else {
            return Err(Error::InvalidOutput {
                tool: name.to_owned(),
                problems: vec!["result is not an object".into()],
            });
        };
        if map.get("resultType").is_some_and(|t| t != "complete") {
            return Ok(result); // input_required
        }
        if !map.get("content").is_some_and(Value::is_array) {
            return Err(Error::InvalidOutput { tool: name.to_owned(), problems: vec!["content is missing".into()] });
        }
        let is_error = map.get("isError").and_then(Value::as_bool) == Some(true);
        if let (Some(schema), false) = (&tool.output_schema, is_error) {
            let structured = map.get("structuredContent").ok_or_else(|| Error::InvalidOutput {
                tool: name.to_owned(),
                problems: vec!["structuredContent is missing".into()],
            })?;
            schema.validate(structured).map_err(|problems| Error::InvalidOutput { tool: name.to_owned(), problems })?;
        }
        Ok(result)
    }

    async fn read_resource(&self) -> Result<Value, Error> {
        let uri = self.string_param("uri")?;
        let owner = self
            .snapshot
            .resource(uri)
            .or_else(|| self.snapshot.template_for(uri))
            .ok_or_else(|| Error::ResourceNotFound(uri.to_owned()))?;
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
        Ok(self.server.cached(result, policy))
    }

    async fn get_prompt(&self) -> Result<Value, Error> {
        let name = self.string_param("name")?;
        let arguments = self.object_param("arguments")?;
        if let Some((key, _)) = arguments.iter().find(|(_, v)| !v.is_string()) {
            return Err(Error::InvalidParams(format!("prompt argument {key} must be a string")));
        }
        let prompt = self.snapshot.prompt(name).ok_or_else(|| Error::UnknownPrompt(name.to_owned()))?;
        let missing: Vec<&str> =
            prompt.required_arguments.iter().filter(|a| !arguments.contains_key(*a)).map(String::as_str).collect();
        if !missing.is_empty() {
            return Err(Error::InvalidParams(format!("prompt {name} requires argument(s): {}", missing.join(", "))));
        }
        self.run(&prompt.plugin, name, |plugin, cx| plugin.get_prompt(name, arguments.clone(), cx)).await
    }

    async fn complete(&self) -> Result<Value, Error> {
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
                let plugin = self
                    .snapshot
                    .prompt(&name)
                    .map(|p| Arc::clone(&p.plugin))
                    .ok_or_else(|| Error::UnknownPrompt(name.clone()))?;
                (CompletionRef::Prompt(name), plugin)
            }
            Some("ref/resource") => {
                let uri = text(reference.get("uri"), "ref.uri")?;
                let owner =
                    self.snapshot.templates.iter().find(|t| t.key == uri).or_else(|| self.snapshot.resource(&uri));
                let plugin =
                    owner.map(|o| Arc::clone(&o.plugin)).ok_or_else(|| Error::ResourceNotFound(uri.clone()))?;
                (CompletionRef::Resource(uri), plugin)
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
        let mut input = self.input_round(binding)?;
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
            let mut running = call(plugin.as_ref(), cx);
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
                for input_request in requests.values() {
                    let needed = required_capability(input_request).ok_or_else(|| {
                        plugin_error(PluginError::Internal(format!("malformed input request: {input_request}").into()))
                    })?;
                    if !needed.is_declared_in(&self.capabilities) {
                        return Err(ErrorObject::missing_capability(needed.as_required()).into());
                    }
                }
                let sealed = self.server.sealer.seal(binding, state);
                return Ok(
                    json!({ "resultType": "input_required", "inputRequests": requests, "requestState": sealed }),
                );
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
        let registered =
            Unregister { pending, ids: requests.keys().map(|_| RequestId::String(legacy::request_id())).collect() };
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

    /// Reads `inputResponses` and opens `requestState` on a retry.
    fn input_round(&self, binding: Binding<'_>) -> Result<Option<InputRound>, Error> {
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
            Some(Value::String(sealed)) => Some(self.server.sealer.open(sealed, binding).map_err(Error::RequestState)?),
            Some(_) => return Err(Error::InvalidParams("requestState must be a string".into())),
        };
        Ok(match (responses, state) {
            (None, None) => None,
            (responses, state) => Some(InputRound { responses: responses.unwrap_or_default(), state: state.flatten() }),
        })
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
type PendingResponses =
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
