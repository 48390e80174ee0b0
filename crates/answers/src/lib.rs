//! The answer cache: plugin answers kept for the `ttlMs` their plugin gave
//! them, shared by every plugin of a replica ([`AnswerCache`]) within one
//! bound, each plugin instance seeing its own part ([`PluginCache`]).
//!
//! What is kept: an upstream's `resources/read` and `prompts/get` answers,
//! and the results of tools annotated `readOnlyHint` that their plugin (an
//! upstream, a WASM module) marked with a `ttlMs` of its own, for that long
//! (at most an hour). A `public` answer (its `cacheScope`) serves every caller; any
//! other is kept per authorization context (the caller's principal, client
//! and scopes), never shared across them. Identical reads and prompts asked
//! while one is in flight wait for its answer instead of asking again (a
//! tool call never does: two identical calls may both be meant), within one
//! authorization context. A retry with a client's input is never served from
//! the cache nor kept. A plugin's entries go when it reports a change (an
//! upstream's list change or resource update): that bumps the plugin's
//! generation, which every key carries, so nothing kept before (or fetched
//! while it happened) is found again, and the old entries age out. A
//! rebuilt plugin is a new instance, with keys of its own; a removed one's
//! entries age out alike. Every entry is weighed, key and answer (bytes on the wire and 32 per JSON
//! value), and the cache as a whole holds at most `upstream.cache_max_bytes`.
//!
//! This crate knows no plugin kind, no HTTP and no SQL: it keeps JSON
//! answers for the `CallContext` of a call.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use moka::Expiry;
use moka::future::Cache;
use serde_json::Value;
use switchyard_core::CallContext;

/// The longest an answer is kept, whatever its `ttlMs`.
const MAX_TTL: Duration = Duration::from_secs(3600);

/// What an answer is kept under.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    /// The plugin instance (a rebuilt plugin starts afresh).
    plugin: u64,
    /// The plugin's generation when the answer was asked for.
    generation: u64,
    method: &'static str,
    /// The URI, or the name and canonical arguments.
    target: Arc<str>,
    /// The authorization context of a private answer; `None` for a public one.
    audience: Option<Arc<str>>,
}

/// What an answer took: its bytes on the wire and the JSON values it holds
/// (what its parsed form costs).
#[derive(Debug, Clone, Copy, Default)]
pub struct Weight {
    /// Its bytes, as read.
    pub bytes: usize,
    /// The JSON values it holds.
    pub values: usize,
}

impl Weight {
    /// The weight of `value`, which took `bytes`: its JSON values counted.
    pub fn of(value: &Value, bytes: usize) -> Self {
        fn values(value: &Value) -> usize {
            1 + match value {
                Value::Array(items) => items.iter().map(values).sum(),
                Value::Object(members) => members.values().map(|member| 1 + values(member)).sum(),
                _ => 0,
            }
        }
        Self { bytes, values: values(value) }
    }
}

/// A kept answer: the plugin's result as it came, and how to keep it.
#[derive(Debug, Clone)]
pub struct Kept {
    /// The result, `ttlMs` and `cacheScope` still in it.
    pub result: Arc<Value>,
    ttl: Duration,
    public: bool,
    weight: u32,
}

impl Kept {
    /// `result` as the plugin gave it (`ttlMs`, `cacheScope` still in it),
    /// which took `weight` to read.
    pub fn new(result: Value, weight: Weight) -> Self {
        // An answer that asks for more input is never kept.
        let complete = result.get("resultType").and_then(Value::as_str).is_none_or(|t| t == "complete");
        let ttl = result
            .get("ttlMs")
            .and_then(Value::as_u64)
            .filter(|_| complete)
            .map_or(Duration::ZERO, Duration::from_millis);
        let public = result.get("cacheScope").and_then(Value::as_str) == Some("public");
        // What the parsed value costs (about 32 bytes a value) and its text.
        let bytes = weight.bytes.saturating_add(weight.values.saturating_mul(32));
        Self {
            result: Arc::new(result),
            ttl: ttl.min(MAX_TTL),
            public,
            weight: u32::try_from(bytes).unwrap_or(u32::MAX),
        }
    }
}

