//! The Switchyard binary as a library: configuration, wiring and shutdown, so
//! that `main.rs` stays thin and `testkit` starts exactly what production runs.
//!
//! It holds no business logic: it builds the configured built-ins, connects
//! the registry and keeps the catalog in step with it ([`catalog_sync`]),
//! puts the transports and the admin API in front, and orders the shutdown.

pub mod catalog_sync;
pub mod cli;
pub mod config;
pub mod stdio;
pub mod task_store;

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use futures::future::BoxFuture;
use serde_json::Value;
use switchyard_auth::{Gate, Verifier};
use switchyard_bus::{InMemoryBus, NotificationBus, RedisBus};
use switchyard_core::plugin_spec::SpecError;
use switchyard_core::tasks::Tasks;
use switchyard_core::{Catalog, ListenHub, Plugin, Server};
use switchyard_http::Health;
use switchyard_plugins::Factory;
use switchyard_registry::{PluginRecord, Registry};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::catalog_sync::CatalogSync;
pub use config::Config;

/// A wired-up Switchyard, ready to serve.
pub struct Switchyard {
    /// The MCP data layer.
    pub server: Arc<Server>,
    /// Readiness, flipped off at shutdown.
    pub health: Health,
    /// Cancelled when shutdown begins: listen streams end, the hub stops.
    pub shutdown: CancellationToken,
    /// The link between the registry and the catalog.
    pub catalog_sync: Arc<CatalogSync>,
    limiter: Option<Arc<dyn switchyard_http::limit::RateLimiter>>,
    /// The bearer-token verifier, when authentication is configured.
    verifier: Option<Arc<Verifier>>,
    registry: Registry,
    bus: Arc<dyn NotificationBus>,
    config: Config,
    /// `/metrics`, when the binary installed telemetry.
    prometheus: Option<switchyard_telemetry::Prometheus>,
}

