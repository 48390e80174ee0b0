//! The data layer's sections of the configuration file, as the operator
//! writes them (`[server]`, `[cache]`, `[state]`, `[tasks]`, `[listen]` and
//! `[auth.scopes]`), their defaults and their checks. The binary places them
//! in its file and composes them; what they become is [`Config`],
//! [`TaskConfig`], [`ListenLimits`] and [`Policy`].

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;
use switchyard_settings::{Problems, Section, StringList};

use crate::caching::{CachePolicy, CacheScope};
use crate::listen::ListenLimits;
use crate::policy::Policy;
use crate::server::Config;
use crate::state::StateKey;
use crate::tasks::TaskConfig;

/// `[server]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    /// `serverInfo.name`. Default `switchyard`.
    pub name: Option<String>,
    /// `instructions` for the model. Default none.
    pub instructions: Option<String>,
    /// Items per list page. Default 100.
    pub page_size: Option<usize>,
    /// Deadline of one plugin call, e.g. `"60s"`. Default 60 s.
    pub call_timeout: Option<String>,
}

/// `[cache]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCache {
    /// `ttlMs` of `server/discover`. Default `"1h"`.
    pub discover_ttl: Option<String>,
    /// `ttlMs` of `*/list`. Default `"60s"`.
    pub list_ttl: Option<String>,
    /// `ttlMs` of `resources/read`. Default `"60s"`.
    pub read_ttl: Option<String>,
}

/// `[state]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawState {
    /// Sealing keys as `id:base64secret` (32+ bytes), newest first; the first
    /// signs, all verify. Every replica must share them. Default: one random
    /// key per process (fine for a single replica; logged as a warning).
    pub keys: Option<StringList>,
    /// Lifetime of a sealed `requestState`. Default `"10m"`.
    pub lifetime: Option<String>,
    /// A `requestState` that comes back with input answers opens once (in
    /// Redis when `redis_url` is set, so on every replica). Default true.
    pub single_use: Option<bool>,
}

/// `[tasks]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTasks {
    /// How long a task is kept from its creation (`ttlMs`). Default `"1h"`.
    pub ttl: Option<String>,
    /// The polling interval suggested to clients. Default `"1s"`.
    pub poll_interval: Option<String>,
    /// How long a replica's claim on a running task lasts without renewal:
    /// a task whose replica died is failed this long after. Default `"15s"`.
    pub lease: Option<String>,
    /// How long one round of a task's call may run (input waits excluded).
    /// Default `server.call_timeout`.
    pub deadline: Option<String>,
    /// Tasks one caller may have running or waiting for input, per replica. Default 16.
    pub max_per_caller: Option<usize>,
}

/// `[listen]`: the bounds of `subscriptions/listen`, so that one caller
/// cannot hold a replica's streams or memory.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawListen {
    /// Open listen streams per replica. Default 10000.
    pub max_streams: Option<usize>,
    /// Open listen streams per caller (principal, or peer address when
    /// unauthenticated). Default 64.
    pub max_streams_per_caller: Option<usize>,
    /// `resourceSubscriptions` entries per stream. Default 256.
    pub max_resource_subscriptions: Option<usize>,
    /// Their total length, bytes. Default 32768.
    pub max_subscription_bytes: Option<usize>,
    /// Notifications one stream may have waiting before it is closed as too
    /// slow. Default 64.
    pub queue: Option<usize>,
}

/// `[auth.scopes]`: `tools = { calculator_add = ["math"] }` and so on.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScopes {
    /// By published tool name.
    #[serde(default)]
    pub tools: BTreeMap<String, StringList>,
    /// By prompt name.
    #[serde(default)]
    pub prompts: BTreeMap<String, StringList>,
    /// By resource URI or template.
    #[serde(default)]
    pub resources: BTreeMap<String, StringList>,
}

/// What `[server]`, `[cache]` and `[state]` make.
#[derive(Debug)]
pub struct CoreSettings {
    /// The data layer's settings.
    pub config: Config,
    /// The caching of `*/list`, which the catalog applies.
    pub list_cache: CachePolicy,
    /// No `state.keys` were given: this process made one of its own, which
    /// no other replica can open.
    pub ephemeral_state_key: bool,
}

