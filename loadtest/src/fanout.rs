//! `fanout`: a change published on one replica, heard on listen streams held
//! by that replica (local) and by another one (across replicas, through
//! Redis), timed on one clock: the load generator publishes (`resources/
//! updated` through replica A's admin API) and receives every frame. Also the
//! memory an idle listen stream costs the replica holding it.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;
use tokio::sync::mpsc;

use crate::{Server, start_switchyard_with};

const LISTEN: &str = r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["file:///bench/"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

/// Resident memory of a process, bytes.
fn rss(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .context("VmRSS")?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()?;
    Ok(kib * 1024)
}

/// Opens `count` listen streams on `server`, each on its own connection, and
/// reports `(stream index, round)` for every `file:///bench/{round}` frame.
async fn open_streams(
    server: &Server,
    count: usize,
    heard: mpsc::UnboundedSender<(usize, u64, Instant)>,
) -> anyhow::Result<()> {
    let (ready, mut acknowledged) = mpsc::channel::<()>(count);
    for index in 0..count {
        let (url, heard, ready) = (server.url.clone(), heard.clone(), ready.clone());
        tokio::spawn(async move {
            let client = reqwest::Client::builder().tcp_nodelay(true).build()?;
            let response = crate::listen_request(&client, &url, LISTEN).send().await?;
            let mut body = response.bytes_stream();
            let mut buffer = Vec::new();
            let mut acknowledged = false;
            while let Some(chunk) = body.next().await {
                let now = Instant::now();
                buffer.extend_from_slice(&chunk?);
                while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
                    let event: Vec<u8> = buffer.drain(..end + 2).collect();
                    let text = String::from_utf8_lossy(&event);
                    if !acknowledged && text.contains("acknowledged") {
                        acknowledged = true;
                        let _ = ready.send(()).await;
                    } else if let Some(rest) = text.split("file:///bench/").nth(1) {
                        let round: u64 = rest.chars().take_while(char::is_ascii_digit).collect::<String>().parse()?;
                        let _ = heard.send((index, round, now));
                    }
                }
            }
            anyhow::Ok(())
        });
    }
    for _ in 0..count {
        tokio::time::timeout(Duration::from_secs(30), acknowledged.recv())
            .await
            .context("streams were not all acknowledged within 30 s")?;
    }
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

pub(crate) async fn fanout(binary: &Path, streams: usize, rounds: u64) -> anyhow::Result<()> {
    let redis = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let prefix = format!("switchyard-loadtest-{}:", std::process::id());
    let env = [("SWITCHYARD_REDIS_URL", redis.as_str()), ("SWITCHYARD_REDIS_PREFIX", prefix.as_str())];
    let (a, b) = (start_switchyard_with(binary, &env).await?, start_switchyard_with(binary, &env).await?);
    let rss_before = rss(b.child.id())?;
    let (local_tx, mut local_rx) = mpsc::unbounded_channel();
    let (remote_tx, mut remote_rx) = mpsc::unbounded_channel();
    open_streams(&a, streams, local_tx).await?;
    open_streams(&b, streams, remote_tx).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_after = rss(b.child.id())?;
    let per_stream = (rss_after.saturating_sub(rss_before)) as f64 / streams as f64;

    let admin = format!("{}/notifications/resources/updated", a.url.replace("/mcp", "/admin/v1"));
    let http = reqwest::Client::new();
    let (mut local, mut remote) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        let uri = format!("file:///bench/{round}");
        let published = Instant::now();
        let status = http.post(&admin).json(&serde_json::json!({ "uri": uri })).send().await?.status();
        anyhow::ensure!(status.as_u16() == 202, "publish answered {status}");
        for (rx, into) in [(&mut local_rx, &mut local), (&mut remote_rx, &mut remote)] {
            for _ in 0..streams {
                let (_, heard_round, at) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
                    .await
                    .context("a stream missed a notification")?
                    .context("streams closed")?;
                anyhow::ensure!(heard_round == round, "round {heard_round} heard during round {round}");
                into.push(at.duration_since(published));
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    local.sort();
    remote.sort();
    let ms = |d: Duration| format!("{:.2}", d.as_secs_f64() * 1000.0);
    println!(
        "## resources/updated published on replica A, {streams} listen streams on A and {streams} on B, {rounds} rounds\n"
    );
    println!("| streams | p50 ms | p99 ms | max ms |");
    println!("|---|---|---|---|");
    for (name, times) in [("on A (local)", &local), ("on B (across replicas, Redis)", &remote)] {
        println!(
            "| {name} | {} | {} | {} |",
            ms(percentile(times, 0.5)),
            ms(percentile(times, 0.99)),
            ms(percentile(times, 1.0))
        );
    }
    println!(
        "\nidle listen stream on B: {:.1} KiB of resident memory each ({:.0} streams per GiB; target >= 100,000)",
        per_stream / 1024.0,
        (1u64 << 30) as f64 / per_stream.max(1.0)
    );
    Ok(())
}
