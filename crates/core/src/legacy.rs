//! Serving clients of the `initialize` era (2025-11-25, 2025-06-18,
//! 2025-03-26) on the same endpoint, statelessly (DIGEST §11).
//!
//! No session is created: `initialize` is answered and forgotten, so the next
//! request may land on any replica. What a legacy session would have carried
//! (the negotiated version, a log level) is not needed to serve a request.
//!
//! When a tool needs input (sampling, elicitation, roots), a legacy client
//! cannot retry with answers; instead the server sends it JSON-RPC requests on
//! the tool call's SSE response, and the client answers each in a POST of its
//! own, which `Server::deliver_response` hands to the waiting call. The id we
//! mint names the replica that holds the call, so an answer that a load
//! balancer sends elsewhere is relayed to it over the bus. The client's
//! capabilities were declared in an `initialize` we did not keep, so a client
//! that lacks one answers with an error, which becomes a tool error.

use serde_json::{Map, Value, json};
use switchyard_protocol::logging::LoggingLevel;
use switchyard_protocol::version::ProtocolVersion;

/// The log threshold for legacy requests: their `logging/setLevel` cannot be
/// remembered without a session, so we send informational messages and above.
pub(crate) const LOG_THRESHOLD: LoggingLevel = LoggingLevel::Info;

/// The `InitializeResult` for a legacy client.
pub(crate) fn initialize_result(params: &Map<String, Value>, server_info: &Value, instructions: Option<&str>) -> Value {
    let requested = params.get("protocolVersion").and_then(Value::as_str);
    let version = ProtocolVersion::negotiate_legacy(requested);
    // Without a standing stream (GET is 405: there is no session to attach it
    // to) list changes cannot reach a legacy client, so none are promised.
    let mut result = json!({
        "protocolVersion": version.as_str(),
        "capabilities": {
            "tools": { "listChanged": false },
            "resources": { "subscribe": false, "listChanged": false },
            "prompts": { "listChanged": false },
            "completions": {},
            "logging": {},
        },
        "serverInfo": server_info,
    });
    if let Some(instructions) = instructions {
        result["instructions"] = json!(instructions);
    }
    result
}

/// Removes the members a legacy result does not have.
pub(crate) fn shape_result(result: &mut Value) {
    if let Value::Object(map) = result {
        for member in ["resultType", "ttlMs", "cacheScope"] {
            map.remove(member);
        }
    }
}

/// The tool error for a tool that needs input from a legacy client over a
/// transport that cannot stream requests to it.
pub(crate) fn input_unavailable() -> String {
    "This tool needs input from the client (elicitation, sampling or roots), which this transport \
     cannot request from a 2025-era client: connect with protocol revision 2026-07-28."
        .to_owned()
}

/// A fresh id for a request sent to a legacy client: high-entropy, so it
/// names one waiting request and cannot be guessed by another client.
pub(crate) fn request_id(replica: &str) -> String {
    format!("switchyard-{replica}-{:032x}", rand::random::<u128>())
}

/// The replica named in an input request id we minted.
pub(crate) fn replica_of(id: &str) -> Option<&str> {
    let rest = id.strip_prefix("switchyard-")?;
    rest.split_once('-').map(|(replica, _)| replica)
}
