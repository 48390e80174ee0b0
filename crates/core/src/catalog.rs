//! The catalog: an immutable [`Snapshot`] of everything the plugins offer,
//! with schemas compiled and names indexed, swapped whole when anything changes.
//!
//! Requests read the current snapshot (an `Arc` clone) and keep it for their
//! whole life, so a rebuild never disturbs a request in flight. A rebuild
//! compiles schemas off the async threads, bumps the catalog version, and
//! publishes one bus event per list that actually changed.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, Weak};

use futures::future::BoxFuture;
use serde_json::Value;
use switchyard_bus::{Event, NotificationBus};
use switchyard_protocol::headers;
use switchyard_telemetry::ToolCalls;

use crate::caching::CachePolicy;
use crate::listen::ListenHub;
use crate::plugin::{ChangeSink, Plugin};
use crate::policy::ItemKind;
use crate::schema::{self, CompiledSchema};

/// The three lists a listen stream can hear changes of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    /// `tools/list`
    Tools,
    /// `prompts/list`
    Prompts,
    /// `resources/list` and `resources/templates/list`
    Resources,
}

/// A tool argument mirrored into an `Mcp-Param-{Name}` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderParam {
    /// The header name, lower-case, with the `mcp-param-` prefix.
    pub header: String,
    /// The argument (top-level property) it mirrors.
    pub argument: String,
}

/// One tool, ready to call.
pub struct ToolEntry {
    /// The tool name.
    pub name: String,
    /// The `Tool` object, verbatim as the plugin gave it.
    pub definition: Value,
    /// The plugin that runs it.
    pub plugin: Arc<dyn Plugin>,
    /// The compiled `inputSchema`.
    pub input_schema: CompiledSchema,
    /// The compiled `outputSchema`, if the tool has one.
    pub output_schema: Option<CompiledSchema>,
    /// Arguments mirrored into headers (`x-mcp-header`).
    pub header_params: Vec<HeaderParam>,
    /// The tool's `switchyard.tool.calls`.
    pub calls: ToolCalls,
}

/// One prompt.
pub struct PromptEntry {
    /// The prompt name.
    pub name: String,
    /// The `Prompt` object, verbatim.
    pub definition: Value,
    /// The plugin that renders it.
    pub plugin: Arc<dyn Plugin>,
    /// Names of the arguments marked `required`.
    pub required_arguments: Vec<String>,
}

/// One resource or resource template.
pub struct ResourceEntry {
    /// The `uri` (resource) or `uriTemplate` (template).
    pub key: String,
    /// The object, verbatim.
    pub definition: Value,
    /// The plugin that reads it.
    pub plugin: Arc<dyn Plugin>,
}

/// What lists and the scope policy need of any entry.
pub trait Item {
    /// Tool, prompt or resource.
    fn kind(&self) -> ItemKind;
    /// The name, URI or URI template it is listed and found by.
    fn key(&self) -> &str;
    /// The object `*/list` returns.
    fn definition(&self) -> &Value;
    /// The plugin that serves it.
    fn plugin(&self) -> &Arc<dyn Plugin>;
}

macro_rules! item {
    ($entry:ty, $kind:expr, $key:ident) => {
        impl Item for $entry {
            fn kind(&self) -> ItemKind {
                $kind
            }
            fn key(&self) -> &str {
                &self.$key
            }
            fn definition(&self) -> &Value {
                &self.definition
            }
            fn plugin(&self) -> &Arc<dyn Plugin> {
                &self.plugin
            }
        }
    };
}
item!(ToolEntry, ItemKind::Tool, name);
item!(PromptEntry, ItemKind::Prompt, name);
item!(ResourceEntry, ItemKind::Resource, key);

