//! The servers a scenario measures, as child processes: Switchyard (pinned
//! where `SERVER_CPUS` says), the bare handler, and what is read of them
//! from `/proc` (CPU time, resident memory).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail};

pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) url: String,
    /// The registry file of a Switchyard server, removed with it.
    pub(crate) database: Option<PathBuf>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(database) = &self.database {
            let _ = std::fs::remove_file(database);
        }
    }
}

/// Where `SERVER_CPUS` is set (e.g. `0`), servers run pinned to those CPUs
/// with `taskset`, so that a load generator pinned elsewhere does not share
/// their cores.
pub(crate) fn server_command(program: &std::path::Path) -> Command {
    match std::env::var("SERVER_CPUS") {
        Ok(cpus) if !cpus.is_empty() => {
            let mut command = Command::new("taskset");
            command.arg("-c").arg(cpus).arg(program);
            command
        }
        _ => Command::new(program),
    }
}

/// A `subscriptions/listen` POST of `body` with the headers the transport requires.
pub(crate) fn listen_request(client: &reqwest::Client, url: &str, body: &'static str) -> reqwest::RequestBuilder {
    client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .body(body)
}

pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

pub(crate) async fn wait_ready(url: &str) -> anyhow::Result<()> {
    let client = reqwest::Client::new();
    for _ in 0..100 {
        if client.get(url).send().await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    bail!("{url} did not come up")
}

pub(crate) async fn start_bare() -> anyhow::Result<Server> {
    start_bare_forwarding(None).await
}

/// The bare server, whose `/forward` passes requests on to `upstream` if given.
pub(crate) async fn start_bare_forwarding(upstream: Option<&str>) -> anyhow::Result<Server> {
    let port = free_port()?;
    let mut command = server_command(&std::env::current_exe()?);
    command.args(["bare", "--bind", &format!("127.0.0.1:{port}")]);
    if let Some(upstream) = upstream {
        command.args(["--forward", upstream]);
    }
    let child = command.stdout(Stdio::null()).spawn()?;
    let url = format!("http://127.0.0.1:{port}/");
    wait_ready(&url).await?;
    Ok(Server { child, url, database: None })
}

pub(crate) async fn start_switchyard(binary: &std::path::Path) -> anyhow::Result<Server> {
    start_switchyard_with(binary, &[]).await
}

/// Starts Switchyard with extra `SWITCHYARD_*` settings.
pub(crate) async fn start_switchyard_with(binary: &std::path::Path, env: &[(&str, &str)]) -> anyhow::Result<Server> {
    start_switchyard_on(binary, free_port()?, env).await
}

/// Starts Switchyard on `port` (known beforehand, for a resource URI) with extra settings.
pub(crate) async fn start_switchyard_on(
    binary: &std::path::Path,
    port: u16,
    env: &[(&str, &str)],
) -> anyhow::Result<Server> {
    let database = std::env::temp_dir().join(format!("switchyard-loadtest-{}-{port}.db", std::process::id()));
    let child = server_command(binary)
        .args(["serve", "--bind", &format!("127.0.0.1:{port}")])
        .env("SWITCHYARD_LOG", "warn")
        .env("SWITCHYARD_DATABASE_URL", format!("sqlite://{}", database.display()))
        .envs(env.iter().copied())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| {
            format!("starting {} (build it with cargo build --release -p switchyard)", binary.display())
        })?;
    wait_ready(&format!("http://127.0.0.1:{port}/healthz")).await?;
    Ok(Server { child, url: format!("http://127.0.0.1:{port}/mcp"), database: Some(database) })
}

/// CPU time (user + system) a process has used so far.
pub(crate) fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').context("stat format")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
    let per_second: u64 = String::from_utf8(Command::new("getconf").arg("CLK_TCK").output()?.stdout)?.trim().parse()?;
    Ok(Duration::from_secs_f64(ticks as f64 / per_second as f64))
}

/// A value in kB from `/proc/<pid>/status` (`VmRSS`, `VmHWM`).
pub(crate) fn status_kib(pid: u32, field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = status.lines().find(|l| l.starts_with(field)).with_context(|| format!("{field} in status"))?;
    Ok(line.split_whitespace().nth(1).context("a value")?.parse()?)
}
