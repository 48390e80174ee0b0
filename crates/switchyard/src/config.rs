//! The one `Config` of the binary, in two stages: [`RawConfig`] is what the
//! operator wrote (defaults, then a TOML file, then `SWITCHYARD_*`
//! environment variables, later winning), and [`Config`] is validated and
//! ready to use. Every problem is reported at once, before any socket is bound.
//!
//! Each crate owns its sections: their serde shape, defaults and checks
//! live beside the settings they make (`switchyard_http::RawHttp`,
//! `switchyard_auth::RawAuth`, …). This module places them in the file,
//! reads the top-level keys that wire crates together (`bind`, the
//! database, Redis), and composes the results.
//!
//! Environment names map onto the file's keys: `SWITCHYARD_BIND` is `bind`,
//! `SWITCHYARD_HTTP__MAX_BODY_BYTES` is `http.max_body_bytes`. Values are
//! read as TOML when they parse (`10`, `true`, `["a","b"]`) and as strings
//! otherwise; lists also accept a comma-separated string.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use switchyard_core::CachePolicy;
use switchyard_core::settings::{CoreSettings, RawCache, RawListen, RawServer, RawState, RawTasks};
pub use switchyard_settings::{Problems, Secret, StringList, parse_duration};

#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;

pub use switchyard_admin::RawAdmin;
pub use switchyard_auth::RawAuth;
pub use switchyard_http::RawHttp;
pub use switchyard_limits::RawRateLimit;
pub use switchyard_plugins::{RawUpstream, RawWasm};
pub use switchyard_telemetry::RawTelemetry;

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

/// `[registry]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRegistry {
    /// How often a replica checks the registry version even without a bus
    /// event. Default `"10s"`.
    pub sync_interval: Option<String>,
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
    pub admin: Option<switchyard_admin::Settings>,
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
    pub auth: Option<switchyard_auth::Settings>,
    /// The Tasks extension.
    pub tasks: switchyard_core::tasks::TaskConfig,
    /// Bounds of `subscriptions/listen`.
    pub listen: switchyard_core::ListenLimits,
    /// Traces and metrics.
    pub telemetry: switchyard_telemetry::Config,
    /// Where `/metrics` is served, if not on `bind`.
    pub metrics_bind: Option<SocketAddr>,
}

/// Every problem found in the configuration.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration:\n  - {}", .0.join("\n  - "))]
pub struct Invalid(pub Vec<String>);

/// The rest of the environment the configuration was read with: the
/// variables not named `SWITCHYARD_*`, from which `upstream.secret_env`
/// grants values to upstream specs.
type Environment = BTreeMap<String, String>;

impl RawConfig {
    /// Reads the file (if any), then overlays the environment variables given
    /// (the binary passes `std::env::vars()`; tests pass a map).
    ///
    /// # Errors
    /// Every unreadable file, unknown key and bad value, together.
    pub fn load(file: Option<&Path>, env: impl IntoIterator<Item = (String, String)>) -> Result<Self, Invalid> {
        let (raw, _, problems) = Self::read(file, env);
        if problems.is_empty() { Ok(raw) } else { Err(Invalid(problems.into_vec())) }
    }

    /// What [`RawConfig::load`] reads, the rest of the environment, and
    /// every problem found: a section that cannot be read is left at its
    /// defaults, so the others are still read (and can be checked).
    fn read(file: Option<&Path>, env: impl IntoIterator<Item = (String, String)>) -> (Self, Environment, Problems) {
        let mut problems = Problems::new();
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
        let (env, others): (Environment, Environment) = env.into_iter().partition(|(k, _)| k.starts_with(ENV_PREFIX));
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
        let raw = RawConfig::deserialize(toml::Value::Table(table)).unwrap_or_else(|e| {
            problems.push(e.to_string());
            RawConfig::default()
        });
        (raw, others, problems)
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
        let (raw, environment, mut problems) = RawConfig::read(file, env);
        let config = Self::check(raw, environment, &mut problems);
        if problems.is_empty() { Ok(config) } else { Err(Invalid(problems.into_vec())) }
    }

