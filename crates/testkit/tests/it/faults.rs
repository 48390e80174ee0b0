//! Fault injection (#16): three replicas on a Redis and a PostgreSQL
//! database of the test's own, steady `tools/call` load on each, two listen
//! streams on each (resource and tool subscriptions) that listen again
//! whenever they end, as clients do, and numbered `resources/updated`
//! published all along through the replicas' admin APIs (each with an
//! idempotency key). Meanwhile Redis is killed and comes back empty, one
//! replica is cut off from Redis for a while (the network, not Redis,
//! fails: it must catch up without a gap), one is SIGKILLed and restarted,
//! another is SIGTERMed and restarted, and a plugin is registered. Then:
//!
//! - no request failed outside a fault window;
//! - every event answered 202 reached, exactly once, every stream that was
//!   open on a live replica from before its publish until the end (a stream
//!   whose replica missed events must have ended: gaps are announced), the
//!   streams of the replica that was cut off included;
//! - every event answered 503 reached no stream (one answered 504, sent
//!   but unanswered, may or may not have), and no stream heard any event
//!   twice;
//! - the registration reached every replica.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use serde_json::{Value, json};
use switchyard_bus::testing::Partition;
use switchyard_registry::testing::FreshDatabase;
use switchyard_testkit::{Client, RedisServer, ServerProcess, drain_events, meta, until};
use tokio_util::sync::CancellationToken;

const REPLICAS: usize = 3;
const STREAMS_PER_REPLICA: usize = 2;

/// Where each replica answers now; `None` while it is down.
type Bases = Arc<Mutex<Vec<Option<String>>>>;

#[derive(Debug)]
struct Publish {
    n: u64,
    sent: Instant,
    answered: Instant,
    /// `None`: no answer (the replica went away mid-request).
    status: Option<u16>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Still open when the test ended.
    Open,
    /// Ended with its final result (a drain, or an announced gap).
    Final,
    /// The connection broke (a killed replica).
    Cut,
}

#[derive(Debug)]
struct StreamLog {
    replica: usize,
    /// When its acknowledgement arrived: from then on it hears every event.
    opened: Option<Instant>,
    heard: Vec<u64>,
    end: End,
}

#[derive(Debug, Default)]
struct Record {
    publishes: Vec<Publish>,
    streams: Vec<StreamLog>,
    /// Requests that failed: replica, from when they were sent to when
    /// they failed, why.
    failures: Vec<(usize, std::ops::RangeInclusive<Instant>, String)>,
}

type Shared = Arc<Mutex<Record>>;

fn base(bases: &Bases, replica: usize) -> Option<String> {
    bases.lock().unwrap()[replica].clone()
}

/// `tools/call` of `echo` on `replica` every 20 ms (about 50 per second per replica, 150 in all), recording failures.
async fn load(replica: usize, bases: Bases, record: Shared, stop: CancellationToken) {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let mut round = 0_u64;
    while !stop.is_cancelled() {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let Some(base) = base(&bases, replica) else { continue };
        let sent = Instant::now();
        round += 1;
        let text = format!("ping {replica}/{round}");
        let mut params = json!({ "name": "echo", "arguments": { "text": text } });
        params["_meta"] = meta(json!({}));
        let mut request = http
            .post(format!("{base}/mcp"))
            .body(json!({ "jsonrpc": "2.0", "id": round, "method": "tools/call", "params": params }).to_string());
        for (name, value) in Client::headers_for("tools/call", &params) {
            request = request.header(name, value);
        }
        let answer = match request.send().await {
            Ok(response) => response.json::<Value>().await.map_err(|e| e.to_string()),
            Err(error) => Err(error.to_string()),
        };
        let failure = match answer {
            Ok(answer) if answer["result"]["content"][0]["text"] == text.as_str() => continue,
            Ok(answer) => answer.to_string(),
            Err(error) => error,
        };
        record.lock().unwrap().failures.push((replica, sent..=Instant::now(), failure));
    }
}

