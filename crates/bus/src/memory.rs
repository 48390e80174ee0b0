//! The in-process bus: a bounded broadcast channel. The embedded default.

use futures::future::BoxFuture;
use tokio::sync::broadcast;

use crate::{Error, Event, IDEMPOTENCY_WINDOW, Local, NotificationBus, Published, Result, Subscription};

/// How many events a slow subscriber may fall behind before it is told it lagged.
const CAPACITY: usize = 1024;

/// How many idempotency keys are remembered at most (each for
/// [`IDEMPOTENCY_WINDOW`]); beyond it the oldest are forgotten first.
const REMEMBERED_KEYS: u64 = 100_000;

/// A bus that reaches the subscribers of this process only.
#[derive(Clone)]
pub struct InMemoryBus {
    sender: broadcast::Sender<Local>,
    /// Each key's event fingerprint.
    published_keys: moka::sync::Cache<String, String>,
}

impl std::fmt::Debug for InMemoryBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InMemoryBus").finish_non_exhaustive()
    }
}

impl InMemoryBus {
    /// A new, empty bus.
    pub fn new() -> Self {
        let published_keys =
            moka::sync::Cache::builder().max_capacity(REMEMBERED_KEYS).time_to_live(IDEMPOTENCY_WINDOW).build();
        Self { sender: broadcast::channel(CAPACITY).0, published_keys }
    }

    fn deliver(&self, event: Event) {
        switchyard_telemetry::metrics().bus_published(event.kind(), true);
        // No subscriber is not an error: nobody is listening yet.
        let _ = self.sender.send(Local::Event(event));
    }
}

impl Default for InMemoryBus {
    fn default() -> Self {
        Self::new()
    }
}

impl NotificationBus for InMemoryBus {
    fn publish(&self, event: Event) -> BoxFuture<'_, Result<()>> {
        self.deliver(event);
        Box::pin(async { Ok(()) })
    }

    fn publish_once<'a>(&'a self, event: Event, key: &'a str) -> BoxFuture<'a, Result<Published>> {
        let fingerprint = crate::fingerprint(&event);
        let entry = self.published_keys.entry_by_ref(key).or_insert(fingerprint.clone());
        let published = if entry.is_fresh() {
            self.deliver(event);
            Ok(Published::Now)
        } else if *entry.value() == fingerprint {
            Ok(Published::Already)
        } else {
            Err(Error::KeyReused)
        };
        Box::pin(async move { published })
    }

    fn subscribe(&self) -> Subscription {
        Subscription { inner: self.sender.subscribe() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Delivery;

    /// The contract every bus meets; the Redis bus runs it in `tests/redis.rs`.
    #[tokio::test]
    async fn in_memory_bus_meets_the_contract() {
        crate::testing::contract::meets_the_contract(&InMemoryBus::new()).await;
    }

    #[tokio::test]
    async fn a_slow_subscriber_is_told_it_lagged() {
        let bus = InMemoryBus::new();
        let mut sub = bus.subscribe();
        for v in 0..(CAPACITY as u64 + 10) {
            bus.publish(Event::ToolsListChanged { catalog_version: v }).await.unwrap();
        }
        assert_eq!(sub.recv().await, Some(Delivery::Gap { missed: Some(10) }));
    }

    #[test]
    fn events_have_a_stable_wire_form() {
        let json = serde_json::to_string(&Event::ResourceUpdated { uri: "file:///a".into() }).unwrap();
        assert_eq!(json, r#"{"kind":"resource_updated","uri":"file:///a"}"#);
    }
}
