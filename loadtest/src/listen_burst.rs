//! Thousands of clients opening `subscriptions/listen` at the same moment,
//! as after a network blip or a rolling restart: how long until each stream
//! is acknowledged, with Switchyard's listen backlog and with the stock 128.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;

use crate::servers::{Server, listen_request, start_switchyard_with};

const LISTEN: &str = r#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

/// Opens `clients` listen streams at once, each on its own connection;
/// returns each one's time to its acknowledgement.
async fn burst(server: &Server, clients: usize) -> anyhow::Result<Vec<Duration>> {
    let start = Arc::new(tokio::sync::Barrier::new(clients));
    let tasks = (0..clients).map(|_| {
        let (url, start) = (server.url.clone(), Arc::clone(&start));
        tokio::spawn(async move {
            // One client per stream: each opens its own connection, as separate hosts would.
            let client = reqwest::Client::builder().tcp_nodelay(true).build()?;
            start.wait().await;
            let began = Instant::now();
            let response = listen_request(&client, &url, LISTEN).send().await?;
            anyhow::ensure!(response.status().is_success(), "status {}", response.status());
            let mut body = response.bytes_stream();
            let first = body.next().await.context("the stream ended before its acknowledgement")??;
            anyhow::ensure!(String::from_utf8_lossy(&first).contains("acknowledged"), "no acknowledgement first");
            let took = began.elapsed();
            // Hold the stream until every client is in, so the burst is real.
            tokio::time::sleep(Duration::from_secs(2)).await;
            anyhow::Ok(took)
        })
    });
    let mut times = Vec::with_capacity(clients);
    for task in futures::future::join_all(tasks).await {
        times.push(task??);
    }
    times.sort();
    Ok(times)
}

pub(crate) async fn listen_burst(binary: &Path, clients: usize) -> anyhow::Result<()> {
    println!("## {clients} clients open subscriptions/listen at the same moment\n");
    println!("| listen backlog | p50 ms | p99 ms | max ms | acknowledged after > 1 s |");
    println!("|---|---|---|---|---|");
    for backlog in ["4096", "128"] {
        let server = start_switchyard_with(binary, &[("SWITCHYARD_HTTP__LISTEN_BACKLOG", backlog)]).await?;
        let times = burst(&server, clients).await?;
        let ms = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1000.0);
        let slow = times.iter().filter(|t| **t > Duration::from_secs(1)).count();
        println!(
            "| {backlog} | {} | {} | {} | {slow} |",
            ms(times[times.len() / 2]),
            ms(times[times.len() * 99 / 100]),
            ms(times[times.len() - 1])
        );
    }
    Ok(())
}