/// Everything the catalog offers at one version.
#[derive(Default)]
pub struct Snapshot {
    /// The catalog version this snapshot was built at.
    pub version: u64,
    /// Tools, sorted by name.
    pub tools: Vec<ToolEntry>,
    /// Prompts, sorted by name.
    pub prompts: Vec<PromptEntry>,
    /// Resources, sorted by URI.
    pub resources: Vec<ResourceEntry>,
    /// Resource templates, sorted by template.
    pub templates: Vec<ResourceEntry>,
    /// The caching policy of list results: the default combined with every
    /// plugin's own policy.
    pub list_policy: CachePolicy,
}

impl std::fmt::Debug for Snapshot {
    // The version and the sizes: the entries hold plugins and compiled schemas.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("version", &self.version)
            .field("tools", &self.tools.len())
            .field("prompts", &self.prompts.len())
            .field("resources", &self.resources.len())
            .field("templates", &self.templates.len())
            .finish_non_exhaustive()
    }
}

impl Snapshot {
    /// The tool named `name`.
    pub fn tool(&self, name: &str) -> Option<&ToolEntry> {
        self.tools.binary_search_by(|t| t.name.as_str().cmp(name)).ok().map(|i| &self.tools[i])
    }

    /// The prompt named `name`.
    pub fn prompt(&self, name: &str) -> Option<&PromptEntry> {
        self.prompts.binary_search_by(|p| p.name.as_str().cmp(name)).ok().map(|i| &self.prompts[i])
    }

    /// The resource with exactly this URI.
    pub fn resource(&self, uri: &str) -> Option<&ResourceEntry> {
        self.resources.binary_search_by(|r| r.key.as_str().cmp(uri)).ok().map(|i| &self.resources[i])
    }

    /// What serves a read of `uri`: the resource at it, else the first
    /// template that matches it.
    pub fn serving(&self, uri: &str) -> Option<&ResourceEntry> {
        self.resource(uri).or_else(|| self.template_for(uri))
    }

    /// The first template (in sorted order) that matches `uri`.
    pub fn template_for(&self, uri: &str) -> Option<&ResourceEntry> {
        self.templates.iter().find(|t| crate::uri_template::match_uri(&t.key, uri).is_some())
    }

    fn definitions(&self, kind: ListKind) -> Vec<&Value> {
        match kind {
            ListKind::Tools => self.tools.iter().map(|t| &t.definition).collect(),
            ListKind::Prompts => self.prompts.iter().map(|p| &p.definition).collect(),
            ListKind::Resources => self.resources.iter().chain(&self.templates).map(|r| &r.definition).collect(),
        }
    }
}

/// The live catalog: the plugins, and the snapshot built from them.
pub struct Catalog {
    plugins: RwLock<Vec<Arc<dyn Plugin>>>,
    snapshot: RwLock<Arc<Snapshot>>,
    version: AtomicU64,
    bus: Arc<dyn NotificationBus>,
    default_policy: CachePolicy,
    /// Serialises rebuilds so two changes cannot publish out of order.
    rebuild_lock: tokio::sync::Mutex<()>,
    /// Handed to every plugin call, so that a plugin can report a change.
    changes: Arc<dyn ChangeSink>,
    /// Where the `resources/updated` that plugins report go: this process's
    /// listen streams, once the server is built over this catalog.
    updates_heard_by: RwLock<Option<ListenHub>>,
}

impl Catalog {
    /// A catalog over `plugins`, built once before it is returned.
    pub async fn new(
        plugins: Vec<Arc<dyn Plugin>>,
        bus: Arc<dyn NotificationBus>,
        default_policy: CachePolicy,
    ) -> Arc<Self> {
        let catalog = Arc::new_cyclic(|this| Self {
            plugins: RwLock::new(plugins),
            snapshot: RwLock::new(Arc::new(Snapshot { list_policy: default_policy, ..Snapshot::default() })),
            version: AtomicU64::new(0),
            bus,
            default_policy,
            rebuild_lock: tokio::sync::Mutex::new(()),
            changes: Arc::new(CatalogChanges(Weak::clone(this))),
            updates_heard_by: RwLock::new(None),
        });
        catalog.rebuild().await;
        catalog
    }

