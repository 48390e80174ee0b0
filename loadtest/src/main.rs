//! Benchmarks: Switchyard against a bare axum handler that returns a small JSON
//! answer, both as separate processes on loopback, measured in the same run.
//!
//! The figure that matters is requests per **server CPU-second** (read from
//! `/proc/<pid>/stat`), as a ratio to the bare handler: it is what a replica
//! costs, and it is stable across machines where absolute rates are not.
//! Latency percentiles come from a concurrency-1 run. Bounded in count and
//! time; loopback only.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{Parser, Subcommand};

mod auth_call;
mod fanout;
mod fanout_compare;
mod forward;
mod hand;
mod listen_burst;
mod load;
mod plugin_call;
mod servers;
mod tools_call;
mod wasm_call;

use load::{Run, load, load_spread};
use plugin_call::plugin_call;
use servers::{Server, free_port, server_command, start_switchyard, start_switchyard_with, status_kib};
use tools_call::{CALL, CALL_HEADERS, CALL_SSE, ROUNDS, tools_call};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Scenario,
}

#[derive(Subcommand)]
enum Scenario {
    /// Serve the bare baseline: POST / answers a small JSON-RPC result
    /// without parsing the body; POST /mcp is the hand-written `tools/call`
    /// handler (`hand.rs`); GET /readyz answers once it listens. With
    /// `--forward`, POST /forward passes each request on to that upstream
    /// over cleartext HTTP/2, and POST /forward1 over HTTP/1.1 (`forward.rs`).
    Bare {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:0")]
        bind: String,
        /// An upstream MCP endpoint for POST /forward and /forward1, e.g. `http://127.0.0.1:8080/mcp`.
        #[arg(long)]
        forward: Option<String>,
    },
    /// `tools/call` of `echo`: throughput per server CPU-second and latency,
    /// as ratios to the bare handler.
    ToolsCall {
        /// The switchyard binary (build it with `cargo build --release`).
        #[arg(long, default_value = "target/release/switchyard")]
        switchyard: PathBuf,
        /// Requests per throughput run.
        #[arg(long, default_value_t = 50_000)]
        requests: usize,
        /// Concurrent connections for the throughput run.
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
        /// Requests of the concurrency-1 latency run.
        #[arg(long, default_value_t = 2_000)]
        latency_requests: usize,
    },
    /// `tools/call` of a WASM tool (`units_convert`, the example plugin) and of
    /// an upstream tool (`up_echo`, republished from a second Switchyard), as
    /// ratios to a built-in tool (`echo`) on the same server, same run.
    PluginCall {
        /// The switchyard binary (build it with `cargo build --release`).
        #[arg(long, default_value = "target/release/switchyard")]
        switchyard: PathBuf,
        /// The units example module (`cargo build --profile wasm-guest --target
        /// wasm32-wasip1 -p switchyard-example-units`).
        #[arg(long, default_value = "target/wasm32-wasip1/wasm-guest/switchyard_example_units.wasm")]
        wasm: PathBuf,
        /// Requests per throughput run.
        #[arg(long, default_value_t = 20_000)]
        requests: usize,
        /// Concurrent connections for the throughput run.
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
        /// Requests of the concurrency-1 latency run.
        #[arg(long, default_value_t = 2_000)]
        latency_requests: usize,
    },
    /// Many clients opening listen streams at once: time to acknowledgement,
    /// with the configured listen backlog and with the stock 128.
    ListenBurst {
        /// The switchyard binary (build it with `cargo build --release`).
        #[arg(long, default_value = "target/release/switchyard")]
        switchyard: PathBuf,
        /// Clients connecting at once.
        #[arg(long, default_value_t = 2_000)]
        clients: usize,
    },
    /// `tools/call` of `echo` with an RS256 bearer token from a real
    /// authorization server (`oidc-provider`), reused (verification cache
    /// hit) and fresh on every request (miss), as ratios to the same call
    /// without authentication.
    AuthCall {
        /// The switchyard binary (build it with `cargo build --release`).
        #[arg(long, default_value = "target/release/switchyard")]
        switchyard: PathBuf,
        /// Requests per throughput run (also the number of fresh tokens fetched).
        #[arg(long, default_value_t = 10_000)]
        requests: usize,
        /// Concurrent connections for the throughput run.
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
    },
    /// `resources/updated` published on replica A, heard by listen streams on
    /// A and on replica B (through Redis): latency percentiles on one clock,
    /// and the memory of an idle listen stream. Needs Redis (`REDIS_URL`,
    /// default `redis://127.0.0.1:6379`).
    Fanout {
        /// The switchyard binary (build it with `cargo build --release`).
        #[arg(long, default_value = "target/release/switchyard")]
        switchyard: PathBuf,
        /// Listen streams on each replica.
        #[arg(long, default_value_t = 1_000)]
        streams: usize,
        /// Notifications published.
        #[arg(long, default_value_t = 20)]
        rounds: u64,
        /// HTTP/2 connections that carry the streams of the HTTP/2 rows.
        #[arg(long, default_value_t = 5)]
        h2_connections: usize,
    },
    /// The across-replica rows of `fanout` for two builds in one run, their
    /// rounds in turn (what a change to the bus is weighed by: separate runs
    /// of one build differ by more than the 10% a change may cost). Needs
    /// Redis (`REDIS_URL`).
    FanoutCompare {
        /// The build measured against.
        #[arg(long)]
        before: PathBuf,
        /// The build measured.
        #[arg(long, default_value = "target/release/switchyard")]
        after: PathBuf,
        /// Listen streams on each build's replica B.
        #[arg(long, default_value_t = 1_000)]
        streams: usize,
        /// Notifications published through each build, per transport.
        #[arg(long, default_value_t = 100)]
        rounds: u64,
        /// HTTP/2 connections that carry the streams of the HTTP/2 rows.
        #[arg(long, default_value_t = 5)]
        h2_connections: usize,
    },
    /// Two replicas on one Redis against one, the load spread round robin:
    /// throughput and CPU per request. Needs Redis (`REDIS_URL`).
    Replicas {
        /// The switchyard binary (build it with `cargo build --release`).
        #[arg(long, default_value = "target/release/switchyard")]
        switchyard: PathBuf,
        /// Requests per run.
        #[arg(long, default_value_t = 50_000)]
        requests: usize,
        /// Concurrent connections.
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
    },
    /// Process spawn to the first answered `tools/call`.
    ColdStart {
        /// The switchyard binary (build it with `cargo build --release`).
        #[arg(long, default_value = "target/release/switchyard")]
        switchyard: PathBuf,
        /// How many starts.
        #[arg(long, default_value_t = 10)]
        starts: usize,
    },
    /// Resident memory of one server idle, at the peak of a `tools/call` load
    /// (JSON and SSE answers), and after it.
    Memory {
        /// The switchyard binary (build it with `cargo build --release`).
        #[arg(long, default_value = "target/release/switchyard")]
        switchyard: PathBuf,
        /// Requests of each answer kind.
        #[arg(long, default_value_t = 50_000)]
        requests: usize,
        /// Concurrent connections.
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
    },
    /// Every scenario with its default counts, as one Markdown report headed
    /// with the date and the machine (what loadtest/README.md shows).
    All {
        /// The switchyard binary (build it with `cargo build --release`).
        #[arg(long, default_value = "target/release/switchyard")]
        switchyard: PathBuf,
        /// The units example module.
        #[arg(long, default_value = "target/wasm32-wasip1/wasm-guest/switchyard_example_units.wasm")]
        wasm: PathBuf,
    },
    /// One WASM call in process (no HTTP): the host's floor and the units example.
    WasmCall {
        /// The units example module.
        #[arg(long, default_value = "target/wasm32-wasip1/wasm-guest/switchyard_example_units.wasm")]
        wasm: PathBuf,
        /// Sequential calls per measurement.
        #[arg(long, default_value_t = 3_000)]
        calls: u32,
        /// Measure only the pooling allocator (for a profiler's eyes: no
        /// on-demand rows, one compilation).
        #[arg(long)]
        pooling_only: bool,
    },
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    match Cli::parse().command {
        Scenario::Bare { bind, forward } => runtime.block_on(bare(bind, forward)),
        Scenario::ToolsCall { switchyard, requests, concurrency, latency_requests } => {
            runtime.block_on(tools_call(switchyard, requests, concurrency, latency_requests))
        }
        Scenario::ListenBurst { switchyard, clients } => {
            runtime.block_on(listen_burst::listen_burst(&switchyard, clients))
        }
        Scenario::Fanout { switchyard, streams, rounds, h2_connections } => {
            runtime.block_on(fanout::fanout(&switchyard, streams, rounds, h2_connections))
        }
        Scenario::FanoutCompare { before, after, streams, rounds, h2_connections } => {
            runtime.block_on(fanout_compare::fanout_compare(&before, &after, streams, rounds, h2_connections))
        }
        Scenario::AuthCall { switchyard, requests, concurrency } => {
            runtime.block_on(auth_call::auth_call(&switchyard, requests, concurrency))
        }
        Scenario::WasmCall { wasm, calls, pooling_only } => {
            runtime.block_on(wasm_call::wasm_call(&wasm, calls, pooling_only))
        }
        Scenario::PluginCall { switchyard, wasm, requests, concurrency, latency_requests } => {
            runtime.block_on(plugin_call(switchyard, wasm, requests, concurrency, latency_requests))
        }
        Scenario::Replicas { switchyard, requests, concurrency } => {
            runtime.block_on(replicas(&switchyard, requests, concurrency))
        }
        Scenario::ColdStart { switchyard, starts } => runtime.block_on(cold_start(&switchyard, starts)),
        Scenario::Memory { switchyard, requests, concurrency } => {
            runtime.block_on(memory(&switchyard, requests, concurrency))
        }
        Scenario::All { switchyard, wasm } => runtime.block_on(all(switchyard, wasm)),
    }
}

