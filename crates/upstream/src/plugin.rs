//! [`UpstreamPlugin`]: an upstream server's lists, cached, and its calls, routed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use switchyard_answers::{AnswerCache, Kept, PluginCache, named_target};
use switchyard_core::catalog::{ListChanges, ListKind};
use switchyard_core::plugin::{CompletionRef, PluginResult, TaskRequest};
use switchyard_core::{CallContext, Outcome, Plugin, PluginError, required_capability};
use switchyard_protocol::Produced;
use switchyard_protocol::method::request;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

use crate::call_facts::CallFacts;
use crate::client::{CallError, McpClient, Reply, Weight};
use crate::follow::Follower;
use crate::input::{self, outcome};
use crate::limits::{Backoff, Bound};

/// Bounds on how long upstream lists are cached, whatever the upstream says.
const MIN_TTL: Duration = Duration::from_secs(1);
const MAX_TTL: Duration = Duration::from_secs(3600);
/// The upstream's lists as last read.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Lists {
    /// Set through [`Lists::set_tools`], which reads their call facts too.
    tools: Vec<Value>,
    pub(crate) prompts: Vec<Value>,
    pub(crate) resources: Vec<Value>,
    pub(crate) templates: Vec<Value>,
    /// What a call to each tool needs of its definition.
    calls: CallFacts,
}

impl Lists {
    /// `tools` as the tool list, and what a call to each needs of it.
    fn set_tools(&mut self, tools: Vec<Value>) {
        self.calls = CallFacts::of(&tools);
        self.tools = tools;
    }

    /// The kinds of list that differ between `self` and `other`.
    fn changed_kinds(&self, other: &Self) -> Vec<ListKind> {
        [
            (ListKind::Tools, self.tools != other.tools),
            (ListKind::Prompts, self.prompts != other.prompts),
            (ListKind::Resources, self.resources != other.resources || self.templates != other.templates),
        ]
        .into_iter()
        .filter_map(|(kind, changed)| changed.then_some(kind))
        .collect()
    }
}

/// A remote MCP server as a plugin. Background work (list refresh, the
/// upstream listen stream) stops when the plugin is dropped.
pub struct UpstreamPlugin {
    id: String,
    client: Arc<McpClient>,
    /// Swapped whole on each refresh, so a reader holds one version without copying it.
    lists: Arc<RwLock<Arc<Lists>>>,
    stop: CancellationToken,
    /// Its answers kept for their `ttlMs`.
    cache: PluginCache,
    /// Whether the upstream ever marked a read-only tool's result with a
    /// `ttlMs`: until it does, tool calls are not looked up in the cache.
    tools_cacheable: AtomicBool,
}

impl std::fmt::Debug for UpstreamPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamPlugin").field("id", &self.id).field("client", &self.client).finish_non_exhaustive()
    }
}