impl Switchyard {
    /// Builds the built-ins, connects the registry (applying migrations),
    /// loads every registered plugin, and wires catalog, listen hub and server.
    ///
    /// # Errors
    /// When a configured plugin cannot be built or the registry cannot be read:
    /// serving a catalog without the registered plugins would be serving a lie.
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        let bus: Arc<dyn NotificationBus> = match &config.redis {
            None => Arc::new(InMemoryBus::new()),
            Some(redis) => {
                RedisBus::connect(redis).await.with_context(|| format!("connecting the bus to {redis:?}"))?
            }
        };
        let builtins = config
            .plugins
            .iter()
            .map(|name| switchyard_plugins::builtin::by_name(name).with_context(|| format!("unknown plugin {name}")))
            .collect::<anyhow::Result<Vec<Arc<dyn Plugin>>>>()?;
        let registry = Registry::connect(&config.registry)
            .await
            .with_context(|| format!("opening the registry at {:?}", config.registry))?;
        let catalog = Catalog::new(builtins.clone(), Arc::clone(&bus), config.list_cache).await;
        let shutdown = CancellationToken::new();
        let factory = Arc::new(Factory::new(
            config.wasm,
            config.upstream,
            config.grants.clone(),
            catalog.list_changes(),
            Arc::clone(&bus),
        ));
        let catalog_sync = Arc::new(CatalogSync::new(registry.clone(), Arc::clone(&catalog), factory, builtins));
        catalog_sync.sync().await.context("loading the registered plugins")?;
        Arc::clone(&catalog_sync).spawn(&bus, config.registry_sync_interval, shutdown.clone());
        let hub = ListenHub::spawn(&bus, shutdown.clone(), config.listen.clone());
        let tasks = Arc::new(Tasks::new(Arc::new(task_store::RegistryTasks(registry.clone())), config.tasks));
        tasks.spawn_upkeep(shutdown.clone());
        let mut server = Server::new(catalog, hub, config.core.clone()).with_tasks(tasks);
        if let Some(redis) = &config.redis {
            // A requestState may come back to any replica: its use is marked where all see it.
            let marks = switchyard_bus::RedisMarks::connect(redis)
                .await
                .context("connecting the requestState marks to Redis")?;
            server = server.with_state_marks(Arc::new(marks));
        }
        let server = Arc::new(server);
        server.spawn_answer_relay(shutdown.clone());
        if config.ephemeral_state_key {
            tracing::warn!(
                "no state.keys configured: requestState and the ids of requests to legacy clients are sealed with a per-process key, so multi-round requests and legacy clients' answers only work against this one replica"
            );
        }
        let limiter: Option<Arc<dyn switchyard_http::limit::RateLimiter>> = match (&config.rate_limit, &config.redis) {
            (None, _) => None,
            (Some((limits, _)), None) => Some(Arc::new(switchyard_limits::LocalLimiter::new(limits.clone()))),
            (Some((limits, on_error)), Some(redis)) => Some(Arc::new(
                switchyard_limits::RedisLimiter::connect(redis, limits.clone(), *on_error)
                    .await
                    .context("connecting the rate limiter to Redis")?,
            )),
        };
        let verifier = match &config.auth {
            None => None,
            Some(auth) => {
                let verifier = Arc::new(Verifier::new(auth.verifier.clone()).context("configuring authentication")?);
                verifier.spawn_refresh(shutdown.clone());
                Some(verifier)
            }
        };
        Ok(Self {
            server,
            health: Health::default(),
            shutdown,
            catalog_sync,
            limiter,
            verifier,
            registry,
            bus,
            config,
            prometheus: None,
        })
    }

    /// Serves `/metrics` from `prometheus` (the binary's installed telemetry).
    #[must_use]
    pub fn with_prometheus(mut self, prometheus: Option<switchyard_telemetry::Prometheus>) -> Self {
        self.prometheus = prometheus;
        self
    }

    /// `GET /metrics` in the Prometheus text format, if telemetry serves it.
    fn metrics_router(&self) -> Option<axum::Router> {
        let prometheus = self.prometheus.clone()?;
        Some(axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let prometheus = prometheus.clone();
                async move {
                    // Collection walks every instrument: off the async threads.
                    let text = tokio::task::spawn_blocking(move || prometheus.render()).await.unwrap_or_default();
                    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text)
                }
            }),
        ))
    }

    /// The HTTP application: MCP, health, the protected resource metadata
    /// when authentication is on, and the admin API unless it has its own port.
    pub fn router(&self) -> axum::Router {
        let auth = self.verifier.as_ref().map(|verifier| {
            switchyard_http::AuthLayer::new(switchyard_auth::RequireBearerLayer::new(Arc::clone(verifier)))
        });
        let mut mcp = switchyard_http::router(
            Arc::clone(&self.server),
            self.config.http.clone(),
            self.health.clone(),
            self.limiter.clone(),
            auth,
        );
        if let Some(verifier) = &self.verifier {
            let server = Arc::clone(&self.server);
            let scopes: switchyard_auth::metadata::ExtraScopes = Arc::new(move || server.scopes_in_use());
            mcp = mcp.merge(switchyard_auth::metadata::router(verifier.config(), scopes));
        }
        if let (None, Some(metrics)) = (self.config.metrics_bind, self.metrics_router()) {
            mcp = mcp.merge(self.guarded(metrics));
        }
        match (&self.config.admin, self.admin_router()) {
            (Some(admin), Some(router)) if admin.bind.is_none() => mcp.merge(router),
            _ => mcp,
        }
    }

    /// `router` behind the same Host/Origin checks as MCP (a browser page
    /// must not reach it through DNS rebinding).
    fn guarded(&self, router: axum::Router) -> axum::Router {
        router.layer(switchyard_http::guard::GuardLayer::new(Arc::new(self.config.http.clone())))
    }

    /// The admin API, behind the same Host/Origin checks as MCP, if enabled.
    pub fn admin_router(&self) -> Option<axum::Router> {
        let admin = self.config.admin.as_ref()?;
        let mut api = admin.api.clone();
        if let (Some(verifier), Some(auth)) = (&self.verifier, &self.config.auth) {
            let gate = Gate::with_scopes(Arc::clone(verifier), vec![auth.admin_scope.clone()]);
            api.access = api.access.with_oauth(Arc::new(AdminBearer(gate)));
        }
        let router = switchyard_admin::router(
            api,
            self.registry.clone(),
            Arc::clone(self.server.catalog()),
            Arc::clone(&self.bus),
            Arc::clone(&self.catalog_sync) as Arc<dyn switchyard_admin::Plugins>,
        );
        Some(self.guarded(router))
    }

    /// Serves HTTP on `listener` until `signal` resolves, then shuts down in
    /// order: readiness off, listen streams sent their final result, in-flight
    /// requests given the grace period (those still running then are
    /// answered with a JSON-RPC error), then return.
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
        let drain_started = Arc::new(std::sync::OnceLock::new());
        let mark_start = Arc::clone(&drain_started);
        tokio::spawn(async move {
            signal.await;
            let _ = mark_start.set(std::time::Instant::now());
            tracing::info!("shutting down");
            health.set_ready(false);
            // Listen streams see this and send their final result.
            shutdown.cancel();
            begin_drain.cancel();
        });
        if let (Some(admin), Some(router)) = (&self.config.admin, self.admin_router())
            && let Some(bind) = admin.bind
        {
            serve_beside("the admin API", bind, &self.config.http, router, drained.clone())?;
        }
        if let (Some(bind), Some(metrics)) = (self.config.metrics_bind, self.metrics_router()) {
            let http = switchyard_http::Config { listen_backlog: 128, ..self.config.http.clone() };
            serve_beside("/metrics", bind, &http, metrics, drained.clone())?;
        }
        let grace = self.config.shutdown_grace;
        let wait_for_drain = drained.clone();
        let serving =
            switchyard_http::serve(listener, app, &self.config.http, async move { wait_for_drain.cancelled().await });
        tokio::pin!(serving);
        tokio::select! {
            () = &mut serving => {}
            () = async { drained.cancelled().await; tokio::time::sleep(grace).await } => {
                tracing::warn!(
                    grace_seconds = grace.as_secs(),
                    "requests still running after the grace period; answering them with an error and exiting"
                );
                // Each gets a JSON-RPC error now; a moment to write it.
                self.health.cut_off_requests();
                let _ = tokio::time::timeout(ANSWER_CUT_OFF_REQUESTS, &mut serving).await;
            }
        }
        // Tasks running here get what is left of the grace period, then are
        // failed with a message, so that no client waits for a lease to run out.
        let spent = drain_started.get().map_or(Duration::ZERO, std::time::Instant::elapsed);
        self.server.end_tasks(grace.saturating_sub(spent)).await;
        Ok(())
    }
}

