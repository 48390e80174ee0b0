//! The notification bus: how a change (a tool list changed, a resource was
//! updated) travels from where it happens to every listen stream that may want
//! it, in this process and, with a distributed implementation, on every replica.
//!
//! This crate knows no HTTP, no JSON-RPC ids and no listen streams: it moves
//! [`Event`]s. `core`'s listen hub subscribes once per process and fans events
//! out to its local streams; that split is what lets [`RedisBus`] carry events
//! between replicas without touching anything above it.
//!
//! Even a single process publishes through the bus, so the one-replica path is
//! the same path that scales out. [`testing`] starts Redis servers and
//! clusters of a test's own. [`marks`] keeps single-use marks on the same
//! Redis (or in process), which `core` needs to refuse a replayed
//! `requestState` on every replica.

pub mod marks;
mod memory;
mod redis;
pub mod testing;
mod wire;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

pub use memory::InMemoryBus;
pub use redis::{RedisBus, RedisConfig};
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
    /// The bus was cut off from other replicas and is back: events may have
    /// been missed, so whoever keeps state derived from them compares it
    /// afresh. Local only.
    BusReconnected,
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
            Self::BusReconnected => "bus_reconnected",
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
                | Self::TaskCancelled { .. }
                | Self::TaskStatus { .. }
        )
    }
}

/// The ways a bus can fail.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The bus has no subscribers and is shutting down.
    #[error("the bus is closed")]
    Closed,
    /// The event was delivered locally but could not be sent to other replicas.
    #[error("could not reach the other replicas: {0}")]
    Transport(String),
}

/// A crate-local result.
pub type Result<T> = std::result::Result<T, Error>;

/// What a subscriber receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// An event, in publish order.
    Event(Event),
    /// The subscriber fell behind and `missed` events were dropped; it must
    /// assume every list may have changed.
    Lagged {
        /// How many events were lost.
        missed: u64,
    },
}

/// The bus: publish events, and subscribe to every event published anywhere.
pub trait NotificationBus: Send + Sync + 'static {
    /// Publishes an event to every subscriber, on every replica the
    /// implementation reaches.
    ///
    /// # Errors
    /// When the event could not be handed to the transport.
    fn publish(&self, event: Event) -> BoxFuture<'_, Result<()>>;

    /// A new subscription that receives every event published after this call.
    fn subscribe(&self) -> Subscription;
}

/// A stream of deliveries from the bus. Dropping it unsubscribes.
pub struct Subscription {
    inner: tokio::sync::broadcast::Receiver<Event>,
}

impl Subscription {
    /// Waits for the next delivery; `None` once the bus is gone.
    pub async fn recv(&mut self) -> Option<Delivery> {
        use tokio::sync::broadcast::error::RecvError;
        match self.inner.recv().await {
            Ok(event) => Some(Delivery::Event(event)),
            Err(RecvError::Lagged(missed)) => Some(Delivery::Lagged { missed }),
            Err(RecvError::Closed) => None,
        }
    }
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription").finish_non_exhaustive()
    }
}
