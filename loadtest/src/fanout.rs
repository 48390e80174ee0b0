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

use crate::{Server, start_bare, start_switchyard_with};

const LISTEN: &str = r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["file:///bench/"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
/// What every notification of a round carries: `file:///bench/{round}`.
const MARK: &[u8] = b"file:///bench/";

/// Resident memory of a process, bytes.
fn rss(pid: u32) -> anyhow::Result<u64> {
    Ok(crate::status_kib(pid, "VmRSS")? * 1024)
}

/// Open streams, each read by a task of its own; dropping this closes them.
struct Streams(Vec<tokio::task::JoinHandle<()>>);

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

/// Opens `count` streams with `request` on `address`, each on its own
/// connection; returns once every one holds its acknowledgement (a frame
/// containing `acknowledged`). Every later `file:///bench/{round}` is
/// reported with its stream's index and the time of the read that brought it.
async fn open_streams(
    address: SocketAddr,
    request: &str,
    count: usize,
    heard: &mpsc::UnboundedSender<(usize, u64, Instant)>,
) -> anyhow::Result<Streams> {
    let (ready, mut acknowledged) = mpsc::channel::<anyhow::Result<()>>(count);
    let mut tasks = Vec::with_capacity(count);
    for index in 0..count {
        let (request, heard, ready) = (request.to_owned(), heard.clone(), ready.clone());
        tasks.push(tokio::spawn(async move {
            let opened = async {
                let mut socket = tokio::net::TcpStream::connect(address).await?;
                socket.set_nodelay(true)?;
                socket.write_all(request.as_bytes()).await?;
                let mut buffer = Vec::with_capacity(4096);
                while !buffer.windows(12).any(|w| w == b"acknowledged") {
                    anyhow::ensure!(socket.read_buf(&mut buffer).await? > 0, "closed before its acknowledgement");
                }
                anyhow::Ok(socket)
            };
            let mut socket = match opened.await {
                Ok(socket) => {
                    let _ = ready.send(Ok(())).await;
                    socket
                }
                Err(error) => {
                    let _ = ready.send(Err(error)).await;
                    return;
                }
            };
            let mut buffer = Vec::with_capacity(4096);
            while socket.read_buf(&mut buffer).await.is_ok_and(|n| n > 0) {
                let now = Instant::now();
                let (rounds, consumed) = rounds_in(&buffer);
                for round in rounds {
                    let _ = heard.send((index, round, now));
                }
                buffer.drain(..consumed);
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

/// The HTTP/1.1 request of a listen stream on `server`.
fn raw_listen_request(server: &Server) -> anyhow::Result<(SocketAddr, String)> {
    let url = reqwest::Url::parse(&server.url)?;
    let address = url.socket_addrs(|| None)?.into_iter().next().context("an address")?;
    let request = format!(
        "POST {} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: subscriptions/listen\r\ncontent-length: {}\r\n\r\n{LISTEN}",
        url.path(),
        address,
        LISTEN.len()
    );
    Ok((address, request))
}

/// Resident memory each of `count` idle streams opened with `request` costs
/// the process `pid`, bytes.
async fn per_stream_memory(pid: u32, address: SocketAddr, request: &str, count: usize) -> anyhow::Result<f64> {
    let (heard, _ignored) = mpsc::unbounded_channel();
    let before = rss(pid)?;
    let streams = open_streams(address, request, count, &heard).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = rss(pid)?;
    drop(streams);
    Ok(after.saturating_sub(before) as f64 / count as f64)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
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
    let cpu = || pids.iter().map(|pid| crate::cpu_time(*pid)).sum::<anyhow::Result<Duration>>();
    let cpu_before = cpu()?;
    let mut times = Vec::new();
    for _ in 0..count {
        let round = rounds.next().context("rounds left")?;
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
        // Let the streams go idle again, as between real changes.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let cpu_each = (cpu()? - cpu_before) / u32::try_from(times.len()).unwrap_or(u32::MAX).max(1);
    times.sort();
    Ok(Fanout { times, cpu_each })
}

pub(crate) async fn fanout(binary: &Path, streams: usize, rounds: u64) -> anyhow::Result<()> {
    let redis = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let prefix = format!("switchyard-loadtest-{}:", std::process::id());
    let env = [("SWITCHYARD_REDIS_URL", redis.as_str()), ("SWITCHYARD_REDIS_PREFIX", prefix.as_str())];
    let (a, b) = (start_switchyard_with(binary, &env).await?, start_switchyard_with(binary, &env).await?);
    let (address_a, request_a) = raw_listen_request(&a)?;
    let (address_b, request_b) = raw_listen_request(&b)?;
    let (pid_a, pid_b) = (a.child.id(), b.child.id());
    let publish_on_a = format!("{}/notifications/resources/updated", a.url.replace("/mcp", "/admin/v1"));
    let bare = start_bare().await?;
    let bare_address = reqwest::Url::parse(&bare.url)?.socket_addrs(|| None)?[0];
    let bare_request = format!("GET /sse HTTP/1.1\r\nhost: {bare_address}\r\n\r\n");
    let publish_on_bare = format!("{}publish", bare.url);

    // Memory first, while every server is fresh.
    let bare_each = per_stream_memory(bare.child.id(), bare_address, &bare_request, streams).await?;
    let ours_each = per_stream_memory(pid_b, address_b, &request_b, streams).await?;

    let mut round_numbers = 1..;
    let (tx, mut heard) = mpsc::unbounded_channel();
    // Across replicas: published on A, heard on B only (the issue's target).
    let on_b = open_streams(address_b, &request_b, streams, &tx).await?;
    let across = measure(&publish_on_a, &[pid_a, pid_b], &mut heard, streams, &mut round_numbers, rounds).await?;
    drop(on_b);
    // Local: published on A, heard on A.
    let on_a = open_streams(address_a, &request_a, streams, &tx).await?;
    let local = measure(&publish_on_a, &[pid_a], &mut heard, streams, &mut round_numbers, rounds).await?;
    // Both at once, on the one core the replicas share here.
    let on_b = open_streams(address_b, &request_b, streams, &tx).await?;
    let both = measure(&publish_on_a, &[pid_a, pid_b], &mut heard, 2 * streams, &mut round_numbers, rounds).await?;
    drop((on_a, on_b));
    // The floor: a bare axum server writing one event to as many SSE streams.
    let on_bare = open_streams(bare_address, &bare_request, streams, &tx).await?;
    let floor = measure(&publish_on_bare, &[bare.child.id()], &mut heard, streams, &mut round_numbers, rounds).await?;
    drop(on_bare);

    let ms = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1000.0);
    println!("## resources/updated published on replica A, {rounds} rounds, {streams} streams per server\n");
    println!("| heard on | p50 ms | p99 ms | max ms | server CPU per notification |");
    println!("|---|---|---|---|---|");
    for (name, run) in [
        (format!("{streams} streams on B (across replicas, Redis)"), &across),
        (format!("{streams} streams on A (local)"), &local),
        (format!("{streams} on A and {streams} on B"), &both),
        (format!("{streams} SSE streams of a bare axum broadcaster (local)"), &floor),
    ] {
        println!(
            "| {name} | {} | {} | {} | {:.1} µs |",
            ms(percentile(&run.times, 0.5)),
            ms(percentile(&run.times, 0.99)),
            ms(percentile(&run.times, 1.0)),
            run.cpu_each.as_secs_f64() * 1e6
        );
    }
    println!(
        "\np99 across replicas with {streams} streams: {} ms (target < 10 ms); local p99 as a ratio to the bare broadcaster's: {:.2}",
        ms(percentile(&across.times, 0.99)),
        percentile(&local.times, 0.99).as_secs_f64() / percentile(&floor.times, 0.99).as_secs_f64().max(1e-9)
    );
    println!(
        "idle listen stream: {:.1} KiB of resident memory each ({:.0} streams per GiB; target >= 100,000); \
         an idle SSE stream of the bare axum server: {:.1} KiB",
        ours_each / 1024.0,
        (1u64 << 30) as f64 / ours_each.max(1.0),
        bare_each / 1024.0,
    );
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
