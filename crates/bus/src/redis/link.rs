//! [`RedisLink`]: one connection to the Redis a [`RedisConfig`] names, one
//! server (through redis-rs's connection manager) or a Redis Cluster (whose
//! client follows the topology), for everything that sends commands: the
//! bus's appends and heartbeat, single-use marks, the rate limiter. Both
//! reconnect by themselves; [`Patience`] says how long a command may wait.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use super::RedisConfig;

/// How long a link waits, and how often it retries, before a command fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Patience {
    /// To connect.
    pub connect: Duration,
    /// For an answer.
    pub respond: Duration,
    /// Retries of a command on one server.
    pub retries: usize,
    /// Retries of a command on a cluster.
    pub cluster_retries: u32,
    /// The longest wait between reconnection attempts to one server.
    pub max_delay: Option<Duration>,
}

impl Patience {
    /// A check on a request's path (a rate limit, a single-use mark): about a
    /// second at most (connect 1 s, answer 0.5 s, one retry), after which the
    /// caller decides.
    pub const CHECK: Self = Self {
        connect: Duration::from_secs(1),
        respond: Duration::from_millis(500),
        retries: 1,
        cluster_retries: 1,
        max_delay: None,
    };
}

/// A connection to one Redis server or a Redis Cluster; cheap to clone.
#[derive(Clone)]
pub enum RedisLink {
    /// One server.
    Single(ConnectionManager),
    /// A cluster.
    Cluster(ClusterConnection),
}

impl RedisLink {
    /// Connects to what `config` names.
    ///
    /// # Errors
    /// When a URL is invalid or Redis does not answer now.
    pub async fn connect(config: &RedisConfig, patience: Patience) -> redis::RedisResult<Self> {
        if config.cluster {
            let client = config
                .cluster_builder()?
                .connection_timeout(patience.connect)
                .response_timeout(patience.respond)
                .retries(patience.cluster_retries)
                .build()?;
            return Ok(Self::Cluster(client.get_async_connection().await?));
        }
        let mut manager = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(patience.connect))
            .set_response_timeout(Some(patience.respond))
            .set_number_of_retries(patience.retries);
        if let Some(max_delay) = patience.max_delay {
            manager = manager.set_max_delay(max_delay);
        }
        Ok(Self::Single(ConnectionManager::new_with_config(config.client()?, manager).await?))
    }
}

impl ConnectionLike for RedisLink {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Self::Single(manager) => manager.req_packed_command(cmd),
            Self::Cluster(cluster) => cluster.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Self::Single(manager) => manager.req_packed_commands(pipeline, offset, count),
            Self::Cluster(cluster) => cluster.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Self::Single(manager) => manager.get_db(),
            Self::Cluster(cluster) => cluster.get_db(),
        }
    }
}