/// How long requests cut off at the end of the grace period have to send
/// their error before the process exits anyway.
const ANSWER_CUT_OFF_REQUESTS: Duration = Duration::from_secs(1);

/// Serves `router` (`what`, for the logs) on its own address until `stop`.
fn serve_beside(
    what: &'static str,
    bind: std::net::SocketAddr,
    http: &switchyard_http::Config,
    router: axum::Router,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let listener =
        switchyard_http::bind(bind, http.listen_backlog).with_context(|| format!("binding {what} to {bind}"))?;
    tracing::info!(address = %listener.local_addr()?, "serving {what}");
    let http = http.clone();
    tokio::spawn(async move {
        switchyard_http::serve(listener, router, &http, async move { stop.cancelled().await }).await
    });
    Ok(())
}

/// OAuth access to the admin API: a valid token holding the admin scope.
struct AdminBearer(Gate);

impl switchyard_admin::BearerCheck for AdminBearer {
    fn admin<'a>(
        &'a self,
        uri: &'a axum::http::Uri,
        headers: &'a axum::http::HeaderMap,
    ) -> BoxFuture<'a, Result<String, axum::response::Response>> {
        Box::pin(async move {
            let principal = self.0.check(uri, headers).await?;
            Ok(format!("{} {}", principal.issuer, principal.subject))
        })
    }
}

impl switchyard_admin::Plugins for CatalogSync {
    fn check<'a>(&'a self, record: &'a PluginRecord) -> BoxFuture<'a, Result<Vec<Value>, SpecError>> {
        Box::pin(async move { Ok(self.build(record, switchyard_plugins::Purpose::Check).await?.tools()) })
    }

    fn refresh(&self) -> BoxFuture<'_, Result<i64, switchyard_registry::Error>> {
        Box::pin(self.sync())
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