    /// Every section checked by the crate that owns it, composed; what is
    /// wrong goes to `problems` (the result is then not to be used).
    fn check(raw: RawConfig, environment: Environment, problems: &mut Problems) -> Self {
        let bind_text = raw.bind.unwrap_or_else(|| "127.0.0.1:8080".into());
        let bind = bind_text.parse().unwrap_or_else(|_| {
            problems.push(format!("bind: {bind_text:?} is not an address like 127.0.0.1:8080"));
            SocketAddr::from(([127, 0, 0, 1], 8080))
        });
        let plugins = builtin_plugins(raw.plugins, raw.fixture, problems);
        let known_scheme = |url: &str| ["sqlite:", "postgres:", "postgresql:"].iter().any(|s| url.starts_with(s));
        if raw.database_url.as_deref().is_some_and(|url| !known_scheme(url)) {
            problems.push("database_url: must start with sqlite: or postgres:");
        }

        let http = raw.http.check(problems.section("http"));
        let mut auth_section = raw.auth;
        let scopes = std::mem::take(&mut auth_section.scopes);
        let auth = auth_section.check(bind, &http.endpoint, problems.section("auth"));
        // With authorization on, `core` refuses any request without a
        // verified caller: a route that lost its auth layer fails closed.
        let policy = scopes.into_policy(auth.is_some());
        let CoreSettings { config: core, list_cache, ephemeral_state_key } =
            raw.server.check(raw.cache, raw.state, policy, problems);
        let tasks = raw.tasks.check(problems.section("tasks"));
        let listen = raw.listen.check(problems.section("listen"));
        let telemetry = raw.telemetry.check(problems.section("telemetry"));
        let rate_limit = raw.rate_limit.check(problems.section("rate_limit"));
        let admin = raw.admin.check(bind, problems.section("admin"));
        let (wasm, host_dirs) = raw.wasm.check(problems.section("wasm"));
        let upstream = raw.upstream.check(environment, problems.section("upstream"));
        let grants = switchyard_plugins::Grants { outbound: upstream.outbound, secrets: upstream.secrets, host_dirs };
        let shutdown_grace =
            problems.section("shutdown").duration("grace", raw.shutdown.grace.as_deref(), Duration::from_secs(30));
        let registry_sync_interval = problems.section("registry").positive_duration(
            "sync_interval",
            raw.registry.sync_interval.as_deref(),
            Duration::from_secs(10),
        );

        let redis_url = raw.redis_url;
        if redis_url.as_deref().is_some_and(|url| !(url.starts_with("redis://") || url.starts_with("rediss://"))) {
            problems.push("redis_url: must start with redis:// or rediss://");
        }
        if raw.redis_log_max_len == Some(0) {
            problems.push("redis_log_max_len: must be at least 1");
        }
        // Replicas that share Redis share work: a multi-round request, a
        // legacy client's answer and every bus message (its MAC) must open
        // on any of them, so they must hold the same keys.
        if ephemeral_state_key && redis_url.is_some() {
            problems.push(
                "state.keys: replicas that share Redis must share state.keys (requestState, legacy answer ids and the bus's MACs use them)",
            );
        }
        let tls_ca_pem = raw.redis_tls_ca_file.as_ref().and_then(|path| {
            if !redis_url.as_deref().is_some_and(|url| url.starts_with("rediss://")) {
                problems.push("redis_tls_ca_file: only for a rediss:// redis_url");
            }
            std::fs::read(path).map_err(|e| problems.push(format!("redis_tls_ca_file: {path}: {e}"))).ok()
        });
        let redis = redis_url.map(|url| switchyard_bus::RedisConfig {
            url,
            tls_ca_pem,
            prefix: raw.redis_prefix.unwrap_or_else(|| "switchyard:".into()),
            cluster: raw.redis_cluster.unwrap_or(false),
            keys: core
                .state_keys
                .iter()
                .map(|key| switchyard_bus::BusKey::derived(&key.id, key.secret.expose()))
                .collect(),
            log_max_len: raw.redis_log_max_len.unwrap_or(switchyard_bus::DEFAULT_LOG_MAX_LEN),
        });
        Config {
            bind,
            plugins,
            log: raw.log.unwrap_or_else(|| "info".into()),
            log_format: raw.log_format.unwrap_or_default(),
            registry: switchyard_registry::Config {
                url: raw.database_url.unwrap_or_else(|| switchyard_registry::Config::default().url),
                ..switchyard_registry::Config::default()
            },
            redis,
            core,
            list_cache,
            http,
            ephemeral_state_key,
            shutdown_grace,
            admin,
            registry_sync_interval,
            wasm,
            upstream: upstream.limits,
            grants,
            rate_limit,
            auth,
            tasks,
            listen,
            telemetry: telemetry.config,
            metrics_bind: telemetry.metrics_bind,
        }
    }
}

impl Config {
    /// Checks `raw`, handing upstream the variables of `environment` that
    /// `upstream.secret_env` grants (`SWITCHYARD_*` never are).
    ///
    /// # Errors
    /// Every problem found.
    pub fn from_raw(raw: RawConfig, environment: impl IntoIterator<Item = (String, String)>) -> Result<Self, Invalid> {
        // `upstream` itself never grants `SWITCHYARD_*` (SecretPolicy::grants).
        let environment = environment.into_iter().collect();
        let mut problems = Problems::new();
        let config = Self::check(raw, environment, &mut problems);
        if problems.is_empty() { Ok(config) } else { Err(Invalid(problems.into_vec())) }
    }
}

impl TryFrom<RawConfig> for Config {
    type Error = Invalid;

    /// Checks `raw` alone: no environment, so `upstream.secret_env` grants
    /// no values ([`Config::load`] and [`Config::from_raw`] hand one on).
    fn try_from(raw: RawConfig) -> Result<Self, Invalid> {
        Self::from_raw(raw, [])
    }
}

/// The built-in plugins to enable: `plugins`, and the fixture if one is named.
fn builtin_plugins(plugins: Option<StringList>, fixture: Option<String>, problems: &mut Problems) -> Vec<String> {
    let mut plugins = plugins.map_or_else(|| vec!["calculator".into(), "echo".into()], StringList::into_vec);
    if let Some(fixture) = fixture.filter(|f| !f.is_empty()) {
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
    plugins
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