/// Keeps one listen stream open on `replica`, listening again when it ends.
async fn listen(replica: usize, bases: Bases, record: Shared, stop: CancellationToken) {
    let http = reqwest::Client::new();
    let mut params = json!({ "notifications": { "toolsListChanged": true, "resourceSubscriptions": ["file:///n/"] } });
    params["_meta"] = meta(json!({}));
    let headers = Client::headers_for("subscriptions/listen", &params);
    let body = json!({ "jsonrpc": "2.0", "id": 42, "method": "subscriptions/listen", "params": params }).to_string();
    while !stop.is_cancelled() {
        let Some(base) = base(&bases, replica) else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let mut request = http.post(format!("{base}/mcp")).body(body.clone());
        for (name, value) in &headers {
            request = request.header(name, value);
        }
        let response = match request.send().await {
            Ok(response) if response.status() == 200 => response,
            _ => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let index = {
            let mut record = record.lock().unwrap();
            record.streams.push(StreamLog { replica, opened: None, heard: Vec::new(), end: End::Open });
            record.streams.len() - 1
        };
        let (mut bytes, mut buffer) = (response.bytes_stream(), Vec::new());
        let end = 'reading: loop {
            let chunk = tokio::select! {
                () = stop.cancelled() => break End::Open,
                chunk = bytes.next() => chunk,
            };
            let Some(Ok(chunk)) = chunk else { break End::Cut };
            buffer.extend_from_slice(&chunk);
            for message in drain_events(&mut buffer) {
                let mut record = record.lock().unwrap();
                let stream = &mut record.streams[index];
                match message["method"].as_str() {
                    Some("notifications/subscriptions/acknowledged") => stream.opened = Some(Instant::now()),
                    Some("notifications/resources/updated") => {
                        let uri = message["params"]["uri"].as_str().unwrap_or_default();
                        stream.heard.push(uri.strip_prefix("file:///n/").and_then(|n| n.parse().ok()).unwrap());
                    }
                    _ if message["id"] == 42 => break 'reading End::Final,
                    _ => {}
                }
            }
        };
        record.lock().unwrap().streams[index].end = end;
    }
}

/// Publishes `file:///n/1`, `file:///n/2`, … every 40 ms through the live
/// replicas in turn (but not through `avoided`, cut off from Redis), each
/// once, with its idempotency key.
async fn publish(bases: Bases, avoided: Arc<AtomicUsize>, record: Shared, stop: CancellationToken) {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().unwrap();
    let mut n = 0_u64;
    while !stop.is_cancelled() {
        tokio::time::sleep(Duration::from_millis(40)).await;
        n += 1;
        let avoid = avoided.load(Ordering::SeqCst);
        let live: Vec<String> = {
            let bases = bases.lock().unwrap();
            bases.iter().enumerate().filter(|(r, _)| *r != avoid).filter_map(|(_, b)| b.clone()).collect()
        };
        let base = &live[usize::try_from(n).unwrap() % live.len()];
        let sent = Instant::now();
        let status = http
            .post(format!("{base}/admin/v1/notifications/resources/updated"))
            .header("idempotency-key", format!("n-{n}"))
            .json(&json!({ "uri": format!("file:///n/{n}") }))
            .send()
            .await
            .ok()
            .map(|response| response.status().as_u16());
        record.lock().unwrap().publishes.push(Publish { n, sent, answered: Instant::now(), status });
    }
}

/// Waits (up to 30 s) until every listener holds a stream acknowledged
/// after `after` and at least 3 s ago that is still open: the gaps of the
/// fault at `after` are all announced (a replica's reader retries within
/// 2 s, its heartbeat within 1 s).
async fn settled(record: &Shared, after: Instant) {
    until("the listen streams to settle after the fault", Duration::from_secs(30), async || {
        let record = record.lock().unwrap();
        let quiet = record.streams.iter().filter(|s| {
            s.end == End::Open && s.opened.is_some_and(|o| o > after && o.elapsed() > Duration::from_secs(3))
        });
        quiet.count() == REPLICAS * STREAMS_PER_REPLICA
    })
    .await;
}

/// Fault windows: when a request to `replica` (or to any, for `None`) may
/// fail. A request counts as met by a fault if it was in flight at any
/// moment of a window (sent just before a kill, it fails just after).
struct Windows(Vec<(Option<usize>, Instant, Instant)>);

impl Windows {
    /// Whether a request to `replica` in flight over `during` met a fault.
    fn cover(&self, replica: usize, during: &std::ops::RangeInclusive<Instant>) -> bool {
        self.0
            .iter()
            .any(|(who, from, to)| who.is_none_or(|r| r == replica) && during.start() <= to && from <= during.end())
    }
}