/// The baseline: the least an HTTP JSON endpoint can do on this stack.
/// `GET /sse` and `POST /publish` are the least a notification fan-out can
/// do on it (what `fanout` weighs listen streams against): every `/sse`
/// stream gets `data: acknowledged` at once, then one event per publish,
/// the published JSON as it came, through one broadcast channel. It also
/// takes OTLP exports (`/v1/traces`, `/v1/metrics`) and drops them, as a
/// collector would that keeps up, for the traced variant of `tools-call`.
async fn bare(bind: String, forward: Option<String>) -> anyhow::Result<()> {
    // An empty protobuf body is the empty (successful) export response.
    let otlp_sink = || async { ([("content-type", "application/x-protobuf")], "") };
    let (published, _) = tokio::sync::broadcast::channel::<axum::body::Bytes>(64);
    let subscribe = published.clone();
    let app = axum::Router::new()
        .route(
            "/",
            axum::routing::post(|body: axum::body::Bytes| async move {
                let _ = body;
                (
                    [("content-type", "application/json")],
                    r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"hello"}]}}"#,
                )
            }),
        )
        .route(
            "/sse",
            axum::routing::get(move || {
                let events = subscribe.subscribe();
                async move {
                    let first = axum::body::Bytes::from_static(b"data: acknowledged\n\n");
                    let stream = futures::stream::unfold((Some(first), events), |(first, mut events)| async move {
                        if let Some(first) = first {
                            return Some((Ok::<_, std::convert::Infallible>(first), (None, events)));
                        }
                        let message = events.recv().await.ok()?;
                        let mut event = Vec::with_capacity(message.len() + 8);
                        event.extend_from_slice(b"data: ");
                        event.extend_from_slice(&message);
                        event.extend_from_slice(b"\n\n");
                        Some((Ok(axum::body::Bytes::from(event)), (None, events)))
                    });
                    ([("content-type", "text/event-stream")], axum::body::Body::from_stream(stream))
                }
            }),
        )
        .route(
            "/publish",
            axum::routing::post(move |body: axum::body::Bytes| async move {
                let _ = published.send(body);
                axum::http::StatusCode::ACCEPTED
            }),
        )
        .route("/mcp", axum::routing::post(hand::tools_call))
        // What `callgrind-tools-call.sh` waits for, as it does for Switchyard.
        .route("/readyz", axum::routing::get(|| async { "ready" }))
        .route("/v1/traces", axum::routing::post(otlp_sink))
        .route("/v1/metrics", axum::routing::post(otlp_sink));
    let app = match forward {
        Some(url) => app
            .route(
                "/forward",
                axum::routing::post(forward::forward).with_state(forward::Upstream::connect(&url).await?),
            )
            .route(
                "/forward1",
                axum::routing::post(forward::forward_http1).with_state(forward::Http1Upstream::new(&url)?),
            ),
        None => app,
    };
    let listener = tokio::net::TcpListener::bind(&bind).await?;
    println!("{}", listener.local_addr()?);
    let listener = axum::serve::ListenerExt::tap_io(listener, |s| {
        let _ = s.set_nodelay(true);
    });
    axum::serve(listener, app).await?;
    Ok(())
}

