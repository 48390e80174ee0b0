//! The notification bus: how a change (a tool list changed, a resource was
//! updated) travels from where it happens to every listen stream that may want
//! it, in this process and, with a distributed implementation, on every replica.
//!
//! This crate knows no HTTP, no JSON-RPC ids and no listen streams: it moves
//! [`Event`]s. `core`'s listen hub subscribes once per process and fans events
//! out to its local streams; that split is what lets the Redis bus carry
//! events between replicas without touching anything above it.
//!
//! Even a single process publishes through the bus, so the one-replica path is
//! the same path that scales out. A publish that returns `Ok` was carried
//! (across replicas: appended to a durable log first); one that fails was
//! delivered nowhere. A subscriber receives each event at most once, and
//! hears a [`Delivery::Gap`] whenever events may have been lost, never
//! silence. [`marks`] keeps single-use marks in process (or, with the
//! Redis bus, in Redis), which `core` needs to refuse a replayed
//! `requestState` on every replica.
//!
//! | feature | what it adds |
//! |---|---|
//! | `redis` | `RedisBus`, `RedisMarks`, `RedisConfig`, `RedisLink` (the one connection type of everything that talks to Redis) and `BusKey`: what several replicas need. The in-process bus, the embedded default, needs none of it. |
//! | `testing` | `testing`: Redis servers, clusters and partitions of a test's own, and the contract every bus meets. For test suites only; the product never enables it. |

pub mod marks;
mod memory;
#[cfg(feature = "redis")]
mod redis;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(feature = "redis")]
mod wire;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

pub use memory::InMemoryBus;
#[cfg(feature = "redis")]
pub use redis::{DEFAULT_LOG_MAX_LEN, Patience, RedisBus, RedisConfig, RedisLink, RedisMarks};
#[cfg(feature = "redis")]
pub use wire::BusKey;

/// Something that changed, as every replica needs to hear it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// The tool list changed; `catalog_version` is the version after the change.
    ToolsListChanged {
        /// The catalog version after the change.
        catalog_version: u64,
    },
    /// The prompt list changed.
    PromptsListChanged {
        /// The catalog version after the change.
        catalog_version: u64,
    },
    /// The resource list changed.
    ResourcesListChanged {
        /// The catalog version after the change.
        catalog_version: u64,
    },
    /// The plugin registry changed (a plugin was added, changed, enabled,
    /// disabled or removed); every replica reloads its catalog from the
    /// registry if it is behind `registry_version`.
    RegistryChanged {
        /// The registry's catalog version after the change.
        registry_version: i64,
    },
    /// The resource at `uri` (or one below it) changed.
    ResourceUpdated {
        /// The URI that changed.
        uri: String,
    },
    /// Task `id` changed; `task` is its detailed wire form, for the listen
    /// streams that named it.
    TaskStatus {
        /// The task id.
        id: String,
        /// The task as `tasks/get` returns it.
        task: serde_json::Value,
    },
    /// A client cancelled task `id`; the replica running it stops the call.
    TaskCancelled {
        /// The task id.
        id: String,
    },
    /// A legacy client's answer to an input request that a call on replica
    /// `replica` sent; the answer arrived at another replica, which relays it.
    RelayedAnswer {
        /// The replica whose call is waiting.
        replica: String,
        /// The id of the input request, as the server minted it.
        id: String,
        /// `{"result": …}` or `{"error": …}`, as the client sent it.
        response: serde_json::Value,
    },
    /// A client's answers to the question of a 2025-era upstream's call
    /// parked on replica `replica`; the retry that brought them arrived at
    /// another replica, which waits for the call's next turn under `reply_to`.
    ParkedAnswer {
        /// The replica whose call waits.
        replica: String,
        /// The parked call's id.
        parked: String,
        /// Who answers: the call's own caller (its accounting key).
        caller: String,
        /// The client's `inputResponses`.
        responses: serde_json::Value,
        /// What the turn is published under.
        reply_to: String,
        /// Unix milliseconds by which the holding replica must say it has
        /// the call: later, the retry has told its client to call the tool
        /// again, and the call is let go instead. 0: unbounded.
        #[serde(default)]
        received_by_ms: u64,
        /// Unix milliseconds at which the retry stops waiting for the turn.
        /// 0: the holder's own timeout.
        #[serde(default)]
        deadline_ms: u64,
        /// What the retry's client hears of the call meanwhile:
        /// `{"progress": bool, "logLevel": "info"}`.
        #[serde(default)]
        hears: serde_json::Value,
    },
    /// The next turn of a parked call that a [`Event::ParkedAnswer`] asked
    /// for: `{"result": …}`, `{"asked": {"parked", "key", "request"}}` or
    /// `{"error": "…"}`.
    ParkedTurn {
        /// The `reply_to` of the answer.
        reply_to: String,
        /// The turn.
        turn: serde_json::Value,
    },
    /// The bus was cut off from other replicas and is back. What they
    /// carried meanwhile is delivered next (or a [`Delivery::Gap`] says it
    /// cannot be); what failed to publish meanwhile was carried nowhere, so
    /// whoever derives state from a store (the catalog from the registry)
    /// compares it afresh. Local only.
    BusReconnected,
    /// A replica failed to publish while it was cut off from the others (so
    /// those events were delivered nowhere, not even there) and tells every
    /// replica once it can. Subscribers hear it as a [`Delivery::Gap`].
    EventsLost,
}

