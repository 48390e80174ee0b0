//! The one `Config` of the binary, in two stages: [`RawConfig`] is what the
//! operator wrote (defaults, then a TOML file, then `SWITCHYARD_*`
//! environment variables, later winning), and [`Config`] is validated and
//! ready to use. Every problem is reported at once, before any socket is bound.
//!
//! Environment names map onto the file's keys: `SWITCHYARD_BIND` is `bind`,
//! `SWITCHYARD_HTTP__MAX_BODY_BYTES` is `http.max_body_bytes`. Values are
//! read as TOML when they parse (`10`, `true`, `["a","b"]`) and as strings
//! otherwise; lists also accept a comma-separated string.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;
use switchyard_core::state::StateKey;
use switchyard_core::{CachePolicy, CacheScope};
pub use switchyard_settings::{Secret, StringList, parse_duration};

mod listen;
mod plugins;
#[cfg(test)]
mod reference;

pub use listen::RawListen;
pub use plugins::{RawUpstream, RawWasm};

/// The environment prefix.
pub const ENV_PREFIX: &str = "SWITCHYARD_";

/// Configuration as written: every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// Address to listen on. Default `127.0.0.1:8080` (loopback).
    pub bind: Option<String>,
    /// Built-in plugins to enable, by name. Default `["calculator", "echo"]`.
    pub plugins: Option<StringList>,
    /// A test fixture to enable as well: `conformance`. Default none.
    pub fixture: Option<String>,
    /// Log filter in `tracing` syntax. Default `info`.
    pub log: Option<String>,
    /// How log lines are written: `text` (default) or `json`.
    pub log_format: Option<switchyard_telemetry::LogFormat>,
    /// The registry database: `sqlite://PATH` or `postgres://…`. Default
    /// `sqlite://switchyard.db` (created on first run).
    pub database_url: Option<String>,
    /// Redis for the bus across replicas: `redis://host:6379`, or
    /// `rediss://host:6380` for TLS. Default none (the in-process bus: one replica).
    pub redis_url: Option<String>,
    /// With `rediss://`: a PEM file of the CA certificates that sign Redis's
    /// certificate, instead of the system's roots. Default none.
    pub redis_tls_ca_file: Option<String>,
    /// Prefix of Switchyard's Redis channel names. Default `switchyard:`.
    pub redis_prefix: Option<String>,
    /// `redis_url` is a Redis Cluster: seed nodes separated by commas. Default false.
    pub redis_cluster: Option<bool>,
    /// About how many events the bus's log in Redis keeps, so a replica cut
    /// off for a while catches up without a gap. Default 10,000.
    pub redis_log_max_len: Option<usize>,
    /// MCP server settings.
    #[serde(default)]
    pub server: RawServer,
    /// Caching hints.
    #[serde(default)]
    pub cache: RawCache,
    /// HTTP transport settings.
    #[serde(default)]
    pub http: RawHttp,
    /// `requestState` sealing.
    #[serde(default)]
    pub state: RawState,
    /// Shutdown.
    #[serde(default)]
    pub shutdown: RawShutdown,
    /// The admin API.
    #[serde(default)]
    pub admin: RawAdmin,
    /// Keeping the catalog in step with the registry.
    #[serde(default)]
    pub registry: RawRegistry,
    /// The WASM plugin runtime, and the host directories its plugins may be granted.
    #[serde(default)]
    pub wasm: RawWasm,
    /// Where upstream plugins may connect, and which secrets they may use.
    #[serde(default)]
    pub upstream: RawUpstream,
    /// Rate limits per caller and tool.
    #[serde(default)]
    pub rate_limit: RawRateLimit,
    /// OAuth 2.1 bearer tokens and the scope policy.
    #[serde(default)]
    pub auth: RawAuth,
    /// The Tasks extension.
    #[serde(default)]
    pub tasks: RawTasks,
    /// Bounds of `subscriptions/listen`.
    #[serde(default)]
    pub listen: RawListen,
    /// Traces and metrics.
    #[serde(default)]
    pub telemetry: RawTelemetry,
}

/// `[telemetry]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTelemetry {
    /// Base URL of an OTLP/HTTP collector, e.g. `http://otel-collector:4318`.
    /// Default none: no traces or metrics leave the process.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the exported resource. Default `switchyard`.
    pub service_name: Option<String>,
    /// Fraction of new traces kept, 0 to 1. Default 1.
    pub sample_ratio: Option<f64>,
    /// Join the trace a client's `traceparent` names and follow its sampled
    /// flag (trusted clients, or replicas in front of replicas). Default
    /// false: a client's trace is linked from a new one.
    pub follow_client_traces: Option<bool>,
    /// How often spans are sent. Default `"5s"`.
    pub trace_interval: Option<String>,
    /// How often metrics are pushed over OTLP. Default `"30s"`.
    pub metrics_interval: Option<String>,
    /// Whether `/metrics` serves the Prometheus text format. Default true.
    pub prometheus: Option<bool>,
    /// A separate address for `/metrics` (e.g. `0.0.0.0:9464` in a pod, for
    /// the scraper; not behind the Host/Origin check, which a scraper's
    /// `Host: <pod IP>` would fail). Default none: `/metrics` on the main
    /// address, behind the same checks as MCP.
    pub metrics_bind: Option<String>,
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