/// The `state.keys` the replicas of a run share.
pub(crate) const LOADTEST_STATE_KEY: &str = "lt:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

/// One replica against two sharing Redis, the load spread round robin as a
/// plain load balancer would: requests per second and per server CPU-second
/// (summed over the replicas). Where the replicas share the generator's
/// cores, wall throughput cannot double; what scaling out may not do is cost
/// more CPU per request.
async fn replicas(binary: &std::path::Path, requests: usize, concurrency: usize) -> anyhow::Result<()> {
    let redis = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let prefix = format!("loadtest-replicas-{}:", std::process::id());
    // Replicas sharing Redis share keys (the bus's MACs, requestState).
    let env = [
        ("SWITCHYARD_REDIS_URL", redis.as_str()),
        ("SWITCHYARD_REDIS_PREFIX", prefix.as_str()),
        ("SWITCHYARD_STATE__KEYS", LOADTEST_STATE_KEY),
    ];
    let (a, b) = (start_switchyard_with(binary, &env).await?, start_switchyard_with(binary, &env).await?);
    let layouts: [(&str, Vec<&Server>); 2] = [("one replica", vec![&a]), ("two replicas, round robin", vec![&a, &b])];
    for (_, servers) in &layouts {
        load_spread(servers, CALL, CALL_HEADERS, 2_000, concurrency, Arc::new(Vec::new())).await?;
    }
    let mut runs: [Vec<Run>; 2] = Default::default();
    for _ in 0..ROUNDS {
        for (i, (_, servers)) in layouts.iter().enumerate() {
            runs[i].push(load_spread(servers, CALL, CALL_HEADERS, requests, concurrency, Arc::new(Vec::new())).await?);
        }
    }
    let best = |runs: Vec<Run>| runs.into_iter().max_by(|a, b| a.per_second().total_cmp(&b.per_second()));
    let ms = |d: Duration| format!("{:.3}", d.as_secs_f64() * 1000.0);
    println!("## Two replicas against one (Redis bus), {requests} tools/call at concurrency {concurrency}\n");
    println!("| layout | req/s | ratio | req per server CPU-s | ratio | p50 ms | p99 ms |");
    println!("|---|---|---|---|---|---|---|");
    let mut base = None;
    for ((name, _), runs) in layouts.iter().zip(runs) {
        let run = best(runs).context("at least one round")?;
        let (wall, cpu) = *base.get_or_insert((run.per_second(), run.per_cpu_second()));
        println!(
            "| {name} | {:.0} | {:.2} | {:.0} | {:.2} | {} | {} |",
            run.per_second(),
            run.per_second() / wall,
            run.per_cpu_second(),
            run.per_cpu_second() / cpu,
            ms(run.percentile(0.5)),
            ms(run.percentile(0.99))
        );
    }
    Ok(())
}

