//! The MCP data layer of Switchyard: validates a request's metadata, dispatches
//! it to the plugin that owns the tool, resource or prompt, seals multi-round
//! state, and runs the listen hub that feeds `subscriptions/listen` streams.
//!
//! It knows no HTTP, SSE framing, JWT, SQL or Redis. Transports (`http`, the
//! binary's stdio loop) hand it parsed JSON-RPC requests and carry back what it
//! returns: a result, an error, or a stream of listen frames, plus the
//! notifications a request emits while it runs (progress, log messages).
//!
//! # Layout
//! - [`server`]: [`Server`], the entry point: `prepare` (era, `_meta`, version)
//!   then `execute` (dispatch by [`Method`](switchyard_protocol::Method));
//!   between them a [`Prepared`] request, and what it produced, an [`Execution`].
//! - `call` (private): one call into a plugin with its MRTR plumbing, given
//!   only the parts of the server it needs (`CallDeps`); `cancellation`
//!   (private): the request's cancellation, its token made only when watched.
//! - `legacy` (private): clients of the `initialize` era, and the relay that
//!   asks them for input and carries their answers to the replica that waits.
//! - [`plugin`]: the [`Plugin`] trait that every kind of plugin implements;
//!   [`plugin_spec`]: what their spec parsers share.
//! - [`catalog`]: the current snapshot of what the plugins offer, rebuilt on change.
//! - [`schema`]: JSON Schema 2020-12 compilation, bounded and offline.
//! - [`state`]: sealing and opening MRTR `requestState`.
//! - [`tasks`]: the Tasks extension: durable tasks any replica answers for
//!   (their store, the task methods, starting a call as a task, running it).
//! - [`listen`]: the listen hub: one bus subscription, many local streams.
//! - [`policy`]: the [`Caller`], the scopes items need and callers hold; list
//!   filtering and refusals.
//! - [`settings`]: the data layer's sections of the configuration file.
//! - [`error`]: the one place that decides JSON-RPC error or `isError` result.
//!
//! Read `ARCHITECTURE.md` at the repository root for a request's whole path.

pub mod caching;
pub mod catalog;
pub mod error;
pub mod listen;
pub mod plugin;
pub mod plugin_spec;
pub mod policy;
pub mod schema;
pub mod server;
pub mod settings;
pub mod state;
pub mod tasks;

mod call;
mod cancellation;
mod cursor;
mod legacy;
mod request;
mod telemetry;
mod uri_template;

pub use caching::{CachePolicy, CacheScope};
pub use call::required_capability;
pub use catalog::Catalog;
pub use error::{Error, Result};
pub use listen::{ListenFrame, ListenHub, ListenLimits, ListenNotification, ListenStream};
pub use plugin::{CallContext, Outcome, Plugin, PluginError};
pub use policy::{Caller, SubjectToken};
pub use request::{Execution, Prepared};
pub use server::{Config, Server};
