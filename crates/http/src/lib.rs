//! The Streamable HTTP transport (MCP 2026-07-28): one POST endpoint that
//! answers each request with JSON, or with an SSE stream when something must be
//! sent before the result (progress, log messages) or the request is a
//! `subscriptions/listen`.
//!
//! This crate owns HTTP concerns only: Origin/Host checks, content type and
//! body limits, where an authentication layer goes (it is handed one, boxed),
//! the mirrored-header checks of SEP-2243, the JSON-RPC-error to
//! HTTP-status table, SSE framing, and cache headers derived from `ttlMs` and
//! `cacheScope`. It knows no SQL, no Redis, and not how tokens are checked.
//!
//! # Layout
//! - [`router`]: the axum `Router` and [`Config`].
//! - `serve`: [`bind`] and [`serve`], the accept loop: HTTP/1.1 and cleartext
//!   HTTP/2 on one port.
//! - `endpoint`: the POST handler, in the validation order of DIGEST §8.6.
//! - `head_timer`: hyper's timer for an HTTP/1.1 connection's head deadline,
//!   one `Sleep` per connection rather than per request.
//! - [`guard`]: Origin and Host allow-lists (DNS-rebinding protection), also
//!   applied by the binary to the admin API.
//! - [`limit`]: the rate-limit seam, asked before the body is read.
//! - `mirror`: `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`.
//! - `reply`: JSON and SSE responses, the status table, cache headers.
//! - `trace`: the HTTP server span and `http.server.request.duration`.

mod connection;
mod endpoint;
mod forwarded;
pub mod guard;
mod head_timer;
pub mod limit;
mod mirror;
mod reply;
mod router;
mod serve;
mod settings;
mod trace;

pub use router::{AuthLayer, Config, Health, router};
pub use serve::{bind, serve};
pub use settings::RawHttp;
