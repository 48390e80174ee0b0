//! `switchyard`: run the MCP server over HTTP or stdio. See `lib.rs`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use switchyard::config::Config;
use switchyard::{Switchyard, shutdown_signal};

#[derive(Parser)]
#[command(version, about = "Switchyard: remote MCP servers at scale")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP over Streamable HTTP.
    Serve {
        /// Address to listen on (also SWITCHYARD_BIND); default 127.0.0.1:8080.
        #[arg(long)]
        bind: Option<String>,
        /// A TOML configuration file; SWITCHYARD_* variables override it.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Serve MCP over stdin/stdout (newline-delimited JSON); logs go to stderr.
    Stdio {
        /// A TOML configuration file; SWITCHYARD_* variables override it.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Apply the registry's database migrations and exit (for a Kubernetes Job).
    Migrate {
        /// A TOML configuration file; SWITCHYARD_* variables override it.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Manage registered plugins through a running server's admin API.
    Plugin {
        #[command(subcommand)]
        command: switchyard::cli::PluginCommand,
        /// The configuration the server runs with (for its address and admin token).
        #[arg(long, global = true)]
        config: Option<PathBuf>,
        /// The server, e.g. http://127.0.0.1:8080 (default: from the configuration).
        #[arg(long, global = true)]
        server: Option<String>,
    },
    /// Validate the configuration and exit.
    CheckConfig {
        /// A TOML configuration file; SWITCHYARD_* variables override it.
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

// mimalloc, asked the way its fast paths expect (see switchyard-alloc).
#[global_allocator]
static ALLOCATOR: switchyard_alloc::Allocator = switchyard_alloc::Allocator;

/// Exit code for a configuration error (EX_CONFIG-style usage error, as linkerd does).
const EXIT_CONFIG: u8 = 64;

fn load(file: Option<&PathBuf>, bind: Option<String>) -> Result<Config, ExitCode> {
    let mut env: Vec<(String, String)> = std::env::vars().collect();
    if let Some(bind) = bind {
        env.push(("SWITCHYARD_BIND".into(), bind)); // the flag wins over the environment
    }
    Config::load(file.map(PathBuf::as_path), env).map_err(|e| {
        eprintln!("switchyard: {e}");
        ExitCode::from(EXIT_CONFIG)
    })
}

/// Logs, traces and metrics for this process; `None` (and a message) if
/// they cannot start, which is a configuration error.
fn init_telemetry(config: &Config) -> Option<switchyard_telemetry::Telemetry> {
    match switchyard_telemetry::init(&config.telemetry, &config.log, config.log_format) {
        Ok(telemetry) => Some(telemetry),
        Err(error) => {
            eprintln!("switchyard: {error}");
            None
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let (config, stdio) = match cli.command {
        Command::CheckConfig { config } => {
            return match load(config.as_ref(), None) {
                Ok(_) => {
                    println!("configuration is valid");
                    ExitCode::SUCCESS
                }
                Err(code) => code,
            };
        }
        Command::Migrate { config } => {
            let config = match load(config.as_ref(), None) {
                Ok(config) => config,
                Err(code) => return code,
            };
            let Some(telemetry) = init_telemetry(&config) else { return ExitCode::from(EXIT_CONFIG) };
            let outcome = match switchyard_registry::Registry::connect(&config.registry).await {
                Ok(registry) => {
                    let version = registry.catalog_version().await.unwrap_or_default();
                    println!("migrations applied; catalog version {version}");
                    ExitCode::SUCCESS
                }
                Err(error) => {
                    eprintln!("switchyard: {}", switchyard_core::error::chain(&error));
                    ExitCode::FAILURE
                }
            };
            telemetry.shutdown();
            return outcome;
        }
        Command::Plugin { command, config, server } => {
            let config = match load(config.as_ref(), None) {
                Ok(config) => config,
                Err(code) => return code,
            };
            let outcome = match switchyard::cli::AdminClient::new(&config, server.as_deref()) {
                Ok(client) => client.run(command).await,
                Err(error) => Err(error),
            };
            return match outcome {
                Ok(output) => {
                    println!("{output}");
                    ExitCode::SUCCESS
                }
                Err(error) => {
                    eprintln!("switchyard: {error:#}");
                    ExitCode::FAILURE
                }
            };
        }
        Command::Serve { bind, config } => (load(config.as_ref(), bind), false),
        Command::Stdio { config } => (load(config.as_ref(), None), true),
    };
    let config = match config {
        Ok(config) => config,
        Err(code) => return code,
    };
    let Some(telemetry) = init_telemetry(&config) else { return ExitCode::from(EXIT_CONFIG) };
    let outcome = run(config, stdio, telemetry.prometheus()).await;
    if let Err(error) = &outcome {
        tracing::error!("{error:#}");
    }
    // Last: what the exporters hold is sent (bounded by their timeouts).
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    if outcome.is_ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

async fn run(config: Config, stdio: bool, prometheus: Option<switchyard_telemetry::Prometheus>) -> anyhow::Result<()> {
    let (bind, config_backlog, authenticated) = (config.bind, config.http.listen_backlog, config.auth.is_some());
    let app = Switchyard::build(config).await?.with_prometheus(prometheus);
    if stdio {
        let shutdown = app.shutdown.clone();
        tokio::spawn({
            let shutdown = shutdown.clone();
            async move {
                shutdown_signal().await;
                shutdown.cancel();
            }
        });
        switchyard::stdio::serve(app.server.clone(), tokio::io::stdin(), tokio::io::stdout(), shutdown).await?;
        return Ok(());
    }
    let listener = switchyard_http::bind(bind, config_backlog).map_err(|e| anyhow::anyhow!("binding {bind}: {e}"))?;
    tracing::info!(address = %listener.local_addr()?, "serving MCP over HTTP");
    if !bind.ip().is_loopback() && !authenticated {
        // Only reachable with `auth.allow_unauthenticated = true`: say so loudly.
        tracing::warn!(%bind, "SERVING WITHOUT AUTHENTICATION on a non-loopback address: anyone who can connect may call every tool (auth.allow_unauthenticated = true)");
    }
    app.serve(listener, shutdown_signal()).await
}
