//! [`Factory`]: turns a registered plugin (kind, namespace, spec) into a
//! running `core::Plugin`, and checks a spec before the registry stores it.
//!
//! The factory knows no SQL: a WASM module's bytes come through an
//! [`Artifacts`] source the caller provides (the registry, in the binary).

use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use serde_json::Value;
use switchyard_answers::AnswerCache;
use switchyard_bus::NotificationBus;
use switchyard_core::Plugin;
use switchyard_core::catalog::ListChanges;
use switchyard_core::plugin_spec::{PluginKind, SpecError, invalid};
use switchyard_upstream::{
    McpClient, OutboundPolicy, Parking, SecretPolicy, UpstreamLimits, UpstreamPlugin, UpstreamSpec,
};
use switchyard_wasm::{HostDirs, Runtime, RuntimeConfig, WasmPlugin, WasmSpec};

use crate::builtin;
use crate::namespaced::Namespaced;

/// Where module bytes come from, by SHA-256.
pub trait Artifacts: Send + Sync {
    /// The bytes of the artifact with this digest, `Ok(None)` when there is none.
    fn fetch<'a>(&'a self, sha256: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, String>>;
}

/// A plugin as the registry describes it.
#[derive(Debug, Clone, Copy)]
pub struct Registration<'a> {
    /// The registry id.
    pub id: &'a str,
    /// The namespace (tool prefix).
    pub namespace: &'a str,
    /// Which kind builds it.
    pub kind: PluginKind,
    /// The kind's spec.
    pub spec: &'a Value,
    /// Scopes a caller needs for everything the plugin offers.
    pub scopes: &'a [String],
}

/// Why a plugin is being built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// To check a registration before it is stored: everything must work
    /// now (an upstream must answer), and nothing runs in the background.
    Check,
    /// To serve: background work starts (an upstream's list refresh), and a
    /// dependency that is down now is retried rather than fatal.
    Serve,
}

/// What the operator lets a plugin spec reach, from the server's
/// configuration. A registration can name nothing outside it: whoever may
/// register a plugin is not trusted with the server's own secrets or files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// Where upstream plugins (and their token endpoints) may connect.
    pub outbound: OutboundPolicy,
    /// Which variables and files upstream credentials may be read from.
    pub secrets: SecretPolicy,
    /// Which host directories WASM plugins may preopen.
    pub host_dirs: HostDirs,
}

/// Builds plugins of every kind. The WASM runtime is created on first use,
/// so a server without WASM plugins reserves nothing for it.
pub struct Factory {
    wasm_config: RuntimeConfig,
    wasm: OnceLock<Arc<Runtime>>,
    upstream_limits: UpstreamLimits,
    /// Upstream answers kept for their `ttlMs`, shared by every upstream
    /// plugin this factory builds, within `upstream_limits.cache_max_bytes`.
    answers: Arc<AnswerCache>,
    /// Where upstream calls wait for a client's input, reachable from the
    /// other replicas over the bus.
    parking: Arc<Parking>,
    grants: Grants,
    changes: ListChanges,
}

impl std::fmt::Debug for Factory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Factory").field("wasm_config", &self.wasm_config).finish_non_exhaustive()
    }
}

impl Factory {
    /// A factory whose WASM plugins run with `wasm_config`, whose upstream
    /// plugins read under `upstream_limits`, whose specs may reach only what
    /// `grants` allows, whose plugins report list changes outside calls to
    /// `changes`, and whose upstream calls waiting for a client's input are
    /// reached from other replicas over `bus`.
    pub fn new(
        wasm_config: RuntimeConfig,
        upstream_limits: UpstreamLimits,
        grants: Grants,
        changes: ListChanges,
        bus: Arc<dyn NotificationBus>,
    ) -> Self {
        let answers = AnswerCache::new(upstream_limits.cache_max_bytes);
        let parking = Parking::new(bus);
        Self { wasm_config, wasm: OnceLock::new(), upstream_limits, answers, parking, grants, changes }
    }

    fn wasm_runtime(&self) -> Result<&Arc<Runtime>, SpecError> {
        if let Some(runtime) = self.wasm.get() {
            return Ok(runtime);
        }
        let runtime = Runtime::new(self.wasm_config).map_err(|e| invalid("kind", format!("WASM runtime: {e}")))?;
        Ok(self.wasm.get_or_init(|| runtime))
    }

    /// Builds the plugin, published under its namespace.
    ///
    /// # Errors
    /// What is wrong with the registration, by field.
    pub async fn build(
        &self,
        plugin: Registration<'_>,
        artifacts: &dyn Artifacts,
        purpose: Purpose,
    ) -> Result<Arc<dyn Plugin>, SpecError> {
        let inner: Arc<dyn Plugin> = match plugin.kind {
            PluginKind::Builtin => {
                let name = plugin
                    .spec
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| invalid("spec.name", "is required: the built-in plugin's name"))?;
                builtin::by_name(name).ok_or_else(|| {
                    let known: Vec<&str> = builtin::AVAILABLE.iter().map(|(n, _)| *n).collect();
                    invalid("spec.name", format!("{name:?} is not a built-in plugin (known: {})", known.join(", ")))
                })?
            }
            PluginKind::Wasm => {
                let spec = WasmSpec::parse(plugin.spec, self.wasm_config.max_memory_bytes, &self.grants.host_dirs)
                    .map_err(|e| invalid(format!("spec.{}", e.field), e.reason))?;
                let runtime = self.wasm_runtime()?;
                let module = match runtime.cached_module(&spec.artifact) {
                    Some(module) => module,
                    None => {
                        let bytes = artifacts
                            .fetch(&spec.artifact)
                            .await
                            .map_err(|e| invalid("spec.artifact", format!("cannot be fetched: {e}")))?
                            .ok_or_else(|| {
                                invalid("spec.artifact", "no artifact has this digest; upload the module first")
                            })?;
                        runtime
                            .compile(&spec.artifact, bytes)
                            .await
                            .map_err(|e| invalid("spec.artifact", e.to_string()))?
                    }
                };
                Arc::new(
                    WasmPlugin::load(runtime, plugin.id, &module, spec)
                        .await
                        .map_err(|e| invalid("spec.artifact", e.to_string()))?
                        .with_answers(self.answers.for_plugin()),
                )
            }
            PluginKind::Upstream => {
                // Secrets are checked against the grants here, before the
                // client reads any of them or connects anywhere.
                let spec = UpstreamSpec::parse(plugin.spec, &self.grants.secrets)
                    .map_err(|e| invalid(format!("spec.{}", e.field), e.reason))?;
                let client = McpClient::new(
                    spec,
                    self.grants.outbound.clone(),
                    self.upstream_limits,
                    plugin.namespace,
                    &self.parking,
                )
                .map_err(|(field, reason)| invalid(field, reason))?;
                let changes = (purpose == Purpose::Serve).then(|| self.changes.clone());
                Arc::new(
                    UpstreamPlugin::connect(plugin.id, client, changes, &self.answers)
                        .await
                        .map_err(|e| invalid("spec.url", e.to_string()))?,
                )
            }
        };
        let published = Namespaced::new(plugin.id, plugin.namespace, inner).with_scopes(plugin.scopes.to_vec());
        for tool in published.tools() {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
            if !switchyard_core::catalog::is_valid_tool_name(name) {
                return Err(invalid(
                    "namespace",
                    format!(
                        "the published tool name {name:?} must be 1-64 characters of [A-Za-z0-9_.-]; shorten the namespace"
                    ),
                ));
            }
        }
        Ok(Arc::new(published))
    }
}
