//! Plugin kinds: each turns a spec into a [`switchyard_core::Plugin`].
//!
//! - [`builtin`]: plugins compiled into the binary, switched on by
//!   configuration (or registered under a namespace).
//! - WASM: sandboxed modules, run by `switchyard-wasm`.
//! - upstream MCP servers, through `switchyard-upstream`.
//!
//! [`Factory`] builds a registered plugin of any kind and publishes it under
//! its namespace ([`Namespaced`]). This crate knows no inbound HTTP and no
//! SQL: the binary hands it registrations and artifact bytes, and hands the
//! plugins it builds to `core`.

pub mod builtin;
mod factory;
mod namespaced;

pub use factory::{Artifacts, Factory, Grants, Purpose, Registration};
pub use namespaced::Namespaced;
pub use switchyard_core::plugin_spec::PluginKind;
pub use switchyard_upstream::{OutboundPolicy, RawUpstream, SecretPolicy, UpstreamLimits};
pub use switchyard_wasm::RuntimeConfig as WasmConfig;
pub use switchyard_wasm::{HostDirs, RawWasm};