/// `[auth]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAuth {
    /// The canonical URI of the MCP endpoint as clients reach it, e.g.
    /// `https://mcp.example.com/mcp`: the audience tokens must name.
    /// Default: `http://{bind}{http.endpoint}`.
    pub resource: Option<String>,
    /// Trusted issuers of JWT access tokens.
    #[serde(default)]
    pub issuers: Vec<RawIssuer>,
    /// Token introspection (RFC 7662) for opaque tokens.
    pub introspection: Option<RawIntrospection>,
    /// Scopes every MCP request needs. Default none.
    pub required_scopes: Option<StringList>,
    /// More scopes to announce in the protected resource metadata.
    pub scopes_supported: Option<StringList>,
    /// The scope an OAuth token needs for the admin API. Default `switchyard:admin`.
    pub admin_scope: Option<String>,
    /// Clock skew allowed on `exp`/`nbf`. Default `"30s"`.
    pub leeway: Option<String>,
    /// Verified tokens kept in memory. Default 100000.
    pub cache_capacity: Option<u64>,
    /// How often issuer keys are refetched. Default `"10m"`.
    pub jwks_refresh: Option<String>,
    /// Least time between key refetches caused by an unknown `kid`. Default `"30s"`.
    pub jwks_min_refetch: Option<String>,
    /// `resource_name` in the metadata.
    pub resource_name: Option<String>,
    /// Serve without authentication on a non-loopback address. Default false:
    /// such a bind without `[auth]` issuers or introspection is refused.
    pub allow_unauthenticated: Option<bool>,
    /// Scopes needed per item, on top of the plugins' own.
    #[serde(default)]
    pub scopes: RawScopes,
}

/// `[[auth.issuers]]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawIssuer {
    /// The `iss` value, exactly.
    pub issuer: String,
    /// Its JWKS URL. Default: discovered from the issuer's metadata.
    pub jwks_uri: Option<String>,
    /// Accepted algorithms. Default `["RS256", "PS256", "ES256", "EdDSA"]`.
    pub algorithms: Option<StringList>,
    /// Accepted audiences, when not the resource URI.
    pub audiences: Option<StringList>,
}

/// `[auth.introspection]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawIntrospection {
    /// The introspection endpoint.
    pub endpoint: String,
    /// Switchyard's client id there.
    pub client_id: String,
    /// Its secret; prefer `client_secret_file` or `SWITCHYARD_AUTH__INTROSPECTION__CLIENT_SECRET`.
    pub client_secret: Option<Secret>,
    /// A file holding the secret (a mounted Kubernetes Secret).
    pub client_secret_file: Option<String>,
    /// The issuer the answers speak for.
    pub issuer: String,
    /// How long an active answer is trusted before the token is asked about
    /// again, however late its `exp`: a revocation is seen within it. Default `"60s"`.
    pub max_age: Option<String>,
    /// How long a refused token (inactive, not for us, expired) is remembered,
    /// so repeating it costs no call to the authorization server. Default `"10s"`.
    pub negative_ttl: Option<String>,
    /// Introspection calls in flight at once; beyond it a token waits its
    /// turn, then gets 503. Default 16.
    pub max_concurrent: Option<usize>,
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

/// `[rate_limit]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRateLimit {
    /// Per caller and target: `"20/s"`, `"600/m"`. Default none (unlimited).
    pub rate: Option<String>,
    /// Requests allowed at once. Default: the rate's count.
    pub burst: Option<u32>,
    /// When Redis cannot be asked: `allow` (default) or `deny`.
    pub on_redis_error: Option<switchyard_limits::OnError>,
    /// Rates by plugin namespace: `units = "5/s"`.
    #[serde(default)]
    pub plugins: BTreeMap<String, String>,
}

/// `[admin]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    /// Serve the admin API. Default true.
    pub enabled: Option<bool>,
    /// Its path prefix. Default `/admin/v1`.
    pub prefix: Option<String>,
    /// Serve it on this address instead of the main one. Default: the main port.
    pub bind: Option<String>,
    /// A bearer token that grants access from anywhere. Default none.
    pub token: Option<Secret>,
    /// Accept requests from loopback peers without a token. Default true
    /// when the admin API is served on a loopback address, false otherwise.
    pub allow_loopback: Option<bool>,
    /// Largest artifact upload in bytes. Default 32 MiB.
    pub max_artifact_bytes: Option<usize>,
}

/// `[registry]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRegistry {
    /// How often a replica checks the registry version even without a bus
    /// event. Default `"10s"`.
    pub sync_interval: Option<String>,
}

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

/// `[http]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHttp {
    /// MCP endpoint path. Default `/mcp`.
    pub endpoint: Option<String>,
    /// Accepted `Host` names; `*` for any. Default the loopback names.
    pub allowed_hosts: Option<StringList>,
    /// Accepted `Origin` host names; `*` for any. Default the loopback names.
    pub allowed_origins: Option<StringList>,
    /// Largest request body in bytes. Default 4 MiB.
    pub max_body_bytes: Option<usize>,
    /// Largest legacy client's answer in bytes (it may cross the bus). Default 256 KiB.
    pub max_answer_bytes: Option<usize>,
    /// SSE keep-alive interval on listen streams. Default `"15s"`.
    pub keep_alive: Option<String>,
    /// Connections queued by the kernel before they are accepted. Default 4096.
    pub listen_backlog: Option<u32>,
    /// Streams one HTTP/2 connection may have open at once. Default 1000.
    pub h2_max_concurrent_streams: Option<u32>,
    /// How long a client may take to send a request head; also how long an
    /// HTTP/1.1 or HTTP/2 connection may sit idle. Default `"30s"`.
    pub header_read_timeout: Option<String>,
    /// How long a client may take to send a request body. Default `"30s"`.
    pub body_read_timeout: Option<String>,
    /// How often HTTP/2 peers are pinged. Default `"30s"`.
    pub h2_keep_alive_interval: Option<String>,
    /// How long an HTTP/2 peer may take to answer a ping. Default `"20s"`.
    pub h2_keep_alive_timeout: Option<String>,
    /// Proxies whose `X-Forwarded-For` is believed, as CIDR ranges or
    /// addresses (`10.0.0.0/8`). Default none.
    pub trusted_proxies: Option<StringList>,
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

/// `[shutdown]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawShutdown {
    /// How long in-flight requests may take to finish after SIGTERM. Default `"30s"`.
    pub grace: Option<String>,
}

/// Validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Listen address.
    pub bind: SocketAddr,
    /// Built-in plugins to enable (fixture included).
    pub plugins: Vec<String>,
    /// Log filter.
    pub log: String,
    /// How log lines are written.
    pub log_format: switchyard_telemetry::LogFormat,
    /// The registry database.
    pub registry: switchyard_registry::Config,
    /// Redis for the bus, when several replicas run.
    pub redis: Option<switchyard_bus::RedisConfig>,
    /// The data layer's settings.
    pub core: switchyard_core::Config,
    /// List caching policy.
    pub list_cache: CachePolicy,
    /// The transport's settings.
    pub http: switchyard_http::Config,
    /// Whether the sealing keys were generated (single-replica only).
    pub ephemeral_state_key: bool,
    /// Shutdown grace period.
    pub shutdown_grace: Duration,
    /// The admin API, unless disabled.
    pub admin: Option<AdminConfig>,
    /// Interval of the registry version check.
    pub registry_sync_interval: Duration,
    /// The WASM runtime.
    pub wasm: switchyard_plugins::WasmConfig,
    /// What upstream plugins may make a replica read and wait for.
    pub upstream: switchyard_plugins::UpstreamLimits,
    /// What plugin specs may reach: outbound addresses, secrets, host directories.
    pub grants: switchyard_plugins::Grants,
    /// Rate limits, if any is configured.
    pub rate_limit: Option<(switchyard_limits::Limits, switchyard_limits::OnError)>,
    /// Bearer-token authentication, when configured.
    pub auth: Option<AuthConfig>,
    /// The Tasks extension.
    pub tasks: switchyard_core::tasks::TaskConfig,
    /// Bounds of `subscriptions/listen`.
    pub listen: switchyard_core::ListenLimits,
    /// Traces and metrics.
    pub telemetry: switchyard_telemetry::Config,
    /// Where `/metrics` is served, if not on `bind`.
    pub metrics_bind: Option<SocketAddr>,
}

/// Authentication settings.
#[derive(Debug, Clone)]
pub struct AuthConfig {
    /// The resource server's settings.
    pub verifier: switchyard_auth::Config,
    /// The scope the admin API requires of OAuth callers.
    pub admin_scope: String,
}

/// The admin API's settings.
#[derive(Debug, Clone)]
pub struct AdminConfig {
    /// Prefix, access and limits.
    pub api: switchyard_admin::Config,
    /// A separate address, if configured.
    pub bind: Option<SocketAddr>,
    /// The admin token, when one is configured (the CLI sends it).
    pub token: Option<Secret>,
}

/// Every problem found in the configuration.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration:\n  - {}", .0.join("\n  - "))]
pub struct Invalid(pub Vec<String>);

impl RawConfig {
    /// Reads the file (if any), then overlays the environment variables given
    /// (the binary passes `std::env::vars()`; tests pass a map).
    ///
    /// # Errors
    /// Every unreadable file, unknown key and bad value, together.
    pub fn load(file: Option<&Path>, env: impl IntoIterator<Item = (String, String)>) -> Result<Self, Invalid> {
        let (raw, problems) = Self::read(file, env);
        if problems.is_empty() { Ok(raw) } else { Err(Invalid(problems)) }
    }

    /// What [`RawConfig::load`] reads, and every problem it found: a section
    /// that cannot be read is left at its defaults, so the others are still
    /// read (and can be checked).
    fn read(file: Option<&Path>, env: impl IntoIterator<Item = (String, String)>) -> (Self, Vec<String>) {
        let mut problems = Vec::new();
        let mut table = match file {
            None => toml::Table::new(),
            Some(path) => match std::fs::read_to_string(path) {
                Ok(text) => text.parse::<toml::Table>().unwrap_or_else(|e| {
                    problems.push(format!("{}: {e}", path.display()));
                    toml::Table::new()
                }),
                Err(e) => {
                    problems.push(format!("{}: {e}", path.display()));
                    toml::Table::new()
                }
            },
        };
        let (env, others): (BTreeMap<String, String>, BTreeMap<String, String>) =
            env.into_iter().partition(|(k, _)| k.starts_with(ENV_PREFIX));
        for (name, value) in env {
            let path: Vec<String> = name[ENV_PREFIX.len()..].split("__").map(str::to_ascii_lowercase).collect();
            let parsed = format!("v = {value}")
                .parse::<toml::Table>()
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or(toml::Value::String(value));
            if let Err(section) = insert_path(&mut table, &path, parsed) {
                problems.push(format!("{name}: {section} is not a section"));
            }
        }
        // Each top-level key alone first: serde stops at the first error, and
        // one bad section must not hide the problems of the others.
        let keys: Vec<String> = table.keys().cloned().collect();
        for key in keys {
            let alone = toml::Table::from_iter(table.get(&key).map(|value| (key.clone(), value.clone())));
            if let Err(error) = RawConfig::deserialize(toml::Value::Table(alone)) {
                let message = error.to_string();
                let message = message.trim_end();
                problems.push(if message.contains(&key) { message.to_owned() } else { format!("{key}: {message}") });
                table.remove(&key);
            }
        }
        let mut raw = RawConfig::deserialize(toml::Value::Table(table)).unwrap_or_else(|e| {
            problems.push(e.to_string());
            RawConfig::default()
        });
        // Upstream specs may read the variables `upstream.secret_env`
        // grants: their values are taken now, and only theirs.
        let grants = switchyard_plugins::SecretPolicy {
            env: raw.upstream.secret_env.clone().map(StringList::into_vec).unwrap_or_default(),
            ..Default::default()
        };
        raw.upstream.granted_env = others
            .into_iter()
            .filter(|(name, _)| grants.grants(name))
            .map(|(name, value)| (name, value.into()))
            .collect();
        (raw, problems)
    }
}

