//! The upstream MCP plugin kind: a remote Streamable HTTP MCP server whose
//! tools, resources and prompts Switchyard republishes (under the plugin's
//! namespace, which `plugins::Namespaced` adds).
//!
//! - [`McpClient`] speaks 2026-07-28 (stateless, `_meta` on every request,
//!   `server/discover`), and falls back to the 2025 `initialize` era (a
//!   session id, `notifications/initialized`) when the upstream does not know
//!   the stateless revision. Answers may be JSON or SSE.
//! - [`UpstreamPlugin`] caches the upstream's lists for their `ttlMs` (or the
//!   spec's `list_ttl_ms`), refreshes them when the upstream's own
//!   `subscriptions/listen` stream says they changed, and routes calls with a
//!   timeout and clear errors. What an upstream says during a call (progress,
//!   log messages) reaches our client as its request asked (`client::Relay`).
//! - Credentials are the platform's own ([`Credentials`]: a static header, or
//!   OAuth client credentials fetched and refreshed here), read from the
//!   environment or a file, never from the registry, and only from the
//!   variables and directories the operator granted ([`SecretPolicy`];
//!   Switchyard's own `SWITCHYARD_*` settings never). A client's token is never
//!   passed upstream: nothing from the inbound request but the call's own
//!   arguments reaches the upstream.
//! - [`OutboundPolicy`]: upstream and token URLs must name an allowed host;
//!   link-local, NAT64 and cloud metadata addresses are refused unless
//!   allowed, and internal ones (loopback, private) unless the operator named
//!   the host or its range; checked on the literal URL and on every address
//!   DNS returns; no proxy, no redirects.
//! - [`UpstreamLimits`]: an upstream is run by whoever registered it, so
//!   everything it sends is read under the operator's bounds (bytes per
//!   message, per SSE answer and per list refresh; items and pages per list;
//!   deadlines per page, per refresh and on the listen stream's silence), its
//!   `list_changed` notifications cost at most one refresh per interval, and
//!   one that keeps failing is retried with a doubling wait. Breaking a bound
//!   is an error for that upstream alone: the last good lists stay served.
//! - Resilience (`breaker`): after failures in a row an upstream is not sent
//!   to until a probe answers, and idempotent requests that failed in
//!   transport are sent again within a retry budget. Connections are pooled
//!   and kept alive, over HTTP/2 where the upstream offers it. An upstream
//!   marked `h2c` is sent its requests on one connection of the client's own
//!   (`client::h2c`), whose writes carry the requests of many calls at once;
//!   any other `http` upstream on HTTP/1.1 connections of its own
//!   (`client::http1`), kept alive and given back once an answer is read.
//!   reqwest carries `https` upstreams.
//! - The answer cache (`switchyard-answers`, shared with WASM plugins):
//!   answers kept for their `ttlMs`, public ones for every caller and
//!   private ones per authorization context, identical reads in flight asked
//!   once, all within one bound per replica.
//! - The Tasks extension passes through (`tasks`): our client that takes a
//!   task is declared to an upstream that offers them, the upstream's task
//!   reaches it under an id of our server's, and its `tasks/*` requests
//!   come back here and go to the upstream for that caller.
//!
//! This crate knows no inbound HTTP and no SQL.

mod breaker;
mod call_facts;
mod client;
mod counted;
mod follow;
mod input;
mod limits;
mod outbound;
mod parking;
mod plugin;
mod secrets;
mod settings;
mod spec;
mod sse;
mod tasks;

pub use breaker::Retry;
pub use client::{CallError, McpClient};
pub use limits::{Bound, UpstreamLimits};
pub use outbound::{Allowed, IpNet, OutboundPolicy};
pub use parking::Parking;
pub use plugin::UpstreamPlugin;
pub use secrets::{SecretPolicy, SecretRef};
pub use settings::{RawUpstream, Settings};
pub use spec::{Credentials, SpecError, UpstreamSpec};
