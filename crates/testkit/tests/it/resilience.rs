//! An upstream that fails (#19): its breaker stops the replica sending to it
//! and probes it back, an idempotent request that met a reset connection is
//! sent again, and a tool call never is. The replicas are real processes and
//! the upstream is [`HostileUpstream`], failing on demand.

// Helpers here are test code too; clippy only knows #[test] functions as such.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchyard_testkit::{Behaviour, Client, HostileUpstream, ServerProcess, until};

use crate::upstreams::{echo, metric, register, replica_env, start_replica, tool_names};

/// A replica on SQLite whose breakers open after 3 failures for 1 s, with
/// `upstream` registered as `h`.
async fn replica_of(upstream: &HostileUpstream, dir: &tempfile::TempDir) -> ServerProcess {
    let database = format!("sqlite://{}", dir.path().join("registry.db").display());
    let mut env = replica_env(&database);
    env.push(("SWITCHYARD_UPSTREAM__BREAKER_FAILURES", "3".into()));
    env.push(("SWITCHYARD_UPSTREAM__BREAKER_OPEN", "1s".into()));
    let replica = start_replica(&env).await;
    register(&replica, json!({"namespace": "h", "kind": "upstream", "spec": {"url": upstream.url()}})).await;
    replica
}

/// [`replica_of`], with a second, healthy upstream registered as `g`
/// beside `h`; returns once it serves both upstreams' tools.
async fn replica_with_a_neighbour(
    upstream: &HostileUpstream,
    dir: &tempfile::TempDir,
) -> (ServerProcess, HostileUpstream) {
    let replica = replica_of(upstream, dir).await;
    let healthy = HostileUpstream::start().await;
    register(&replica, json!({"namespace": "g", "kind": "upstream", "spec": {"url": healthy.url()}})).await;
    let client = replica.client();
    until("the replica serves both upstreams' tools", Duration::from_secs(10), async || {
        let names = tool_names(&client).await;
        names.contains(&"h_ok".to_owned()) && names.contains(&"g_ok".to_owned())
    })
    .await;
    (replica, healthy)
}

/// Waits until `client`'s replica serves the upstream's tool `h_ok`.
async fn serves_h_ok(client: &Client) {
    until("the replica serves the upstream's tool", Duration::from_secs(10), async || {
        tool_names(client).await.contains(&"h_ok".to_owned())
    })
    .await;
}

/// `h_ok`'s answer: its text, and whether it is an error.
async fn call_ok(client: &Client) -> (String, bool) {
    let reply = client.request("tools/call", json!({"name": "h_ok", "arguments": {}})).await;
    let result = reply.result();
    (result["content"][0]["text"].as_str().unwrap().to_owned(), result["isError"] == true)
}

