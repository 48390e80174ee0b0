//! Rate limits per caller and per tool (GCRA, the generic cell rate
//! algorithm: a steady rate with a burst allowance, one number stored per
//! key, the "theoretical arrival time").
//!
//! - [`RedisLimiter`]: the state lives in Redis (one server or a Redis
//!   Cluster), updated by one Lua script that reads Redis's own clock, so
//!   every replica shares one budget and replica clocks do not matter. When Redis cannot be asked, [`OnError`]
//!   decides (allow or deny) and the failure is logged.
//! - [`LocalLimiter`]: the same algorithm in process, for a single replica.
//!
//! Which rate applies: [`Limits`] has a default and per-namespace rates (a
//! registered plugin's tools are `{namespace}_{tool}`), keyed by the caller
//! and the target (the catalog item the request names, else its method; see
//! `core::Server::limit_target`). The HTTP endpoint asks before it reads the
//! body when the headers say what the request is, after parsing it when they
//! do not. Each part of a key is bounded in length. This crate knows nothing
//! of MCP beyond that key.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use switchyard_bus::{Patience, RedisConfig, RedisLink};
use switchyard_http::limit::{Decision, Key, RateLimiter};

mod settings;

pub use settings::RawRateLimit;

/// A steady rate with a burst.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Requests per second, sustained.
    pub per_second: f64,
    /// Requests that may come at once.
    pub burst: u32,
}

impl Rate {
    /// Parses `"20/s"`, `"600/m"`, `"5000/h"`.
    pub fn parse(text: &str, burst: Option<u32>) -> Option<Self> {
        let (count, unit) = text.trim().split_once('/')?;
        let count: f64 = count.trim().parse().ok().filter(|c: &f64| *c > 0.0)?;
        let per_second = count
            / match unit.trim() {
                "s" => 1.0,
                "m" => 60.0,
                "h" => 3600.0,
                _ => return None,
            };
        Some(Self { per_second, burst: burst.unwrap_or(count.ceil().max(1.0) as u32).max(1) })
    }

    /// Time between two requests at the steady rate.
    fn interval(self) -> Duration {
        Duration::from_secs_f64(1.0 / self.per_second)
    }

    /// How far ahead of now the arrival time may run: `burst - 1` intervals.
    fn tolerance(self) -> Duration {
        self.interval() * (self.burst - 1)
    }
}

/// Which rate applies to which target.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Limits {
    /// For every target without a namespace rate; `None`: unlimited.
    pub default: Option<Rate>,
    /// By namespace: applies to targets named `{namespace}_…`.
    pub namespaces: HashMap<String, Rate>,
}

impl Limits {
    /// The rate for `target`, and the key it is counted under.
    fn rate_for(&self, target: &str) -> Option<Rate> {
        let namespace = target.split_once('_').map(|(ns, _)| ns);
        namespace.and_then(|ns| self.namespaces.get(ns)).copied().or(self.default)
    }
}

/// What to do when the shared limit cannot be checked
/// (`rate_limit.on_redis_error`: `allow` or `deny`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Let the request through (availability first). The default.
    #[default]
    Allow,
    /// Refuse it with a one-second retry (protection first).
    Deny,
}

/// GCRA state kept in Redis. `KEYS[1]`: the key; `ARGV`: interval and
/// tolerance in microseconds. Returns 0 to allow, else microseconds to wait.
const GCRA: &str = r"
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) * 1000000 + tonumber(now_parts[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local allow_at = tat - tolerance
if now < allow_at then return allow_at - now end
local new_tat = tat + interval
redis.call('SET', KEYS[1], new_tat, 'PX', math.ceil((new_tat - now) / 1000) + 1000)
return 0
";

/// Limits shared by every replica, kept in Redis (one server or a cluster).
pub struct RedisLimiter {
    link: RedisLink,
    script: redis::Script,
    prefix: String,
    limits: Limits,
    on_error: OnError,
}

impl std::fmt::Debug for RedisLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLimiter")
            .field("limits", &self.limits)
            .field("on_error", &self.on_error)
            .finish_non_exhaustive()
    }
}

