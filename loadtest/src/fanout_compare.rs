//! `fanout-compare`: the across-replica fan-out of two builds in one run,
//! round by round in turn. Each build runs its own pair of replicas on one
//! Redis (each pair under a prefix of its own), and the generator publishes
//! on one pair's replica A and then on the other's, the pair that goes first
//! alternating round by round, so whatever drifts on a shared machine during
//! a run (other processes, Redis's memory, the page cache) weighs on both
//! builds alike. Separate runs of one build differ here by more than the 10%
//! a change is allowed; rounds in turn within one run do not.

use std::path::Path;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::fanout::{ReplicaEnv, Streams, cpu_of, listen_streams, open_streams, percentile, publish_round};
use crate::servers::{Server, start_switchyard_with};

/// One build's pair of replicas, the streams held on its replica B, and
/// what its rounds measured.
struct Contender {
    name: String,
    a: Server,
    b: Server,
    /// Kept open while the rounds run.
    streams: Option<Streams>,
    times: Vec<Duration>,
    cpu: Duration,
}

impl Contender {
    async fn start(name: &str, binary: &Path, tag: &str, streams: usize) -> anyhow::Result<Self> {
        let replicas = ReplicaEnv::new(tag, streams);
        let (a, b) = (
            start_switchyard_with(binary, &replicas.pairs()).await?,
            start_switchyard_with(binary, &replicas.pairs()).await?,
        );
        Ok(Self { name: name.to_owned(), a, b, streams: None, times: Vec::new(), cpu: Duration::ZERO })
    }

    fn publish_url(&self) -> String {
        format!("{}/notifications/resources/updated", self.a.url.replace("/mcp", "/admin/v1"))
    }

    fn pids(&self) -> [u32; 2] {
        [self.a.child.id(), self.b.child.id()]
    }
}

/// Every round of one transport, the two builds in turn; each build's
/// times (sorted) and CPU per notification.
async fn rounds_in_turn(
    contenders: &mut [Contender; 2],
    h2_connections: Option<usize>,
    streams: usize,
    rounds: u64,
    round_numbers: &mut std::ops::RangeFrom<u64>,
) -> anyhow::Result<()> {
    let (tx, mut heard) = mpsc::unbounded_channel();
    for contender in contenders.iter_mut() {
        contender.times.clear();
        contender.streams = Some(open_streams(&listen_streams(&contender.b, h2_connections)?, streams, &tx).await?);
    }
    let (http, urls) = (reqwest::Client::new(), contenders.each_ref().map(Contender::publish_url));
    let before = [cpu_of(&contenders[0].pids())?, cpu_of(&contenders[1].pids())?];
    for round in 0..rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let number = round_numbers.next().unwrap_or_default();
            publish_round(&http, &urls[i], &mut heard, streams, number, &mut contenders[i].times).await?;
        }
    }
    for (contender, before) in contenders.iter_mut().zip(before) {
        let notifications = u32::try_from(contender.times.len()).unwrap_or(u32::MAX).max(1);
        contender.cpu = (cpu_of(&contender.pids())? - before) / notifications;
        contender.times.sort();
        contender.streams = None;
    }
    Ok(())
}

pub(crate) async fn fanout_compare(
    before: &Path,
    after: &Path,
    streams: usize,
    rounds: u64,
    h2_connections: usize,
) -> anyhow::Result<()> {
    let mut contenders = [
        Contender::start("before", before, "-before", streams).await?,
        Contender::start("after", after, "-after", streams).await?,
    ];
    let mut round_numbers = 1..;
    println!("## across replicas, {rounds} rounds of each build in turn, {streams} streams on replica B\n");
    println!("| transport | build | p50 ms | p99 ms | max ms | server CPU per notification |");
    println!("|---|---|---|---|---|---|");
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mut ratios = Vec::new();
    for (transport, h2) in
        [("HTTP/1.1".to_owned(), None), (format!("HTTP/2, {h2_connections} connections"), Some(h2_connections))]
    {
        rounds_in_turn(&mut contenders, h2, streams, rounds, &mut round_numbers).await?;
        for contender in &contenders {
            println!(
                "| {transport} | {} | {:.2} | {:.2} | {:.2} | {:.1} µs |",
                contender.name,
                ms(percentile(&contender.times, 0.5)),
                ms(percentile(&contender.times, 0.99)),
                ms(percentile(&contender.times, 1.0)),
                contender.cpu.as_secs_f64() * 1e6
            );
        }
        let [old, new] = &contenders;
        let ratio = |p: f64| ms(percentile(&new.times, p)) / ms(percentile(&old.times, p)).max(1e-9);
        ratios.push(format!(
            "{transport}: p50 {:.2}, p99 {:.2}, CPU per notification {:.2}",
            ratio(0.5),
            ratio(0.99),
            new.cpu.as_secs_f64() / old.cpu.as_secs_f64().max(1e-12)
        ));
    }
    println!("\nafter/before (target: at most 1.10 each): {}", ratios.join("; "));
    Ok(())
}
