//! [`UpstreamPlugin`]: an upstream server's lists, cached, and its calls, routed.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use switchyard_core::catalog::{ListChanges, ListKind};
use switchyard_core::plugin::{CompletionRef, PluginResult};
use switchyard_core::{CallContext, Outcome, Plugin, PluginError};
use switchyard_protocol::headers;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::client::{CallError, McpClient};

/// Bounds on how long upstream lists are cached, whatever the upstream says.
const MIN_TTL: Duration = Duration::from_secs(1);
const MAX_TTL: Duration = Duration::from_secs(3600);
/// Most pages read of one list.
const MAX_PAGES: usize = 100;

/// The upstream's lists as last read.
#[derive(Debug, Clone, Default, PartialEq)]
struct Lists {
    tools: Vec<Value>,
    prompts: Vec<Value>,
    resources: Vec<Value>,
    templates: Vec<Value>,
}

/// A remote MCP server as a plugin. Background work (list refresh, the
/// upstream listen stream) stops when the plugin is dropped.
pub struct UpstreamPlugin {
    id: String,
    client: Arc<McpClient>,
    lists: Arc<RwLock<Lists>>,
    stop: CancellationToken,
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
    /// Reads the upstream's lists once. With `changes`, it then keeps them
    /// fresh in the background and tells the catalog when they change; an
    /// upstream that is down at this point is retried rather than fatal.
    /// Without `changes` (a check before registering), an unreachable
    /// upstream is an error.
    ///
    /// # Errors
    /// The first read failed and there is no catalog to keep trying for.
    pub async fn connect(id: &str, client: Arc<McpClient>, changes: Option<ListChanges>) -> Result<Self, CallError> {
        let plugin = Self { id: id.to_owned(), client, lists: Arc::default(), stop: CancellationToken::new() };
        let first = fetch(&plugin.client).await;
        let ttl = match first {
            Ok((lists, ttl)) => {
                *plugin.lists.write().unwrap_or_else(|p| p.into_inner()) = lists;
                ttl
            }
            Err(error) if changes.is_some() => {
                tracing::warn!(plugin = id, %error, "upstream unavailable; serving no tools from it until it answers");
                MIN_TTL
            }
            Err(error) => return Err(error),
        };
        if let Some(changes) = changes {
            plugin.keep_fresh(changes, ttl);
        }
        Ok(plugin)
    }

    /// Refreshes the lists when their TTL runs out or the upstream says they
    /// changed, and reports real changes to the catalog.
    fn keep_fresh(&self, changes: ListChanges, first_ttl: Duration) {
        let (client, lists, stop, id) =
            (Arc::clone(&self.client), Arc::clone(&self.lists), self.stop.clone(), self.id.clone());
        let nudge = Arc::new(Notify::new());
        // The upstream's own notifications, for stateless upstreams.
        {
            let (client, stop, nudge) = (Arc::clone(&client), stop.clone(), Arc::clone(&nudge));
            tokio::spawn(async move {
                let mut backoff = Duration::from_secs(1);
                loop {
                    if client.is_stateless().await {
                        let opened = Instant::now();
                        let listening = client.listen(|method| {
                            if method.ends_with("/list_changed") {
                                nudge.notify_one();
                            }
                        });
                        tokio::select! {
                            () = stop.cancelled() => return,
                            outcome = listening => {
                                if let Err(error) = outcome {
                                    tracing::debug!(%error, "upstream listen stream ended");
                                }
                                // A stream that stayed up a while was healthy: reconnect soon.
                                if opened.elapsed() > Duration::from_secs(30) {
                                    backoff = Duration::from_secs(1);
                                }
                                // It may have missed changes while it was down.
                                nudge.notify_one();
                            }
                        }
                    }
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                }
            });
        }
        tokio::spawn(async move {
            let mut ttl = first_ttl;
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(ttl) => {}
                    () = nudge.notified() => {}
                }
                match fetch(&client).await {
                    Ok((fresh, fresh_ttl)) => {
                        ttl = fresh_ttl;
                        let old =
                            std::mem::replace(&mut *lists.write().unwrap_or_else(|p| p.into_inner()), fresh.clone());
                        for (kind, changed) in [
                            (ListKind::Tools, old.tools != fresh.tools),
                            (ListKind::Prompts, old.prompts != fresh.prompts),
                            (ListKind::Resources, old.resources != fresh.resources || old.templates != fresh.templates),
                        ] {
                            if changed {
                                changes.changed(kind).await;
                            }
                        }
                    }
                    Err(error) => {
                        tracing::warn!(plugin = %id, %error, "cannot refresh the upstream's lists; keeping the last ones");
                        ttl = MIN_TTL.max(ttl / 2).min(Duration::from_secs(30));
                    }
                }
            }
        });
    }

    fn tool_definition(&self, name: &str) -> Option<Value> {
        self.lists.read().unwrap_or_else(|p| p.into_inner()).tools.iter().find(|t| t["name"] == name).cloned()
    }
}

