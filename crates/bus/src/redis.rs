//! The Redis bus: every replica publishes the events that concern other
//! replicas on one Redis channel and subscribes to it once; inside the
//! process, events fan out through the same bounded broadcast channel as the
//! in-process bus.
//!
//! - RESP3 pushes on a `ConnectionManager` that reconnects with backoff and
//!   resubscribes by itself; a heartbeat `PING` every second notices a dead
//!   connection even when nothing is published.
//! - Local first: an event is delivered to this process's subscribers at
//!   once, whatever Redis is doing, and a replica ignores its own messages
//!   when they come back. A Redis outage stops only the cross-replica part.
//! - After a reconnect, subscribers get [`Event::BusReconnected`]: events may
//!   have been missed, so state must be compared (the catalog sync compares
//!   registry versions and emits `list_changed` only where something changed).
//! - Wire format ([`crate::wire`]), versioned and authenticated: an HMAC
//!   under a key every replica shares, on channel `{prefix}events`. Messages
//!   that do not verify (a forgery, an unknown version or key) are dropped
//!   and counted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands as _, ProtocolVersion, PushKind};
use tokio::sync::broadcast;

use crate::wire::{self, BusKey};
use crate::{Error, Event, NotificationBus, Result, Subscription};

/// Local fan-out capacity, as for the in-process bus.
const CAPACITY: usize = 1024;

/// How to reach Redis.
#[derive(Clone)]
pub struct RedisConfig {
    /// `redis://[user:password@]host:port[/db]`, or `rediss://…` for TLS.
    /// In cluster mode, seed nodes separated by commas.
    pub url: String,
    /// With `rediss://`: the CA certificates (PEM) that sign Redis's
    /// certificate, instead of the system's roots.
    pub tls_ca_pem: Option<Vec<u8>>,
    /// Prefix of the channel name, so several deployments can share a Redis. Default `switchyard:`.
    pub prefix: String,
    /// A Redis Cluster: `url` lists seed nodes; the cluster client follows
    /// the topology, and a publish on any node reaches subscribers on all.
    pub cluster: bool,
    /// Keys for the bus messages' MACs; the first signs. Every replica must
    /// hold the signing key of the others. Unused by the limiter and marks.
    pub keys: Vec<BusKey>,
}

impl RedisConfig {
    /// The seed nodes of a Redis Cluster: `url` split at commas.
    ///
    /// # Errors
    /// When a node's URL is invalid.
    pub fn seed_nodes(&self) -> redis::RedisResult<Vec<redis::ConnectionInfo>> {
        self.url.split(',').map(|node| redis::IntoConnectionInfo::into_connection_info(node.trim())).collect()
    }

    fn certificates(&self) -> Option<redis::TlsCertificates> {
        self.tls_ca_pem.clone().map(|root| redis::TlsCertificates { client_tls: None, root_cert: Some(root) })
    }

    /// A client of the one server `url` names (RESP3 when `resp3`), over
    /// TLS for `rediss://`, trusting `tls_ca_pem` when given. The bus, the
    /// limiter and the marks all connect through it.
    ///
    /// # Errors
    /// When the URL or the certificates are invalid.
    pub fn client(&self, resp3: bool) -> redis::RedisResult<redis::Client> {
        let mut info = redis::IntoConnectionInfo::into_connection_info(self.url.as_str())?;
        if resp3 {
            let settings = info.redis_settings().clone().set_protocol(ProtocolVersion::RESP3);
            info = info.set_redis_settings(settings);
        }
        match self.certificates() {
            Some(certificates) => redis::Client::build_with_tls(info, certificates),
            None => redis::Client::open(info),
        }
    }

    /// A Redis Cluster client's builder over the seed nodes, with the same TLS.
    ///
    /// # Errors
    /// When a node's URL is invalid.
    pub fn cluster_builder(&self) -> redis::RedisResult<redis::cluster::ClusterClientBuilder> {
        let builder = redis::cluster::ClusterClientBuilder::new(self.seed_nodes()?);
        Ok(match self.certificates() {
            Some(certificates) => builder.certs(certificates),
            None => builder,
        })
    }
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may hold a password.
        let url = match self.url.split_once('@') {
            Some((credentials, host)) => {
                format!("{}***@{host}", &credentials[..credentials.find("//").map_or(0, |i| i + 2)])
            }
            None => self.url.clone(),
        };
        f.debug_struct("RedisConfig")
            .field("url", &url)
            .field("prefix", &self.prefix)
            .field("cluster", &self.cluster)
            .field("tls_ca_pem", &self.tls_ca_pem.as_ref().map(|_| "(set)"))
            .field("keys", &self.keys)
            .finish()
    }
}