impl Event {
    /// The event's kind, as its wire form names it (a metric label).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::ToolsListChanged { .. } => "tools_list_changed",
            Self::PromptsListChanged { .. } => "prompts_list_changed",
            Self::ResourcesListChanged { .. } => "resources_list_changed",
            Self::RegistryChanged { .. } => "registry_changed",
            Self::ResourceUpdated { .. } => "resource_updated",
            Self::TaskStatus { .. } => "task_status",
            Self::TaskCancelled { .. } => "task_cancelled",
            Self::RelayedAnswer { .. } => "relayed_answer",
            Self::ParkedAnswer { .. } => "parked_answer",
            Self::ParkedTurn { .. } => "parked_turn",
            Self::BusReconnected => "bus_reconnected",
            Self::EventsLost => "events_lost",
        }
    }

    /// Whether other replicas need this event. A list change is not sent:
    /// every replica derives its catalog from the registry and announces its
    /// own changes to its own streams (so a client hears one `list_changed`
    /// per change, not one per replica); the registry change that causes it is.
    pub fn crosses_replicas(&self) -> bool {
        matches!(
            self,
            Self::RegistryChanged { .. }
                | Self::ResourceUpdated { .. }
                | Self::RelayedAnswer { .. }
                | Self::ParkedAnswer { .. }
                | Self::ParkedTurn { .. }
                | Self::TaskCancelled { .. }
                | Self::TaskStatus { .. }
                | Self::EventsLost
        )
    }
}

/// The ways a bus can fail.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The bus has no subscribers and is shutting down.
    #[error("the bus is closed")]
    Closed,
    /// The event could not be carried to the other replicas, and was
    /// delivered nowhere (not here either): publishing it again is safe.
    #[error("could not reach the other replicas: {0}")]
    Transport(String),
    /// The event was sent to be carried, but no answer came (the
    /// connection broke, or the answer was late): it may have been carried,
    /// and then every replica delivers it, this one included. Publishing it
    /// again with the same idempotency key carries it exactly once.
    #[error("the other replicas may or may not have it: {0}")]
    Unanswered(String),
    /// The idempotency key was used for another event within
    /// [`IDEMPOTENCY_WINDOW`]; nothing was published.
    #[error("the idempotency key was used for another event")]
    KeyReused,
}

/// A crate-local result.
pub type Result<T> = std::result::Result<T, Error>;

/// What a subscriber receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// An event. A subscriber never receives the same published event twice.
    Event(Event),
    /// Events may have been lost: the subscriber fell behind in this process,
    /// or this replica could not read everything the others published (the
    /// log was trimmed past where it stood, or Redis lost it). Whoever keeps
    /// state derived from events must assume anything may have changed.
    Gap {
        /// How many events were lost, when that is known.
        missed: Option<u64>,
    },
}

/// Whether a publish with an idempotency key carried the event, or found
/// that an earlier publish with the same key already had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// The event was carried now.
    Now,
    /// A publish with this key was carried before (within
    /// [`IDEMPOTENCY_WINDOW`]); this one was not, so nobody hears it twice.
    Already,
}

/// How long an idempotency key is remembered.
pub const IDEMPOTENCY_WINDOW: std::time::Duration = std::time::Duration::from_secs(600);

/// What an idempotency key is bound to: the event's SHA-256 (hex), so a
/// key used again for another event is refused rather than swallowed.
pub(crate) fn fingerprint(event: &Event) -> String {
    use sha2::Digest as _;
    let json = serde_json::to_vec(event).unwrap_or_default();
    sha2::Sha256::digest(json).iter().map(|b| format!("{b:02x}")).collect()
}

/// The bus: publish events, and subscribe to every event published anywhere.
pub trait NotificationBus: Send + Sync + 'static {
    /// Publishes an event to every subscriber, on every replica the
    /// implementation reaches. `Ok` means carried: an event that crosses
    /// replicas was durably handed to the transport first. An error means
    /// it was delivered nowhere, here included, so a retry is safe.
    ///
    /// # Errors
    /// When the event could not be handed to the transport.
    fn publish(&self, event: Event) -> BoxFuture<'_, Result<()>>;

    /// [`publish`](Self::publish), at most once per `key` within
    /// [`IDEMPOTENCY_WINDOW`] on every replica the implementation reaches:
    /// for a publisher that retries after an error or a lost answer.
    ///
    /// # Errors
    /// As `publish`; a failed publish does not use up the key. A key used
    /// for another event is [`Error::KeyReused`].
    fn publish_once<'a>(&'a self, event: Event, key: &'a str) -> BoxFuture<'a, Result<Published>>;

    /// A new subscription that receives every event published after this call.
    fn subscribe(&self) -> Subscription;
}

/// What the buses put on their local fan-out channel.
#[derive(Debug, Clone)]
pub(crate) enum Local {
    Event(Event),
    /// Events were lost before they reached this process: only the Redis
    /// bus's reader finds that out.
    #[cfg_attr(not(feature = "redis"), expect(dead_code, reason = "only the Redis bus announces gaps"))]
    Gap {
        missed: Option<u64>,
    },
}

/// A stream of deliveries from the bus. Dropping it unsubscribes.
pub struct Subscription {
    inner: tokio::sync::broadcast::Receiver<Local>,
}

impl Subscription {
    /// Waits for the next delivery; `None` once the bus is gone.
    pub async fn recv(&mut self) -> Option<Delivery> {
        use tokio::sync::broadcast::error::RecvError;
        match self.inner.recv().await {
            Ok(Local::Event(Event::EventsLost)) => Some(Delivery::Gap { missed: None }),
            Ok(Local::Event(event)) => Some(Delivery::Event(event)),
            Ok(Local::Gap { missed }) => Some(Delivery::Gap { missed }),
            Err(RecvError::Lagged(missed)) => {
                switchyard_telemetry::metrics().bus_gap("lagged");
                Some(Delivery::Gap { missed: Some(missed) })
            }
            Err(RecvError::Closed) => None,
        }
    }
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription").finish_non_exhaustive()
    }
}