/// Reads every list, following cursors; returns them with the TTL to keep them for.
async fn fetch(client: &McpClient) -> Result<(Lists, Duration), CallError> {
    let mut ttl: Option<Duration> = None;
    let mut lists = Lists::default();
    for (method, key) in [
        ("tools/list", "tools"),
        ("prompts/list", "prompts"),
        ("resources/list", "resources"),
        ("resources/templates/list", "resourceTemplates"),
    ] {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut params = Map::new();
            if let Some(cursor) = &cursor {
                params.insert("cursor".into(), json!(cursor));
            }
            let page = match client.request(method, params, None, &[], None).await {
                Ok(page) => page,
                // An upstream without prompts or resources says so with -32601.
                Err(CallError::Rpc { code: -32601, .. }) => break,
                Err(error) => return Err(error),
            };
            if let Some(ms) = page.get("ttlMs").and_then(Value::as_u64) {
                let page_ttl = Duration::from_millis(ms);
                ttl = Some(ttl.map_or(page_ttl, |t| t.min(page_ttl)));
            }
            items.extend(page.get(key).and_then(Value::as_array).into_iter().flatten().cloned());
            cursor = page.get("nextCursor").and_then(Value::as_str).map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        match key {
            "tools" => lists.tools = items,
            "prompts" => lists.prompts = items,
            "resources" => lists.resources = items,
            _ => lists.templates = items,
        }
    }
    let ttl = ttl.unwrap_or(client.spec().list_ttl).clamp(MIN_TTL, MAX_TTL);
    Ok((lists, ttl))
}

/// A final upstream result as ours: `resultType` is the server's to add, and
/// a multi-round request cannot be relayed through a republished tool yet.
fn complete(mut result: Value) -> PluginResult<Outcome> {
    if result.get("resultType").and_then(Value::as_str).is_some_and(|t| t != "complete") {
        return Err(PluginError::Tool(
            "the upstream asked for more input, which republished tools cannot relay yet".into(),
        ));
    }
    if let Some(object) = result.as_object_mut() {
        object.remove("resultType");
        object.remove("ttlMs");
        object.remove("cacheScope");
    }
    Ok(Outcome::Complete(result))
}

/// What the client sees when the upstream fails: the tool failed (the model
/// can read why), or its parameters were wrong.
fn refused(error: CallError) -> PluginError {
    match error {
        CallError::Rpc { code: -32602, message } => PluginError::InvalidParams(message),
        other => PluginError::Tool(other.to_string()),
    }
}

impl Plugin for UpstreamPlugin {
    fn id(&self) -> &str {
        &self.id
    }

    fn tools(&self) -> Vec<Value> {
        self.lists.read().unwrap_or_else(|p| p.into_inner()).tools.clone()
    }

    fn prompts(&self) -> Vec<Value> {
        self.lists.read().unwrap_or_else(|p| p.into_inner()).prompts.clone()
    }

    fn resources(&self) -> Vec<Value> {
        self.lists.read().unwrap_or_else(|p| p.into_inner()).resources.clone()
    }

    fn resource_templates(&self) -> Vec<Value> {
        self.lists.read().unwrap_or_else(|p| p.into_inner()).templates.clone()
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Map<String, Value>,
        cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Outcome>> {
        Box::pin(async move {
            // Arguments the upstream's tool mirrors into headers (SEP-2243).
            let mut extra = Vec::new();
            if let Some(definition) = self.tool_definition(name)
                && let Some(properties) = definition["inputSchema"]["properties"].as_object()
            {
                for (argument, property) in properties {
                    let (Some(header), Some(value)) =
                        (property.get(headers::X_MCP_HEADER).and_then(Value::as_str), arguments.get(argument))
                    else {
                        continue;
                    };
                    let text = match value {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    extra.push((
                        format!("{}{}", headers::PARAM_PREFIX, header.to_ascii_lowercase()),
                        headers::encode_value(&text),
                    ));
                }
            }
            let mut params = Map::new();
            params.insert("name".into(), json!(name));
            params.insert("arguments".into(), Value::Object(arguments));
            let result = tokio::select! {
                result = self.client.request("tools/call", params, Some(name), &extra, Some(cx.deadline())) => result,
                () = cx.cancellation().cancelled() => return Err(PluginError::Tool("the call was cancelled".into())),
            };
            result.map_err(refused).and_then(complete)
        })
    }

    fn read_resource<'a>(&'a self, uri: &'a str, cx: CallContext) -> BoxFuture<'a, PluginResult<Outcome>> {
        Box::pin(async move {
            let mut params = Map::new();
            params.insert("uri".into(), json!(uri));
            match self.client.request("resources/read", params, Some(uri), &[], Some(cx.deadline())).await {
                Err(CallError::Rpc { code: -32602 | -32002, .. }) => {
                    Err(PluginError::ResourceNotFound { uri: uri.to_owned() })
                }
                other => other.map_err(refused).and_then(complete),
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
            let mut params = Map::new();
            params.insert("name".into(), json!(name));
            params.insert("arguments".into(), Value::Object(arguments));
            self.client
                .request("prompts/get", params, Some(name), &[], Some(cx.deadline()))
                .await
                .map_err(refused)
                .and_then(complete)
        })
    }

    fn complete<'a>(
        &'a self,
        reference: &'a CompletionRef,
        argument: &'a str,
        value: &'a str,
        context: &'a Map<String, Value>,
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
            let result = self.client.request("completion/complete", params, None, &[], None).await.map_err(refused)?;
            Ok(result["completion"]["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect())
        })
    }
}