#[tokio::test]
async fn notifications_survive_redis_restarts_and_killed_and_drained_replicas() {
    let mut redis = RedisServer::start().await;
    // Replica 0 reaches Redis through a relay the test can cut.
    let partition = Partition::start(redis.port()).await;
    let database = FreshDatabase::postgres().await;
    let (redis_url, relayed_url) = (redis.url(), partition.url());
    let env_via = |url| {
        [
            ("SWITCHYARD_REDIS_URL", url),
            ("SWITCHYARD_REDIS_PREFIX", "faults:"),
            ("SWITCHYARD_DATABASE_URL", database.url()),
            ("SWITCHYARD_SHUTDOWN__GRACE", "1s"),
        ]
    };
    let env = env_via(redis_url.as_str());
    let mut replicas = vec![ServerProcess::start(&env_via(relayed_url.as_str())).await];
    for _ in 1..REPLICAS {
        replicas.push(ServerProcess::start(&env).await);
    }
    let bases: Bases = Arc::new(Mutex::new(replicas.iter().map(|r| Some(r.base_url().to_owned())).collect()));
    let record = Shared::default();
    let stop = CancellationToken::new();
    let mut workers = Vec::new();
    for replica in 0..REPLICAS {
        workers.push(tokio::spawn(load(replica, Arc::clone(&bases), Arc::clone(&record), stop.clone())));
        for _ in 0..STREAMS_PER_REPLICA {
            workers.push(tokio::spawn(listen(replica, Arc::clone(&bases), Arc::clone(&record), stop.clone())));
        }
    }
    until("every stream acknowledged before the first publish", Duration::from_secs(10), async || {
        record.lock().unwrap().streams.iter().filter(|s| s.opened.is_some()).count() == REPLICAS * STREAMS_PER_REPLICA
    })
    .await;
    let avoided = Arc::new(AtomicUsize::new(usize::MAX));
    let publisher = tokio::spawn(publish(Arc::clone(&bases), Arc::clone(&avoided), Arc::clone(&record), stop.clone()));
    let mut windows = Vec::new();
    // Steady load between faults (time is the subject: the scenario's pace).
    let settle = || tokio::time::sleep(Duration::from_secs(2));
    settle().await;

    // Redis dies and comes back empty; every replica announces the gap
    // (streams waiting for resources end, and listen again).
    let from = Instant::now();
    redis.kill();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    redis.restart().await;
    // Every replica announces the lost log: every stream ends and listens again.
    settled(&record, Instant::now()).await;
    windows.push((None, from, Instant::now()));

    // Replica 0 is cut off from Redis (not Redis from everyone): its
    // streams stay open and catch up on what was published meanwhile.
    let cut_at = Instant::now();
    avoided.store(0, Ordering::SeqCst);
    partition.cut();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    partition.restore();
    let cut = cut_at..=Instant::now();
    settle().await;
    avoided.store(usize::MAX, Ordering::SeqCst);

    // Replica 1 is SIGKILLed, then started again (on another port).
    let from = Instant::now();
    bases.lock().unwrap()[1] = None;
    drop(replicas.remove(1)); // Drop kills it: SIGKILL
    let restarted = ServerProcess::start(&env).await;
    bases.lock().unwrap()[1] = Some(restarted.base_url().to_owned());
    replicas.insert(1, restarted);
    windows.push((Some(1), from, Instant::now()));
    settle().await;

    // A plugin is registered through replica 0.
    let registered = reqwest::Client::new()
        .post(format!("{}/admin/v1/plugins", replicas[0].base_url()))
        .json(&json!({ "namespace": "late", "kind": "builtin", "spec": { "name": "echo" } }))
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), 201, "{:?}", registered.text().await);

    // Replica 2 is SIGTERMed (drained), then started again.
    let from = Instant::now();
    let pid = replicas[2].child().id().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    until("the drained replica to exit", Duration::from_secs(10), async || !replicas[2].is_running()).await;
    bases.lock().unwrap()[2] = None;
    let restarted = ServerProcess::start(&env).await;
    bases.lock().unwrap()[2] = Some(restarted.base_url().to_owned());
    replicas[2] = restarted;
    windows.push((Some(2), from, Instant::now()));
    settle().await;

    // Stop publishing; let what was published arrive; stop everything.
    publisher.abort();
    let _ = publisher.await;
    settle().await;
    stop.cancel();
    for worker in workers {
        worker.await.unwrap();
    }
    check(&record.lock().unwrap(), &Windows(windows), &cut);

    // The registration reached every replica.
    for replica in &replicas {
        let tools = replica.client().request("tools/list", json!({})).await;
        let names: Vec<&str> =
            tools.result()["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
        assert!(names.contains(&"late_echo"), "{} serves {names:?}", replica.base_url());
    }
    drop(replicas);
    database.remove().await;
}

