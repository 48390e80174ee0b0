//! [`Server`]: validates a request's era, `_meta` and version ([`Server::prepare`]),
//! then dispatches it by method ([`Server::execute`]).
//!
//! The split lets a transport slot its own checks between the two steps, as the
//! validation order of DIGEST §8.6 needs: HTTP checks its mirrored headers
//! after the version gate and before dispatch.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};
use switchyard_bus::marks::{LocalMarks, Marks};
use switchyard_bus::{Delivery as BusDelivery, Event};
use switchyard_protocol::capabilities::ClientCapability;
use switchyard_protocol::meta::META;
use switchyard_protocol::params::Retry;
use switchyard_protocol::version::{self, Era};
use switchyard_protocol::{
    ErrorObject, Finished, Method, ModernCall, Params, Produced, RequestId, RequestMeta, ServerStamp,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::caching::{CachePolicy, CacheScope};
use crate::call::{Call, CallDeps};
use crate::cancellation::Cancellation;
use crate::catalog::{Catalog, Snapshot};
use crate::error::{Delivery, Error};
pub use crate::legacy::Delivered;
use crate::legacy::{self, Relay};
use crate::listen::{ListenHub, ListenStream, ReadScopes};
use crate::plugin::Notifier;
use crate::policy::{Caller, Policy};
use crate::request::{Answer, Execution, Prepared};
use crate::state::{StateKey, StateSealer};
use crate::tasks::{self, Tasks};
use crate::telemetry;

mod listen;
mod lists;

/// Uses of `requestState` one process remembers (each until its state expires).
const LOCAL_STATE_MARKS: u64 = 1_000_000;

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
    /// A `requestState` that comes back with input answers opens once
    /// (marked in [`Server::with_state_marks`], in process by default).
    pub state_single_use: bool,
    /// Scopes items need beyond what their plugins declare.
    pub policy: Policy,
}

impl Default for Config {
    /// The defaults each field names, and one random state key of this
    /// process's own: replicas that share work must be given the same keys.
    fn default() -> Self {
        Self {
            server_name: "switchyard".into(),
            server_version: env!("CARGO_PKG_VERSION").into(),
            instructions: None,
            page_size: 100,
            discover_cache: CachePolicy::new(Duration::from_secs(3600), CacheScope::Public),
            read_cache: CachePolicy::new(Duration::from_secs(60), CacheScope::Public),
            call_timeout: Duration::from_secs(60),
            state_keys: vec![StateKey { id: "ephemeral".into(), secret: rand::random::<[u8; 32]>().to_vec().into() }],
            state_lifetime: Duration::from_secs(600),
            state_single_use: true,
            policy: Policy::default(),
        }
    }
}

/// The MCP server: the catalog, the listen hub and the rules between them.
pub struct Server {
    catalog: Arc<Catalog>,
    hub: ListenHub,
    sealer: StateSealer,
    config: Config,
    /// `resultType` and `_meta.serverInfo`, the members every modern result
    /// gets, written as text once.
    stamp: Arc<ServerStamp>,
    /// Legacy clients' answers: to the calls waiting here, or relayed to
    /// the replica that holds them. It names this process: in the input
    /// request ids it mints, and as the owner of the tasks it runs.
    relay: Relay,
    /// The Tasks extension, when a task store is configured.
    tasks: Option<Arc<Tasks>>,
    /// Where the uses of `requestState` are marked.
    state_marks: Arc<dyn Marks>,
}

impl Server {
    /// A server over `catalog`, feeding listen streams from `hub`.
    pub fn new(catalog: Arc<Catalog>, hub: ListenHub, config: Config) -> Self {
        let stamp = Arc::new(ServerStamp::new(json!({ "name": config.server_name, "version": config.server_version })));
        let sealer = StateSealer::new(config.state_keys.clone(), config.state_lifetime);
        let relay = Relay::new(format!("{:016x}", rand::random::<u64>()));
        hub.gate_reads(Arc::new(CatalogReads { catalog: Arc::downgrade(&catalog), policy: config.policy.clone() }));
        catalog.deliver_updates_to(hub.clone());
        Self {
            catalog,
            hub,
            sealer,
            config,
            stamp,
            relay,
            tasks: None,
            state_marks: Arc::new(LocalMarks::new(LOCAL_STATE_MARKS)),
        }
    }

