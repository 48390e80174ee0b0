//! The Redis bus against the real Redis at `TEST_REDIS_URL` (default
//! `redis://127.0.0.1:6379`), each test on channels of its own, and against
//! a private `redis-server` this test starts, stops and restarts.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use switchyard_bus::testing::{RedisCluster, RedisServer};
use switchyard_bus::{Delivery, Event, NotificationBus, RedisBus, RedisConfig};

fn config() -> RedisConfig {
    RedisConfig {
        tls_ca_pem: None,
        url: std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into()),
        prefix: format!("switchyard-test-{:x}:", rand::random::<u64>()),
        cluster: false,
        keys: keys(),
    }
}

fn keys() -> Vec<switchyard_bus::BusKey> {
    vec![switchyard_bus::BusKey::derived("t", &[7; 32])]
}

async fn next(subscription: &mut switchyard_bus::Subscription) -> Option<Delivery> {
    tokio::time::timeout(Duration::from_secs(5), subscription.recv()).await.ok().flatten()
}

async fn nothing_within(subscription: &mut switchyard_bus::Subscription, wait: Duration) -> bool {
    tokio::time::timeout(wait, subscription.recv()).await.is_err()
}

#[tokio::test]
async fn events_cross_replicas_once_and_list_changes_stay_home() {
    let config = config();
    let (one, two) = (RedisBus::connect(&config).await.unwrap(), RedisBus::connect(&config).await.unwrap());
    let (mut at_one, mut at_two) = (one.subscribe(), two.subscribe());

    one.publish(Event::ResourceUpdated { uri: "file:///a".into() }).await.unwrap();
    let expected = Delivery::Event(Event::ResourceUpdated { uri: "file:///a".into() });
    assert_eq!(next(&mut at_one).await, Some(expected.clone()), "delivered locally at once");
    assert_eq!(next(&mut at_two).await, Some(expected), "and to the other replica");
    assert!(nothing_within(&mut at_one, Duration::from_millis(300)).await, "not twice: our own echo is dropped");

    one.publish(Event::ToolsListChanged { catalog_version: 7 }).await.unwrap();
    assert_eq!(next(&mut at_one).await, Some(Delivery::Event(Event::ToolsListChanged { catalog_version: 7 })));
    assert!(
        nothing_within(&mut at_two, Duration::from_millis(300)).await,
        "each replica announces its own list changes"
    );

    two.publish(Event::RegistryChanged { registry_version: 3 }).await.unwrap();
    assert_eq!(next(&mut at_one).await, Some(Delivery::Event(Event::RegistryChanged { registry_version: 3 })));
}

#[tokio::test]
async fn another_deployment_on_the_same_redis_hears_nothing() {
    let (ours, theirs) = (config(), config());
    let (a, b) = (RedisBus::connect(&ours).await.unwrap(), RedisBus::connect(&theirs).await.unwrap());
    let mut at_b = b.subscribe();
    a.publish(Event::RegistryChanged { registry_version: 1 }).await.unwrap();
    assert!(nothing_within(&mut at_b, Duration::from_millis(300)).await);
}

#[tokio::test]
async fn an_outage_pauses_only_the_cross_replica_part_and_ends_with_a_resync() {
    let mut redis = RedisServer::start().await;
    let config =
        RedisConfig { tls_ca_pem: None, url: redis.url(), prefix: "outage:".into(), cluster: false, keys: keys() };
    let (one, two) = (RedisBus::connect(&config).await.unwrap(), RedisBus::connect(&config).await.unwrap());
    let (mut at_one, mut at_two) = (one.subscribe(), two.subscribe());

    redis.kill();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!one.is_connected(), "the heartbeat noticed");
    // Local delivery goes on; the publish reports that other replicas were not reached.
    let during = one.publish(Event::ResourceUpdated { uri: "file:///during".into() }).await;
    assert!(during.is_err());
    assert_eq!(next(&mut at_one).await, Some(Delivery::Event(Event::ResourceUpdated { uri: "file:///during".into() })));

    redis.restart().await;
    // Each replica reconnects, resubscribes, and tells its subscribers to compare state.
    assert_eq!(next(&mut at_one).await, Some(Delivery::Event(Event::BusReconnected)));
    assert_eq!(next(&mut at_two).await, Some(Delivery::Event(Event::BusReconnected)));
    one.publish(Event::ResourceUpdated { uri: "file:///after".into() }).await.unwrap();
    assert_eq!(next(&mut at_two).await, Some(Delivery::Event(Event::ResourceUpdated { uri: "file:///after".into() })));
}

/// Cluster mode: two replicas whose seeds are different nodes of a real
/// three-node Redis Cluster hear each other's events, once, in order.
#[tokio::test]
async fn events_cross_replicas_through_a_redis_cluster() {
    let cluster = RedisCluster::start().await;
    let config = |seeds: &[usize]| RedisConfig {
        tls_ca_pem: None,
        url: cluster.url(seeds),
        prefix: "clustered:".into(),
        cluster: true,
        keys: keys(),
    };
    let one = RedisBus::connect(&config(&[0])).await.unwrap();
    let two = RedisBus::connect(&config(&[2, 1])).await.unwrap();
    let (mut at_one, mut at_two) = (one.subscribe(), two.subscribe());
    for n in 0..3 {
        one.publish(Event::ResourceUpdated { uri: format!("file:///from-one/{n}") }).await.unwrap();
    }
    two.publish(Event::ResourceUpdated { uri: "file:///from-two".into() }).await.unwrap();
    for n in 0..3 {
        let expected = Event::ResourceUpdated { uri: format!("file:///from-one/{n}") };
        assert_eq!(next(&mut at_two).await, Some(Delivery::Event(expected.clone())));
        assert_eq!(next(&mut at_one).await, Some(Delivery::Event(expected)), "local delivery, once");
    }
    let from_two = Some(Delivery::Event(Event::ResourceUpdated { uri: "file:///from-two".into() }));
    assert_eq!(next(&mut at_one).await, from_two);
    assert_eq!(next(&mut at_two).await, from_two);
    assert!(nothing_within(&mut at_one, Duration::from_millis(300)).await, "no duplicates");
}
