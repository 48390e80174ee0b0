//! `fanout`: a change published on one replica, heard on listen streams held
//! by another replica (across replicas, through Redis) and by the publishing
//! one (local), timed on one clock: the load generator publishes (`resources/
//! updated` through replica A's admin API) and receives every frame. The
//! floor to weigh that against: a bare axum server writing one event to as
//! many SSE streams. Also the memory an idle listen stream costs the replica
//! holding it, next to what an idle SSE stream costs the bare server.
//!
//! Each stream is its own connection, as separate clients would hold them,
//! read by a plain socket loop rather than an HTTP client: the generator has
//! one core for a thousand streams, and an HTTP client's per-frame work there
//! would be measured as the server's latency.

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::mpsc;

use crate::servers::{Server, cpu_time, start_bare, start_switchyard_with, status_kib};

const LISTEN: &str = r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["file:///bench/"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
/// What every notification of a round carries: `file:///bench/{round}`.
const MARK: &[u8] = b"file:///bench/";

/// Resident memory of a process, bytes.
fn rss(pid: u32) -> anyhow::Result<u64> {
    Ok(status_kib(pid, "VmRSS")? * 1024)
}

/// Open streams, each read by a task of its own; dropping this closes them.
pub(crate) struct Streams(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Streams {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// The rounds named in `buffer` (every `file:///bench/{round}` followed by a
/// non-digit), and how much of `buffer` they used up; the rest, which may
/// hold the start of a mark or number, waits for the next read.
fn rounds_in(buffer: &[u8]) -> (Vec<u64>, usize) {
    let (mut rounds, mut at) = (Vec::new(), 0);
    loop {
        let Some(start) = buffer[at..].windows(MARK.len()).position(|w| w == MARK) else {
            return (rounds, at.max(buffer.len().saturating_sub(MARK.len() - 1)));
        };
        let digits = at + start + MARK.len();
        let end = digits + buffer[digits..].iter().take_while(|b| b.is_ascii_digit()).count();
        if end == buffer.len() {
            return (rounds, at + start);
        }
        if let Ok(round) = std::str::from_utf8(&buffer[digits..end]).unwrap_or("").parse() {
            rounds.push(round);
        }
        at = end;
    }
}

/// How streams reach a server.
#[derive(Clone)]
pub(crate) enum Target {
    /// One HTTP/1.1 connection per stream (as separate clients, or a load
    /// balancer speaking HTTP/1.1 to the replicas, hold them), each opened
    /// with this raw request.
    Http1 { address: SocketAddr, request: String },
    /// Cleartext HTTP/2 with prior knowledge, the streams spread evenly over
    /// `connections` connections (as a load balancer speaking HTTP/2 to the
    /// replicas multiplexes its clients' streams); each a `request` with `body`.
    Http2 { address: SocketAddr, connections: usize, request: Box<http::Request<()>>, body: &'static str },
}

/// One stream's reader: finds the rounds each read brings and reports them
/// with the stream's index, stamped with the read's time.
struct Reader {
    index: usize,
    buffer: Vec<u8>,
    heard: mpsc::UnboundedSender<(usize, u64, Instant)>,
}

impl Reader {
    fn read(&mut self, bytes: &[u8]) {
        let now = Instant::now();
        self.buffer.extend_from_slice(bytes);
        let (rounds, consumed) = rounds_in(&self.buffer);
        for round in rounds {
            let _ = self.heard.send((self.index, round, now));
        }
        self.buffer.drain(..consumed);
    }
}

/// Opens `count` streams on `target`; returns once every one holds its
/// acknowledgement (a frame containing `acknowledged`). Every later
/// `file:///bench/{round}` is reported with its stream's index and the time
/// of the read that brought it.
pub(crate) async fn open_streams(
    target: &Target,
    count: usize,
    heard: &mpsc::UnboundedSender<(usize, u64, Instant)>,
) -> anyhow::Result<Streams> {
    let (ready, mut acknowledged) = mpsc::channel::<anyhow::Result<()>>(count);
    let mut tasks = Vec::with_capacity(count);
    let connections = match target {
        Target::Http1 { .. } => Vec::new(),
        Target::Http2 { address, connections, .. } => {
            let mut senders = Vec::with_capacity(*connections);
            for _ in 0..*connections {
                let socket = tokio::net::TcpStream::connect(address).await?;
                socket.set_nodelay(true)?;
                // Windows wide enough that no round waits for a WINDOW_UPDATE.
                let (sender, connection) = h2::client::Builder::new()
                    .initial_window_size(1 << 20)
                    .initial_connection_window_size(1 << 30)
                    .handshake::<_, bytes::Bytes>(socket)
                    .await?;
                tasks.push(tokio::spawn(async move {
                    let _ = connection.await;
                }));
                senders.push(sender);
            }
            senders
        }
    };
    for index in 0..count {
        let (target, ready) = (target.clone(), ready.clone());
        let mut reader = Reader { index, buffer: Vec::with_capacity(4096), heard: heard.clone() };
        let sender = connections.get(index % connections.len().max(1)).cloned();
        tasks.push(tokio::spawn(async move {
            let until_acknowledged = |bytes: &[u8], seen: &mut Vec<u8>| {
                seen.extend_from_slice(bytes);
                seen.windows(12).any(|w| w == b"acknowledged")
            };
            match target {
                Target::Http1 { address, request } => {
                    let opened = async {
                        let mut socket = tokio::net::TcpStream::connect(address).await?;
                        socket.set_nodelay(true)?;
                        socket.write_all(request.as_bytes()).await?;
                        let (mut chunk, mut seen) = (vec![0; 4096], Vec::new());
                        loop {
                            let read = socket.read(&mut chunk).await?;
                            anyhow::ensure!(read > 0, "closed before its acknowledgement");
                            if until_acknowledged(&chunk[..read], &mut seen) {
                                break anyhow::Ok(socket);
                            }
                        }
                    };
                    let Some(mut socket) = report(opened.await, &ready).await else { return };
                    let mut chunk = vec![0; 4096];
                    while let Ok(read @ 1..) = socket.read(&mut chunk).await {
                        reader.read(&chunk[..read]);
                    }
                }
                Target::Http2 { request, body, .. } => {
                    let opened = async {
                        let mut sender = sender.context("a connection")?.ready().await?;
                        let (response, mut send) = sender.send_request(*request, false)?;
                        send.send_data(bytes::Bytes::from_static(body.as_bytes()), true)?;
                        let mut stream = response.await?.into_body();
                        let mut seen = Vec::new();
                        loop {
                            let data = stream.data().await.context("ended before its acknowledgement")??;
                            let _ = stream.flow_control().release_capacity(data.len());
                            if until_acknowledged(&data, &mut seen) {
                                break anyhow::Ok(stream);
                            }
                        }
                    };
                    let Some(mut stream) = report(opened.await, &ready).await else { return };
                    while let Some(Ok(data)) = stream.data().await {
                        let _ = stream.flow_control().release_capacity(data.len());
                        reader.read(&data);
                    }
                }
            }
        }));
    }
    let streams = Streams(tasks);
    for _ in 0..count {
        tokio::time::timeout(Duration::from_secs(30), acknowledged.recv())
            .await
            .context("streams were not all acknowledged within 30 s")?
            .context("stream tasks ended")??;
    }
    Ok(streams)
}

/// Tells the waiting `open_streams` whether a stream opened; the stream if it did.
async fn report<T>(opened: anyhow::Result<T>, ready: &mpsc::Sender<anyhow::Result<()>>) -> Option<T> {
    match opened {
        Ok(stream) => {
            let _ = ready.send(Ok(())).await;
            Some(stream)
        }
        Err(error) => {
            let _ = ready.send(Err(error)).await;
            None
        }
    }
}

/// The address of a server's URL.
fn address_of(url: &str) -> anyhow::Result<SocketAddr> {
    reqwest::Url::parse(url)?.socket_addrs(|| None)?.into_iter().next().context("an address")
}

/// Listen streams on `server`, over HTTP/1.1, or over HTTP/2 when
/// `h2_connections` says how many connections carry them.
pub(crate) fn listen_streams(server: &Server, h2_connections: Option<usize>) -> anyhow::Result<Target> {
    let url = reqwest::Url::parse(&server.url)?;
    let address = address_of(&server.url)?;
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "subscriptions/listen"),
    ];
    Ok(match h2_connections {
        None => {
            let mut request = format!("POST {} HTTP/1.1\r\nhost: {address}\r\n", url.path());
            for (name, value) in headers {
                request.push_str(&format!("{name}: {value}\r\n"));
            }
            request.push_str(&format!("content-length: {}\r\n\r\n{LISTEN}", LISTEN.len()));
            Target::Http1 { address, request }
        }
        Some(connections) => {
            let mut request = http::Request::post(format!("http://{address}{}", url.path()));
            for (name, value) in headers {
                request = request.header(name, value);
            }
            Target::Http2 { address, connections, request: Box::new(request.body(())?), body: LISTEN }
        }
    })
}

/// The bare broadcaster's SSE streams, over HTTP/1.1 or HTTP/2.
fn bare_streams(bare: &Server, h2_connections: Option<usize>) -> anyhow::Result<Target> {
    let address = address_of(&bare.url)?;
    Ok(match h2_connections {
        None => Target::Http1 { address, request: format!("GET /sse HTTP/1.1\r\nhost: {address}\r\n\r\n") },
        Some(connections) => Target::Http2 {
            address,
            connections,
            request: Box::new(http::Request::get(format!("http://{address}/sse")).body(())?),
            body: "",
        },
    })
}

/// What opening idle streams added to a process's resident memory, per stream.
struct Growth {
    /// Bytes in all.
    each: f64,
    /// Of those, file pages: the binary's code or read-only data faulted in
    /// by the first streams, paid once rather than per stream.
    file_each: f64,
}

/// Resident memory each of `count` idle streams opened on `target` costs
/// the process `pid`.
async fn per_stream_memory(pid: u32, target: &Target, count: usize) -> anyhow::Result<Growth> {
    let (heard, _ignored) = mpsc::unbounded_channel();
    let (before, file_before) = (rss(pid)?, status_kib(pid, "RssFile")? * 1024);
    let streams = open_streams(target, count, &heard).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (after, file_after) = (rss(pid)?, status_kib(pid, "RssFile")? * 1024);
    drop(streams);
    Ok(Growth {
        each: after.saturating_sub(before) as f64 / count as f64,
        file_each: file_after.saturating_sub(file_before) as f64 / count as f64,
    })
}

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

/// What one fan-out scenario measured.
struct Fanout {
    /// Every publish-to-frame time, sorted.
    times: Vec<Duration>,
    /// Server CPU (user + system, summed over the servers named) per
    /// delivered notification.
    cpu_each: Duration,
}

/// Publishes `count` updates with a POST of `{"uri": "file:///bench/{round}"}`
/// to `publish` and waits each time until all `expected` streams heard it.
async fn measure(
    publish: &str,
    pids: &[u32],
    heard: &mut mpsc::UnboundedReceiver<(usize, u64, Instant)>,
    expected: usize,
    rounds: &mut std::ops::RangeFrom<u64>,
    count: u64,
) -> anyhow::Result<Fanout> {
    let http = reqwest::Client::new();
    let cpu_before = cpu_of(pids)?;
    let mut times = Vec::new();
    for _ in 0..count {
        let round = rounds.next().context("rounds left")?;
        publish_round(&http, publish, heard, expected, round, &mut times).await?;
    }
    let cpu_each = (cpu_of(pids)? - cpu_before) / u32::try_from(times.len()).unwrap_or(u32::MAX).max(1);
    times.sort();
    Ok(Fanout { times, cpu_each })
}

/// The CPU time the processes `pids` have used.
pub(crate) fn cpu_of(pids: &[u32]) -> anyhow::Result<Duration> {
    pids.iter().map(|pid| cpu_time(*pid)).sum()
}

/// Publishes `file:///bench/{round}` to `publish`, waits until `expected`
/// streams heard it and adds each one's time from publish to frame to
/// `times`; then lets the streams go idle again, as between real changes.
pub(crate) async fn publish_round(
    http: &reqwest::Client,
    publish: &str,
    heard: &mut mpsc::UnboundedReceiver<(usize, u64, Instant)>,
    expected: usize,
    round: u64,
    times: &mut Vec<Duration>,
) -> anyhow::Result<()> {
    let uri = format!("file:///bench/{round}");
    let published = Instant::now();
    let status = http.post(publish).json(&serde_json::json!({ "uri": uri })).send().await?.status();
    anyhow::ensure!(status.as_u16() == 202, "publish answered {status}");
    for _ in 0..expected {
        let (_, heard_round, at) = tokio::time::timeout(Duration::from_secs(10), heard.recv())
            .await
            .context("a stream missed a notification")?
            .context("streams closed")?;
        anyhow::ensure!(heard_round == round, "round {heard_round} heard during round {round}");
        times.push(at.duration_since(published));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    Ok(())
}

/// The environment of replicas that share one Redis under a prefix of
/// their own (`REDIS_URL`, default `redis://127.0.0.1:6379`).
pub(crate) struct ReplicaEnv {
    redis: String,
    prefix: String,
    per_caller: String,
}

impl ReplicaEnv {
    /// For replicas whose keys are named by `tag` and the generator's
    /// process id, each holding up to `streams` streams of one caller.
    pub(crate) fn new(tag: &str, streams: usize) -> Self {
        Self {
            redis: std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into()),
            prefix: format!("switchyard-loadtest-{}{tag}:", std::process::id()),
            // The generator stands for many clients from one address: each
            // replica lets one caller hold every stream of the run (64 by default).
            per_caller: (2 * streams).to_string(),
        }
    }

    /// Replicas sharing Redis share keys too (the bus's MACs, requestState).
    pub(crate) fn pairs(&self) -> [(&str, &str); 4] {
        [
            ("SWITCHYARD_REDIS_URL", self.redis.as_str()),
            ("SWITCHYARD_REDIS_PREFIX", self.prefix.as_str()),
            ("SWITCHYARD_STATE__KEYS", crate::LOADTEST_STATE_KEY),
            ("SWITCHYARD_LISTEN__MAX_STREAMS_PER_CALLER", self.per_caller.as_str()),
        ]
    }
}

/// Streams hyper (and so the bare server, on `axum::serve`) allows on one
/// HTTP/2 connection by default.
const BARE_H2_STREAMS_PER_CONNECTION: usize = 200;

pub(crate) async fn fanout(binary: &Path, streams: usize, rounds: u64, h2_connections: usize) -> anyhow::Result<()> {
    anyhow::ensure!(
        h2_connections > 0 && streams.div_ceil(h2_connections) <= BARE_H2_STREAMS_PER_CONNECTION,
        "the bare server takes {BARE_H2_STREAMS_PER_CONNECTION} streams per HTTP/2 connection: \
         {streams} streams need --h2-connections {} or more",
        streams.div_ceil(BARE_H2_STREAMS_PER_CONNECTION)
    );
    let replicas = ReplicaEnv::new("", streams);
    let env = replicas.pairs();
    let (a, b) = (start_switchyard_with(binary, &env).await?, start_switchyard_with(binary, &env).await?);
    let (pid_a, pid_b) = (a.child.id(), b.child.id());
    let publish_on_a = format!("{}/notifications/resources/updated", a.url.replace("/mcp", "/admin/v1"));
    let bare = start_bare().await?;
    let publish_on_bare = format!("{}publish", bare.url);
    let (on_a, on_b, on_bare) = (listen_streams(&a, None)?, listen_streams(&b, None)?, bare_streams(&bare, None)?);
    let h2 = Some(h2_connections);
    let (on_b_h2, on_bare_h2) = (listen_streams(&b, h2)?, bare_streams(&bare, h2)?);

    // Memory first, while every server is fresh (each measured on a process
    // that held no streams before, so freed memory is not counted as reused).
    let mut memory = vec![
        ("listen stream, HTTP/1.1 (a connection each)".to_owned(), per_stream_memory(pid_b, &on_b, streams).await?),
        ("bare axum SSE stream, HTTP/1.1".to_owned(), per_stream_memory(bare.child.id(), &on_bare, streams).await?),
    ];
    let fresh = start_switchyard_with(binary, &env).await?;
    let fresh_bare = start_bare().await?;
    memory.push((
        format!("listen stream, HTTP/2 ({h2_connections} connections)"),
        per_stream_memory(fresh.child.id(), &listen_streams(&fresh, h2)?, streams).await?,
    ));
    memory.push((
        format!("bare axum SSE stream, HTTP/2 ({h2_connections} connections)"),
        per_stream_memory(fresh_bare.child.id(), &bare_streams(&fresh_bare, h2)?, streams).await?,
    ));
    drop((fresh, fresh_bare));

    let mut round_numbers = 1..;
    let (tx, mut heard) = mpsc::unbounded_channel();
    let mut run = async |targets: &[&Target], publish: &str, pids: &[u32]| {
        let mut open = Vec::new();
        for target in targets {
            open.push(open_streams(target, streams, &tx).await?);
        }
        measure(publish, pids, &mut heard, targets.len() * streams, &mut round_numbers, rounds).await
    };
    // Across replicas: published on A, heard on B only (the issue's target).
    let across = run(&[&on_b], &publish_on_a, &[pid_a, pid_b]).await?;
    let across_h2 = run(&[&on_b_h2], &publish_on_a, &[pid_a, pid_b]).await?;
    // Local: published on A, heard on A.
    let local = run(&[&on_a], &publish_on_a, &[pid_a]).await?;
    // Both at once, on the one core the replicas share here.
    let both = run(&[&on_a, &on_b], &publish_on_a, &[pid_a, pid_b]).await?;
    // The floor: a bare axum server writing one event to as many SSE streams.
    let floor = run(&[&on_bare], &publish_on_bare, &[bare.child.id()]).await?;
    let floor_h2 = run(&[&on_bare_h2], &publish_on_bare, &[bare.child.id()]).await?;

    let ms = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1000.0);
    println!("## resources/updated published on replica A, {rounds} rounds, {streams} streams per server\n");
    println!("| heard on | p50 ms | p99 ms | max ms | server CPU per notification |");
    println!("|---|---|---|---|---|");
    let over_h2 = format!("HTTP/2, {h2_connections} connections");
    for (name, run) in [
        (format!("{streams} streams on B (across replicas, Redis), HTTP/1.1"), &across),
        (format!("{streams} streams on B (across replicas, Redis), {over_h2}"), &across_h2),
        (format!("{streams} streams on A (local), HTTP/1.1"), &local),
        (format!("{streams} on A and {streams} on B, HTTP/1.1"), &both),
        (format!("{streams} SSE streams of a bare axum broadcaster (local), HTTP/1.1"), &floor),
        (format!("{streams} SSE streams of a bare axum broadcaster (local), {over_h2}"), &floor_h2),
    ] {
        println!(
            "| {name} | {} | {} | {} | {:.1} µs |",
            ms(percentile(&run.times, 0.5)),
            ms(percentile(&run.times, 0.99)),
            ms(percentile(&run.times, 1.0)),
            run.cpu_each.as_secs_f64() * 1e6
        );
    }
    let ratio = |ours: &Fanout, bare: &Fanout| {
        percentile(&ours.times, 0.99).as_secs_f64() / percentile(&bare.times, 0.99).as_secs_f64().max(1e-9)
    };
    println!(
        "\np99 across replicas with {streams} streams (target < 10 ms): {} ms over HTTP/1.1, {} ms over {over_h2}; \
         local p99 as a ratio to the bare broadcaster's, HTTP/1.1: {:.2}",
        ms(percentile(&across.times, 0.99)),
        ms(percentile(&across_h2.times, 0.99)),
        ratio(&local, &floor),
    );
    println!("\n| idle stream | resident memory each | of which file pages | streams per GiB |");
    println!("|---|---|---|---|");
    for (name, Growth { each, file_each }) in &memory {
        println!(
            "| {name} | {:.1} KiB | {:.1} KiB | {:.0} |",
            each / 1024.0,
            file_each / 1024.0,
            (1u64 << 30) as f64 / each.max(1.0)
        );
    }
    println!("\ntarget: >= 100,000 idle listen streams per GiB (about 10 KiB each)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::rounds_in;

    #[test]
    fn rounds_are_read_across_reads() {
        let first: &[u8] = b"data: {\"uri\":\"file:///bench/12\"}\n\ndata: {\"uri\":\"file:///bench/1";
        let (rounds, consumed) = rounds_in(first);
        assert_eq!(rounds, vec![12]);
        let mut next = first[consumed..].to_vec();
        next.extend_from_slice(b"3\"}\n\ndata: {\"uri\":\"file:///be");
        let (rounds, consumed) = rounds_in(&next);
        assert_eq!(rounds, vec![13]);
        let mut last = next[consumed..].to_vec();
        last.extend_from_slice(b"nch/14\"}");
        assert_eq!(rounds_in(&last).0, vec![14]);
    }
}