    /// The current snapshot. Hold it for the whole request.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        Arc::clone(&self.snapshot.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// The bus this catalog publishes on.
    pub fn bus(&self) -> &Arc<dyn NotificationBus> {
        &self.bus
    }

    /// Replaces the set of plugins and rebuilds.
    pub async fn replace_plugins(&self, plugins: Vec<Arc<dyn Plugin>>) {
        *self.plugins.write().unwrap_or_else(|p| p.into_inner()) = plugins;
        self.rebuild().await;
    }

    /// Rebuilds the snapshot from the plugins' current lists, swaps it in, and
    /// publishes a list-changed event for every list that differs.
    pub async fn rebuild(&self) {
        let _serial = self.rebuild_lock.lock().await;
        let plugins = self.plugins.read().unwrap_or_else(|p| p.into_inner()).clone();
        let version = self.version.load(Ordering::SeqCst) + 1;
        let policy = self.default_policy;
        // Schema compilation is CPU work: keep it off the async threads.
        let built = tokio::task::spawn_blocking(move || build(&plugins, version, policy)).await;
        let Ok(new) = built else {
            tracing::error!("catalog rebuild panicked; keeping the previous catalog");
            return;
        };
        let new = Arc::new(new);
        let old = std::mem::replace(&mut *self.snapshot.write().unwrap_or_else(|p| p.into_inner()), Arc::clone(&new));
        self.version.store(version, Ordering::SeqCst);
        for kind in [ListKind::Tools, ListKind::Prompts, ListKind::Resources] {
            if old.definitions(kind) != new.definitions(kind) {
                let event = match kind {
                    ListKind::Tools => Event::ToolsListChanged { catalog_version: version },
                    ListKind::Prompts => Event::PromptsListChanged { catalog_version: version },
                    ListKind::Resources => Event::ResourcesListChanged { catalog_version: version },
                };
                if let Err(error) = self.bus.publish(event).await {
                    tracing::warn!(%error, "could not publish a list change");
                }
            }
        }
    }

    /// Sends the `resources/updated` plugins report to `hub`'s streams.
    pub(crate) fn deliver_updates_to(&self, hub: ListenHub) {
        *self.updates_heard_by.write().unwrap_or_else(|p| p.into_inner()) = Some(hub);
    }

    pub(crate) fn change_sink(&self) -> Arc<dyn ChangeSink> {
        Arc::clone(&self.changes)
    }

    /// A handle through which a plugin whose lists change outside any call
    /// (an upstream server's own notifications) tells the catalog to rebuild.
    /// It does not keep the catalog alive.
    pub fn list_changes(&self) -> ListChanges {
        ListChanges(Arc::clone(&self.changes))
    }
}

/// See [`Catalog::list_changes`].
#[derive(Clone)]
pub struct ListChanges(Arc<dyn ChangeSink>);

impl ListChanges {
    /// The lists of `kind` changed: rebuild, and tell listen streams if the
    /// published lists really differ.
    pub async fn changed(&self, kind: ListKind) {
        self.0.changed(kind).await;
    }

    /// The resource `uri`, which plugin `plugin` (its id) serves, changed,
    /// as the plugin learned by itself on this replica (an upstream told
    /// it): this replica's listen streams subscribed to it hear it, if their
    /// callers may read it. An update of a URI the catalog does not have
    /// that plugin serve is dropped: a plugin speaks only for its own.
    pub fn resource_updated(&self, plugin: &str, uri: &str) {
        self.0.resource_updated(plugin, uri);
    }

    /// Any resource plugin `plugin` serves may have changed, unknown which
    /// (an upstream's stream broke): this replica's streams subscribed to
    /// one of them each hear of it.
    pub fn resources_may_have_changed(&self, plugin: &str) {
        self.0.resources_may_have_changed(plugin);
    }
}