impl Config {
    /// Reads and checks the configuration: the file (if any), then the
    /// environment variables given. Every problem of both steps is reported
    /// at once: a section that cannot be read is checked at its defaults, so
    /// the others' problems are still found.
    ///
    /// # Errors
    /// Every problem found.
    pub fn load(file: Option<&Path>, env: impl IntoIterator<Item = (String, String)>) -> Result<Self, Invalid> {
        let (raw, mut problems) = RawConfig::read(file, env);
        match Self::try_from(raw) {
            Ok(config) if problems.is_empty() => Ok(config),
            Ok(_) => Err(Invalid(problems)),
            Err(Invalid(more)) => {
                problems.extend(more);
                Err(Invalid(problems))
            }
        }
    }
}

impl TryFrom<RawConfig> for Config {
    type Error = Invalid;

    fn try_from(raw: RawConfig) -> Result<Self, Invalid> {
        let mut problems = Vec::new();
        let mut duration = |what: &str, value: Option<String>, default: Duration| match value {
            None => default,
            Some(text) => parse_duration(&text).unwrap_or_else(|| {
                problems.push(format!("{what}: {text:?} is not a duration (try \"250ms\", \"30s\", \"5m\", \"1h\")"));
                default
            }),
        };
        let core_defaults = switchyard_core::Config::default();
        let call_timeout = duration("server.call_timeout", raw.server.call_timeout, core_defaults.call_timeout);
        let discover_ttl = duration("cache.discover_ttl", raw.cache.discover_ttl, core_defaults.discover_cache.ttl);
        let list_ttl = duration("cache.list_ttl", raw.cache.list_ttl, Duration::from_secs(60));
        let read_ttl = duration("cache.read_ttl", raw.cache.read_ttl, core_defaults.read_cache.ttl);
        let http_defaults = switchyard_http::Config::default();
        let keep_alive = duration("http.keep_alive", raw.http.keep_alive, http_defaults.keep_alive);
        let header_read_timeout =
            duration("http.header_read_timeout", raw.http.header_read_timeout, http_defaults.header_read_timeout);
        let body_read_timeout =
            duration("http.body_read_timeout", raw.http.body_read_timeout, http_defaults.body_read_timeout);
        let h2_keep_alive_interval = duration(
            "http.h2_keep_alive_interval",
            raw.http.h2_keep_alive_interval,
            http_defaults.h2_keep_alive_interval,
        );
        let h2_keep_alive_timeout =
            duration("http.h2_keep_alive_timeout", raw.http.h2_keep_alive_timeout, http_defaults.h2_keep_alive_timeout);
        let state_lifetime = duration("state.lifetime", raw.state.lifetime, core_defaults.state_lifetime);
        let shutdown_grace = duration("shutdown.grace", raw.shutdown.grace, Duration::from_secs(30));
        let registry_sync_interval =
            duration("registry.sync_interval", raw.registry.sync_interval, Duration::from_secs(10));
        let task_defaults = switchyard_core::tasks::TaskConfig::default();
        let tasks = switchyard_core::tasks::TaskConfig {
            ttl: duration("tasks.ttl", raw.tasks.ttl, task_defaults.ttl),
            poll_interval: duration("tasks.poll_interval", raw.tasks.poll_interval, task_defaults.poll_interval),
            lease: duration("tasks.lease", raw.tasks.lease, task_defaults.lease),
            deadline: raw.tasks.deadline.clone().map(|text| duration("tasks.deadline", Some(text), call_timeout)),
            max_per_caller: raw.tasks.max_per_caller.unwrap_or(task_defaults.max_per_caller),
        };
        let telemetry_defaults = switchyard_telemetry::Config::default();
        let telemetry = switchyard_telemetry::Config {
            trace_interval: duration(
                "telemetry.trace_interval",
                raw.telemetry.trace_interval,
                telemetry_defaults.trace_interval,
            ),
            metrics_interval: duration(
                "telemetry.metrics_interval",
                raw.telemetry.metrics_interval,
                telemetry_defaults.metrics_interval,
            ),
            otlp_endpoint: raw.telemetry.otlp_endpoint.filter(|e| !e.is_empty()),
            service_name: raw.telemetry.service_name.unwrap_or(telemetry_defaults.service_name),
            sample_ratio: raw.telemetry.sample_ratio.unwrap_or(telemetry_defaults.sample_ratio),
            follow_client_traces: raw.telemetry.follow_client_traces.unwrap_or(telemetry_defaults.follow_client_traces),
            prometheus: raw.telemetry.prometheus.unwrap_or(telemetry_defaults.prometheus),
            ..telemetry_defaults
        };
        if !(0.0..=1.0).contains(&telemetry.sample_ratio) {
            problems.push("telemetry.sample_ratio: must be between 0 and 1".into());
        }
        if let Some(endpoint) = &telemetry.otlp_endpoint
            && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
        {
            problems.push(format!("telemetry.otlp_endpoint: {endpoint:?} is not an http(s) URL"));
        }

        let metrics_bind = raw.telemetry.metrics_bind.as_deref().and_then(|text| {
            text.parse::<SocketAddr>().map_err(|e| problems.push(format!("telemetry.metrics_bind: {text:?}: {e}"))).ok()
        });

        let known_scheme = |url: &str| ["sqlite:", "postgres:", "postgresql:"].iter().any(|s| url.starts_with(s));
        if raw.database_url.as_deref().is_some_and(|url| !known_scheme(url)) {
            problems.push("database_url: must start with sqlite: or postgres:".to_owned());
        }
        let bind_text = raw.bind.unwrap_or_else(|| "127.0.0.1:8080".into());
        let bind = bind_text.parse().unwrap_or_else(|_| {
            problems.push(format!("bind: {bind_text:?} is not an address like 127.0.0.1:8080"));
            SocketAddr::from(([127, 0, 0, 1], 8080))
        });

        let mut plugins = raw.plugins.map_or_else(|| vec!["calculator".into(), "echo".into()], StringList::into_vec);
        if let Some(fixture) = raw.fixture.filter(|f| !f.is_empty()) {
            if fixture == "conformance" {
                plugins.push(fixture);
            } else {
                problems.push(format!("fixture: {fixture:?} is unknown (the one fixture is \"conformance\")"));
            }
        }
        for name in &plugins {
            if switchyard_plugins::builtin::by_name(name).is_none() {
                let known: Vec<&str> = switchyard_plugins::builtin::AVAILABLE.iter().map(|(n, _)| *n).collect();
                problems.push(format!("plugins: {name:?} is not a built-in plugin (known: {})", known.join(", ")));
            }
        }

        let (state_keys, ephemeral_state_key) = match raw.state.keys.map(StringList::into_vec) {
            None => (core_defaults.state_keys.clone(), true),
            Some(keys) => {
                let parsed: Vec<StateKey> =
                    keys.iter().filter_map(|k| parse_key(k).map_err(|e| problems.push(e)).ok()).collect();
                if parsed.is_empty() {
                    problems.push("state.keys: at least one key is needed".into());
                }
                (parsed, false)
            }
        };

        let page_size = raw.server.page_size.unwrap_or(core_defaults.page_size);
        if page_size == 0 {
            problems.push("server.page_size must be at least 1".into());
        }
        for (key, value) in [
            ("http.header_read_timeout", header_read_timeout),
            ("http.body_read_timeout", body_read_timeout),
            ("http.h2_keep_alive_interval", h2_keep_alive_interval),
            ("http.h2_keep_alive_timeout", h2_keep_alive_timeout),
        ] {
            if value.is_zero() {
                problems.push(format!("{key}: must be more than zero"));
            }
        }
        let mut http = switchyard_http::Config {
            keep_alive,
            header_read_timeout,
            body_read_timeout,
            h2_keep_alive_interval,
            h2_keep_alive_timeout,
            ..http_defaults
        };
        if let Some(endpoint) = raw.http.endpoint {
            if !endpoint.starts_with('/') {
                problems.push(format!("http.endpoint: {endpoint:?} must start with /"));
            }
            http.endpoint = endpoint;
        }
        if let Some(hosts) = raw.http.allowed_hosts {
            http.allowed_hosts = hosts.into_vec();
        }
        if let Some(origins) = raw.http.allowed_origins {
            http.allowed_origins = origins.into_vec();
        }
        for proxy in raw.http.trusted_proxies.map(StringList::into_vec).unwrap_or_default() {
            let range = proxy.parse::<ipnet::IpNet>().or_else(|_| proxy.parse::<std::net::IpAddr>().map(Into::into));
            match range {
                Ok(range) => http.trusted_proxies.push(range),
                Err(_) => problems
                    .push(format!("http.trusted_proxies: {proxy:?} is not an address or a CIDR range like 10.0.0.0/8")),
            }
        }
        if let Some(max) = raw.http.max_body_bytes {
            http.max_body_bytes = max;
        }
        if let Some(max) = raw.http.max_answer_bytes {
            http.max_answer_bytes = max;
        }
        if let Some(backlog) = raw.http.listen_backlog {
            http.listen_backlog = backlog.max(1);
        }
        if let Some(streams) = raw.http.h2_max_concurrent_streams {
            http.h2_max_concurrent_streams = streams.max(1);
        }

        if raw.redis_url.as_deref().is_some_and(|url| !(url.starts_with("redis://") || url.starts_with("rediss://"))) {
            problems.push("redis_url: must start with redis:// or rediss://".to_owned());
        }
        if raw.redis_log_max_len == Some(0) {
            problems.push("redis_log_max_len: must be at least 1".to_owned());
        }
        if registry_sync_interval.is_zero() {
            problems.push("registry.sync_interval must be more than 0".into());
        }
        let rate_limit = rate_limit_config(raw.rate_limit, &mut problems);
        let mut policy = switchyard_core::policy::Policy {
            tools: scope_map(&raw.auth.scopes.tools),
            prompts: scope_map(&raw.auth.scopes.prompts),
            resources: scope_map(&raw.auth.scopes.resources),
            authenticated_only: false,
        };
        let auth = auth_config(raw.auth, bind, &http.endpoint, &mut problems);
        // With authorization on, `core` refuses any request without a
        // verified caller: a route that lost its auth layer fails closed.
        policy.authenticated_only = auth.is_some();
        let admin = admin_config(raw.admin, bind, &mut problems);
        let plugins::PluginConfig { wasm, upstream, grants } =
            plugins::plugin_config(raw.wasm, raw.upstream, &mut problems);
        let listen = listen::listen_limits(raw.listen, &mut problems);
        // Replicas that share Redis share work: a multi-round request, a
        // legacy client's answer and every bus message (its MAC) must open
        // on any of them, so they must hold the same keys.
        if ephemeral_state_key && raw.redis_url.as_deref().is_some_and(|u| !u.is_empty()) {
            problems.push(
                "state.keys: replicas that share Redis must share state.keys (requestState, legacy answer ids and the bus's MACs use them)".into(),
            );
        }

        let tls_ca_pem = raw.redis_tls_ca_file.as_ref().and_then(|path| {
            if !raw.redis_url.as_deref().is_some_and(|url| url.starts_with("rediss://")) {
                problems.push("redis_tls_ca_file: only for a rediss:// redis_url".into());
            }
            std::fs::read(path).map_err(|e| problems.push(format!("redis_tls_ca_file: {path}: {e}"))).ok()
        });
        if tasks.ttl.is_zero()
            || tasks.lease < Duration::from_millis(300)
            || tasks.poll_interval.is_zero()
            || tasks.max_per_caller == 0
            || tasks.deadline.is_some_and(|d| d.is_zero())
        {
            problems.push(
                "tasks.ttl, tasks.poll_interval, tasks.deadline and tasks.max_per_caller must be more than 0, tasks.lease at least 300ms".into(),
            );
        }
        if !problems.is_empty() {
            return Err(Invalid(problems));
        }
        let redis = raw.redis_url.filter(|u| !u.is_empty()).map(|url| switchyard_bus::RedisConfig {
            url,
            tls_ca_pem,
            prefix: raw.redis_prefix.clone().unwrap_or_else(|| "switchyard:".into()),
            cluster: raw.redis_cluster.unwrap_or(false),
            keys: state_keys.iter().map(|key| switchyard_bus::BusKey::derived(&key.id, key.secret.expose())).collect(),
            log_max_len: raw.redis_log_max_len.unwrap_or(switchyard_bus::DEFAULT_LOG_MAX_LEN),
        });
        Ok(Config {
            listen,
            telemetry,
            metrics_bind,
            tasks,
            auth,
            rate_limit,
            redis,
            grants,
            admin,
            registry_sync_interval,
            wasm,
            upstream,
            bind,
            plugins,
            log: raw.log.unwrap_or_else(|| "info".into()),
            log_format: raw.log_format.unwrap_or_default(),
            registry: switchyard_registry::Config {
                url: raw.database_url.unwrap_or_else(|| switchyard_registry::Config::default().url),
                ..switchyard_registry::Config::default()
            },
            core: switchyard_core::Config {
                server_name: raw.server.name.unwrap_or(core_defaults.server_name),
                server_version: env!("CARGO_PKG_VERSION").into(),
                instructions: raw.server.instructions,
                page_size,
                discover_cache: CachePolicy::new(discover_ttl, CacheScope::Public),
                read_cache: CachePolicy::new(read_ttl, CacheScope::Public),
                call_timeout,
                state_keys,
                state_lifetime,
                state_single_use: raw.state.single_use.unwrap_or(core_defaults.state_single_use),
                policy,
            },
            list_cache: CachePolicy::new(list_ttl, CacheScope::Public),
            http,
            ephemeral_state_key,
            shutdown_grace,
        })
    }
}

