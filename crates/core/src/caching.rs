//! `ttlMs` and `cacheScope`: the caching hints on cacheable results (SEP-2549).

use std::time::Duration;

use serde_json::{Map, Value};

/// Who may reuse a cached result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheScope {
    /// No caller-specific data: any client or shared cache may reuse it.
    Public,
    /// Reuse only within the same authorization context.
    Private,
}

impl CacheScope {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Public => "public",
            Self::Private => "private",
        }
    }

    /// The narrower of two scopes: a result built from a private part is private.
    #[must_use]
    pub fn narrowest(self, other: Self) -> Self {
        if self == Self::Private || other == Self::Private { Self::Private } else { Self::Public }
    }
}

/// The freshness hint and scope for one kind of result. The default is
/// "stale at once, public".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachePolicy {
    /// How long the result stays fresh after receipt; zero means stale at once.
    pub ttl: Duration,
    /// Who may reuse it.
    pub scope: CacheScope,
}

impl Default for CachePolicy {
    fn default() -> Self {
        Self::new(Duration::ZERO, CacheScope::Public)
    }
}

impl CachePolicy {
    /// A policy from a TTL and a scope.
    pub const fn new(ttl: Duration, scope: CacheScope) -> Self {
        Self { ttl, scope }
    }

    /// The policy of a result built from two parts: the shorter TTL, the
    /// narrower scope.
    #[must_use]
    pub fn combine(self, other: Self) -> Self {
        Self { ttl: self.ttl.min(other.ttl), scope: self.scope.narrowest(other.scope) }
    }

    /// `result` with `ttlMs` and `cacheScope` written in (when it is an object).
    #[must_use]
    pub fn applied(self, mut result: Value) -> Value {
        if let Value::Object(map) = &mut result {
            self.apply(map);
        }
        result
    }

    /// Writes `ttlMs` and `cacheScope` into a result object.
    pub fn apply(self, result: &mut Map<String, Value>) {
        let ttl_ms = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        result.insert("ttlMs".into(), Value::from(ttl_ms));
        result.insert("cacheScope".into(), Value::from(self.scope.as_str()));
    }
}
