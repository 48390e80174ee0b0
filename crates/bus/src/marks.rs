//! Single-use marks: "has this been used before?", answered once per mark
//! for every replica. `core` marks each `requestState` it opens with input
//! answers, so a captured or repeated retry cannot run a tool's next round
//! twice. In process ([`LocalMarks`]) for one replica, in Redis
//! ([`RedisMarks`], `SET NX` with the mark's expiry) for many.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;

use crate::RedisConfig;

/// Records marks, each until its expiry.
pub trait Marks: Send + Sync + 'static {
    /// Marks `id` until `expires_at` (Unix seconds): `Ok(true)` the first
    /// time, `Ok(false)` when it was marked already.
    ///
    /// # Errors
    /// When the store cannot be asked; the caller decides (it refuses).
    fn first_use<'a>(&'a self, id: &'a str, expires_at: u64) -> BoxFuture<'a, Result<bool, String>>;
}

fn seconds_until(expires_at: u64) -> Duration {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    Duration::from_secs(expires_at.saturating_sub(now).max(1))
}

/// Marks of one process, bounded: an entry leaves at its expiry, and past
/// `capacity` the least used are evicted (a mark evicted before its expiry
/// could be used again, so size `capacity` above the marks one lifetime sees).
pub struct LocalMarks {
    marks: moka::sync::Cache<String, Duration>,
}

struct UntilExpiry;

impl moka::Expiry<String, Duration> for UntilExpiry {
    fn expire_after_create(&self, _: &String, ttl: &Duration, _: std::time::Instant) -> Option<Duration> {
        Some(*ttl)
    }
}

impl LocalMarks {
    /// Keeps at most `capacity` marks.
    pub fn new(capacity: u64) -> Self {
        Self { marks: moka::sync::Cache::builder().max_capacity(capacity).expire_after(UntilExpiry).build() }
    }
}

impl std::fmt::Debug for LocalMarks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalMarks").finish_non_exhaustive()
    }
}

impl Marks for LocalMarks {
    fn first_use<'a>(&'a self, id: &'a str, expires_at: u64) -> BoxFuture<'a, Result<bool, String>> {
        let ttl = seconds_until(expires_at);
        // One step per key: two concurrent uses cannot both be first.
        let entry = self.marks.entry(id.to_owned()).or_insert_with(|| ttl);
        Box::pin(std::future::ready(Ok(entry.is_fresh())))
    }
}

/// Where the marks live in Redis.
#[derive(Clone)]
enum Link {
    Single(redis::aio::ConnectionManager),
    Cluster(redis::cluster_async::ClusterConnection),
}

/// Marks every replica shares, as `{prefix}used:{id}` keys in Redis that
/// expire with the mark.
pub struct RedisMarks {
    link: Link,
    prefix: String,
}

impl std::fmt::Debug for RedisMarks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisMarks").field("prefix", &self.prefix).finish_non_exhaustive()
    }
}

impl RedisMarks {
    /// Connects to the Redis (or Redis Cluster) `config` names. A check
    /// waits about a second at most (connect 1 s, answer 0.5 s, one retry).
    ///
    /// # Errors
    /// When a URL is invalid or Redis does not answer now.
    pub async fn connect(config: &RedisConfig) -> redis::RedisResult<Self> {
        let (connect_timeout, response_timeout) = (Duration::from_secs(1), Duration::from_millis(500));
        let link = if config.cluster {
            let client = config
                .cluster_builder()?
                .connection_timeout(connect_timeout)
                .response_timeout(response_timeout)
                .retries(1)
                .build()?;
            Link::Cluster(client.get_async_connection().await?)
        } else {
            let client = config.client()?;
            let manager_config = redis::aio::ConnectionManagerConfig::new()
                .set_connection_timeout(Some(connect_timeout))
                .set_response_timeout(Some(response_timeout))
                .set_number_of_retries(1);
            Link::Single(redis::aio::ConnectionManager::new_with_config(client, manager_config).await?)
        };
        Ok(Self { link, prefix: config.prefix.clone() })
    }
}

impl Marks for RedisMarks {
    fn first_use<'a>(&'a self, id: &'a str, expires_at: u64) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            let mut command = redis::cmd("SET");
            let ttl = u64::try_from(seconds_until(expires_at).as_millis()).unwrap_or(u64::MAX);
            command.arg(format!("{}used:{id}", self.prefix)).arg(1).arg("NX").arg("PX").arg(ttl);
            let set: redis::RedisResult<Option<String>> = match self.link.clone() {
                Link::Single(mut manager) => command.query_async(&mut manager).await,
                Link::Cluster(mut cluster) => command.query_async(&mut cluster).await,
            };
            set.map(|reply| reply.is_some()).map_err(|e| e.to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_a_minute() -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() + 60
    }

    #[tokio::test]
    async fn a_local_mark_is_new_once() {
        let marks = LocalMarks::new(1000);
        assert_eq!(marks.first_use("a", in_a_minute()).await, Ok(true));
        assert_eq!(marks.first_use("a", in_a_minute()).await, Ok(false));
        assert_eq!(marks.first_use("b", in_a_minute()).await, Ok(true));
    }

    #[tokio::test]
    async fn redis_marks_are_shared_by_replicas() {
        let url = std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
        let config = RedisConfig {
            tls_ca_pem: None,
            url,
            prefix: format!("switchyard-marks-{:x}:", rand::random::<u64>()),
            cluster: false,
            keys: Vec::new(),
            log_max_len: 10,
        };
        let (one, two) = (RedisMarks::connect(&config).await.unwrap(), RedisMarks::connect(&config).await.unwrap());
        assert_eq!(one.first_use("state", in_a_minute()).await, Ok(true));
        assert_eq!(two.first_use("state", in_a_minute()).await, Ok(false), "the other replica sees the mark");
    }
}