/// What the record must show (the module's list).
fn check(record: &Record, windows: &Windows, cut: &std::ops::RangeInclusive<Instant>) {
    let cut_at = *cut.start();
    let stray: Vec<_> =
        record.failures.iter().filter(|(replica, during, _)| !windows.cover(*replica, during)).collect();
    assert!(stray.is_empty(), "requests failed outside the fault windows: {stray:?}");

    let accepted: Vec<&Publish> = record.publishes.iter().filter(|p| p.status == Some(202)).collect();
    // 503: not carried, heard by no one. (504: sent, but no answer came;
    // heard or not, the answer says so. `None`: the replica that was asked
    // was killed.)
    let refused: Vec<u64> = record.publishes.iter().filter(|p| p.status == Some(503)).map(|p| p.n).collect();
    assert!(accepted.len() > 100, "{} of {} publishes accepted", accepted.len(), record.publishes.len());
    assert!(!refused.is_empty(), "the Redis outage refused some publishes");
    let unknown: Vec<_> = record.publishes.iter().filter(|p| !matches!(p.status, Some(202 | 503 | 504))).collect();
    assert!(unknown.iter().all(|p| p.status.is_none()), "answers other than 202, 503 and 504: {unknown:?}");
    let perhaps: Vec<_> = record.publishes.iter().filter(|p| p.status == Some(504)).collect();
    // Unanswered: a publish sent on a connection that broke (Redis's death,
    // or the cut of replica 0 from it, before the heartbeat saw it), which
    // may or may not have run. Nowhere else.
    let in_redis_fault = |p: &&Publish| {
        let overlaps = |from: &Instant, to: &Instant| p.sent <= *to && *from <= p.answered;
        windows.0.iter().any(|(who, from, to)| who.is_none() && overlaps(from, to)) || overlaps(cut.start(), cut.end())
    };
    assert!(perhaps.iter().all(in_redis_fault), "only publishes in a Redis fault are unanswered: {perhaps:?}");

    let mut complete = 0;
    for stream in &record.streams {
        let mut counts: HashMap<u64, usize> = HashMap::new();
        for n in &stream.heard {
            *counts.entry(*n).or_default() += 1;
        }
        let twice: Vec<_> = counts.iter().filter(|(_, count)| **count > 1).collect();
        assert!(twice.is_empty(), "a stream on replica {} heard events twice: {twice:?}", stream.replica);
        let heard_refused: Vec<_> = refused.iter().filter(|n| counts.contains_key(n)).collect();
        assert!(heard_refused.is_empty(), "events answered 503 were heard: {heard_refused:?}");
        // Open from before a publish until the end: it heard every one.
        let (End::Open, Some(opened)) = (stream.end, stream.opened) else { continue };
        let missing: Vec<u64> =
            accepted.iter().filter(|p| p.sent > opened && !counts.contains_key(&p.n)).map(|p| p.n).collect();
        assert!(missing.is_empty(), "a stream on replica {} missed {missing:?} without a gap", stream.replica);
        complete += 1;
    }
    assert_eq!(complete, REPLICAS * STREAMS_PER_REPLICA, "every stream open at the end was checked");
    let through_the_cut = |s: &&StreamLog| s.replica == 0 && s.end == End::Open && s.opened.is_some_and(|o| o < cut_at);
    assert!(record.streams.iter().any(|s| through_the_cut(&s)), "a stream on replica 0 lived through its cut");
    let ended = |end| record.streams.iter().filter(|s| s.end == end).count();
    assert!(ended(End::Final) > 0 && ended(End::Cut) > 0, "gaps and the drain end streams; the kill cuts them");
}
