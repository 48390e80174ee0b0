//! The shared limiter against the running Redis (`TEST_REDIS_URL`): two
//! limiters (two replicas) spend one budget.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use switchyard_http::limit::{Decision, Key, RateLimiter};
use switchyard_limits::{Limits, OnError, Rate, RedisLimiter};

#[tokio::test]
async fn replicas_share_one_budget() {
    let url = std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let prefix = format!("switchyard-test-{:x}:", rand::random::<u64>());
    let limits = Limits { default: Some(Rate { per_second: 2.0, burst: 2 }), ..Limits::default() };
    let one = RedisLimiter::connect(&url, &prefix, limits.clone(), OnError::Deny).await.unwrap();
    let two = RedisLimiter::connect(&url, &prefix, limits, OnError::Deny).await.unwrap();
    let key = Key { principal: "10.1.1.1", target: "echo" };
    assert_eq!(one.check(key).await, Decision::Allow);
    assert_eq!(two.check(key).await, Decision::Allow);
    let Decision::Deny { retry_after } = one.check(key).await else { panic!("the shared burst is spent") };
    assert!(retry_after <= Duration::from_millis(500), "{retry_after:?}");
    assert_eq!(two.check(Key { principal: "10.1.1.2", target: "echo" }).await, Decision::Allow, "per caller");
    tokio::time::sleep(retry_after + Duration::from_millis(20)).await;
    assert_eq!(two.check(key).await, Decision::Allow, "after the wait");
}

#[tokio::test]
async fn an_unreachable_redis_follows_the_configured_policy() {
    // Two limiters on a private redis-server, which then stops.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut server = std::process::Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("redis://127.0.0.1:{port}");
    let mut limiters = Vec::new();
    for on_error in [OnError::Allow, OnError::Deny] {
        let limits = Limits { default: Some(Rate { per_second: 100.0, burst: 100 }), ..Limits::default() };
        let mut attempt = 0;
        let limiter = loop {
            match RedisLimiter::connect(&url, "x:", limits.clone(), on_error).await {
                Ok(limiter) => break limiter,
                Err(_) if attempt < 100 => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(error) => panic!("{error}"),
            }
        };
        limiters.push(limiter);
    }
    server.kill().unwrap();
    server.wait().unwrap();
    let key = Key { principal: "p", target: "t" };
    assert_eq!(limiters[0].check(key).await, Decision::Allow);
    assert!(matches!(limiters[1].check(key).await, Decision::Deny { .. }));
}
