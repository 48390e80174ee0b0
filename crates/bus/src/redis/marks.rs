//! Single-use marks in Redis ([`crate::marks`]): `SET NX` with the mark's
//! expiry, so every replica sees a mark any of them made.

use futures::future::BoxFuture;

use super::{Patience, RedisConfig, RedisLink};
use crate::marks::{Marks, seconds_until};

/// Marks every replica shares, as `{prefix}used:{id}` keys in Redis that
/// expire with the mark.
pub struct RedisMarks {
    link: RedisLink,
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
        let link = RedisLink::connect(config, Patience::CHECK).await?;
        Ok(Self { link, prefix: config.prefix.clone() })
    }
}

impl Marks for RedisMarks {
    fn first_use<'a>(&'a self, id: &'a str, expires_at: u64) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move {
            let mut command = redis::cmd("SET");
            let ttl = u64::try_from(seconds_until(expires_at).as_millis()).unwrap_or(u64::MAX);
            command.arg(format!("{}used:{id}", self.prefix)).arg(1).arg("NX").arg("PX").arg(ttl);
            let set: redis::RedisResult<Option<String>> = command.query_async(&mut self.link.clone()).await;
            set.map(|reply| reply.is_some()).map_err(|e| e.to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::{SystemTime, UNIX_EPOCH};

    use super::*;

    fn in_a_minute() -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() + 60
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
