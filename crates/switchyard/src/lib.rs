//! The Switchyard binary as a library: configuration, wiring and shutdown, so
//! that `main.rs` stays thin and `testkit` starts exactly what production runs.
//!
//! It holds no business logic: it builds plugins from configuration, gives
//! them to `core`, puts a transport in front, and orders the shutdown.

pub mod config;
pub mod stdio;

use std::sync::Arc;

use anyhow::Context as _;
use switchyard_bus::{InMemoryBus, NotificationBus};
use switchyard_core::{Catalog, ListenHub, Plugin, Server};
use switchyard_http::Health;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use config::Config;

/// Per-stream queue of the listen hub: how far a listen stream may fall behind.
const LISTEN_QUEUE: usize = 64;

/// A wired-up Switchyard, ready to serve.
pub struct Switchyard {
    /// The MCP data layer.
    pub server: Arc<Server>,
    /// Readiness, flipped off at shutdown.
    pub health: Health,
    /// Cancelled when shutdown begins: listen streams end, the hub stops.
    pub shutdown: CancellationToken,
    config: Config,
}

impl Switchyard {
    /// Builds plugins, catalog, listen hub and server from `config`.
    ///
    /// # Errors
    /// When a configured plugin cannot be built.
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        let bus: Arc<dyn NotificationBus> = Arc::new(InMemoryBus::new());
        let plugins = config
            .plugins
            .iter()
            .map(|name| switchyard_plugins::builtin::by_name(name).with_context(|| format!("unknown plugin {name}")))
            .collect::<anyhow::Result<Vec<Arc<dyn Plugin>>>>()?;
        let catalog = Catalog::new(plugins, Arc::clone(&bus), config.list_cache).await;
        let shutdown = CancellationToken::new();
        let hub = ListenHub::spawn(&bus, shutdown.clone(), LISTEN_QUEUE);
        let server = Arc::new(Server::new(catalog, hub, config.core.clone()));
        if config.ephemeral_state_key {
            tracing::warn!(
                "no state.keys configured: requestState is sealed with a per-process key, so multi-round requests only work against this one replica"
            );
        }
        Ok(Self { server, health: Health::default(), shutdown, config })
    }

    /// The HTTP application.
    pub fn router(&self) -> axum::Router {
        switchyard_http::router(Arc::clone(&self.server), self.config.http.clone(), self.health.clone())
    }

    /// Serves HTTP on `listener` until `signal` resolves, then shuts down in
    /// order: readiness off, listen streams sent their final result, in-flight
    /// requests given the grace period, then return.
    ///
    /// # Errors
    /// When the listener fails.
    pub async fn serve(
        self,
        listener: TcpListener,
        signal: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let app = self.router();
        self.health.set_ready(true);
        let health = self.health.clone();
        let shutdown = self.shutdown.clone();
        let drained = CancellationToken::new();
        let begin_drain = drained.clone();
        tokio::spawn(async move {
            signal.await;
            tracing::info!("shutting down");
            health.set_ready(false);
            // Listen streams see this and send their final result.
            shutdown.cancel();
            begin_drain.cancel();
        });
        let grace = self.config.shutdown_grace;
        let wait_for_drain = drained.clone();
        let serving = switchyard_http::serve(listener, app, async move { wait_for_drain.cancelled().await });
        tokio::pin!(serving);
        tokio::select! {
            result = &mut serving => result.context("serving HTTP")?,
            () = async { drained.cancelled().await; tokio::time::sleep(grace).await } => {
                tracing::warn!(grace_seconds = grace.as_secs(), "requests still running after the grace period; exiting");
            }
        }
        Ok(())
    }
}

/// Resolves on SIGTERM (what Kubernetes sends) or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}
