//! The Redis bus against the real Redis at `TEST_REDIS_URL` (default
//! `redis://127.0.0.1:6379`), each test under a prefix of its own, and
//! against a private `redis-server` this test starts, stops, restarts or
//! cuts one replica off from.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use switchyard_bus::testing::{Partition, RedisCluster, RedisServer};
use switchyard_bus::{Delivery, Event, NotificationBus, Published, RedisBus, RedisConfig};

fn config() -> RedisConfig {
    let url = std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    on(url, &format!("switchyard-test-{:x}:", rand::random::<u64>()))
}

fn on(url: String, prefix: &str) -> RedisConfig {
    RedisConfig { tls_ca_pem: None, url, prefix: prefix.into(), cluster: false, keys: keys(), log_max_len: 10_000 }
}

fn updated(n: usize) -> Event {
    Event::ResourceUpdated { uri: format!("file:///n/{n}") }
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

/// The contract every bus meets (`bus::testing::contract`), as the
/// in-process bus does.
#[tokio::test]
async fn the_redis_bus_meets_the_contract() {
    let bus = RedisBus::connect(&config()).await.unwrap();
    switchyard_bus::testing::contract::meets_the_contract(bus.as_ref()).await;
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
async fn an_outage_refuses_publishes_whole_and_ends_with_an_announced_gap() {
    let mut redis = RedisServer::start().await;
    let config = on(redis.url(), "outage:");
    let (one, two) = (RedisBus::connect(&config).await.unwrap(), RedisBus::connect(&config).await.unwrap());
    let (mut at_one, mut at_two) = (one.subscribe(), two.subscribe());

    redis.kill();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!one.is_connected(), "the heartbeat noticed");
    // Not carried, so delivered nowhere: not even here, and a retry is safe.
    assert!(one.publish(Event::ResourceUpdated { uri: "file:///during".into() }).await.is_err());
    assert!(nothing_within(&mut at_one, Duration::from_millis(300)).await, "no partial local delivery");

    // Redis comes back empty: what the log held is gone, and each replica
    // says so; so does the one whose publish failed, to every replica.
    redis.restart().await;
    for at in [&mut at_one, &mut at_two] {
        let reconnected = Delivery::Event(Event::BusReconnected);
        let heard = until(at, |heard| heard.contains(&reconnected) && gaps(heard) >= 2).await;
        assert!(heard.contains(&reconnected), "{heard:?}");
        assert!(gaps(&heard) >= 2, "the lost log and the failed publish: {heard:?}");
        assert!(heard.iter().all(|d| *d == Delivery::Gap { missed: None } || *d == reconnected), "{heard:?}");
    }
    one.publish(Event::ResourceUpdated { uri: "file:///after".into() }).await.unwrap();
    assert_eq!(next(&mut at_two).await, Some(Delivery::Event(Event::ResourceUpdated { uri: "file:///after".into() })));
    assert!(one.is_connected() && two.is_connected());
}

/// What a subscription hears until `enough` says so, or 10 s pass.
async fn until(subscription: &mut switchyard_bus::Subscription, enough: impl Fn(&[Delivery]) -> bool) -> Vec<Delivery> {
    let mut heard = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !enough(&heard) {
        match tokio::time::timeout_at(deadline, subscription.recv()).await {
            Ok(Some(delivery)) => heard.push(delivery),
            _ => break,
        }
    }
    heard
}

fn gaps(heard: &[Delivery]) -> usize {
    heard.iter().filter(|d| matches!(d, Delivery::Gap { .. })).count()
}

/// A replica that could not publish while cut off tells the others when it
/// is back: the event it failed to carry is announced as lost to everyone.
#[tokio::test]
async fn a_replica_whose_publish_failed_announces_a_gap_everywhere() {
    let redis = RedisServer::start().await;
    let partition = Partition::start(redis.port()).await;
    let one = RedisBus::connect(&on(redis.url(), "owed:")).await.unwrap();
    let two = RedisBus::connect(&on(partition.url(), "owed:")).await.unwrap();
    let (mut at_one, mut at_two) = (one.subscribe(), two.subscribe());
    partition.cut();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(two.publish(Event::TaskCancelled { id: "t".into() }).await.is_err());
    partition.restore();
    assert_eq!(next(&mut at_one).await, Some(Delivery::Gap { missed: None }));
    let reconnected = Delivery::Event(Event::BusReconnected);
    let heard = until(&mut at_two, |heard| heard.contains(&reconnected) && gaps(heard) >= 1).await;
    assert!(heard.contains(&Delivery::Gap { missed: None }) && heard.contains(&reconnected), "{heard:?}");
    assert!(nothing_within(&mut at_one, Duration::from_millis(300)).await, "announced once");
}

/// A replica cut off from Redis while another publishes reads what it
/// missed when it is back: every event, in order, once, and no gap.
#[tokio::test]
async fn a_replica_cut_off_catches_up_in_order_exactly_once() {
    let redis = RedisServer::start().await;
    let partition = Partition::start(redis.port()).await;
    let one = RedisBus::connect(&on(redis.url(), "catch-up:")).await.unwrap();
    let two = RedisBus::connect(&on(partition.url(), "catch-up:")).await.unwrap();
    let mut at_two = two.subscribe();

    one.publish(updated(0)).await.unwrap();
    assert_eq!(next(&mut at_two).await, Some(Delivery::Event(updated(0))));
    partition.cut();
    for n in 1..=100 {
        one.publish(updated(n)).await.unwrap();
        if n == 50 {
            // Back for a moment, then cut again: reconnects in the middle of it all.
            partition.restore();
            tokio::time::sleep(Duration::from_millis(150)).await;
            partition.cut();
        }
    }
    partition.restore();
    let mut heard = Vec::new();
    while let Some(delivery) = next(&mut at_two).await {
        match delivery {
            Delivery::Event(Event::BusReconnected) => {}
            Delivery::Event(event) => heard.push(event),
            gap @ Delivery::Gap { .. } => panic!("nothing was lost, yet {gap:?}"),
        }
        if heard.len() == 100 {
            break;
        }
    }
    assert_eq!(heard, (1..=100).map(updated).collect::<Vec<_>>());
    assert!(nothing_within(&mut at_two, Duration::from_millis(500)).await, "and nothing twice");
}

/// A replica cut off for longer than the log keeps hears a gap of the
/// right size, then what is left, in order.
#[tokio::test]
async fn a_replica_behind_the_trimmed_log_hears_how_much_it_missed() {
    let redis = RedisServer::start().await;
    let partition = Partition::start(redis.port()).await;
    let short = |url| RedisConfig { log_max_len: 10, ..on(url, "trimmed:") };
    let one = RedisBus::connect(&short(redis.url())).await.unwrap();
    let two = RedisBus::connect(&short(partition.url())).await.unwrap();
    let mut at_two = two.subscribe();
    partition.cut();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Redis trims whole nodes of entries (at most 100, or 4 KiB): about 10 stay.
    for n in 1..=250 {
        one.publish(updated(n)).await.unwrap();
    }
    partition.restore();
    let mut deliveries = Vec::new();
    while let Some(delivery) = next(&mut at_two).await {
        if delivery == Delivery::Event(Event::BusReconnected) {
            continue;
        }
        deliveries.push(delivery.clone());
        if delivery == Delivery::Event(updated(250)) {
            break;
        }
    }
    let Delivery::Gap { missed: Some(missed) } = deliveries[0] else { panic!("{:?} before a gap", deliveries[0]) };
    assert!((200..=240).contains(&missed), "{missed} missed, while about 10 of 250 stay");
    let rest = (usize::try_from(missed).unwrap() + 1..=250).map(|n| Delivery::Event(updated(n)));
    assert_eq!(deliveries[1..], rest.collect::<Vec<_>>());
}

/// An idempotency key makes a retried publish, from any replica, heard once.
#[tokio::test]
async fn a_publish_with_a_used_key_is_heard_by_no_one() {
    let config = config();
    let (one, two) = (RedisBus::connect(&config).await.unwrap(), RedisBus::connect(&config).await.unwrap());
    let (mut at_one, mut at_two) = (one.subscribe(), two.subscribe());
    assert_eq!(one.publish_once(updated(1), "retry-me").await.unwrap(), Published::Now);
    assert_eq!(two.publish_once(updated(1), "retry-me").await.unwrap(), Published::Already);
    assert_eq!(one.publish_once(updated(1), "retry-me").await.unwrap(), Published::Already);
    let reused = two.publish_once(updated(3), "retry-me").await;
    assert!(matches!(reused, Err(switchyard_bus::Error::KeyReused)), "a key is bound to its event: {reused:?}");
    for at in [&mut at_one, &mut at_two] {
        assert_eq!(next(at).await, Some(Delivery::Event(updated(1))));
    }
    assert_eq!(two.publish_once(updated(2), "another").await.unwrap(), Published::Now);
    for at in [&mut at_one, &mut at_two] {
        assert_eq!(next(at).await, Some(Delivery::Event(updated(2))));
        assert!(nothing_within(at, Duration::from_millis(300)).await);
    }
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
        log_max_len: 10_000,
    };
    let one = RedisBus::connect(&config(&[0])).await.unwrap();
    let two = RedisBus::connect(&config(&[2, 1])).await.unwrap();
    let (mut at_one, mut at_two) = (one.subscribe(), two.subscribe());
    for n in 0..3 {
        one.publish(Event::ResourceUpdated { uri: format!("file:///from-one/{n}") }).await.unwrap();
    }
    for n in 0..3 {
        let expected = Event::ResourceUpdated { uri: format!("file:///from-one/{n}") };
        assert_eq!(next(&mut at_two).await, Some(Delivery::Event(expected.clone())));
        assert_eq!(next(&mut at_one).await, Some(Delivery::Event(expected)), "local delivery, once");
    }
    two.publish(Event::ResourceUpdated { uri: "file:///from-two".into() }).await.unwrap();
    let from_two = Some(Delivery::Event(Event::ResourceUpdated { uri: "file:///from-two".into() }));
    assert_eq!(next(&mut at_one).await, from_two);
    assert_eq!(next(&mut at_two).await, from_two);
    assert!(nothing_within(&mut at_one, Duration::from_millis(300)).await, "no duplicates");
    drop((at_one, at_two));
    switchyard_bus::testing::contract::meets_the_contract(one.as_ref()).await;
}