/// An upstream answering HTTP 500 opens its breaker after three failures:
/// its tool then fails at once, naming when it is tried again, without the
/// upstream being asked; the replica's other tools answer. Once the open
/// time has passed, one call probes the upstream, and when it answers, its
/// tool works again. Each step is counted in `switchyard.upstream.breaker`.
/// Another upstream beside it (`g`) is not touched: its tool answers, and
/// its series stay its own.
#[tokio::test]
async fn an_upstream_that_keeps_failing_is_not_asked_until_a_probe_answers() {
    let upstream = HostileUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (replica, _healthy) = replica_with_a_neighbour(&upstream, &dir).await;
    let client = replica.client();
    assert_eq!(call_ok(&client).await, ("ok".to_owned(), false));

    upstream.become_(Behaviour::ServerError);
    until("the breaker opens", Duration::from_secs(10), async || call_ok(&client).await.0.contains("not asked")).await;
    let asked = upstream.asked("tools/call");
    for _ in 0..5 {
        let started = Instant::now();
        let (text, is_error) = call_ok(&client).await;
        assert!(is_error && text.contains("its last 3 requests failed"), "{text}");
        assert!(started.elapsed() < Duration::from_millis(250), "fails at once: {:?}", started.elapsed());
    }
    assert_eq!(upstream.asked("tools/call"), asked, "not sent while the breaker is open");
    assert_eq!(echo(&client).await["content"][0]["text"], "still here");
    let g_ok = client.request("tools/call", json!({"name": "g_ok", "arguments": {}})).await;
    assert_eq!(g_ok.result()["content"][0]["text"], "ok", "the other upstream answers");
    assert!(metric(&replica, r#"switchyard_upstream_breaker_total{event="opened",upstream="h"}"#).await >= 1);
    assert_eq!(metric(&replica, r#"switchyard_upstream_breaker_total{event="opened",upstream="g"}"#).await, 0);
    assert!(metric(&replica, r#"switchyard_upstream_breaker_total{event="rejected",upstream="h"}"#).await >= 5);

    upstream.become_(Behaviour::Honest);
    until("a probe answers and the tool works again", Duration::from_secs(10), async || {
        call_ok(&client).await == ("ok".to_owned(), false)
    })
    .await;
    assert!(upstream.asked("tools/call") > asked);
    assert!(metric(&replica, r#"switchyard_upstream_breaker_total{event="closed",upstream="h"}"#).await >= 1);
}

/// A connection reset on first contact does not fail registration: the
/// discovery is sent again. A tool call whose answer was cut off is an
/// error, not sent twice (it may have done its work); the next one works.
#[tokio::test]
async fn idempotent_requests_are_retried_and_tool_calls_never() {
    let upstream = HostileUpstream::start().await;
    upstream.reset_next(1);
    let dir = tempfile::tempdir().unwrap();
    let replica = replica_of(&upstream, &dir).await;
    assert!(upstream.asked("server/discover") >= 2, "the first discovery was cut off and sent again");
    assert!(metric(&replica, r#"switchyard_upstream_retries_total{upstream="h"}"#).await >= 1);
    let client = replica.client();
    serves_h_ok(&client).await;
    let before = upstream.asked("tools/call");
    upstream.reset_next(1);
    let (text, is_error) = call_ok(&client).await;
    assert!(is_error, "{text}");
    assert_eq!(upstream.asked("tools/call"), before + 1, "a tool call is sent once");
    assert_eq!(call_ok(&client).await, ("ok".to_owned(), false));
    let _: Value = echo(&client).await;
}

/// An answer over a bound is refused, but does not count against the
/// upstream: a caller may have asked for a large one, and must not be able
/// to shut the upstream for everyone. Five such answers in a row, where
/// three failures open the breaker, leave it closed.
#[tokio::test]
async fn answers_over_a_bound_do_not_open_the_breaker() {
    let upstream = HostileUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let replica = replica_of(&upstream, &dir).await;
    let client = replica.client();
    serves_h_ok(&client).await;
    upstream.become_(Behaviour::EndlessEvent);
    for _ in 0..5 {
        let (text, is_error) = call_ok(&client).await;
        assert!(is_error && text.contains("upstream.max_message_bytes"), "{text}");
    }
    assert_eq!(metric(&replica, r#"switchyard_upstream_breaker_total{event="opened",upstream="h"}"#).await, 0);
    upstream.become_(Behaviour::Honest);
    assert_eq!(call_ok(&client).await, ("ok".to_owned(), false));
}

/// The median time of `calls` calls of `tool`.
async fn median_latency(client: &Client, tool: &str, arguments: &Value, calls: usize) -> Duration {
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        let reply = client.request("tools/call", json!({"name": tool, "arguments": arguments})).await;
        assert_ne!(reply.result()["isError"], true, "{tool}: {:?}", reply.messages);
        times.push(started.elapsed());
    }
    times.sort_unstable();
    times[calls / 2]
}

/// An upstream that hangs, with a full house of calls waiting on it, costs
/// the replica's other tools (a built-in, another upstream's) no latency:
/// their median stays within a small factor of what it was before, in the
/// same run (a ratio: absolute times depend on the machine).
#[tokio::test]
async fn an_upstream_that_hangs_costs_the_other_tools_no_latency() {
    let upstream = HostileUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (replica, _healthy) = replica_with_a_neighbour(&upstream, &dir).await;
    let client = replica.client();
    let echo_arguments = json!({"text": "still here"});
    let (echo_before, g_before) = (
        median_latency(&client, "echo", &echo_arguments, 21).await,
        median_latency(&client, "g_ok", &json!({}), 21).await,
    );

    upstream.become_(Behaviour::Hang);
    let hanging: Vec<_> = (0..16)
        .map(|_| {
            let client = replica.client();
            tokio::spawn(async move { client.request("tools/call", json!({"name": "h_ok", "arguments": {}})).await })
        })
        .collect();
    until("the calls hang at the upstream", Duration::from_secs(10), async || upstream.asked("tools/call") >= 16).await;
    let (echo_during, g_during) = (
        median_latency(&client, "echo", &echo_arguments, 21).await,
        median_latency(&client, "g_ok", &json!({}), 21).await,
    );
    let ratio = |during: Duration, before: Duration| during.as_secs_f64() / before.as_secs_f64().max(1e-6);
    println!(
        "median latency while an upstream hangs, as a ratio to before: echo {:.2}, another upstream's tool {:.2}",
        ratio(echo_during, echo_before),
        ratio(g_during, g_before)
    );
    assert!(ratio(echo_during, echo_before) < 5.0, "echo: {echo_before:?} before, {echo_during:?} while h hangs");
    assert!(ratio(g_during, g_before) < 5.0, "g_ok: {g_before:?} before, {g_during:?} while h hangs");

    upstream.become_(Behaviour::Honest);
    for call in hanging {
        let _ = call.await.unwrap();
    }
}