    /// Marks the uses of `requestState` in `marks` (Redis, when replicas
    /// share the work) instead of this process's memory.
    #[must_use]
    pub fn with_state_marks(mut self, marks: Arc<dyn Marks>) -> Self {
        self.state_marks = marks;
        self
    }

    /// Serves the Tasks extension with `tasks`: advertised in
    /// `server/discover`, and task-capable tools run as tasks for clients
    /// that declare it.
    #[must_use]
    pub fn with_tasks(mut self, tasks: Arc<Tasks>) -> Self {
        self.tasks = Some(tasks);
        self
    }

    /// At shutdown: lets the tasks running here finish within `grace`, then
    /// stops the rest and fails them with a message saying why, so no client
    /// waits for a lease to run out.
    pub async fn end_tasks(&self, grace: Duration) {
        if let Some(tasks) = &self.tasks {
            tasks.end_all(grace, self.catalog.bus().as_ref()).await;
        }
    }

    /// This replica's name (the owner recorded on the tasks it runs).
    pub fn replica(&self) -> &str {
        self.relay.replica()
    }

    /// Hands a legacy client's answer, from `principal`, to the request that
    /// asked for it: here, or over the bus to the replica whose id it
    /// carries. An id we did not mint, or minted for another caller, goes
    /// nowhere, and neither does a second answer to an id already relayed.
    pub async fn deliver_response(
        &self,
        id: &RequestId,
        outcome: std::result::Result<Value, ErrorObject>,
        principal: Option<&str>,
    ) -> Delivered {
        self.relay.deliver(&self.sealer, self.catalog.bus().as_ref(), id, outcome, principal).await
    }

