//! The in-process bus: a bounded broadcast channel. The embedded default.

use futures::future::BoxFuture;
use tokio::sync::broadcast;

use crate::{Event, NotificationBus, Result, Subscription};

/// How many events a slow subscriber may fall behind before it is told it lagged.
const CAPACITY: usize = 1024;

/// A bus that reaches the subscribers of this process only.
#[derive(Debug, Clone)]
pub struct InMemoryBus {
    sender: broadcast::Sender<Event>,
}

impl InMemoryBus {
    /// A new, empty bus.
    pub fn new() -> Self {
        Self { sender: broadcast::channel(CAPACITY).0 }
    }
}

impl Default for InMemoryBus {
    fn default() -> Self {
        Self::new()
    }
}

impl NotificationBus for InMemoryBus {
    fn publish(&self, event: Event) -> BoxFuture<'_, Result<()>> {
        switchyard_telemetry::metrics().bus_published(event.kind(), true);
        // No subscriber is not an error: nobody is listening yet.
        let _ = self.sender.send(event);
        Box::pin(async { Ok(()) })
    }

    fn subscribe(&self) -> Subscription {
        Subscription { inner: self.sender.subscribe() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Delivery;

    // The contract every bus implementation must meet; the Redis bus (#5) runs
    // the same assertions.
    async fn delivers_in_order_to_every_subscriber(bus: &dyn NotificationBus) {
        let mut a = bus.subscribe();
        let mut b = bus.subscribe();
        for v in 1..=3 {
            bus.publish(Event::ToolsListChanged { catalog_version: v }).await.unwrap();
        }
        for sub in [&mut a, &mut b] {
            for v in 1..=3 {
                assert_eq!(sub.recv().await, Some(Delivery::Event(Event::ToolsListChanged { catalog_version: v })));
            }
        }
    }

    #[tokio::test]
    async fn in_memory_bus_meets_the_contract() {
        delivers_in_order_to_every_subscriber(&InMemoryBus::new()).await;
    }

    #[tokio::test]
    async fn a_slow_subscriber_is_told_it_lagged() {
        let bus = InMemoryBus::new();
        let mut sub = bus.subscribe();
        for v in 0..(CAPACITY as u64 + 10) {
            bus.publish(Event::ToolsListChanged { catalog_version: v }).await.unwrap();
        }
        assert_eq!(sub.recv().await, Some(Delivery::Lagged { missed: 10 }));
    }

    #[test]
    fn events_have_a_stable_wire_form() {
        let json = serde_json::to_string(&Event::ResourceUpdated { uri: "file:///a".into() }).unwrap();
        assert_eq!(json, r#"{"kind":"resource_updated","uri":"file:///a"}"#);
    }
}
