//! Integration tests over real HTTP (and stdio) against a real Switchyard.
//! Every message the server sends is checked against the official schema by
//! the testkit client.

/// Upstream answers kept for their ttlMs, per caller when private, coalesced (#19).
mod answer_cache;
/// OAuth: bearer tokens from a real authorization server, scopes, metadata.
mod auth;
/// The auth layer alone, over a stand-in inner service, without a socket.
mod auth_layer;
/// The official MCP conformance suite, both requirement sets.
mod conformance;
/// Notifications across three replicas while Redis restarts and replicas are killed and drained (#16).
mod faults;
/// Hostile plugin authors, callers and upstreams (#15).
mod hostile;
/// Cleartext HTTP/2 beside HTTP/1.1: answers, multiplexed listen streams, Host checks, shutdown; h2c to upstreams.
mod http2;
/// `subscriptions/listen`: acknowledgement, filtering, fan-out, shutdown.
mod listen;
/// Registered plugins: CLI, admin API, hot reload, restart, hostile WASM, two replicas.
mod plugins;
/// Requests and results of the 2026-07-28 protocol: discovery, tools, MRTR, errors.
mod protocol;
/// What an upstream says during a call (progress, log messages) reaching the client (#19).
mod relay;
/// Upstreams that fail: breaker, retries of idempotent requests (#19).
mod resilience;
/// The official Rust SDK as a client.
mod rmcp_client;
/// The stdio transport over an in-memory pipe.
mod stdio;
/// The Tasks extension across replicas and faults.
mod tasks;
/// Traces over OTLP to a real receiver, and metrics.
mod telemetry;
/// Acting on the caller's behalf: token exchange (RFC 8693) with a real authorization server (#19).
mod token_exchange;
/// Malformed, oversized and hostile input at the HTTP layer.
mod transport;
/// Hostile upstreams: lists and answers that lie, floods, hangs.
mod upstream_input;
/// The Tasks extension through upstreams: ids of ours, any replica, the caller's alone (#19).
mod upstream_tasks;
mod upstreams;

use switchyard_testkit::App;

/// A server with the conformance fixture, as most tests want.
async fn fixture() -> App {
    App::start(&[("SWITCHYARD_FIXTURE", "conformance")]).await
}