/// The connection: one server through the connection manager, or a cluster.
/// Both reconnect and resubscribe by themselves.
#[derive(Clone)]
enum Link {
    Single(ConnectionManager),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl Link {
    async fn publish(&mut self, channel: &str, payload: String) -> redis::RedisResult<i64> {
        match self {
            Self::Single(manager) => manager.publish(channel, payload).await,
            Self::Cluster(cluster) => cluster.publish(channel, payload).await,
        }
    }

    async fn ping(&mut self) -> redis::RedisResult<String> {
        match self {
            Self::Single(manager) => redis::cmd("PING").query_async(manager).await,
            Self::Cluster(cluster) => redis::cmd("PING").query_async(cluster).await,
        }
    }

    /// Connects with RESP3, pushes going to `pushes`, and subscribes to `channel`.
    async fn connect(
        config: &RedisConfig,
        channel: &str,
        pushes: tokio::sync::mpsc::UnboundedSender<redis::PushInfo>,
    ) -> redis::RedisResult<Self> {
        if config.cluster {
            let client = config
                .cluster_builder()?
                .use_protocol(ProtocolVersion::RESP3)
                .push_sender(pushes)
                .connection_timeout(Duration::from_secs(2))
                .response_timeout(Duration::from_secs(2))
                .retries(2)
                .build()?;
            let mut cluster = client.get_async_connection().await?;
            cluster.subscribe(channel).await?;
            return Ok(Self::Cluster(cluster));
        }
        let client = config.client(true)?;
        let manager_config = ConnectionManagerConfig::new()
            .set_push_sender(pushes)
            .set_automatic_resubscription()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(Duration::from_secs(2)))
            .set_max_delay(Duration::from_secs(2))
            // A command during an outage fails after a short retry instead of
            // the default six (seven seconds holding a request); the
            // heartbeat keeps trying to reconnect every second.
            .set_number_of_retries(2);
        let mut manager = ConnectionManager::new_with_config(client, manager_config).await?;
        manager.subscribe(channel).await?;
        Ok(Self::Single(manager))
    }
}

/// A bus across replicas, through Redis pub/sub.
pub struct RedisBus {
    local: broadcast::Sender<Event>,
    link: Link,
    channel: String,
    origin: String,
    keys: Arc<[BusKey]>,
    connected: Arc<AtomicBool>,
}

impl std::fmt::Debug for RedisBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBus").field("channel", &self.channel).field("origin", &self.origin).finish_non_exhaustive()
    }
}

