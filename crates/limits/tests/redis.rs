//! The shared limiter against the running Redis (`TEST_REDIS_URL`): two
//! limiters (two replicas) spend one budget; the same on a Redis Cluster of
//! the test's own; and a Redis that stops.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use switchyard_bus::RedisConfig;
use switchyard_bus::testing::{RedisCluster, RedisServer};
use switchyard_http::limit::{Decision, Key, RateLimiter};
use switchyard_limits::{Limits, OnError, Rate, RedisLimiter};

#[tokio::test]
async fn replicas_share_one_budget() {
    let url = std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let prefix = format!("switchyard-test-{:x}:", rand::random::<u64>());
    let limits = Limits { default: Some(Rate { per_second: 2.0, burst: 2 }), ..Limits::default() };
    let redis = RedisConfig { tls_ca_pem: None, url, prefix, cluster: false, keys: Vec::new(), log_max_len: 10 };
    let one = RedisLimiter::connect(&redis, limits.clone(), OnError::Deny).await.unwrap();
    let two = RedisLimiter::connect(&redis, limits, OnError::Deny).await.unwrap();
    let key = Key { principal: "10.1.1.1", target: "echo" };
    assert_eq!(one.check(key).await, Decision::Allow);
    assert_eq!(two.check(key).await, Decision::Allow);
    let Decision::Deny { retry_after } = one.check(key).await else { panic!("the shared burst is spent") };
    assert!(retry_after <= Duration::from_millis(500), "{retry_after:?}");
    assert_eq!(two.check(Key { principal: "10.1.1.2", target: "echo" }).await, Decision::Allow, "per caller");
    tokio::time::sleep(retry_after + Duration::from_millis(20)).await;
    assert_eq!(two.check(key).await, Decision::Allow, "after the wait");
}

/// Cluster mode: keys spread over the nodes' slots, and two replicas seeded
/// with different nodes still spend one budget per key.
#[tokio::test]
async fn replicas_share_one_budget_on_a_redis_cluster() {
    let cluster = RedisCluster::start().await;
    let limits = Limits { default: Some(Rate { per_second: 1.0, burst: 2 }), ..Limits::default() };
    let seeded = |seeds: &[usize]| RedisConfig {
        tls_ca_pem: None,
        url: cluster.url(seeds),
        prefix: "c:".into(),
        cluster: true,
        keys: Vec::new(),
        log_max_len: 10,
    };
    let one = RedisLimiter::connect(&seeded(&[0]), limits.clone(), OnError::Deny).await.unwrap();
    let two = RedisLimiter::connect(&seeded(&[2, 1]), limits, OnError::Deny).await.unwrap();
    // Twenty callers: their keys land on all three nodes' slots.
    let callers: Vec<String> = (0..20).map(|n| format!("10.2.0.{n}")).collect();
    for caller in &callers {
        let key = Key { principal: caller, target: "echo" };
        assert_eq!(one.check(key).await, Decision::Allow, "{caller}");
        assert_eq!(two.check(key).await, Decision::Allow, "{caller}");
        let Decision::Deny { retry_after } = one.check(key).await else {
            panic!("{caller}: the shared burst is spent")
        };
        assert!(retry_after <= Duration::from_secs(1), "{retry_after:?}");
        assert!(matches!(two.check(key).await, Decision::Deny { .. }), "{caller}: spent for the other replica too");
    }
}

#[tokio::test]
async fn an_unreachable_redis_follows_the_configured_policy() {
    // Two limiters on a private redis-server, which then stops.
    let mut server = RedisServer::start().await;
    let mut limiters = Vec::new();
    for on_error in [OnError::Allow, OnError::Deny] {
        let limits = Limits { default: Some(Rate { per_second: 100.0, burst: 100 }), ..Limits::default() };
        let redis = RedisConfig {
            tls_ca_pem: None,
            url: server.url(),
            prefix: "x:".into(),
            cluster: false,
            keys: Vec::new(),
            log_max_len: 10,
        };
        limiters.push(RedisLimiter::connect(&redis, limits, on_error).await.unwrap());
    }
    server.kill();
    let key = Key { principal: "p", target: "t" };
    assert_eq!(limiters[0].check(key).await, Decision::Allow);
    assert!(matches!(limiters[1].check(key).await, Decision::Deny { .. }));
}