/// Keeps each entry for its own `ttlMs`; a private copy of an answer that
/// turned out public is not kept (the public entry serves everyone).
struct ByTtl;

impl ByTtl {
    /// How long `kept` is kept under `key`.
    fn ttl(key: &Key, kept: &Kept) -> Duration {
        if key.audience.is_some() && kept.public { Duration::ZERO } else { kept.ttl }
    }
}

impl Expiry<Key, Kept> for ByTtl {
    fn expire_after_create(&self, key: &Key, kept: &Kept, _now: std::time::Instant) -> Option<Duration> {
        Some(Self::ttl(key, kept))
    }

    fn expire_after_update(
        &self,
        key: &Key,
        kept: &Kept,
        _now: std::time::Instant,
        _left: Option<Duration>,
    ) -> Option<Duration> {
        Some(Self::ttl(key, kept))
    }
}

/// What an entry counts against the bound: its key and its answer, or
/// nothing for one that is never served (it is removed as soon as the
/// requests waiting on it have their answer).
fn weight(key: &Key, kept: &Kept) -> u32 {
    if ByTtl::ttl(key, kept).is_zero() {
        return 0;
    }
    let key_bytes = key.target.len() + key.audience.as_ref().map_or(0, |a| a.len()) + 64;
    kept.weight.saturating_add(u32::try_from(key_bytes).unwrap_or(u32::MAX))
}

/// The replica's cache of plugin answers.
pub struct AnswerCache {
    entries: Option<Cache<Key, Kept>>,
}

impl std::fmt::Debug for AnswerCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnswerCache").field("enabled", &self.entries.is_some()).finish()
    }
}

/// Tells each plugin instance apart in the shared cache.
static NEXT_PLUGIN: AtomicU64 = AtomicU64::new(1);

/// One plugin instance's view of the cache.
#[derive(Debug, Clone)]
pub struct PluginCache {
    cache: Arc<AnswerCache>,
    plugin: u64,
    generation: Arc<AtomicU64>,
}

impl AnswerCache {
    /// A cache holding at most `max_bytes` (0: none kept, nothing coalesced).
    pub fn new(max_bytes: u64) -> Arc<Self> {
        let entries = (max_bytes > 0)
            .then(|| Cache::builder().max_capacity(max_bytes).weigher(weight).expire_after(ByTtl).build());
        Arc::new(Self { entries })
    }

    /// A view for a new plugin instance.
    /// A view of the cache for a new plugin instance.
    pub fn for_plugin(self: &Arc<Self>) -> PluginCache {
        let plugin = NEXT_PLUGIN.fetch_add(1, Ordering::Relaxed);
        PluginCache { cache: Arc::clone(self), plugin, generation: Arc::default() }
    }
}

/// What a prompt or a tool call is kept under: its name and its arguments,
/// canonical (keys sorted, numbers in one form).
pub fn named_target(name: &str, arguments: &serde_json::Map<String, Value>) -> Arc<str> {
    let mut text = name.as_bytes().to_vec();
    text.push(0);
    switchyard_protocol::canonical::write(&Value::Object(arguments.clone()), &mut text);
    String::from_utf8_lossy(&text).into()
}

/// The authorization context `cx`'s caller answers in: whom a private
/// answer may be served to.
fn audience(cx: &CallContext) -> Arc<str> {
    let caller = cx.caller();
    format!("{:?}|{:?}|{:?}", caller.principal, caller.client_id, caller.scopes).into()
}

impl PluginCache {
    /// A lookup: a hit (kept, or shared with an identical request in
    /// flight) or a miss.
    fn record(&self, hit: bool) {
        switchyard_telemetry::metrics().answer_cache(hit);
    }

    fn key(&self, method: &'static str, target: &Arc<str>, audience: Option<Arc<str>>) -> Key {
        self.key_in(self.generation(), method, target, audience)
    }