impl RedisLimiter {
    /// Connects to the Redis `redis_config` names (one server, or with `cluster`
    /// the seed nodes of a Redis Cluster); keys are
    /// `{prefix}rl:{caller}:{target}`.
    ///
    /// A check waits at most about a second for Redis (connect 1 s, answer
    /// 0.5 s, one retry) before [`OnError`] decides.
    ///
    /// # Errors
    /// When a URL is invalid or Redis does not answer now.
    pub async fn connect(redis_config: &RedisConfig, limits: Limits, on_error: OnError) -> redis::RedisResult<Self> {
        let link = RedisLink::connect(redis_config, Patience::CHECK).await?;
        Ok(Self { link, script: redis::Script::new(GCRA), prefix: redis_config.prefix.clone(), limits, on_error })
    }
}

impl RateLimiter for RedisLimiter {
    fn check<'a>(&'a self, key: Key<'a>) -> BoxFuture<'a, Decision> {
        Box::pin(async move {
            let Some(rate) = self.limits.rate_for(key.target) else { return Decision::Allow };
            let redis_key = format!("{}rl:{}", self.prefix, bounded_key(key));
            let mut invocation = self.script.key(redis_key);
            invocation.arg(rate.interval().as_micros() as u64).arg(rate.tolerance().as_micros() as u64);
            // In a cluster, the key's slot picks the node, and the script,
            // whose only key is that key, runs there (loaded on first use).
            let waited: redis::RedisResult<i64> = invocation.invoke_async(&mut self.link.clone()).await;
            match waited {
                Ok(0) => Decision::Allow,
                Ok(micros) => Decision::Deny { retry_after: Duration::from_micros(micros.unsigned_abs()) },
                Err(error) => {
                    tracing::warn!(%error, on_error = ?self.on_error, "cannot check the rate limit in Redis");
                    match self.on_error {
                        OnError::Allow => Decision::Allow,
                        OnError::Deny => Decision::Deny { retry_after: Duration::from_secs(1) },
                    }
                }
            }
        })
    }
}

/// Limits of one process. The arrival times live in a bounded cache: an
/// entry expires when its arrival time passes (an absent key and a key whose
/// time has passed are the same to GCRA), and past [`LOCAL_KEYS`] the least
/// useful entries are evicted, a little at a time, off the request path.
/// Nothing ever sweeps the whole map under one lock.
pub struct LocalLimiter {
    limits: Limits,
    arrivals: moka::sync::Cache<String, Instant>,
}

impl std::fmt::Debug for LocalLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalLimiter").field("limits", &self.limits).finish_non_exhaustive()
    }
}

impl Default for LocalLimiter {
    fn default() -> Self {
        Self::new(Limits::default())
    }
}

/// Most keys the in-process limiter keeps.
pub const LOCAL_KEYS: u64 = 100_000;

/// Expires an entry when its theoretical arrival time passes.
struct UntilArrival;

impl moka::Expiry<String, Instant> for UntilArrival {
    fn expire_after_create(&self, _: &String, tat: &Instant, created_at: Instant) -> Option<Duration> {
        Some(tat.saturating_duration_since(created_at))
    }

    fn expire_after_update(
        &self,
        _: &String,
        tat: &Instant,
        updated_at: Instant,
        _: Option<Duration>,
    ) -> Option<Duration> {
        Some(tat.saturating_duration_since(updated_at))
    }
}

/// The longest principal or target kept as it is in a key; longer ones are
/// replaced by their SHA-256, so no caller can make a key of any size.
const KEY_PART_MAX: usize = 128;

/// `{principal}:{target}`, each part bounded in length.
fn bounded_key(key: Key<'_>) -> String {
    format!("{}:{}", bounded_part(key.principal), bounded_part(key.target))
}

fn bounded_part(text: &str) -> std::borrow::Cow<'_, str> {
    use sha2::Digest as _;
    if text.len() <= KEY_PART_MAX {
        return text.into();
    }
    let digest = sha2::Sha256::digest(text.as_bytes());
    format!("sha256-{}", digest.iter().map(|b| format!("{b:02x}")).collect::<String>()).into()
}