impl std::fmt::Debug for ListChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListChanges").finish_non_exhaustive()
    }
}

struct CatalogChanges(Weak<Catalog>);

impl ChangeSink for CatalogChanges {
    fn changed(&self, _kind: ListKind) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Some(catalog) = self.0.upgrade() {
                catalog.rebuild().await;
            }
        })
    }

    fn resource_updated(&self, plugin: &str, uri: &str) {
        let Some(catalog) = self.0.upgrade() else { return };
        if catalog.snapshot().serving(uri).is_none_or(|entry| entry.plugin.id() != plugin) {
            return;
        }
        let hub = catalog.updates_heard_by.read().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(hub) = hub {
            hub.deliver_here(Event::ResourceUpdated { uri: uri.to_owned() });
        }
    }

    fn resources_may_have_changed(&self, plugin: &str) {
        let Some(catalog) = self.0.upgrade() else { return };
        let hub = catalog.updates_heard_by.read().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(hub) = hub else { return };
        let snapshot = catalog.snapshot();
        hub.deliver_here_to_subscribers(|uri| snapshot.serving(uri).is_some_and(|entry| entry.plugin.id() == plugin));
    }
}

fn build(plugins: &[Arc<dyn Plugin>], version: u64, default_policy: CachePolicy) -> Snapshot {
    let mut snapshot = Snapshot { version, list_policy: default_policy, ..Snapshot::default() };
    let mut seen = HashSet::new();
    for plugin in plugins {
        if let Some(policy) = plugin.cache_policy() {
            snapshot.list_policy = snapshot.list_policy.combine(policy);
        }
        for definition in plugin.tools() {
            match tool_entry(plugin, definition) {
                Ok(entry) if seen.insert(("tool", entry.name.clone())) => snapshot.tools.push(entry),
                Ok(entry) => {
                    tracing::warn!(plugin = plugin.id(), tool = %entry.name, "duplicate tool name; keeping the first")
                }
                Err(why) => tracing::error!(plugin = plugin.id(), %why, "tool refused"),
            }
        }
        for definition in plugin.prompts() {
            let Some(name) = definition.get("name").and_then(Value::as_str).map(str::to_owned) else {
                tracing::error!(plugin = plugin.id(), "prompt without a name refused");
                continue;
            };
            if !seen.insert(("prompt", name.clone())) {
                tracing::warn!(plugin = plugin.id(), prompt = %name, "duplicate prompt name; keeping the first");
                continue;
            }
            let required_arguments = definition
                .get("arguments")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter(|a| a.get("required").and_then(Value::as_bool) == Some(true))
                .filter_map(|a| a.get("name").and_then(Value::as_str).map(str::to_owned))
                .collect();
            snapshot.prompts.push(PromptEntry { name, definition, plugin: Arc::clone(plugin), required_arguments });
        }
        for (definitions, key, list) in [
            (plugin.resources(), "uri", &mut snapshot.resources),
            (plugin.resource_templates(), "uriTemplate", &mut snapshot.templates),
        ] {
            for definition in definitions {
                let Some(k) = definition.get(key).and_then(Value::as_str).map(str::to_owned) else {
                    tracing::error!(plugin = plugin.id(), "resource without {key} refused");
                    continue;
                };
                if seen.insert((key_kind(key), k.clone())) {
                    list.push(ResourceEntry { key: k, definition, plugin: Arc::clone(plugin) });
                }
            }
        }
    }
    snapshot.tools.sort_by(|a, b| a.name.cmp(&b.name));
    snapshot.prompts.sort_by(|a, b| a.name.cmp(&b.name));
    snapshot.resources.sort_by(|a, b| a.key.cmp(&b.key));
    snapshot.templates.sort_by(|a, b| a.key.cmp(&b.key));
    snapshot
}

fn key_kind(key: &str) -> &'static str {
    if key == "uri" { "resource" } else { "template" }
}

