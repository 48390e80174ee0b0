//! `plugin-call`: a WASM tool and an upstream tool against the built-in
//! `echo` on the same server, per server CPU-second.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;

use crate::load::load;
use crate::servers::{Server, start_bare, start_bare_forwarding, start_switchyard_with, status_kib};
use crate::tools_call::{CALL, CALL_HEADERS, Headers, ROUNDS, Variant, best_rounds};

/// The headers of a 2026-07-28 request of `method` naming `name`.
macro_rules! mcp_headers {
    ($method:literal, $name:literal) => {
        &[
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", $method),
            ("mcp-name", $name),
        ]
    };
}

pub(crate) const UNITS_CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"units_convert","arguments":{"value":1,"from":"mi","to":"km"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
pub(crate) const UPSTREAM_CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"up_echo","arguments":{"text":"hello"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
pub(crate) const UPSTREAM_HEADERS: Headers = mcp_headers!("tools/call", "up_echo");
pub(crate) const UPSTREAM_H2C_CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"uph2_echo","arguments":{"text":"hello"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
pub(crate) const UPSTREAM_H2C_HEADERS: Headers = mcp_headers!("tools/call", "uph2_echo");
pub(crate) const READ_CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"test://static-text","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
pub(crate) const READ_HEADERS: Headers = mcp_headers!("resources/read", "test://static-text");
pub(crate) const UNITS_HEADERS: Headers = mcp_headers!("tools/call", "units_convert");

/// Registers the units module, and `upstream` as the `up` namespace (HTTP/1.1)
/// and as `uph2` (cleartext HTTP/2), through the admin API of `server`.
pub(crate) async fn register_plugins(server: &Server, wasm: &std::path::Path, upstream: &Server) -> anyhow::Result<()> {
    let bytes = std::fs::read(wasm).with_context(|| format!("reading {} (build the example first)", wasm.display()))?;
    let admin = server.url.replace("/mcp", "/admin/v1");
    let http = reqwest::Client::new();
    let uploaded: serde_json::Value = http
        .post(format!("{admin}/artifacts"))
        .header("content-type", "application/wasm")
        .body(bytes)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let body = serde_json::json!({"namespace": "units", "kind": "wasm", "spec": {"artifact": uploaded["sha256"]}});
    http.post(format!("{admin}/plugins")).json(&body).send().await?.error_for_status()?;
    let body = serde_json::json!({"namespace": "up", "kind": "upstream", "spec": {"url": upstream.url}});
    http.post(format!("{admin}/plugins")).json(&body).send().await?.error_for_status()?;
    let body = serde_json::json!({"namespace": "uph2", "kind": "upstream", "spec": {"url": upstream.url, "h2c": true}});
    http.post(format!("{admin}/plugins")).json(&body).send().await?.error_for_status()?;
    Ok(())
}

/// The rows of `plugin_call`, in the order it measures and prints them
/// (the indices below name places in that array).
const SCENARIOS: usize = 7;
const HTTP1: usize = 2;
const H2C: usize = 3;
const HAND: usize = 4;
const FORWARDER: usize = 5;
const FORWARDER_HTTP1: usize = 6;

pub(crate) async fn plugin_call(
    binary: PathBuf,
    wasm: PathBuf,
    requests: usize,
    concurrency: usize,
    latency_requests: usize,
) -> anyhow::Result<()> {
    // The upstream runs on loopback, which the outbound policy refuses unless allowed.
    let server = start_switchyard_with(&binary, &[("SWITCHYARD_UPSTREAM__ALLOWED_RANGES", "127.0.0.0/8")]).await?;
    // The conformance fixture gives the upstream a resource of its own
    // (`test://static-text`, answered with a ttlMs of a minute) to read
    // built in, and through the front server, from its answer cache. The
    // least forwarder's one h2c connection to it is opened once and never
    // again: it must not be closed as idle (after 30 s by default) while a
    // round of the other rows runs, which with 60,000 requests a row can
    // take that long.
    let upstream = start_switchyard_with(
        &binary,
        &[("SWITCHYARD_FIXTURE", "conformance"), ("SWITCHYARD_HTTP__HEADER_READ_TIMEOUT", "10m")],
    )
    .await?;
    let idle_kib = status_kib(server.child.id(), "VmRSS")?;
    register_plugins(&server, &wasm, &upstream).await?;
    // Processes of their own, so that each one's CPU is counted apart: the
    // hand-written handler answering the call itself, and the least
    // forwarders passing it on to the same upstream over h2c and over HTTP/1.1.
    let mut hand_written = start_bare().await?;
    hand_written.url.push_str("mcp");
    let mut forwarder = start_bare_forwarding(Some(&upstream.url)).await?;
    forwarder.url.push_str("forward");
    let mut forwarder_http1 = start_bare_forwarding(Some(&upstream.url)).await?;
    forwarder_http1.url.push_str("forward1");
    let scenarios: [Variant<'_>; SCENARIOS] = [
        ("echo (built-in)", &server, CALL, CALL_HEADERS),
        ("units_convert (WASM)", &server, UNITS_CALL, UNITS_HEADERS),
        ("up_echo (upstream Switchyard, HTTP/1.1)", &server, UPSTREAM_CALL, UPSTREAM_HEADERS),
        ("uph2_echo (the same upstream, h2c)", &server, UPSTREAM_H2C_CALL, UPSTREAM_H2C_HEADERS),
        ("hand-written handler (hand.rs), answering itself", &hand_written, CALL, CALL_HEADERS),
        ("least forwarder (forward.rs), the same upstream over h2c", &forwarder, CALL, CALL_HEADERS),
        ("least forwarder (forward.rs), the same upstream over HTTP/1.1", &forwarder_http1, CALL, CALL_HEADERS),
    ];
    let runs = best_rounds(&scenarios, requests, concurrency).await?;
    let ms = |d: Duration| format!("{:.3}", d.as_secs_f64() * 1000.0);
    println!("## tools/call by plugin kind, one server, {requests} requests at concurrency {concurrency}\n");
    println!("| tool | req/s | req per server CPU-s | ratio to built-in | p50 ms | p99 ms | max ms |");
    println!("|---|---|---|---|---|---|---|");
    let mut rates = [0.0; SCENARIOS];
    for (i, ((name, target, body, headers), run)) in scenarios.iter().zip(runs).enumerate() {
        let latency = load(target, body, headers, latency_requests, 1).await?;
        rates[i] = run.per_cpu_second();
        // The bare processes' rows are weighed against each other below.
        let ratio = if i < HAND { format!("{:.2}", rates[i] / rates[0]) } else { "—".into() };
        println!(
            "| {name} | {:.0} | {:.0} | {ratio} | {} | {} | {} |",
            run.per_second(),
            rates[i],
            ms(latency.percentile(0.5)),
            ms(latency.percentile(0.99)),
            ms(latency.percentile(1.0))
        );
    }
    // #18's upstream row weighed against what forwarding costs at the least:
    // the forwarder's CPU per call above the hand-written handler's, added
    // to `echo`'s, estimates what an upstream call would cost a front whose
    // forwarding were as lean (an estimate: the bare processes run on
    // another allocator, and the handler parses what the forwarder does not).
    let per_call = |rate: f64| 1.0 / rate;
    println!();
    for (forwarder, upstream, protocol) in [(FORWARDER, H2C, "h2c"), (FORWARDER_HTTP1, HTTP1, "HTTP/1.1")] {
        let least_extra = per_call(rates[forwarder]) - per_call(rates[HAND]);
        println!(
            "least forwarder over {protocol} / hand-written handler, per server CPU-second: {:.2}",
            rates[forwarder] / rates[HAND]
        );
        println!(
            "an upstream call over {protocol} whose forwarding cost the least forwarder's extra CPU ({:.1} µs) would be {:.2} of `echo` ({protocol} here: {:.2}; #18's target >= 0.5)",
            least_extra * 1e6,
            per_call(rates[0]) / (per_call(rates[0]) + least_extra),
            rates[upstream] / rates[0]
        );
    }
    let (through, built_in) = cached_read(&server, &upstream, requests, concurrency).await?;
    println!(
        "\n`resources/read` of `test://static-text`: from the front server's answer cache {through:.0} per server CPU-second, built in (the upstream serving it itself) {built_in:.0}: **{:.2}** (target: near 1)",
        through / built_in
    );
    let peak_kib = status_kib(server.child.id(), "VmHWM")?;
    println!(
        "\nServer CPU is the front server's only; an upstream call also costs the upstream's own CPU, and its wall rate shows the round trip."
    );
    println!(
        "The front server's resident memory: {:.1} MiB idle before the plugins were registered, {:.1} MiB at its peak over every run above.",
        idle_kib as f64 / 1024.0,
        peak_kib as f64 / 1024.0
    );
    Ok(())
}

/// Reads per server CPU-second of the upstream's resource: through `front`
/// (after the first read, from its answer cache) and from `upstream` itself,
/// alternated over the rounds; the best round of each.
async fn cached_read(
    front: &Server,
    upstream: &Server,
    requests: usize,
    concurrency: usize,
) -> anyhow::Result<(f64, f64)> {
    load(front, READ_CALL, READ_HEADERS, 2_000, concurrency).await?;
    load(upstream, READ_CALL, READ_HEADERS, 2_000, concurrency).await?;
    let (mut through, mut built_in) = (0.0_f64, 0.0_f64);
    for _ in 0..ROUNDS {
        through = through.max(load(front, READ_CALL, READ_HEADERS, requests, concurrency).await?.per_cpu_second());
        built_in = built_in.max(load(upstream, READ_CALL, READ_HEADERS, requests, concurrency).await?.per_cpu_second());
    }
    Ok((through, built_in))
}
