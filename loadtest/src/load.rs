//! Load generation: requests at a concurrency, with latencies, over one
//! server or spread over several.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::servers::{Server, cpu_time};

pub(crate) struct Run {
    pub(crate) requests: usize,
    pub(crate) wall: Duration,
    pub(crate) cpu: Duration,
    pub(crate) latencies: Vec<Duration>,
}

impl Run {
    pub(crate) fn per_cpu_second(&self) -> f64 {
        self.requests as f64 / self.cpu.as_secs_f64().max(1e-9)
    }
    pub(crate) fn per_second(&self) -> f64 {
        self.requests as f64 / self.wall.as_secs_f64()
    }
    pub(crate) fn percentile(&self, p: f64) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        sorted[((sorted.len() - 1) as f64 * p) as usize]
    }
}

pub(crate) async fn load(
    server: &Server,
    body: &'static str,
    headers: &'static [(&'static str, &'static str)],
    requests: usize,
    concurrency: usize,
) -> anyhow::Result<Run> {
    load_spread(&[server], body, headers, requests, concurrency, Arc::new(Vec::new())).await
}

/// [`load`] with bearer tokens: none when `tokens` is empty, else request
/// `n` sends `tokens[n % len]` (one token: reused; as many as requests: each fresh).
pub(crate) async fn load_with_tokens(
    server: &Server,
    body: &'static str,
    headers: &'static [(&'static str, &'static str)],
    requests: usize,
    concurrency: usize,
    tokens: Arc<Vec<String>>,
) -> anyhow::Result<Run> {
    load_spread(&[server], body, headers, requests, concurrency, tokens).await
}

/// The load itself: `requests` requests over `concurrency` connections,
/// request `n` going to `servers[n % len]` (round robin, as a plain load
/// balancer) with `tokens[n % len]` if any. Server CPU is the sum over
/// `servers`.
pub(crate) async fn load_spread(
    servers: &[&Server],
    body: &'static str,
    headers: &'static [(&'static str, &'static str)],
    requests: usize,
    concurrency: usize,
    tokens: Arc<Vec<String>>,
) -> anyhow::Result<Run> {
    let client = reqwest::Client::builder().tcp_nodelay(true).pool_max_idle_per_host(concurrency).build()?;
    let pids: Vec<u32> = servers.iter().map(|s| s.child.id()).collect();
    let cpu = || pids.iter().map(|pid| cpu_time(*pid)).sum::<anyhow::Result<Duration>>();
    let urls: Arc<Vec<String>> = Arc::new(servers.iter().map(|s| s.url.clone()).collect());
    let remaining = Arc::new(std::sync::atomic::AtomicUsize::new(requests));
    let cpu_before = cpu()?;
    let started = Instant::now();
    let workers = (0..concurrency).map(|_| {
        let (client, urls, remaining) = (client.clone(), Arc::clone(&urls), Arc::clone(&remaining));
        let tokens = Arc::clone(&tokens);
        tokio::spawn(async move {
            let mut latencies = Vec::new();
            while let Ok(n) =
                remaining.fetch_update(std::sync::atomic::Ordering::SeqCst, std::sync::atomic::Ordering::SeqCst, |n| {
                    n.checked_sub(1)
                })
            {
                let url = &urls[n % urls.len()];
                let mut request = client.post(url).body(body);
                if !tokens.is_empty() {
                    request = request.bearer_auth(&tokens[n % tokens.len()]);
                }
                for (k, v) in headers {
                    request = request.header(*k, *v);
                }
                let sent = Instant::now();
                let response = request.send().await?;
                let status = response.status();
                let answer = response.bytes().await?;
                anyhow::ensure!(
                    status.is_success(),
                    "status {status} from {url}: {}",
                    String::from_utf8_lossy(&answer[..answer.len().min(500)])
                );
                latencies.push(sent.elapsed());
            }
            anyhow::Ok(latencies)
        })
    });
    let mut latencies = Vec::with_capacity(requests);
    for worker in futures::future::join_all(workers).await {
        latencies.extend(worker??);
    }
    let wall = started.elapsed();
    let cpu = cpu()? - cpu_before;
    Ok(Run { requests, wall, cpu, latencies })
}