impl LocalLimiter {
    /// A limiter with these limits.
    pub fn new(limits: Limits) -> Self {
        let arrivals = moka::sync::Cache::builder().max_capacity(LOCAL_KEYS).expire_after(UntilArrival).build();
        Self { limits, arrivals }
    }

    fn decide(&self, key: Key<'_>, now: Instant) -> Decision {
        let Some(rate) = self.limits.rate_for(key.target) else { return Decision::Allow };
        let mut decision = Decision::Allow;
        // One key's read and update are one step (moka locks the key only).
        self.arrivals.entry(bounded_key(key)).and_compute_with(|entry| {
            let base = entry.map_or(now, |e| e.into_value().max(now));
            let allow_at = base.checked_sub(rate.tolerance()).unwrap_or(now);
            if now < allow_at {
                decision = Decision::Deny { retry_after: allow_at - now };
                moka::ops::compute::Op::Nop
            } else {
                moka::ops::compute::Op::Put(base + rate.interval())
            }
        });
        decision
    }
}

impl RateLimiter for LocalLimiter {
    fn check<'a>(&'a self, key: Key<'a>) -> BoxFuture<'a, Decision> {
        let decision = self.decide(key, Instant::now());
        Box::pin(async move { decision })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(target: &str) -> Key<'_> {
        Key { principal: "10.0.0.1", target }
    }

    #[test]
    fn keys_are_bounded_and_the_local_limiter_evicts() {
        let long = "x".repeat(10_000);
        let bounded = bounded_key(Key { principal: &long, target: &long });
        assert!(bounded.len() < 2 * (KEY_PART_MAX + 8), "{}", bounded.len());
        assert_ne!(bounded, bounded_key(Key { principal: &long, target: "y" }));
        let limits = Limits { default: Some(Rate { per_second: 1.0, burst: 1 }), ..Limits::default() };
        let limiter = LocalLimiter::new(limits);
        let now = Instant::now();
        for i in 0..(LOCAL_KEYS + 20_000) {
            limiter.decide(Key { principal: &i.to_string(), target: "echo" }, now);
        }
        limiter.arrivals.run_pending_tasks();
        assert!(limiter.arrivals.entry_count() <= LOCAL_KEYS, "{}", limiter.arrivals.entry_count());
    }

    #[test]
    fn rates_parse() {
        assert_eq!(Rate::parse("20/s", None), Some(Rate { per_second: 20.0, burst: 20 }));
        assert_eq!(Rate::parse("60/m", Some(5)), Some(Rate { per_second: 1.0, burst: 5 }));
        assert!(
            Rate::parse("0/s", None).is_none()
                && Rate::parse("5/d", None).is_none()
                && Rate::parse("x", None).is_none()
        );
    }

    #[test]
    fn local_gcra_allows_the_burst_then_the_rate() {
        let limits = Limits { default: Some(Rate { per_second: 10.0, burst: 3 }), ..Limits::default() };
        let limiter = LocalLimiter::new(limits);
        let now = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.decide(key("echo"), now), Decision::Allow);
        }
        let Decision::Deny { retry_after } = limiter.decide(key("echo"), now) else { panic!("the burst is spent") };
        assert!(retry_after <= Duration::from_millis(100) && retry_after > Duration::ZERO, "{retry_after:?}");
        assert_eq!(limiter.decide(key("other"), now), Decision::Allow, "per target");
        assert_eq!(
            limiter.decide(key("echo"), now + Duration::from_millis(100)),
            Decision::Allow,
            "one interval later"
        );
    }

    #[test]
    fn namespaces_have_their_own_rates() {
        let mut namespaces = HashMap::new();
        namespaces.insert("units".to_owned(), Rate { per_second: 1.0, burst: 1 });
        let limiter = LocalLimiter::new(Limits { default: None, namespaces });
        let now = Instant::now();
        assert_eq!(limiter.decide(key("units_convert"), now), Decision::Allow);
        assert!(matches!(limiter.decide(key("units_convert"), now), Decision::Deny { .. }));
        assert_eq!(limiter.decide(key("echo"), now), Decision::Allow, "no default: unlimited");
    }
}