    /// Delivers answers that other replicas relay to calls waiting here, and
    /// stops tasks cancelled elsewhere that run here, until `shutdown`.
    pub fn spawn_answer_relay(self: &Arc<Self>, shutdown: CancellationToken) {
        let mut subscription = self.catalog.bus().subscribe();
        let server = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                let delivery = tokio::select! {
                    () = shutdown.cancelled() => return,
                    delivery = subscription.recv() => delivery,
                };
                let Some(server) = server.upgrade() else { return };
                match delivery {
                    Some(BusDelivery::Event(Event::RelayedAnswer { replica, id, response })) => {
                        server.relay.receive(&replica, id, &response);
                    }
                    // A task cancelled through another replica: stop it if it runs here.
                    Some(BusDelivery::Event(Event::TaskCancelled { id })) => {
                        if let Some(tasks) = &server.tasks {
                            tasks.stop(&id);
                        }
                    }
                    Some(_) => {}
                    None => return,
                }
            }
        });
    }

    /// The catalog.
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// The listen hub.
    pub fn listen_hub(&self) -> &ListenHub {
        &self.hub
    }

    /// Every scope some item of the current catalog needs: what the protected
    /// resource metadata announces in `scopes_supported`.
    pub fn scopes_in_use(&self) -> std::collections::BTreeSet<String> {
        let snapshot = self.catalog.snapshot();
        let policy = &self.config.policy;
        let tools = snapshot.tools.iter().flat_map(|t| policy.needed_by(t));
        let prompts = snapshot.prompts.iter().flat_map(|p| policy.needed_by(p));
        let resources = snapshot.resources.iter().chain(&snapshot.templates).flat_map(|r| policy.needed_by(r));
        tools.chain(prompts).chain(resources).collect()
    }

    /// What the rate limiter counts a request for `method` naming `name`
    /// against: the tool, prompt or resource when the catalog has it, else
    /// the method (unknown methods all as `other`). So the keys form a set
    /// the operator bounds (methods times catalog items), and a name the
    /// catalog does not know (a fresh random one per request, say) opens no
    /// budget of its own.
    pub fn limit_target<'a>(&self, method: &'a str, name: Option<&'a str>) -> &'a str {
        let method = Method::parse(method);
        let known = name.filter(|name| {
            let snapshot = self.catalog.snapshot();
            match method {
                Method::CallTool => snapshot.tool(name).is_some(),
                Method::GetPrompt => snapshot.prompt(name).is_some(),
                Method::ReadResource => snapshot.resource(name).is_some(),
                _ => false,
            }
        });
        known.unwrap_or_else(|| method.label())
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
        mut params: Map<String, Value>,
        modern_hint: bool,
        caller: Caller,
    ) -> Result<Prepared, ErrorObject> {
        self.admit(&caller)?;
        let method = Method::parse(method);
        let snapshot = self.catalog.snapshot();
        let claims_modern = RequestMeta::claimed_version(&params).is_some();
        if !claims_modern && !modern_hint {
            let typed = Params::take(&method, &mut params);
            return Ok(Prepared {
                id,
                method,
                params: typed,
                rest: params,
                era: Era::Legacy,
                meta: None,
                caller,
                snapshot,
            });
        }
        let meta = RequestMeta::take(&mut params)?;
        served_version(&meta)?;
        let typed = Params::take(&method, &mut params);
        Ok(Prepared { id, method, params: typed, rest: params, era: Era::Modern, meta: Some(meta), caller, snapshot })
    }

    /// [`Server::prepare`] for a modern `tools/call` already read typed: the
    /// same checks, without a map of its parameters to take apart.
    ///
    /// # Errors
    /// As `prepare`: `-32603` for an unverified caller where authorization
    /// is on, `-32022` for a version we do not serve.
    pub fn prepare_call(&self, call: ModernCall, caller: Caller) -> Result<Prepared, ErrorObject> {
        self.admit(&caller)?;
        let ModernCall { id, name, arguments, meta } = call;
        served_version(&meta)?;
        let params = Ok(Params::CallTool { name, arguments, retry: Retry::default() });
        let snapshot = self.catalog.snapshot();
        let (method, rest, era, meta) = (Method::CallTool, Map::new(), Era::Modern, Some(meta));
        Ok(Prepared { id, method, params, rest, era, meta, caller, snapshot })
    }

    /// Refuses an unverified caller where authorization is on. Only a
    /// misassembled server gets one (a route without the auth layer): refuse
    /// rather than serve it everything.
    fn admit(&self, caller: &Caller) -> Result<(), ErrorObject> {
        if self.config.policy.authenticated_only && !caller.is_scoped() {
            tracing::error!("a request reached the server without a verified caller; refused");
            return Err(ErrorObject::new(
                switchyard_protocol::error::INTERNAL_ERROR,
                "This server requires authorization, and the request arrived without a verified caller",
            ));
        }
        Ok(())
    }

    /// Runs a prepared request. `outbox`, when given, receives the request's
    /// own notifications (progress, log messages) while it runs; a transport
    /// that cannot stream passes `None` and they are dropped.
    ///
    /// Dropping the returned future cancels the request: the plugin's
    /// cancellation token fires.
    ///
    /// The request's span starts when this is called: a future dropped
    /// before its first poll ends the span without a status or a duration.
    ///
    /// Not an `async fn`, nor is `execute_in_span`: an `async fn` keeps each
    /// argument twice in its future (as passed, and as the local its body
    /// moves it into), and a `Prepared` is 456 bytes. Here the request goes
    /// straight into the boxed future, and the future returned holds the
    /// box, the spans and the clock: 168 bytes where it was 1,048 (#18:
    /// `cargo rustc --release -p switchyard-core --lib -- -Zprint-type-sizes`,
    /// under `RUSTC_BOOTSTRAP=1`, gives every future's layout).
    pub fn execute(
        &self,
        request: Prepared,
        outbox: Option<mpsc::Sender<Value>>,
    ) -> impl Future<Output = Execution> + Send + '_ {
        let (span, durations) = telemetry::mcp_span(&request);
        let started = std::time::Instant::now();
        // The request's future is kilobytes (1,752 bytes): on the heap, it is
        // written once, where inline it was copied with each future that
        // moved it (the span's wrapper, and the endpoint's, as axum boxes
        // it), about 2,500 instructions of `memcpy` a `tools/call` when it
        // was made so (callgrind).
        let running = Box::pin(self.execute_in_span(request, outbox)).instrument(span.clone());
        async move {
            let execution = running.await;
            let error = match &execution {
                Execution::Error { error, .. } => Some(i64::from(error.code)),
                _ => None,
            };
            telemetry::finish_span(&span, &execution);
            match execution {
                // The span lasts as long as the stream (STYLE.md: one span per listen stream).
                Execution::Listen(stream) => Execution::Listen(stream.in_span(span)),
                execution => {
                    durations.record(error, started.elapsed());
                    execution
                }
            }
        }
    }

    #[allow(clippy::manual_async_fn, reason = "an `async fn` would keep `request` twice (see `execute`)")]
    fn execute_in_span(
        &self,
        mut request: Prepared,
        outbox: Option<mpsc::Sender<Value>>,
    ) -> impl Future<Output = Execution> + Send + '_ {
        async move {
            let cancel = Cancellation::default();
            let _cancel_on_drop = cancel.on_drop();
            let era = request.era;
            let method = request.method.clone();
            // Only a modern first round may be reused: a retry's answer is for
            // that retry alone, and a legacy result carries no caching hints.
            let reusable = era == Era::Modern && !request.is_retry();
            let outcome = match era {
                Era::Modern => self.dispatch_modern(&mut request, outbox, cancel).await,
                Era::Legacy => self.dispatch_legacy(&request, outbox, cancel).await,
            };
            match outcome {
                Ok(Dispatched::Listen(stream)) => Execution::Listen(stream),
                Ok(Dispatched::Result(Answer { result, cache })) => {
                    Execution::Result { result: self.finish(result, era), cache: cache.filter(|_| reusable) }
                }
                // The one place a request's error becomes its answer: logged here.
                Err(error) => {
                    error.log_internal();
                    let refusal = error.refusal();
                    match error.delivery() {
                        Delivery::Rpc(error) => Execution::Error { error, refusal },
                        Delivery::ToolError(message) if method == Method::CallTool => {
                            Execution::result(self.finish(Delivery::tool_result(&message), era))
                        }
                        // Only tools report failures in-band; elsewhere it is an internal error.
                        Delivery::ToolError(message) => {
                            Execution::error(ErrorObject::new(switchyard_protocol::error::INTERNAL_ERROR, message))
                        }
                    }
                }
            }
        }
    }

    /// A modern request, borrowed from [`Server::execute_in_span`]'s future
    /// (moved, it would be kept there and here).
    async fn dispatch_modern(
        &self,
        request: &mut Prepared,
        outbox: Option<mpsc::Sender<Value>>,
        cancel: Cancellation,
    ) -> Result<Dispatched, Error> {
        let snapshot = Arc::clone(&request.snapshot);
        // `prepare` makes every modern request with its `_meta`.
        let mut meta = request.meta.take().ok_or_else(|| Error::Protocol(ErrorObject::internal()))?;
        let notifier = match outbox {
            Some(outbox) => Notifier::new(outbox, meta.progress_token.take(), meta.log_level),
            None => Notifier::default(),
        };
        let capabilities = Arc::new(std::mem::take(&mut meta.client_capabilities));
        if serves_alike(&request.method) {
            let shared = self.dispatch_shared(request, &snapshot, notifier, &capabilities, cancel).await;
            return shared.map(Dispatched::Result);
        }
        let result = match &request.method {
            Method::Discover => return Ok(Dispatched::Result(self.discover())),
            Method::Listen => {
                let Params::Listen(filter) = request.typed()? else { return Err(not_its_params(request)) };
                // Boxed, as the tasks' requests below: inline, these rarer
                // futures would make every tool call's larger.
                return Box::pin(self.listen(request, filter, &capabilities)).await.map(Dispatched::Listen);
            }
            Method::GetTask | Method::UpdateTask | Method::CancelTask => {
                let Some(tasks) = &self.tasks else {
                    return Err(ErrorObject::method_not_found(request.method.as_str()).into());
                };
                if !ClientCapability::Tasks.is_declared_in(&capabilities) {
                    return Err(ErrorObject::missing_capability(ClientCapability::Tasks.as_required()).into());
                }
                let params = request.typed()?;
                let (Params::Task { task_id } | Params::UpdateTask { task_id, .. }) = params else {
                    return Err(not_its_params(request));
                };
                if tasks::is_relayed(task_id) {
                    // A task an upstream keeps: its plugin answers.
                    let (request, snapshot, notifier) = (&*request, &snapshot, Notifier::default());
                    let call =
                        Call { deps: self.call_deps(), request, params, snapshot, notifier, capabilities, cancel };
                    call.relayed_task().await?
                } else {
                    let bus = self.catalog.bus().as_ref();
                    Box::pin(tasks.serve(&request.method, params, &request.caller, bus, self.relay.replica())).await?
                }
            }
            _ => return Err(ErrorObject::method_not_found(request.method.as_str()).into()),
        };
        Ok(Dispatched::Result(result.into()))
    }

    async fn dispatch_legacy(
        &self,
        request: &Prepared,
        outbox: Option<mpsc::Sender<Value>>,
        cancel: Cancellation,
    ) -> Result<Dispatched, Error> {
        let snapshot = Arc::clone(&request.snapshot);
        let progress_token = request.rest.get(META).and_then(|m| m.get("progressToken")).cloned();
        let notifier = match outbox {
            Some(outbox) => Notifier::new(outbox, progress_token, Some(legacy::LOG_THRESHOLD)),
            None => Notifier::default(),
        };
        // Legacy clients declared their capabilities in `initialize`, which we
        // did not keep: none are assumed, and a tool that needs input asks the
        // client over the response stream (see `legacy`).
        let capabilities = Arc::new(Map::new());
        if serves_alike(&request.method) {
            let shared = self.dispatch_shared(request, &snapshot, notifier, &capabilities, cancel).await;
            return shared.map(Dispatched::Result);
        }
        // A method the legacy era does not serve is unknown before its
        // parameters are looked at.
        let result = match (&request.method, request.typed()) {
            (Method::Initialize, params) => {
                let protocol_version = match params? {
                    Params::Initialize { protocol_version } => protocol_version.as_deref(),
                    _ => None,
                };
                legacy::initialize_result(
                    protocol_version,
                    self.stamp.server_info(),
                    self.config.instructions.as_deref(),
                )
            }
            (Method::Ping | Method::SetLogLevel | Method::Subscribe | Method::Unsubscribe, _) => json!({}),
            _ => return Err(ErrorObject::method_not_found(request.method.as_str()).into()),
        };
        Ok(Dispatched::Result(result.into()))
    }

    /// The methods both eras serve alike ([`serves_alike`]): the lists,
    /// and the calls into plugins.
    async fn dispatch_shared(
        &self,
        request: &Prepared,
        snapshot: &Snapshot,
        notifier: Notifier,
        capabilities: &Arc<Map<String, Value>>,
        cancel: Cancellation,
    ) -> Result<Answer, Error> {
        let params = request.typed()?;
        let caller = &request.caller;
        let capabilities = Arc::clone(capabilities);
        let call = Call { deps: self.call_deps(), request, params, snapshot, notifier, capabilities, cancel };
        match (&request.method, params) {
            (Method::ListTools, Params::List { cursor }) => {
                self.list(cursor, caller, &snapshot.tools, "tools", snapshot)
            }
            (Method::ListPrompts, Params::List { cursor }) => {
                self.list(cursor, caller, &snapshot.prompts, "prompts", snapshot)
            }
            (Method::ListResources, Params::List { cursor }) => {
                self.list(cursor, caller, &snapshot.resources, "resources", snapshot)
            }
            (Method::ListResourceTemplates, Params::List { cursor }) => {
                self.list(cursor, caller, &snapshot.templates, "resourceTemplates", snapshot)
            }
            (_, Params::CallTool { name, arguments, .. }) => {
                call.call_tool(name, arguments.as_ref()).await.map(Answer::from)
            }
            (_, Params::ReadResource { uri, .. }) => call.read_resource(uri).await,
            (_, Params::GetPrompt { name, arguments, .. }) => {
                call.get_prompt(name, arguments.as_ref()).await.map(Answer::from)
            }
            (_, Params::Complete { reference, argument, value, context }) => {
                call.complete(reference, argument, value, context).await.map(Answer::from)
            }
            _ => Err(not_its_params(request)),
        }
    }

    /// Adds `resultType` and `serverInfo` (modern), or strips modern members (legacy).
    fn finish(&self, result: impl Into<Produced>, era: Era) -> Finished {
        match (era, result.into()) {
            (Era::Modern, result) => Finished::stamped(result, &self.stamp),
            (Era::Legacy, Produced::Value(mut result)) => {
                legacy::shape_result(&mut result);
                Finished::plain(result)
            }
            // Text has none of the modern members.
            (Era::Legacy, text @ Produced::ToolText(_)) => Finished::plain(text),
        }
    }

    fn discover(&self) -> Answer {
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
        if self.tasks.is_some() {
            let mut extensions = Map::new();
            extensions.insert(switchyard_protocol::capabilities::TASKS_EXTENSION.into(), json!({}));
            result["capabilities"]["extensions"] = Value::Object(extensions);
        }
        Answer::cached(result, self.config.discover_cache)
    }

    /// What a call may use of this server, and nothing more.
    fn call_deps(&self) -> CallDeps<'_> {
        CallDeps {
            config: &self.config,
            catalog: &self.catalog,
            sealer: &self.sealer,
            state_marks: self.state_marks.as_ref(),
            tasks: self.tasks.as_ref(),
            relay: &self.relay,
        }
    }
}

