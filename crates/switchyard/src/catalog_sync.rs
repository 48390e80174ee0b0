//! Keeps this replica's catalog equal to the registry: the configured
//! built-ins plus every enabled registered plugin.
//!
//! A sync reads the registry's catalog version first and the records second,
//! so a change landing in between is caught by the next sync, never lost.
//! Syncs run when the bus says the registry changed (`RegistryChanged`, which
//! the admin API publishes), when the bus subscription lagged or the bus
//! reconnected to the other replicas, and on a timer, so that a replica that missed an event (a Redis outage, another
//! process writing the database) still converges. A plugin whose record did
//! not change keeps its running instance (a compiled module, a connection).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use futures::future::BoxFuture;
use switchyard_bus::{Delivery, Event, NotificationBus};
use switchyard_core::plugin_spec::SpecError;
use switchyard_core::{Catalog, Plugin};
use switchyard_plugins::{Artifacts, Factory, Purpose, Registration};
use switchyard_registry::{PluginRecord, Registry};
use tokio_util::sync::CancellationToken;

/// Plugins built at once when the catalog loads.
const CONCURRENT_BUILDS: usize = 4;

/// The catalog's link to the registry.
pub struct CatalogSync {
    registry: Registry,
    catalog: Arc<Catalog>,
    factory: Arc<Factory>,
    builtins: Vec<Arc<dyn Plugin>>,
    state: tokio::sync::Mutex<Loaded>,
}

/// A running plugin, with the record version it was built from.
type Running = (i64, Arc<dyn Plugin>);

#[derive(Default)]
struct Loaded {
    /// The registry version the catalog reflects; `None` before the first sync.
    version: Option<i64>,
    /// Running plugins by registry id, with the record version they were built from.
    plugins: HashMap<String, Running>,
}

/// The registry as the factory's source of module bytes.
struct RegistryArtifacts<'a>(&'a Registry);

impl Artifacts for RegistryArtifacts<'_> {
    fn fetch<'a>(&'a self, sha256: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, String>> {
        Box::pin(async move { self.0.artifact(sha256).await.map_err(|e| e.to_string()) })
    }
}

impl CatalogSync {
    /// A sync for `catalog`; call [`CatalogSync::sync`] once before serving.
    pub fn new(
        registry: Registry,
        catalog: Arc<Catalog>,
        factory: Arc<Factory>,
        builtins: Vec<Arc<dyn Plugin>>,
    ) -> Self {
        Self { registry, catalog, factory, builtins, state: tokio::sync::Mutex::new(Loaded::default()) }
    }

    /// Builds the plugin a record describes, fetching artifacts from the registry.
    ///
    /// # Errors
    /// What is wrong with the record, by field.
    pub async fn build(&self, record: &PluginRecord, purpose: Purpose) -> Result<Arc<dyn Plugin>, SpecError> {
        let registration = Registration {
            id: &record.id,
            namespace: &record.namespace,
            kind: record.kind,
            spec: &record.spec,
            scopes: &record.scopes,
        };
        self.factory.build(registration, &RegistryArtifacts(&self.registry), purpose).await
    }

    /// Brings the catalog up to the registry's current version, if it is behind.
    /// Returns the registry version the catalog now reflects.
    ///
    /// # Errors
    /// When the registry cannot be read; the catalog is left as it was.
    pub async fn sync(&self) -> Result<i64, switchyard_registry::Error> {
        let mut loaded = self.state.lock().await;
        let version = self.registry.catalog_version().await?;
        if loaded.version == Some(version) {
            return Ok(version);
        }
        let records = self.registry.list().await?;
        // Plugins whose record changed are built together, so one slow to
        // build (an upstream answering late) does not delay the others.
        let builds: Vec<BoxFuture<'_, Option<(String, Running)>>> = records
            .iter()
            .filter(|r| r.enabled)
            .map(|record| {
            let reused =
                loaded.plugins.get(&record.id).filter(|(v, _)| *v == record.version).map(|(_, p)| Arc::clone(p));
            Box::pin(async move {
                match reused {
                    Some(plugin) => Some(plugin),
                    None => self
                        .build(record, Purpose::Serve)
                        .await
                        // The admin API checks a plugin before storing it, so
                        // this is an environment problem (say, a module this
                        // replica cannot compile); the rest of the catalog stays up.
                        .inspect_err(|error| tracing::error!(plugin = %record.id, namespace = %record.namespace, %error, "registered plugin cannot be loaded; skipping it"))
                        .ok(),
                }
                .map(|plugin| (record.id.clone(), (record.version, plugin)))
            }) as BoxFuture<'_, _>
        })
            .collect();
        // A few at a time: a cold start must not compile every module at once.
        let plugins: HashMap<String, Running> = futures::stream::iter(builds)
            .buffered(CONCURRENT_BUILDS)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .flatten()
            .collect();
        let mut serving: Vec<Arc<dyn Plugin>> = self.builtins.clone();
        // Registered plugins in namespace order, after the built-ins, so a
        // name clash always resolves the same way on every replica.
        serving.extend(records.iter().filter_map(|r| plugins.get(&r.id)).map(|(_, plugin)| Arc::clone(plugin)));
        self.catalog.replace_plugins(serving).await;
        tracing::info!(registry_version = version, plugins = plugins.len(), "catalog synced with the registry");
        loaded.plugins = plugins;
        loaded.version = Some(version);
        switchyard_telemetry::metrics().catalog_version(u64::try_from(version).unwrap_or_default());
        Ok(version)
    }

    /// Keeps syncing until `shutdown`: on `RegistryChanged` events newer than
    /// the catalog, after a lagged bus subscription, and every `interval`.
    pub fn spawn(self: Arc<Self>, bus: &Arc<dyn NotificationBus>, interval: Duration, shutdown: CancellationToken) {
        let mut subscription = bus.subscribe();
        tokio::spawn(async move {
            let mut timer = tokio::time::interval(interval);
            timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            timer.tick().await;
            loop {
                let due = tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = timer.tick() => true,
                    delivery = subscription.recv() => match delivery {
                        Some(Delivery::Event(Event::RegistryChanged { registry_version })) => {
                            self.state.lock().await.version.is_none_or(|v| v < registry_version)
                        }
                        // Events may have been missed: compare versions afresh.
                        Some(Delivery::Gap { .. } | Delivery::Event(Event::BusReconnected)) => true,
                        Some(Delivery::Event(_)) => false,
                        None => return,
                    },
                };
                if due && let Err(error) = self.sync().await {
                    tracing::warn!(%error, "cannot read the registry; serving the last catalog");
                }
            }
        });
    }
}