impl Drop for UpstreamPlugin {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl UpstreamPlugin {
    /// Reads the upstream's lists. With `changes` (serving), it then keeps
    /// them fresh in the background and tells the catalog when they change;
    /// the first lists are awaited at most `first_lists_wait`, so an upstream
    /// that is slow or down holds up neither the catalog nor the other
    /// plugins (its lists arrive later, as a change). Without `changes` (a
    /// check before registering), the lists must be read now.
    ///
    /// # Errors
    /// A check whose read failed.
    pub async fn connect(
        id: &str,
        client: Arc<McpClient>,
        changes: Option<ListChanges>,
        cache: &Arc<AnswerCache>,
    ) -> Result<Self, CallError> {
        let plugin = Self {
            id: id.to_owned(),
            client,
            lists: Arc::default(),
            stop: CancellationToken::new(),
            cache: cache.for_plugin(),
            tools_cacheable: AtomicBool::new(false),
        };
        let Some(changes) = changes else {
            let (lists, _) = fetch(&plugin.client).await?;
            *plugin.lists.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(lists);
            return Ok(plugin);
        };
        let (first_tx, first_rx) = oneshot::channel();
        plugin.keep_fresh(changes, first_tx);
        match tokio::time::timeout(plugin.client.limits().first_lists_wait, first_rx).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(error))) => {
                tracing::warn!(plugin = id, %error, "upstream unavailable; serving no tools from it until it answers");
            }
            Ok(Err(_)) | Err(_) => {
                tracing::warn!(plugin = id, "upstream slow to list its tools; serving them when they arrive");
            }
        }
        Ok(plugin)
    }

    /// Refreshes the lists when their TTL runs out and when the upstream
    /// says they changed, at most once per `refresh_interval` for the latter;
    /// after a failure, only when the backoff has passed. Reports real
    /// changes to the catalog. The first refresh's outcome goes to `first`
    /// while [`UpstreamPlugin::connect`] waits for it.
    fn keep_fresh(&self, changes: ListChanges, first: oneshot::Sender<Result<(), CallError>>) {
        let nudge = Arc::new(Notify::new());
        // The listen stream needs the upstream's era, which the first refresh learns.
        let first_done = Arc::new(Notify::new());
        let resubscribe = Arc::new(Notify::new());
        let follower = Follower {
            plugin: self.id.clone(),
            client: Arc::clone(&self.client),
            stop: self.stop.clone(),
            nudge: Arc::clone(&nudge),
            first_done: Arc::clone(&first_done),
            resubscribe: Arc::clone(&resubscribe),
            lists: Arc::clone(&self.lists),
            cache: self.cache.clone(),
            changes: changes.clone(),
        };
        tokio::spawn(follower.run());
        let (client, lists, stop, id) =
            (Arc::clone(&self.client), Arc::clone(&self.lists), self.stop.clone(), self.id.clone());
        let cache = self.cache.clone();
        let limits = *client.limits();
        tokio::spawn(async move {
            let mut first = Some(first);
            let mut first_done = Some(first_done);
            let mut backoff = Backoff::new(limits.max_backoff);
            loop {
                let refreshed_at = Instant::now();
                let mut healthy = true;
                // However often the TTL, the backoff or the upstream's
                // notifications ask, one refresh per interval at most.
                let not_before = refreshed_at + limits.refresh_interval;
                let wait = match tokio::select! {
                    () = stop.cancelled() => return,
                    fetched = fetch(&client) => fetched,
                } {
                    Ok((fresh, ttl)) => {
                        backoff.succeeded();
                        let fresh = Arc::new(fresh);
                        let old = std::mem::replace(
                            &mut *lists.write().unwrap_or_else(|p| p.into_inner()),
                            Arc::clone(&fresh),
                        );
                        let changed = old.changed_kinds(&fresh);
                        if !changed.is_empty() {
                            cache.forget();
                        }
                        // Its listen stream asks for the resources it lists; the
                        // first opens after the first refresh, with them.
                        if changed.contains(&ListKind::Resources) && first_done.is_none() {
                            resubscribe.notify_one();
                        }
                        // Only the served copy is kept while the catalog rebuilds.
                        drop((old, fresh));
                        // While `connect` still waits, the catalog reads these lists itself.
                        let waited = first.take().is_some_and(|first| first.send(Ok(())).is_ok());
                        // The catalog rebuilds every list at once: one call, whatever changed.
                        if let Some(&kind) = changed.first().filter(|_| !waited) {
                            changes.changed(kind).await;
                        }
                        ttl
                    }
                    Err(error) => {
                        healthy = false;
                        let wait = backoff.failed();
                        tracing::warn!(plugin = %id, %error, retry_in = ?wait, "cannot refresh the upstream's lists; keeping the last ones");
                        if let Some(first) = first.take() {
                            let _ = first.send(Err(error));
                        }
                        wait
                    }
                };
                if let Some(first_done) = first_done.take() {
                    first_done.notify_one();
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(wait) => {}
                    // A failing upstream waits out its backoff, whatever it says.
                    () = nudge.notified(), if healthy => {}
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep_until(not_before.into()) => {}
                }
            }
        });
    }

    /// The lists as last read.
    fn lists(&self) -> Arc<Lists> {
        Arc::clone(&self.lists.read().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Reads every list, following cursors, within the limits' deadline and
/// bounds; returns them with the TTL to keep them for.
async fn fetch(client: &McpClient) -> Result<(Lists, Duration), CallError> {
    let deadline = client.limits().list_deadline;
    tokio::time::timeout(deadline, fetch_pages(client)).await.unwrap_or(Err(CallError::Timeout(deadline)))
}

async fn fetch_pages(client: &McpClient) -> Result<(Lists, Duration), CallError> {
    let limits = client.limits();
    let mut ttl: Option<Duration> = None;
    let mut lists = Lists::default();
    let mut taken = Weight::default();
    for (method, key) in [
        (request::TOOLS_LIST, "tools"),
        (request::PROMPTS_LIST, "prompts"),
        (request::RESOURCES_LIST, "resources"),
        (request::RESOURCE_TEMPLATES_LIST, "resourceTemplates"),
    ] {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            pages += 1;
            if pages > limits.max_list_pages {
                return Err(
                    client.refused(Bound::ListPages, format!("{method} has more than {} pages", limits.max_list_pages))
                );
            }
            let mut params = Map::new();
            if let Some(cursor) = &cursor {
                params.insert("cursor".into(), json!(cursor));
            }
            let (mut page, weight) = match client.request_sized(method, params, None, &[], None).await {
                Ok(page) => page,
                // An upstream without prompts or resources says so with -32601.
                Err(CallError::Rpc { code: -32601, .. }) => break,
                Err(error) => return Err(error),
            };
            taken.bytes = taken.bytes.saturating_add(weight.bytes);
            taken.values = taken.values.saturating_add(weight.values);
            if taken.values > limits.max_list_values {
                return Err(client.refused(
                    Bound::ListValues,
                    format!("the lists hold more than {} JSON values", limits.max_list_values),
                ));
            }
            if taken.bytes > limits.max_list_bytes {
                return Err(
                    client.refused(Bound::ListBytes, format!("the lists exceed {} bytes", limits.max_list_bytes))
                );
            }
            if let Some(ms) = page.get("ttlMs").and_then(Value::as_u64) {
                let page_ttl = Duration::from_millis(ms);
                ttl = Some(ttl.map_or(page_ttl, |t| t.min(page_ttl)));
            }
            if let Some(Value::Array(page_items)) = page.get_mut(key).map(Value::take) {
                if items.len() + page_items.len() > limits.max_list_items {
                    return Err(client
                        .refused(Bound::ListItems, format!("{method} has more than {} items", limits.max_list_items)));
                }
                items.extend(page_items);
            }
            cursor = page.get("nextCursor").and_then(Value::as_str).map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        match key {
            "tools" => lists.set_tools(items),
            "prompts" => lists.prompts = items,
            "resources" => lists.resources = items,
            _ => lists.templates = items,
        }
    }
    // At least the refresh interval: `ttlMs: 0` must not buy a refresh a second.
    let ttl = ttl
        .unwrap_or(client.spec().list_ttl)
        .clamp(MIN_TTL.max(limits.refresh_interval), MAX_TTL.max(limits.refresh_interval));
    Ok((lists, ttl))
}

/// What the client sees when the upstream fails: the tool failed (the model
/// can read why), or its parameters were wrong.
pub(crate) fn refused(error: CallError) -> PluginError {
    match error {
        CallError::Rpc { code: -32602, message } => PluginError::InvalidParams(message),
        CallError::MissingCapability(needed) => PluginError::MissingCapability(needed),
        other => PluginError::Tool(other.to_string()),
    }
}

impl Plugin for UpstreamPlugin {
    fn id(&self) -> &str {
        &self.id
    }

    fn tools(&self) -> Vec<Value> {
        self.lists().tools.clone()
    }

    fn prompts(&self) -> Vec<Value> {
        self.lists().prompts.clone()
    }

    fn resources(&self) -> Vec<Value> {
        self.lists().resources.clone()
    }

    fn resource_templates(&self) -> Vec<Value> {
        self.lists().templates.clone()
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Map<String, Value>,
        cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Outcome>> {
        Box::pin(async move {
            let lists = self.lists();
            let call = lists.calls.get(name);
            // Arguments the upstream's tool mirrors into headers (SEP-2243).
            let extra = call.map_or_else(Vec::new, |call| call.headers(&arguments));
            // A result is kept only for a tool that says it changes nothing:
            // serving it again then skips no work anyone asked for.
            let read_only = call.is_some_and(|call| call.read_only);
            drop(lists);
            let target =
                (read_only && self.tools_cacheable.load(Ordering::Relaxed)).then(|| named_target(name, &arguments));
            // The cache's futures and a resumed call's are boxed, as they are
            // not every call's (the request's own is boxed in `bounded`):
            // inline, each would make this future, moved whole at each layer
            // of a call, kilobytes larger.
            if let Some(target) = &target
                && let Some(kept) = Box::pin(self.cache.get(request::TOOLS_CALL, target, &cx)).await
            {
                return outcome(Arc::unwrap_or_clone(kept));
            }
            let generation = self.cache.generation();
            let mut params = Map::new();
            params.insert("name".into(), json!(name));
            params.insert("arguments".into(), Value::Object(arguments));
            input::answer(&mut params, &cx);
            let calling = async {
                match (input::parked(&cx), cx.input()) {
                    // A 2025-era upstream's call that waits for these answers.
                    (Some(parked), Some(round)) => Box::pin(self.client.resume(parked, &round.responses, &cx)).await,
                    _ => self.client.request_interruptible(request::TOOLS_CALL, params, Some(name), &extra, &cx).await,
                }
            };
            let reply = tokio::select! {
                reply = calling => reply,
                () = cx.cancellation().cancelled() => return Err(PluginError::Tool("the call was cancelled".into())),
            };
            let (result, weight) = match reply.map_err(refused)? {
                // A result kept as text is complete, and has no `ttlMs` to keep it by.
                Reply::Answer(Produced::ToolText(text), _) if cx.takes_result_text() => {
                    return Ok(Outcome::CompleteText(text));
                }
                // A result built as a value: a task's call (whose answer the
                // client asks for no text of), or one the text could not keep.
                Reply::Answer(result, weight) => (result.into_value(), weight),
                Reply::Asked { parked, key, request } => {
                    // A client that cannot answer is told now, and the upstream's call let go.
                    let declared = cx.input_capabilities();
                    if let Some(needed) =
                        required_capability(&request).filter(|needed| !needed.is_declared_in(&declared))
                    {
                        self.client.let_go(&parked);
                        return Err(PluginError::MissingCapability(needed));
                    }
                    let asked = input::asked_mid_call(parked.clone(), key, request);
                    if asked.is_err() {
                        self.client.let_go(&parked);
                    }
                    return asked;
                }
            };
            // Only a final answer is kept: an `input_required` or a task
            // (whose `ttlMs` is the task's) is the caller's alone.
            let is_final = result.get("resultType").is_none_or(|kind| kind == "complete");
            if !read_only || !is_final || result.get("ttlMs").is_none() {
                return outcome(result);
            }
            // Marked: kept, and from now on this upstream's calls are looked up.
            self.tools_cacheable.store(true, Ordering::Relaxed);
            let kept = Kept::new(result, weight);
            if let Some(target) = target {
                Box::pin(self.cache.keep(generation, (request::TOOLS_CALL, target), &cx, kept.clone())).await;
            }
            outcome(Arc::unwrap_or_clone(kept.result))
        })
    }

    fn read_resource<'a>(&'a self, uri: &'a str, cx: CallContext) -> BoxFuture<'a, PluginResult<Outcome>> {
        Box::pin(async move {
            let mut params = Map::new();
            params.insert("uri".into(), json!(uri));
            input::answer(&mut params, &cx);
            let fetch = || self.client.request_relayed(request::RESOURCES_READ, params, Some(uri), &[], &cx);
            match self.cache.read_through(request::RESOURCES_READ, uri.into(), &cx, fetch).await {
                Err(CallError::Rpc { code: -32602 | -32002, .. }) => {
                    Err(PluginError::ResourceNotFound { uri: uri.to_owned() })
                }
                other => other.map_err(refused).and_then(|result| outcome(Arc::unwrap_or_clone(result))),
            }
        })
    }

    fn get_prompt<'a>(
        &'a self,
        name: &'a str,
        arguments: Map<String, Value>,
        cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Outcome>> {
        Box::pin(async move {
            let target = named_target(name, &arguments);
            let mut params = Map::new();
            params.insert("name".into(), json!(name));
            params.insert("arguments".into(), Value::Object(arguments));
            input::answer(&mut params, &cx);
            let fetch = || self.client.request_relayed(request::PROMPTS_GET, params, Some(name), &[], &cx);
            self.cache
                .read_through(request::PROMPTS_GET, target, &cx, fetch)
                .await
                .map_err(refused)
                .and_then(|result| outcome(Arc::unwrap_or_clone(result)))
        })
    }

    fn task<'a>(
        &'a self,
        id: &'a str,
        request: TaskRequest<'a>,
        cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Value>> {
        Box::pin(crate::tasks::ask(&self.client, id, request, cx))
    }

    fn complete<'a>(
        &'a self,
        reference: &'a CompletionRef,
        argument: &'a str,
        value: &'a str,
        context: &'a Map<String, Value>,
        cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Vec<String>>> {
        Box::pin(async move {
            let reference = match reference {
                CompletionRef::Prompt(name) => json!({"type": "ref/prompt", "name": name}),
                CompletionRef::Resource(uri) => json!({"type": "ref/resource", "uri": uri}),
            };
            let mut params = Map::new();
            params.insert("ref".into(), reference);
            params.insert("argument".into(), json!({"name": argument, "value": value}));
            if !context.is_empty() {
                params.insert("context".into(), json!({"arguments": context}));
            }
            let (result, _) =
                self.client.request_relayed(request::COMPLETE, params, None, &[], &cx).await.map_err(refused)?;
            Ok(result["completion"]["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect())
        })
    }
}