/// Checks a tool definition and compiles its schemas.
fn tool_entry(plugin: &Arc<dyn Plugin>, definition: Value) -> Result<ToolEntry, String> {
    let name = definition.get("name").and_then(Value::as_str).ok_or("tool without a name")?.to_owned();
    if !is_valid_tool_name(&name) {
        return Err(format!("tool name {name:?} must be 1-64 characters of [A-Za-z0-9_.-]"));
    }
    let input = definition.get("inputSchema").ok_or_else(|| format!("tool {name} has no inputSchema"))?;
    if input.get("type").and_then(Value::as_str) != Some("object") {
        return Err(format!("tool {name}: inputSchema must have \"type\": \"object\" at its root"));
    }
    let input_schema = schema::compile(input).map_err(|e| format!("tool {name}: inputSchema: {e}"))?;
    let output_schema = match definition.get("outputSchema") {
        None => None,
        Some(output) => Some(schema::compile(output).map_err(|e| format!("tool {name}: outputSchema: {e}"))?),
    };
    let header_params = header_params(&name, input)?;
    let calls = ToolCalls::new(&name);
    Ok(ToolEntry { name, definition, plugin: Arc::clone(plugin), input_schema, output_schema, header_params, calls })
}

/// Tool names as the conformance suite checks them: 1-64 of `[A-Za-z0-9_.-]`.
pub fn is_valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// Extracts `x-mcp-header` annotations from the top-level properties, refusing
/// the tool when one is invalid: clients drop such tools, so we must not emit them.
/// (An upstream plugin reads its tools' with this too, to mirror a call's
/// arguments into the same headers on its way to the upstream.)
pub fn header_params(tool: &str, input: &Value) -> Result<Vec<HeaderParam>, String> {
    let mut params = Vec::new();
    let mut names = HashSet::new();
    let Some(properties) = input.get("properties").and_then(Value::as_object) else { return Ok(params) };
    for (argument, property) in properties {
        let Some(header) = property.get(headers::X_MCP_HEADER) else { continue };
        let header = header
            .as_str()
            .filter(|h| headers::is_token(h))
            .ok_or_else(|| format!("tool {tool}: {}: x-mcp-header must be an HTTP token", argument))?;
        let kind = property.get("type").and_then(Value::as_str);
        if !matches!(kind, Some("string" | "integer" | "boolean")) {
            return Err(format!("tool {tool}: {argument}: x-mcp-header needs type string, integer or boolean"));
        }
        let lower = header.to_ascii_lowercase();
        if !names.insert(lower.clone()) {
            return Err(format!("tool {tool}: x-mcp-header {header} is not unique"));
        }
        params.push(HeaderParam { header: format!("{}{lower}", headers::PARAM_PREFIX), argument: argument.clone() });
    }
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_names_follow_the_conformance_rule() {
        assert!(is_valid_tool_name("calculator_arithmetic"));
        assert!(is_valid_tool_name("a.b-c_1"));
        assert!(!is_valid_tool_name(""));
        assert!(!is_valid_tool_name("has space"));
        assert!(!is_valid_tool_name(&"x".repeat(65)));
    }

    #[test]
    fn header_params_are_checked() {
        let ok = json!({"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}});
        assert_eq!(
            header_params("t", &ok).unwrap(),
            vec![HeaderParam { header: "mcp-param-region".into(), argument: "region".into() }]
        );
        let bad_type = json!({"type": "object", "properties": {"r": {"type": "object", "x-mcp-header": "R"}}});
        assert!(header_params("t", &bad_type).is_err());
        let bad_name = json!({"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "a b"}}});
        assert!(header_params("t", &bad_name).is_err());
        let dup = json!({"type": "object", "properties": {
            "a": {"type": "string", "x-mcp-header": "X"}, "b": {"type": "string", "x-mcp-header": "x"}}});
        assert!(header_params("t", &dup).is_err());
    }
}