/// Spawn to the first answered `tools/call`, `starts` times, each with a fresh registry.
async fn cold_start(binary: &std::path::Path, starts: usize) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    let mut times = Vec::new();
    for _ in 0..starts {
        let port = free_port()?;
        let database = std::env::temp_dir().join(format!("switchyard-cold-{}-{port}.db", std::process::id()));
        let started = Instant::now();
        let child = server_command(binary)
            .args(["serve", "--bind", &format!("127.0.0.1:{port}")])
            .env("SWITCHYARD_LOG", "warn")
            .env("SWITCHYARD_DATABASE_URL", format!("sqlite://{}", database.display()))
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let server = Server { child, url: format!("http://127.0.0.1:{port}/mcp"), database: Some(database) };
        let answered = loop {
            let mut request = client.post(&server.url).body(CALL);
            for (k, v) in CALL_HEADERS {
                request = request.header(*k, *v);
            }
            if request.send().await.is_ok_and(|r| r.status().is_success()) {
                break started.elapsed();
            }
            anyhow::ensure!(started.elapsed() < Duration::from_secs(30), "no answer within 30 s");
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        times.push(answered);
    }
    times.sort();
    let ms = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1000.0);
    println!(
        "## Cold start: process spawn to the first answered tools/call ({starts} starts, fresh SQLite registry)\n"
    );
    println!("| fastest | median | slowest |");
    println!("|---|---|---|");
    println!("| {} ms | {} ms | {} ms |", ms(times[0]), ms(times[times.len() / 2]), ms(times[times.len() - 1]));
    Ok(())
}

