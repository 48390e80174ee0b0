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
//! - Wire format, versioned: `{"v": 1, "origin": "<replica>", "event": {…}}`
//!   on channel `{prefix}events`. Messages of an unknown version are skipped
//!   with a warning, so replicas of two versions can run side by side.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands as _, ProtocolVersion, PushKind};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::{Error, Event, NotificationBus, Result, Subscription};

/// Local fan-out capacity, as for the in-process bus.
const CAPACITY: usize = 1024;
/// The wire format's version.
const WIRE_VERSION: u32 = 1;

/// How to reach Redis.
#[derive(Clone)]
pub struct RedisConfig {
    /// `redis://[:password@]host:port[/db]` (or `rediss://`). RESP3 is always used.
    /// In cluster mode, seed nodes separated by commas.
    pub url: String,
    /// Prefix of the channel name, so several deployments can share a Redis. Default `switchyard:`.
    pub prefix: String,
    /// A Redis Cluster: `url` lists seed nodes; the cluster client follows
    /// the topology, and a publish on any node reaches subscribers on all.
    pub cluster: bool,
}

impl RedisConfig {
    /// The seed nodes of a Redis Cluster: `url` split at commas.
    ///
    /// # Errors
    /// When a node's URL is invalid.
    pub fn seed_nodes(&self) -> redis::RedisResult<Vec<redis::ConnectionInfo>> {
        self.url.split(',').map(|node| redis::IntoConnectionInfo::into_connection_info(node.trim())).collect()
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
            .finish()
    }
}

#[derive(Serialize, Deserialize)]
struct Envelope {
    v: u32,
    origin: String,
    event: serde_json::Value,
    /// When it was published (Unix milliseconds, the sender's clock), for the
    /// lag metric. Optional: older senders did not write it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sent_ms: Option<u64>,
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
            let client = redis::cluster::ClusterClientBuilder::new(config.seed_nodes()?)
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
        let info = redis::IntoConnectionInfo::into_connection_info(config.url.as_str())?;
        let settings = info.redis_settings().clone().set_protocol(ProtocolVersion::RESP3);
        let client = redis::Client::open(info.set_redis_settings(settings))?;
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
    connected: Arc<AtomicBool>,
}

impl std::fmt::Debug for RedisBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBus").field("channel", &self.channel).field("origin", &self.origin).finish_non_exhaustive()
    }
}

impl RedisBus {
    /// Connects, subscribes, and starts relaying. Fails if Redis cannot be
    /// reached now (a replica should not start deaf); later outages are survived.
    ///
    /// # Errors
    /// When the URL is invalid or Redis does not answer.
    pub async fn connect(config: &RedisConfig) -> std::result::Result<Arc<Self>, redis::RedisError> {
        let (pushes, mut incoming) = tokio::sync::mpsc::unbounded_channel();
        let channel = format!("{}events", config.prefix);
        let link = Link::connect(config, &channel, pushes).await?;
        let bus = Arc::new(Self {
            local: broadcast::channel(CAPACITY).0,
            link,
            channel,
            origin: format!("{:016x}", rand::random::<u64>()),
            connected: Arc::new(AtomicBool::new(true)),
        });

        // Relay: Redis pushes → local subscribers. Holds no strong reference
        // to the bus, so it ends when the bus is dropped.
        let (local, origin, connected) = (bus.local.clone(), bus.origin.clone(), Arc::clone(&bus.connected));
        tokio::spawn(async move {
            while let Some(push) = incoming.recv().await {
                match push.kind {
                    PushKind::Message => {
                        let Some(redis::Value::BulkString(payload)) = push.data.get(1) else { continue };
                        match decode(payload) {
                            Ok((from, event, sent_ms)) if from != origin => {
                                // Wall clocks of two hosts: a skewed clock reads as no lag.
                                let lag = sent_ms.map(|sent| Duration::from_millis(now_ms().saturating_sub(sent)));
                                switchyard_telemetry::metrics().bus_received(event.kind(), lag);
                                let _ = local.send(event);
                            }
                            Ok(_) => {} // our own, already delivered locally
                            Err(why) => tracing::warn!(%why, "skipping a bus message"),
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

fn encode(origin: &str, event: &Event) -> std::result::Result<String, serde_json::Error> {
    let event = serde_json::to_value(event)?;
    serde_json::to_string(&Envelope { v: WIRE_VERSION, origin: origin.to_owned(), event, sent_ms: Some(now_ms()) })
}

/// The origin, the event, and when it was sent (if the sender said).
fn decode(payload: &[u8]) -> std::result::Result<(String, Event, Option<u64>), String> {
    let envelope: Envelope = serde_json::from_slice(payload).map_err(|e| format!("not an envelope: {e}"))?;
    if envelope.v != WIRE_VERSION {
        return Err(format!("wire version {} (this replica speaks {WIRE_VERSION})", envelope.v));
    }
    let event = serde_json::from_value(envelope.event).map_err(|e| format!("unknown event: {e}"))?;
    Ok((envelope.origin, event, envelope.sent_ms))
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
            let payload = encode(&self.origin, &event).map_err(|e| Error::Transport(e.to_string()))?;
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
    fn the_wire_form_is_versioned_and_round_trips() {
        let event = Event::ResourceUpdated { uri: "file:///a".into() };
        let payload = encode("r1", &event).unwrap();
        let (origin, decoded, sent_ms) = decode(payload.as_bytes()).unwrap();
        assert_eq!((origin.as_str(), &decoded), ("r1", &event));
        let sent_ms = sent_ms.expect("the send time travels with the event");
        assert!(now_ms().abs_diff(sent_ms) < 60_000);
        let expected = format!(
            r#"{{"v":1,"origin":"r1","event":{{"kind":"resource_updated","uri":"file:///a"}},"sent_ms":{sent_ms}}}"#
        );
        assert_eq!(payload, expected);
        // A sender from before `sent_ms` is still understood.
        let old = br#"{"v":1,"origin":"r0","event":{"kind":"resource_updated","uri":"file:///a"}}"#;
        assert_eq!(decode(old).unwrap(), ("r0".to_owned(), event, None));
        assert!(decode(br#"{"v":2,"origin":"r","event":{}}"#).unwrap_err().contains("wire version 2"));
        assert!(decode(br#"{"v":1,"origin":"r","event":{"kind":"from_the_future"}}"#).is_err());
    }

    #[test]
    fn debug_hides_the_password() {
        let config = RedisConfig { url: "redis://:hunter2@cache:6379/0".into(), prefix: "s:".into(), cluster: false };
        assert!(!format!("{config:?}").contains("hunter2"));
    }
}