    fn key_in(&self, generation: u64, method: &'static str, target: &Arc<str>, audience: Option<Arc<str>>) -> Key {
        Key { plugin: self.plugin, generation, method, target: Arc::clone(target), audience }
    }

    /// The plugin's generation now: read before a fetch whose answer
    /// [`PluginCache::keep`] may keep, so that a change arriving meanwhile
    /// leaves that answer where nothing finds it.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The answer to `method` on `target` for `cx`'s caller: a kept one, the
    /// one an identical request in flight gets, or that of the request
    /// `fetch` makes. `fetch` is called only when nothing kept answers: a
    /// request's future is large (an upstream client's holds every state of
    /// its call), and a hit should not build and move one.
    ///
    /// # Errors
    /// The fetch's, shared by the requests that waited on it.
    pub async fn read_through<M, F, E>(
        &self,
        method: &'static str,
        target: Arc<str>,
        cx: &CallContext,
        fetch: M,
    ) -> Result<Arc<Value>, E>
    where
        M: FnOnce() -> F,
        F: Future<Output = Result<(Value, Weight), E>>,
        E: Clone + Send + Sync + 'static,
    {
        // A retry carries its client's answers: its answer is its own.
        let Some(entries) = self.cache.entries.as_ref().filter(|_| cx.input().is_none()) else {
            return fetch().await.map(|(result, _)| Arc::new(result));
        };
        if let Some(kept) = entries.get(&self.key(method, &target, None)).await {
            self.record(true);
            return Ok(kept.result);
        }
        let asked = AtomicBool::new(false);
        // The generation is read before the fetch: an answer fetched while a
        // change drops the plugin's entries is kept where nothing finds it.
        let private = self.key(method, &target, Some(audience(cx)));
        let public = Key { audience: None, ..private.clone() };
        let kept = entries
            .try_get_with(private.clone(), async {
                asked.store(true, Ordering::Relaxed);
                // Boxed, so that the future the cache holds (and a hit
                // builds) stays small.
                Box::pin(fetch()).await.map(|(result, weight)| Kept::new(result, weight))
            })
            .await
            .map_err(|error| (*error).clone())?;
        let fetched_here = asked.load(Ordering::Relaxed);
        self.record(!fetched_here);
        if fetched_here {
            if ByTtl::ttl(&private, &kept).is_zero() {
                // Kept only for the requests that waited on it, which have it now.
                entries.invalidate(&private).await;
            }
            if kept.public && !kept.ttl.is_zero() {
                entries.insert(public, kept.clone()).await;
            }
        }
        Ok(kept.result)
    }

    /// A kept answer to `method` on `target` for `cx`'s caller, if any.
    pub async fn get(&self, method: &'static str, target: &Arc<str>, cx: &CallContext) -> Option<Arc<Value>> {
        let entries = self.cache.entries.as_ref().filter(|_| cx.input().is_none())?;
        let kept = match entries.get(&self.key(method, target, None)).await {
            Some(kept) => Some(kept),
            None => entries.get(&self.key(method, target, Some(audience(cx)))).await,
        };
        self.record(kept.is_some());
        kept.map(|kept| kept.result)
    }

    /// Keeps `kept` (the plugin's answer to `method` on `target` for `cx`'s
    /// caller, asked for in `generation`) if the plugin gave it a `ttlMs`.
    pub async fn keep(
        &self,
        generation: u64,
        (method, target): (&'static str, Arc<str>),
        cx: &CallContext,
        kept: Kept,
    ) {
        let Some(entries) = &self.cache.entries else { return };
        if kept.ttl.is_zero() || cx.input().is_some() {
            return;
        }
        let audience = (!kept.public).then(|| audience(cx));
        entries.insert(self.key_in(generation, method, &target, audience), kept).await;
    }

    /// Drops every answer of this plugin instance (it reported a change):
    /// none is found again, and each ages out of the cache (its TTL, or
    /// sooner when room is needed).
    pub fn forget(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }
}