/// #18's ceiling for an idle server's resident memory, started as a newcomer
/// starts it (`switchyard serve`, no environment): 12 MiB.
const IDLE_TARGET_KIB: u64 = 12 * 1024;

/// Resident memory idle, at the peak of a `tools/call` load, and after it.
async fn memory(binary: &std::path::Path, requests: usize, concurrency: usize) -> anyhow::Result<()> {
    let server = start_switchyard(binary).await?;
    // `taskset` execs the server, so the pid is the server's either way.
    let pid = server.child.id();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = status_kib(pid, "VmRSS")?;
    load(&server, CALL, CALL_HEADERS, requests, concurrency).await?;
    load(&server, CALL_SSE, CALL_HEADERS, requests, concurrency).await?;
    let peak = status_kib(pid, "VmHWM")?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = status_kib(pid, "VmRSS")?;
    let mib = |kib: u64| format!("{:.1} MiB", kib as f64 / 1024.0);
    println!(
        "## Memory: resident set idle, at peak and after {requests} JSON + {requests} SSE tools/call at concurrency {concurrency}\n"
    );
    println!("| idle | peak under load | after the load |");
    println!("|---|---|---|");
    println!("| {} | {} | {} |", mib(idle), mib(peak), mib(after));
    let met = if idle <= IDLE_TARGET_KIB { "met" } else { "not met" };
    println!("\nidle: {} (#18's target <= {}: {met})", mib(idle), mib(IDLE_TARGET_KIB));
    Ok(())
}

/// The machine, for the report's heading.
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    // All the machine's cores, not the ones this (pinned) process may use.
    let cores = std::fs::read_to_string("/proc/cpuinfo")
        .map_or(0, |info| info.lines().filter(|l| l.starts_with("processor")).count());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().next().and_then(|l| l.split_whitespace().nth(1)).and_then(|k| k.parse::<u64>().ok()))
        .map_or_else(|| "?".into(), |kib| format!("{} GiB", kib / 1024 / 1024));
    format!("{cores} cores of {cpu}, {memory}")
}

/// Every scenario in turn, as one Markdown report headed with the date and
/// machine. Scenarios whose inputs are missing (the WASM example, Redis, the
/// authorization server's packages) are reported as skipped, with why.
async fn all(binary: PathBuf, wasm: PathBuf) -> anyhow::Result<()> {
    let date = String::from_utf8(Command::new("date").args(["-u", "+%Y-%m-%d %H:%M UTC"]).output()?.stdout)?;
    let pinned = std::env::var("SERVER_CPUS")
        .map_or_else(|_| "servers not pinned".to_owned(), |c| format!("servers on CPU {c}"));
    println!("# Switchyard load tests, {}, {} ({pinned})\n", date.trim(), machine());
    let scenarios: Vec<(&str, futures::future::BoxFuture<'_, anyhow::Result<()>>)> = vec![
        ("tools-call", Box::pin(tools_call(binary.clone(), 50_000, 16, 2_000))),
        ("auth-call", Box::pin(auth_call::auth_call(&binary, 10_000, 16))),
        ("plugin-call", Box::pin(plugin_call(binary.clone(), wasm.clone(), 20_000, 16, 2_000))),
        ("wasm-call", Box::pin(wasm_call::wasm_call(&wasm, 3_000, false))),
        ("fanout", Box::pin(fanout::fanout(&binary, 1_000, 20, 5))),
        ("listen-burst", Box::pin(listen_burst::listen_burst(&binary, 2_000))),
        ("replicas", Box::pin(replicas(&binary, 50_000, 16))),
        ("cold-start", Box::pin(cold_start(&binary, 10))),
        ("memory", Box::pin(memory(&binary, 50_000, 16))),
    ];
    for (name, scenario) in scenarios {
        if let Err(error) = scenario.await {
            println!("## {name}: skipped\n\n{error:#}");
        }
        println!();
    }
    Ok(())
}