impl RawServer {
    /// The data layer's settings from `[server]` (this), `[cache]` and
    /// `[state]`, with the scope `policy`.
    pub fn check(self, cache: RawCache, state: RawState, policy: Policy, problems: &mut Problems) -> CoreSettings {
        let defaults = Config::default();
        let mut server = problems.section("server");
        let call_timeout = server.duration("call_timeout", self.call_timeout.as_deref(), defaults.call_timeout);
        let page_size = server.at_least_one("page_size", self.page_size, defaults.page_size);
        let mut caching = problems.section("cache");
        let discover_ttl = caching.duration("discover_ttl", cache.discover_ttl.as_deref(), defaults.discover_cache.ttl);
        let list_ttl = caching.duration("list_ttl", cache.list_ttl.as_deref(), Duration::from_secs(60));
        let read_ttl = caching.duration("read_ttl", cache.read_ttl.as_deref(), defaults.read_cache.ttl);
        let mut sealing = problems.section("state");
        let lifetime = sealing.duration("lifetime", state.lifetime.as_deref(), defaults.state_lifetime);
        let (state_keys, ephemeral_state_key) = match state.keys.map(StringList::into_vec) {
            None => (defaults.state_keys.clone(), true),
            Some(keys) => {
                let parsed: Vec<StateKey> =
                    keys.iter().filter_map(|k| parse_key(k).map_err(|e| sealing.push("keys", e)).ok()).collect();
                if parsed.is_empty() {
                    sealing.push("keys", "at least one key is needed");
                }
                (parsed, false)
            }
        };
        let config = Config {
            server_name: self.name.unwrap_or(defaults.server_name),
            instructions: self.instructions,
            page_size,
            discover_cache: CachePolicy::new(discover_ttl, CacheScope::Public),
            read_cache: CachePolicy::new(read_ttl, CacheScope::Public),
            call_timeout,
            state_keys,
            state_lifetime: lifetime,
            state_single_use: state.single_use.unwrap_or(defaults.state_single_use),
            policy,
            ..defaults
        };
        CoreSettings { config, list_cache: CachePolicy::new(list_ttl, CacheScope::Public), ephemeral_state_key }
    }
}

/// `id:base64secret`, the secret at least 32 bytes.
fn parse_key(text: &str) -> Result<StateKey, String> {
    let (id, secret) = text.split_once(':').ok_or_else(|| "each key is id:base64secret".to_owned())?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Err(format!("key id {id:?} must be [A-Za-z0-9_-]+"));
    }
    let secret = base64::engine::general_purpose::STANDARD
        .decode(secret)
        .map_err(|_| format!("the secret of key {id} is not base64"))?;
    if secret.len() < 32 {
        return Err(format!("the secret of key {id} has {} bytes; at least 32 are needed", secret.len()));
    }
    Ok(StateKey { id: id.to_owned(), secret: secret.into() })
}

impl RawTasks {
    /// The Tasks extension's settings.
    pub fn check(self, mut section: Section<'_>) -> TaskConfig {
        let defaults = TaskConfig::default();
        let config = TaskConfig {
            ttl: section.positive_duration("ttl", self.ttl.as_deref(), defaults.ttl),
            poll_interval: section.positive_duration(
                "poll_interval",
                self.poll_interval.as_deref(),
                defaults.poll_interval,
            ),
            lease: section.duration("lease", self.lease.as_deref(), defaults.lease),
            deadline: self
                .deadline
                .as_deref()
                .map(|text| section.positive_duration("deadline", Some(text), Config::default().call_timeout)),
            max_per_caller: section.at_least_one("max_per_caller", self.max_per_caller, defaults.max_per_caller),
        };
        // Renewed at a third of it: shorter would renew more often than a
        // store can be asked.
        if config.lease < Duration::from_millis(300) {
            section.push("lease", "must be at least 300ms");
        }
        config
    }
}

impl RawListen {
    /// The listen hub's bounds; a zero bound is a problem (it would refuse every stream).
    pub fn check(self, mut section: Section<'_>) -> ListenLimits {
        let defaults = ListenLimits::default();
        ListenLimits {
            max_streams: section.at_least_one("max_streams", self.max_streams, defaults.max_streams),
            max_streams_per_caller: section.at_least_one(
                "max_streams_per_caller",
                self.max_streams_per_caller,
                defaults.max_streams_per_caller,
            ),
            max_resource_subscriptions: section.at_least_one(
                "max_resource_subscriptions",
                self.max_resource_subscriptions,
                defaults.max_resource_subscriptions,
            ),
            max_subscription_bytes: section.at_least_one(
                "max_subscription_bytes",
                self.max_subscription_bytes,
                defaults.max_subscription_bytes,
            ),
            queue: section.at_least_one("queue", self.queue, defaults.queue),
        }
    }
}

impl RawScopes {
    /// The scope policy; `authenticated_only` when authorization is on, so a
    /// request without a verified caller (a route that lost its auth layer)
    /// is refused.
    pub fn into_policy(self, authenticated_only: bool) -> Policy {
        let map = |raw: BTreeMap<String, StringList>| raw.into_iter().map(|(k, v)| (k, v.into_vec())).collect();
        Policy {
            tools: map(self.tools),
            prompts: map(self.prompts),
            resources: map(self.resources),
            authenticated_only,
        }
    }
}