fn rate_limit_config(
    raw: RawRateLimit,
    problems: &mut Vec<String>,
) -> Option<(switchyard_limits::Limits, switchyard_limits::OnError)> {
    use switchyard_limits::{Limits, Rate};
    let mut parse = |field: &str, text: &str| {
        Rate::parse(text, raw.burst).or_else(|| {
            problems.push(format!("{field}: {text:?} is not a rate like \"20/s\", \"600/m\" or \"5000/h\""));
            None
        })
    };
    let default = raw.rate.as_deref().and_then(|text| parse("rate_limit.rate", text));
    let namespaces = raw
        .plugins
        .iter()
        .filter_map(|(ns, text)| parse(&format!("rate_limit.plugins.{ns}"), text).map(|rate| (ns.clone(), rate)))
        .collect::<std::collections::HashMap<_, _>>();
    let on_error = raw.on_redis_error.unwrap_or_default();
    (default.is_some() || !namespaces.is_empty()).then_some((Limits { default, namespaces }, on_error))
}

fn scope_map(raw: &BTreeMap<String, StringList>) -> std::collections::HashMap<String, Vec<String>> {
    raw.iter().map(|(key, scopes)| (key.clone(), scopes.clone().into_vec())).collect()
}

fn auth_config(raw: RawAuth, bind: SocketAddr, endpoint: &str, problems: &mut Vec<String>) -> Option<AuthConfig> {
    if raw.issuers.is_empty() && raw.introspection.is_none() {
        // Off loopback, serving without authentication must be asked for.
        if !bind.ip().is_loopback() && raw.allow_unauthenticated != Some(true) {
            problems.push(format!(
                "bind: {bind} is not loopback, so [auth] needs issuers or introspection (or auth.allow_unauthenticated = true, which exposes every tool to anyone who can connect)"
            ));
        }
        return None;
    }
    let resource = raw.resource.unwrap_or_else(|| format!("http://{bind}{endpoint}"));
    let issuers = raw
        .issuers
        .into_iter()
        .map(|issuer| {
            let mut config = switchyard_auth::IssuerConfig::new(issuer.issuer);
            config.jwks_uri = issuer.jwks_uri;
            if let Some(algorithms) = issuer.algorithms {
                config.algorithms = algorithms
                    .into_vec()
                    .iter()
                    .filter_map(|name| {
                        name.parse()
                            .map_err(|_| problems.push(format!("auth.issuers: algorithm {name:?} is unknown")))
                            .ok()
                    })
                    .collect();
            }
            config.audiences = issuer.audiences.map(StringList::into_vec).unwrap_or_default();
            config
        })
        .collect();
    let mut config = switchyard_auth::Config::new(resource, issuers);
    let mut introspection_ages = (None, None);
    if let Some(introspection) = raw.introspection {
        introspection_ages = (introspection.max_age, introspection.negative_ttl);
        config.introspection_max_concurrent =
            introspection.max_concurrent.unwrap_or(config.introspection_max_concurrent);
        let secret = match (introspection.client_secret, introspection.client_secret_file) {
            (Some(secret), None) => secret,
            (None, Some(path)) => {
                Secret::new(std::fs::read_to_string(&path).map(|s| s.trim().to_owned()).unwrap_or_else(|e| {
                    problems.push(format!("auth.introspection.client_secret_file: {path}: {e}"));
                    String::new()
                }))
            }
            _ => {
                problems.push("auth.introspection: set one of client_secret and client_secret_file".into());
                Secret::default()
            }
        };
        config.introspection = Some(switchyard_auth::IntrospectionConfig {
            endpoint: introspection.endpoint,
            client_id: introspection.client_id,
            client_secret: secret,
            issuer: introspection.issuer,
        });
    }
    config.required_scopes = raw.required_scopes.map(StringList::into_vec).unwrap_or_default();
    config.scopes_supported = raw.scopes_supported.map(StringList::into_vec).unwrap_or_default();
    let mut duration = |what: &str, value: Option<String>, default: Duration| match value {
        None => default,
        Some(text) => parse_duration(&text).unwrap_or_else(|| {
            problems.push(format!("{what}: {text:?} is not a duration (try \"30s\", \"5m\")"));
            default
        }),
    };
    config.leeway = duration("auth.leeway", raw.leeway, config.leeway);
    config.jwks_refresh = duration("auth.jwks_refresh", raw.jwks_refresh, config.jwks_refresh);
    config.jwks_min_refetch = duration("auth.jwks_min_refetch", raw.jwks_min_refetch, config.jwks_min_refetch);
    config.introspection_max_age =
        duration("auth.introspection.max_age", introspection_ages.0, config.introspection_max_age);
    config.introspection_negative_ttl =
        duration("auth.introspection.negative_ttl", introspection_ages.1, config.introspection_negative_ttl);
    config.cache_capacity = raw.cache_capacity.unwrap_or(config.cache_capacity);
    config.resource_name = raw.resource_name;
    if let Err(error) = config.validate() {
        problems.push(error.to_string());
    }
    Some(AuthConfig { verifier: config, admin_scope: raw.admin_scope.unwrap_or_else(|| "switchyard:admin".into()) })
}

