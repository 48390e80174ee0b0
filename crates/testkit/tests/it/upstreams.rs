//! Hostile upstreams (#15): an upstream that lies or floods is refused at
//! the operator's bounds, costs an error for its own tools alone, and takes
//! no replica's memory, CPU or catalog with it.
//!
//! The upstream is [`HostileUpstream`], a server of the tests' own that
//! behaves until told otherwise (an upstream may pass registration and turn
//! hostile later). The replicas are real processes, so that their memory can
//! be read from `/proc`.

// Helpers here are test code too; clippy only knows #[test] functions as such.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchyard_registry::testing::FreshDatabase;
use switchyard_testkit::{Behaviour, Client, HostileUpstream, ServerProcess, until};

/// The most resident memory a replica may reach while its upstream sends
/// gigabytes: the default bounds (4 MiB a message, 8 MiB a refresh) parsed,
/// over an idle replica's own, with room to spare. Without the bounds, one
/// endless list takes the replica's memory until it is killed.
const PEAK_RESIDENT_BOUND: u64 = 192 << 20;

pub(crate) fn replica_env(database: &str) -> Vec<(&'static str, String)> {
    vec![
        ("SWITCHYARD_DATABASE_URL", database.to_owned()),
        ("SWITCHYARD_REGISTRY__SYNC_INTERVAL", "200ms".into()),
        ("SWITCHYARD_UPSTREAM__ALLOWED_RANGES", "127.0.0.0/8".into()),
        // Short waits, so a test sees several rounds of refusal and retry.
        ("SWITCHYARD_UPSTREAM__MAX_BACKOFF", "300ms".into()),
        ("SWITCHYARD_UPSTREAM__REFRESH_INTERVAL", "500ms".into()),
        ("SWITCHYARD_UPSTREAM__FIRST_LISTS_WAIT", "500ms".into()),
    ]
}

