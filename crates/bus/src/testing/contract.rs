//! What every [`NotificationBus`] promises its subscribers in one process,
//! as assertions any implementation runs against itself: the in-process bus
//! in its unit tests, the Redis bus (on one server and on a cluster) in
//! `tests/redis.rs`. A new implementation calls [`meets_the_contract`].

use std::time::Duration;

use crate::{Delivery, Error, Event, NotificationBus, Published, Subscription};

/// Runs every check of the contract against `bus`.
///
/// # Panics
/// Where `bus` breaks the contract.
pub async fn meets_the_contract(bus: &dyn NotificationBus) {
    delivers_in_order_to_every_subscriber(bus).await;
    a_key_publishes_once_and_is_bound_to_its_event(bus).await;
    a_subscriber_hears_only_what_is_published_after_it_subscribed(bus).await;
}

async fn next(subscription: &mut Subscription) -> Option<Delivery> {
    tokio::time::timeout(Duration::from_secs(5), subscription.recv()).await.ok().flatten()
}

async fn silent_for(subscription: &mut Subscription, wait: Duration) -> bool {
    tokio::time::timeout(wait, subscription.recv()).await.is_err()
}

async fn delivers_in_order_to_every_subscriber(bus: &dyn NotificationBus) {
    let (mut a, mut b) = (bus.subscribe(), bus.subscribe());
    for version in 1..=3 {
        bus.publish(Event::ToolsListChanged { catalog_version: version }).await.expect("a publish");
        bus.publish(Event::ResourceUpdated { uri: format!("file:///contract/{version}") }).await.expect("a publish");
    }
    for subscriber in [&mut a, &mut b] {
        for version in 1..=3 {
            let list = Event::ToolsListChanged { catalog_version: version };
            assert_eq!(next(subscriber).await, Some(Delivery::Event(list)));
            let updated = Event::ResourceUpdated { uri: format!("file:///contract/{version}") };
            assert_eq!(next(subscriber).await, Some(Delivery::Event(updated)));
        }
        assert!(silent_for(subscriber, Duration::from_millis(200)).await, "each event once");
    }
}

async fn a_key_publishes_once_and_is_bound_to_its_event(bus: &dyn NotificationBus) {
    let mut subscriber = bus.subscribe();
    // Keys outlive a test run in a shared Redis: a fresh one each time.
    let key = format!("contract-{:x}", rand::random::<u64>());
    let event = Event::ResourceUpdated { uri: "file:///contract/once".into() };
    assert_eq!(bus.publish_once(event.clone(), &key).await.expect("a publish"), Published::Now);
    assert_eq!(bus.publish_once(event.clone(), &key).await.expect("a publish"), Published::Already);
    let another = Event::ResourceUpdated { uri: "file:///contract/another".into() };
    assert!(matches!(bus.publish_once(another, &key).await, Err(Error::KeyReused)), "a key is bound to its event");
    assert_eq!(next(&mut subscriber).await, Some(Delivery::Event(event)));
    assert!(silent_for(&mut subscriber, Duration::from_millis(200)).await, "the repeat reached no one");
}

async fn a_subscriber_hears_only_what_is_published_after_it_subscribed(bus: &dyn NotificationBus) {
    bus.publish(Event::RegistryChanged { registry_version: 1 }).await.expect("a publish");
    let mut late = bus.subscribe();
    bus.publish(Event::RegistryChanged { registry_version: 2 }).await.expect("a publish");
    assert_eq!(next(&mut late).await, Some(Delivery::Event(Event::RegistryChanged { registry_version: 2 })));
    assert!(silent_for(&mut late, Duration::from_millis(200)).await);
}