fn admin_config(raw: RawAdmin, main_bind: SocketAddr, problems: &mut Vec<String>) -> Option<AdminConfig> {
    if raw.enabled == Some(false) {
        return None;
    }
    let defaults = switchyard_admin::Config::default();
    let prefix = raw.prefix.unwrap_or(defaults.prefix);
    if !prefix.starts_with('/') || prefix.len() < 2 || prefix.ends_with('/') {
        problems.push(format!("admin.prefix: {prefix:?} must start with / and not end with /"));
    }
    let bind = raw.bind.and_then(|text| {
        text.parse()
            .map_err(|_| problems.push(format!("admin.bind: {text:?} is not an address like 127.0.0.1:8081")))
            .ok()
    });
    if raw.token.as_ref().is_some_and(|t| t.expose().len() < 16) {
        problems.push("admin.token: use at least 16 characters".into());
    }
    // Loopback peers are trusted by default only when nobody else can reach
    // the admin API at all. Behind a non-loopback bind, a service-mesh
    // sidecar or a same-host proxy delivers every outside request from
    // 127.0.0.1 (Istio: 127.0.0.6), so trusting loopback would trust everyone.
    let served_on = bind.unwrap_or(main_bind);
    let allow_loopback = raw.allow_loopback.unwrap_or_else(|| served_on.ip().is_loopback());
    let access = switchyard_admin::Access::new(allow_loopback, raw.token.as_ref().map(|t| t.expose().as_str()));
    Some(AdminConfig {
        api: switchyard_admin::Config {
            prefix,
            access,
            max_artifact_bytes: raw.max_artifact_bytes.unwrap_or(defaults.max_artifact_bytes),
        },
        bind,
        token: raw.token,
    })
}