pub(crate) async fn start_replica(env: &[(&'static str, String)]) -> ServerProcess {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    ServerProcess::start(&env).await
}

pub(crate) async fn register(replica: &ServerProcess, plugin: Value) {
    let response = reqwest::Client::new()
        .post(format!("{}/admin/v1/plugins", replica.base_url()))
        .json(&plugin)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
}

pub(crate) async fn tool_names(client: &Client) -> Vec<String> {
    let reply = client.request("tools/list", json!({})).await;
    reply.result()["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

/// The value of `series` (`name{labels}`) on `replica`'s `/metrics`, 0 when absent.
pub(crate) async fn metric(replica: &ServerProcess, series: &str) -> u64 {
    let text = reqwest::get(format!("{}/metrics", replica.base_url())).await.unwrap().text().await.unwrap();
    let prefix = format!("{series} ");
    text.lines().find_map(|line| line.strip_prefix(prefix.as_str())).map_or(0, |n| n.trim().parse().unwrap())
}

/// `switchyard_upstream_refusals_total{bound=…}` of the upstream registered
/// as `h` on `replica`'s `/metrics`.
async fn refusals(replica: &ServerProcess, bound: &str) -> u64 {
    metric(replica, &format!("switchyard_upstream_refusals_total{{bound=\"{bound}\",upstream=\"h\"}}")).await
}

pub(crate) async fn echo(client: &Client) -> Value {
    client.request("tools/call", json!({"name": "echo", "arguments": {"text": "still here"}})).await.result().clone()
}

/// Every way an upstream's lists can lie: an endless body, endless pages, too
/// many items, a page small on the wire but dense in values, JSON 100,000
/// deep, no answer at all. Each refresh is refused
/// at its bound on both replicas, the last good lists stay served, the
/// replicas' other tools answer, and neither grows past the memory bound.
#[tokio::test]
async fn an_upstream_whose_lists_lie_is_refused_and_no_replica_falls() {
    let upstream = HostileUpstream::start().await;
    let database = FreshDatabase::postgres().await;
    let env = replica_env(database.url());
    let mut replicas = [start_replica(&env).await, start_replica(&env).await];
    register(
        &replicas[0],
        json!({"namespace": "h", "kind": "upstream", "spec": {"url": upstream.url(), "timeout_ms": 5000}}),
    )
    .await;
    let clients = [replicas[0].client(), replicas[1].client()];
    for client in &clients {
        until("both replicas serve the upstream's tool", Duration::from_secs(10), async || {
            tool_names(client).await.contains(&"h_ok".to_owned())
        })
        .await;
    }
    until("both replicas follow the upstream's listen stream", Duration::from_secs(10), async || {
        upstream.listen_streams() == 2
    })
    .await;

    for (behaviour, bound, lie) in [
        (Behaviour::EndlessList, Some("message_bytes"), "h_t"),
        (Behaviour::EndlessPages, Some("list_pages"), "h_page"),
        (Behaviour::ManyItems, Some("list_items"), "h_t"),
        (Behaviour::DenseList, Some("message_values"), "h_dense"),
        (Behaviour::DeepJson, None, "h_t"),
        (Behaviour::Hang, None, "h_t"),
    ] {
        let asked = upstream.asked("tools/list");
        let mut before = Vec::new();
        for replica in &replicas {
            before.push(if let Some(bound) = bound { refusals(replica, bound).await } else { 0 });
        }
        upstream.become_(behaviour);
        until(&format!("{behaviour:?}: the replicas try a refresh"), Duration::from_secs(10), async || {
            upstream.asked("tools/list") >= asked + 2
        })
        .await;
        if let Some(bound) = bound {
            for (replica, before) in replicas.iter().zip(before) {
                until(&format!("{behaviour:?}: refused at {bound}"), Duration::from_secs(10), async || {
                    refusals(replica, bound).await > before
                })
                .await;
            }
        }
        for client in &clients {
            let names = tool_names(client).await;
            assert!(
                names.contains(&"h_ok".to_owned()) && !names.iter().any(|n| n.starts_with(lie)),
                "{behaviour:?}: the last good lists stay served: {names:?}"
            );
            assert_eq!(echo(client).await["content"][0]["text"], "still here", "{behaviour:?}");
        }
        upstream.become_(Behaviour::Honest);
    }
    for replica in &mut replicas {
        assert!(replica.is_running());
        let peak = replica.peak_resident_bytes();
        assert!(peak < PEAK_RESIDENT_BOUND, "peak resident memory {} MiB", peak >> 20);
    }
    drop(replicas);
    database.remove().await;
}

/// Calls whose answers lie: an SSE event that never ends, an SSE answer of
/// progress without end and no response, JSON 100,000 deep. Each is an `isError` naming the bound
/// (or the parse failure), well before the call's deadline; the replica's
/// other tools answer and its memory stays bounded. Over HTTP/1.1 and h2c,
/// whose requests take different ways (reqwest's pool, `client::h2c`).
#[tokio::test]
async fn a_call_whose_answer_lies_is_a_tool_error_and_nothing_more() {
    let upstream = HostileUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("registry.db").display());
    let mut replica = start_replica(&replica_env(&database)).await;
    // Over HTTP/1.1 through reqwest, and over h2c on a connection of the client's own.
    for (namespace, h2c) in [("h", false), ("hh", true)] {
        let spec = json!({"url": upstream.url(), "timeout_ms": 20000, "h2c": h2c});
        register(&replica, json!({"namespace": namespace, "kind": "upstream", "spec": spec})).await;
    }
    let client = replica.client();
    until("the replica serves the upstream's tools", Duration::from_secs(10), async || {
        let names = tool_names(&client).await;
        names.contains(&"h_ok".to_owned()) && names.contains(&"hh_ok".to_owned())
    })
    .await;
    for (behaviour, says) in [
        (Behaviour::EndlessEvent, "upstream.max_message_bytes"),
        (Behaviour::EndlessProgress, "upstream.max_stream_bytes"),
        (Behaviour::DeepJson, "recursion limit"),
    ] {
        upstream.become_(behaviour);
        for tool in ["h_ok", "hh_ok"] {
            let started = Instant::now();
            let reply = client.request("tools/call", json!({"name": tool, "arguments": {}})).await;
            let result = reply.result();
            assert_eq!(result["isError"], true, "{behaviour:?}, {tool}: {result}");
            let text = result["content"][0]["text"].as_str().unwrap();
            assert!(text.contains(says), "{behaviour:?}, {tool}: {text}");
            let elapsed = started.elapsed();
            assert!(elapsed < Duration::from_secs(15), "{behaviour:?}, {tool}: refused at the bound, not the deadline");
            assert_eq!(echo(&client).await["content"][0]["text"], "still here");
        }
    }
    assert!(refusals(&replica, "message_bytes").await >= 1);
    assert!(refusals(&replica, "stream_bytes").await >= 1);
    assert!(replica.is_running());
    let peak = replica.peak_resident_bytes();
    assert!(peak < PEAK_RESIDENT_BOUND, "peak resident memory {} MiB", peak >> 20);
}

/// An upstream whose listen stream carries `list_changed` as fast as it can
/// be written costs one refresh per `refresh_interval`, not one per
/// notification; the stream is dropped as a flood and reopened after a
/// backoff; the replica keeps answering.
#[tokio::test]
async fn a_flood_of_list_changed_costs_one_refresh_per_interval() {
    let upstream = HostileUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("registry.db").display());
    let replica = start_replica(&replica_env(&database)).await;
    register(&replica, json!({"namespace": "h", "kind": "upstream", "spec": {"url": upstream.url()}})).await;
    let client = replica.client();
    until("the replica follows the upstream's listen stream", Duration::from_secs(10), async || {
        upstream.listen_streams() == 1
    })
    .await;
    upstream.become_(Behaviour::Flood);
    // The stream open now is an honest one: the flood starts with the next.
    until("the flood is seen", Duration::from_secs(10), async || refusals(&replica, "flood").await >= 1).await;
    let (asked, floods, started) = (upstream.asked("tools/list"), refusals(&replica, "flood").await, Instant::now());
    // Time is the subject: refreshes counted over a window of flooding.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let refreshes = upstream.asked("tools/list") - asked;
    let allowed = usize::try_from(started.elapsed().as_millis() / 500).unwrap() + 1;
    assert!(refreshes <= allowed, "{refreshes} refreshes in {:?}, at most {allowed} allowed", started.elapsed());
    assert!(refusals(&replica, "flood").await > floods, "the flood goes on, and is dropped again");
    assert_eq!(echo(&client).await["content"][0]["text"], "still here");
    assert!(tool_names(&client).await.contains(&"h_ok".to_owned()));
}

/// An upstream that never answers holds up neither a replica's start nor
/// its other plugins: a replica starting while it hangs serves its catalog
/// after `first_lists_wait`, not after the upstream's 30 s timeout, and the
/// upstream's tools join once it answers again.
#[tokio::test]
async fn an_upstream_that_hangs_holds_up_no_other_plugin() {
    let upstream = HostileUpstream::start().await;
    let database = FreshDatabase::postgres().await;
    let env = replica_env(database.url());
    let first = start_replica(&env).await;
    register(&first, json!({"namespace": "slow", "kind": "upstream", "spec": {"url": upstream.url()}})).await;
    register(&first, json!({"namespace": "more", "kind": "builtin", "spec": {"name": "echo"}})).await;
    upstream.become_(Behaviour::Hang);
    // `ServerProcess::start` gives up after 10 s; the upstream's timeout is 30 s.
    let second = start_replica(&env).await;
    let client = second.client();
    let names = tool_names(&client).await;
    assert!(names.contains(&"more_echo".to_owned()) && !names.contains(&"slow_ok".to_owned()), "{names:?}");
    upstream.become_(Behaviour::Honest);
    until("the upstream's tools join once it answers", Duration::from_secs(10), async || {
        tool_names(&client).await.contains(&"slow_ok".to_owned())
    })
    .await;
    drop((first, second));
    database.remove().await;
}

/// Requests to an upstream that stops answering hold at most
/// `max_in_flight` places; a call that finds none free waits for one until
/// its deadline and is then refused naming the bound, without reaching the
/// upstream, so one upstream's stalled answers cannot pile up without end.
/// The replica's other tools answer meanwhile.
#[tokio::test]
async fn calls_to_a_stalled_upstream_wait_for_a_place_and_no_more() {
    let upstream = HostileUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("registry.db").display());
    let mut env = replica_env(&database);
    env.push(("SWITCHYARD_UPSTREAM__MAX_IN_FLIGHT", "1".into()));
    // Calls give up long before the list refresh that holds the one place.
    env.push(("SWITCHYARD_SERVER__CALL_TIMEOUT", "500ms".into()));
    let replica = start_replica(&env).await;
    let spec = json!({"url": upstream.url(), "timeout_ms": 10000});
    register(&replica, json!({"namespace": "h", "kind": "upstream", "spec": spec})).await;
    let client = replica.client();
    until("the replica follows the upstream", Duration::from_secs(10), async || {
        tool_names(&client).await.contains(&"h_ok".to_owned()) && upstream.listen_streams() == 1
    })
    .await;
    let listed = upstream.asked("tools/list");
    upstream.become_(Behaviour::Hang);
    until("a refresh stalls in the one place", Duration::from_secs(10), async || upstream.asked("tools/list") > listed)
        .await;
    let call = || client.request("tools/call", json!({"name": "h_ok", "arguments": {}}));
    let (first, second, other) = tokio::join!(call(), call(), echo(&client));
    assert_eq!(other["content"][0]["text"], "still here");
    for reply in [first, second] {
        assert_eq!(reply.result()["isError"], true, "{:?}", reply.messages);
        let text = reply.result()["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("upstream.max_in_flight"), "{text}");
    }
    assert_eq!(upstream.asked("tools/call"), 0, "no call reached the upstream");
    assert!(refusals(&replica, "in_flight").await >= 2);
    upstream.become_(Behaviour::Honest);
}

/// A client that gives up on a call to an upstream that does not answer
/// closes its stream, and the replica drops its own request to the upstream
/// with it: the upstream sees the request go (cancellation over HTTP: the
/// connection closed on HTTP/1.1, the stream reset on h2c), rather than
/// holding it until the call's deadline.
#[tokio::test]
async fn a_call_the_client_gives_up_is_given_up_at_the_upstream_too() {
    let upstream = HostileUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("registry.db").display());
    let replica = start_replica(&replica_env(&database)).await;
    for (namespace, h2c) in [("h", false), ("hh", true)] {
        let spec = json!({"url": upstream.url(), "timeout_ms": 60000, "h2c": h2c});
        register(&replica, json!({"namespace": namespace, "kind": "upstream", "spec": spec})).await;
    }
    let client = replica.client();
    until("the replica serves the upstream's tools", Duration::from_secs(10), async || {
        let names = tool_names(&client).await;
        names.contains(&"h_ok".to_owned()) && names.contains(&"hh_ok".to_owned())
    })
    .await;
    upstream.become_(Behaviour::Hang);
    for (calls, tool) in [(1, "h_ok"), (2, "hh_ok")] {
        let call = client.request("tools/call", json!({"name": tool, "arguments": {}}));
        assert!(tokio::time::timeout(Duration::from_millis(500), call).await.is_err(), "the upstream hangs");
        until("the upstream sees the call go", Duration::from_secs(5), async || upstream.abandoned() == calls).await;
        assert_eq!(upstream.asked("tools/call"), calls);
    }
    upstream.become_(Behaviour::Honest);
    assert_eq!(echo(&client).await["content"][0]["text"], "still here");
}