impl RedisBus {
    /// Connects, subscribes, and starts relaying. Fails if Redis cannot be
    /// reached now (a replica should not start deaf), or without a key to
    /// sign with; later outages are survived.
    ///
    /// # Errors
    /// When the URL is invalid, no key is configured, or Redis does not answer.
    pub async fn connect(config: &RedisConfig) -> std::result::Result<Arc<Self>, redis::RedisError> {
        if config.keys.is_empty() {
            return Err(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "the Redis bus needs a key every replica shares (state.keys)",
            )));
        }
        let (pushes, mut incoming) = tokio::sync::mpsc::unbounded_channel();
        let channel = format!("{}events", config.prefix);
        let link = Link::connect(config, &channel, pushes).await?;
        let bus = Arc::new(Self {
            local: broadcast::channel(CAPACITY).0,
            link,
            channel,
            origin: format!("{:016x}", rand::random::<u64>()),
            keys: config.keys.clone().into(),
            connected: Arc::new(AtomicBool::new(true)),
        });

        // Relay: Redis pushes → local subscribers. Holds no strong reference
        // to the bus, so it ends when the bus is dropped.
        let (local, origin, connected) = (bus.local.clone(), bus.origin.clone(), Arc::clone(&bus.connected));
        let keys = Arc::clone(&bus.keys);
        let channel = bus.channel.clone();
        tokio::spawn(async move {
            while let Some(push) = incoming.recv().await {
                match push.kind {
                    PushKind::Message => {
                        let Some(redis::Value::BulkString(payload)) = push.data.get(1) else { continue };
                        match wire::decode(&keys, &channel, payload, now_ms()) {
                            Ok(received) if received.origin != origin => {
                                // Wall clocks of two hosts: a skewed clock reads as no lag.
                                let lag = Some(Duration::from_millis(now_ms().saturating_sub(received.sent_ms)));
                                switchyard_telemetry::metrics().bus_received(received.event.kind(), lag);
                                let _ = local.send(received.event);
                            }
                            Ok(_) => {} // our own, already delivered locally
                            Err(why) => {
                                switchyard_telemetry::metrics().bus_rejected();
                                tracing::warn!(%why, "dropping a bus message");
                            }
                        }
                    }
                    PushKind::Disconnection if connected.swap(false, Ordering::SeqCst) => {
                        tracing::warn!(
                            "Redis connection lost; notifications from other replicas pause until it returns"
                        );
                    }
                    PushKind::Subscribe if !connected.swap(true, Ordering::SeqCst) => {
                        tracing::info!("Redis connection back; resynchronising");
                        let _ = local.send(Event::BusReconnected);
                    }
                    _ => {}
                }
            }
        });

        // Heartbeat: a connection that died quietly is noticed and rebuilt.
        let (weak, connected) = (Arc::downgrade(&bus), Arc::clone(&bus.connected));
        tokio::spawn(async move {
            let mut timer = tokio::time::interval(Duration::from_secs(1));
            loop {
                timer.tick().await;
                let Some(bus) = weak.upgrade() else { return };
                let mut link = bus.link.clone();
                drop(bus);
                if link.ping().await.is_err() && connected.swap(false, Ordering::SeqCst) {
                    tracing::warn!("Redis does not answer; notifications from other replicas pause until it returns");
                }
            }
        });
        Ok(bus)
    }

    /// Whether the connection to Redis is up (for readiness and metrics).
    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::SeqCst)
    }
}

fn now_ms() -> u64 {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX)
}

impl NotificationBus for RedisBus {
    fn publish(&self, event: Event) -> BoxFuture<'_, Result<()>> {
        let _ = self.local.send(event.clone());
        Box::pin(async move {
            if !event.crosses_replicas() {
                switchyard_telemetry::metrics().bus_published(event.kind(), true);
                return Ok(());
            }
            if !self.is_connected() {
                // The heartbeat saw Redis go: fail at once rather than make
                // the request that published wait for a reconnect.
                switchyard_telemetry::metrics().bus_published(event.kind(), false);
                return Err(Error::Transport("Redis is unreachable".into()));
            }
            let span = tracing::info_span!(
                "redis",
                otel.name = "PUBLISH",
                otel.kind = "client",
                db.system.name = "redis",
                db.operation.name = "PUBLISH",
                switchyard.bus.event = event.kind(),
            );
            let payload =
                wire::encode(&self.keys, &self.channel, &self.origin, &event, now_ms()).map_err(Error::Transport)?;
            let mut link = self.link.clone();
            let sent = tracing::Instrument::instrument(link.publish(&self.channel, payload), span).await;
            switchyard_telemetry::metrics().bus_published(event.kind(), sent.is_ok());
            sent.map_err(|e| Error::Transport(e.to_string()))?;
            Ok(())
        })
    }

    fn subscribe(&self) -> Subscription {
        Subscription { inner: self.local.subscribe() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_password() {
        let config = RedisConfig {
            tls_ca_pem: None,
            url: "redis://:hunter2@cache:6379/0".into(),
            prefix: "s:".into(),
            cluster: false,
            keys: vec![BusKey { id: "k".into(), secret: b"hunter3-hunter3-hunter3-hunter3!".to_vec() }],
        };
        assert!(!format!("{config:?}").contains("hunter2"));
        assert!(!format!("{config:?}").contains("hunter3"));
    }
}