/// Sets `table[path[0]][path[1]]… = value`, creating sections; `Err` names a
/// path element that exists but is not a section.
fn insert_path(table: &mut toml::Table, path: &[String], value: toml::Value) -> Result<(), String> {
    match path {
        [] => Ok(()),
        [last] => {
            table.insert(last.clone(), value);
            Ok(())
        }
        [section, rest @ ..] => {
            match table.entry(section.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new())) {
                toml::Value::Table(inner) => insert_path(inner, rest, value),
                _ => Err(section.clone()),
            }
        }
    }
}

fn parse_key(text: &str) -> Result<StateKey, String> {
    let (id, secret) = text.split_once(':').ok_or_else(|| "state.keys: each key is id:base64secret".to_owned())?;
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        return Err(format!("state.keys: key id {id:?} must be [A-Za-z0-9_-]+"));
    }
    let secret = base64::engine::general_purpose::STANDARD
        .decode(secret)
        .map_err(|_| format!("state.keys: the secret of key {id} is not base64"))?;
    if secret.len() < 32 {
        return Err(format!("state.keys: the secret of key {id} has {} bytes; at least 32 are needed", secret.len()));
    }
    Ok(StateKey { id: id.to_owned(), secret: secret.into() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn defaults_bind_to_loopback() {
        let config = Config::try_from(RawConfig::load(None, env(&[])).unwrap()).unwrap();
        assert!(config.bind.ip().is_loopback());
        assert_eq!(config.plugins, ["calculator", "echo"]);
        assert!(config.ephemeral_state_key);
    }

    #[test]
    fn environment_overrides_and_nests() {
        let raw = RawConfig::load(
            None,
            env(&[
                ("SWITCHYARD_BIND", "127.0.0.1:9999"),
                ("SWITCHYARD_FIXTURE", "conformance"),
                ("SWITCHYARD_HTTP__MAX_BODY_BYTES", "1024"),
                ("SWITCHYARD_HTTP__ALLOWED_HOSTS", "a.example,b.example"),
                (
                    "SWITCHYARD_STATE__KEYS",
                    "k2:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=,k1:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=",
                ),
                ("OTHER", "ignored"),
            ]),
        )
        .unwrap();
        let config = Config::try_from(raw).unwrap();
        assert_eq!(config.bind.port(), 9999);
        assert!(config.plugins.contains(&"conformance".to_owned()));
        assert_eq!(config.http.max_body_bytes, 1024);
        assert_eq!(config.http.allowed_hosts, ["a.example", "b.example"]);
        assert_eq!(config.core.state_keys.iter().map(|k| k.id.as_str()).collect::<Vec<_>>(), ["k2", "k1"]);
    }

    #[test]
    fn redis_cluster_takes_seed_nodes_for_the_bus_and_the_limits() {
        let nodes = "redis://10.0.0.1:6379,redis://10.0.0.2:6379";
        let key = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
        let clustered =
            [("SWITCHYARD_REDIS_URL", nodes), ("SWITCHYARD_REDIS_CLUSTER", "true"), ("SWITCHYARD_STATE__KEYS", key)];
        let config = Config::try_from(RawConfig::load(None, env(&clustered)).unwrap()).unwrap();
        let redis = config.redis.unwrap();
        assert!(redis.cluster);
        assert_eq!(redis.url, nodes);
        assert_eq!(
            redis.keys.iter().map(|k| k.id.as_str()).collect::<Vec<_>>(),
            ["k1"],
            "the bus signs with state.keys"
        );
        // Without shared keys, replicas sharing Redis could not trust each other.
        let problem = Config::try_from(RawConfig::load(None, env(&clustered[..2])).unwrap()).unwrap_err();
        assert!(problem.to_string().contains("state.keys"), "{problem}");
        let limited = [clustered[0], clustered[1], clustered[2], ("SWITCHYARD_RATE_LIMIT__RATE", "10/s")];
        let config = Config::try_from(RawConfig::load(None, env(&limited)).unwrap()).unwrap();
        assert!(config.redis.unwrap().cluster && config.rate_limit.is_some());
    }

    #[test]
    fn reports_every_problem_at_once() {
        let raw = RawConfig::load(
            None,
            env(&[
                ("SWITCHYARD_BIND", "nowhere"),
                ("SWITCHYARD_SERVER__CALL_TIMEOUT", "soon"),
                ("SWITCHYARD_PLUGINS", "nope"),
                ("SWITCHYARD_DATABASE_URL", "mysql://db/x"),
                ("SWITCHYARD_HTTP__HEADER_READ_TIMEOUT", "0s"),
            ]),
        )
        .unwrap();
        let Invalid(problems) = Config::try_from(raw).unwrap_err();
        assert_eq!(problems.len(), 5, "{problems:?}");
        assert!(problems.iter().any(|p| p.starts_with("http.header_read_timeout")), "{problems:?}");
        assert!(RawConfig::load(None, env(&[("SWITCHYARD_NO_SUCH_KEY", "1")])).is_err());
    }

    #[test]
    fn a_secret_of_digits_is_read_as_its_text_and_never_quoted() {
        let config = Config::load(None, env(&[("SWITCHYARD_ADMIN__TOKEN", "1234567890123456789")])).unwrap();
        assert_eq!(config.admin.unwrap().token.unwrap().expose(), "1234567890123456789");
        let Invalid(problems) =
            Config::load(None, env(&[("SWITCHYARD_ADMIN__TOKEN", "[\"hunter2-hunter2-hunter2\"]")])).unwrap_err();
        assert!(problems.iter().all(|p| !p.contains("hunter2")), "{problems:?}");
    }

    #[test]
    fn problems_reading_one_section_hide_none_of_the_others() {
        let Invalid(problems) = Config::load(
            None,
            env(&[
                ("SWITCHYARD_HTTP__NO_SUCH_KEY", "1"),
                ("SWITCHYARD_RATE_LIMIT__ON_REDIS_ERROR", "maybe"),
                ("SWITCHYARD_NO_SUCH_SECTION__KEY", "1"),
                ("SWITCHYARD_BIND", "nowhere"),
                ("SWITCHYARD_SERVER__PAGE_SIZE", "0"),
            ]),
        )
        .unwrap_err();
        let said = |what: &str| problems.iter().any(|p| p.contains(what));
        assert!(said("no_such_key") && said("no_such_section"), "unknown keys, each: {problems:?}");
        assert!(said("maybe") && said("allow") && said("deny"), "an enum names its values: {problems:?}");
        assert!(said("bind:") && said("page_size"), "and the checks still ran: {problems:?}");
        assert_eq!(problems.len(), 5, "{problems:?}");
    }

    #[test]
    fn a_public_bind_needs_authentication_or_an_explicit_opt_out() {
        let public = [("SWITCHYARD_BIND", "0.0.0.0:8080")];
        let refused = Config::try_from(RawConfig::load(None, env(&public)).unwrap()).unwrap_err();
        assert!(refused.to_string().contains("[auth] needs issuers"), "{refused}");
        let opted_out = env(&[("SWITCHYARD_BIND", "0.0.0.0:8080"), ("SWITCHYARD_AUTH__ALLOW_UNAUTHENTICATED", "true")]);
        assert!(Config::try_from(RawConfig::load(None, opted_out).unwrap()).unwrap().auth.is_none());

        let secured = env(&[
            ("SWITCHYARD_BIND", "0.0.0.0:8080"),
            ("SWITCHYARD_AUTH__RESOURCE", "https://mcp.example.com/mcp"),
            ("SWITCHYARD_AUTH__ISSUERS", r#"[{ issuer = "https://as.example.com", algorithms = ["ES256"] }]"#),
            ("SWITCHYARD_AUTH__REQUIRED_SCOPES", "mcp,tools"),
            ("SWITCHYARD_AUTH__SCOPES__TOOLS__UNITS_CONVERT", "units"),
        ]);
        let config = Config::try_from(RawConfig::load(None, secured).unwrap()).unwrap();
        let auth = config.auth.expect("auth on");
        assert_eq!(auth.verifier.resource, "https://mcp.example.com/mcp");
        assert_eq!(format!("{:?}", auth.verifier.issuers[0].algorithms), "[ES256]");
        assert_eq!(auth.verifier.required_scopes, ["mcp", "tools"]);
        assert_eq!(auth.admin_scope, "switchyard:admin");
        assert_eq!(config.core.policy.tools["units_convert"], ["units"]);

        // A symmetric algorithm is refused: the issuer's public key would be the HMAC secret.
        let symmetric = env(&[("SWITCHYARD_AUTH__ISSUERS", r#"[{ issuer = "https://as", algorithms = ["HS256"] }]"#)]);
        let refused = Config::try_from(RawConfig::load(None, symmetric).unwrap()).unwrap_err();
        assert!(refused.to_string().contains("HS256"), "{refused}");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("5"), None);
        assert_eq!(parse_duration("x"), None);
    }
}
