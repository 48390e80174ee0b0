//! The admin API: how operators and plugin authors change the registry while
//! Switchyard runs. JSON over HTTP under a prefix (`/admin/v1` by default),
//! on the main port or a separate one, as the binary configures.
//!
//! | method and path | does |
//! |---|---|
//! | `GET /plugins` | every plugin |
//! | `POST /plugins` | registers `{namespace, kind, spec, enabled?}` → 201 |
//! | `GET /plugins/{id}` | one plugin |
//! | `PUT /plugins/{id}` | replaces the spec: `{spec, version}` |
//! | `POST /plugins/{id}/enable`, `/disable` | `{version}` |
//! | `DELETE /plugins/{id}?version=N` | removes it → 204 |
//! | `GET /plugins/{id}/tools` | the tools it serves now, as published |
//! | `POST /artifacts` | stores a module (`application/wasm` body) → 201 `{sha256, size}` |
//!
//! Every change names the version it was based on (optimistic concurrency:
//! 409 with the current version when someone else changed it first). A spec
//! is built and checked before it is stored (a WASM module is compiled and
//! asked for its tools), so a bad one is refused with 422 naming the field
//! and nothing is written. After a write the local catalog is brought up to
//! date before the answer, and `RegistryChanged` goes on the bus so every
//! other replica follows.
//!
//! Access: a request from a loopback peer, or one carrying the configured
//! admin token as a bearer token (compared in constant time). The OAuth issue
//! (#4) replaces this with an admin scope. This crate owns HTTP and uses the
//! registry's API; it writes no SQL itself.

mod access;
mod handlers;
mod problem;
mod settings;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post, put};
use futures::future::BoxFuture;
use serde_json::Value;
use switchyard_bus::NotificationBus;
use switchyard_core::Catalog;
use switchyard_core::plugin_spec::SpecError;
use switchyard_registry::{PluginRecord, Registry};

pub use access::{Access, BearerCheck};
pub use settings::{RawAdmin, Settings};

/// What the admin API needs from the process that serves plugins.
pub trait Plugins: Send + Sync + 'static {
    /// Builds the plugin `record` describes, without serving it, and returns
    /// its tools as they would be published.
    fn check<'a>(&'a self, record: &'a PluginRecord) -> BoxFuture<'a, Result<Vec<Value>, SpecError>>;

    /// Brings this replica's catalog up to the registry; returns the registry version.
    fn refresh(&self) -> BoxFuture<'_, Result<i64, switchyard_registry::Error>>;
}

/// The admin API's settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// The path prefix. Default `/admin/v1`.
    pub prefix: String,
    /// Who may call it.
    pub access: Access,
    /// Largest artifact upload, in bytes. Default 32 MiB.
    pub max_artifact_bytes: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self { prefix: "/admin/v1".into(), access: Access::default(), max_artifact_bytes: 32 << 20 }
    }
}

#[derive(Clone)]
pub(crate) struct State {
    pub(crate) registry: Registry,
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) bus: Arc<dyn NotificationBus>,
    pub(crate) plugins: Arc<dyn Plugins>,
    pub(crate) max_artifact_bytes: usize,
}

/// The admin router, with its access check, ready to merge into the main
/// router or serve on its own port.
pub fn router(
    config: Config,
    registry: Registry,
    catalog: Arc<Catalog>,
    bus: Arc<dyn NotificationBus>,
    plugins: Arc<dyn Plugins>,
) -> Router {
    let state = State { registry, catalog, bus, plugins, max_artifact_bytes: config.max_artifact_bytes };
    let api = Router::new()
        .route("/plugins", get(handlers::list).post(handlers::create))
        .route("/plugins/{id}", get(handlers::show).put(handlers::update).delete(handlers::remove))
        .route("/plugins/{id}/tools", get(handlers::tools))
        .route("/plugins/{id}/scopes", put(handlers::set_scopes))
        .route("/plugins/{id}/{action}", post(handlers::switch))
        .route("/artifacts", post(handlers::upload))
        .route("/notifications/resources/updated", post(handlers::resource_updated))
        .fallback(handlers::not_found)
        .with_state(state)
        .layer(axum::middleware::from_fn_with_state(Arc::new(config.access), access::check));
    Router::new().nest(&config.prefix, api)
}