/// Who may hear a `resources/updated`: what a `resources/read` of the URI
/// would need, from the catalog of the moment and the scope policy.
struct CatalogReads {
    /// Weak: the catalog holds the hub (to deliver plugins' updates to it),
    /// and the hub holds this.
    catalog: std::sync::Weak<Catalog>,
    policy: Policy,
}

impl ReadScopes for CatalogReads {
    fn needed(&self, uri: &str) -> Option<Vec<String>> {
        Some(self.policy.needed_by(self.catalog.upgrade()?.snapshot().serving(uri)?))
    }
}

/// Whether both eras serve `method` alike: the lists, and the calls into plugins.
fn serves_alike(method: &Method) -> bool {
    matches!(
        method,
        Method::ListTools
            | Method::ListPrompts
            | Method::ListResources
            | Method::ListResourceTemplates
            | Method::CallTool
            | Method::ReadResource
            | Method::GetPrompt
            | Method::Complete
    )
}

/// A request whose parameters are not those of its method: only a
/// mismatched `Params::take` could make one.
fn not_its_params(request: &Prepared) -> Error {
    Error::Protocol(ErrorObject::internal().with_data(json!({ "method": request.method.as_str() })))
}

enum Dispatched {
    Result(Answer),
    Listen(ListenStream),
}

/// `-32022` unless the modern request's `_meta` names a revision we serve.
fn served_version(meta: &RequestMeta) -> Result<(), ErrorObject> {
    match switchyard_protocol::ProtocolVersion::parse_modern(&meta.protocol_version) {
        Some(_) => Ok(()),
        None => Err(ErrorObject::unsupported_version(&version::MODERN, &meta.protocol_version)),
    }
}
