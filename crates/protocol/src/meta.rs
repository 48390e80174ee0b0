//! `_meta` keys and the per-request metadata every modern request carries.

use serde_json::{Map, Value};

use crate::error::ErrorObject;
use crate::logging::LoggingLevel;

/// The member of `params` that holds request metadata.
pub const META: &str = "_meta";
/// Required: the protocol revision of this request.
pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// Required: the client's capabilities for this request.
pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// Optional: the client's self-description; for display and logs only.
pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// Optional: the minimum level of `notifications/message` for this request.
pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// On results: the server's self-description.
pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// On listen-stream frames: the listen request's id.
pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// Optional: asks for `notifications/progress` with this token.
pub const PROGRESS_TOKEN: &str = "progressToken";
/// W3C trace context (SEP-414 exception to the prefix rule).
pub const TRACEPARENT: &str = "traceparent";
/// W3C trace state.
pub const TRACESTATE: &str = "tracestate";

/// The validated `_meta` of a modern request.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestMeta {
    /// The protocol version as sent (checked against what we serve later, so
    /// that header/body mismatches are reported first).
    pub protocol_version: String,
    /// The `ClientCapabilities` object of this request.
    pub client_capabilities: Map<String, Value>,
    /// The per-request log level, if any.
    pub log_level: Option<LoggingLevel>,
    /// The progress token, if any (a string or an integer).
    pub progress_token: Option<Value>,
    /// W3C trace context of the caller's span (`traceparent`, then
    /// `tracestate`), as sent; checked by whoever uses it. Strings only.
    pub trace_context: Option<(String, Option<String>)>,
}

impl RequestMeta {
    /// Reads the protocol version claimed by `params._meta`, if any, without
    /// validating anything else. Used to classify the era of a request.
    pub fn claimed_version(params: &Map<String, Value>) -> Option<&str> {
        params.get(META)?.get(PROTOCOL_VERSION)?.as_str()
    }

    /// Takes `params._meta` out of the parameters (they are cheaper to carry
    /// without it, and nothing downstream reads it from there) and validates
    /// its required keys.
    ///
    /// # Errors
    /// `-32602` naming the missing or malformed key. `clientInfo` is never required.
    pub fn take(params: &mut Map<String, Value>) -> Result<Self, ErrorObject> {
        let mut meta = match params.remove(META) {
            Some(Value::Object(meta)) => meta,
            Some(_) => return Err(ErrorObject::invalid_params("params._meta must be an object")),
            None => return Err(ErrorObject::invalid_params("params._meta is required")),
        };
        let protocol_version = match meta.remove(PROTOCOL_VERSION) {
            Some(Value::String(v)) => v,
            Some(_) => return Err(missing_or_bad(PROTOCOL_VERSION, "must be a string")),
            None => return Err(missing_or_bad(PROTOCOL_VERSION, "is required")),
        };
        let client_capabilities = match meta.remove(CLIENT_CAPABILITIES) {
            Some(Value::Object(c)) => c,
            Some(_) => return Err(missing_or_bad(CLIENT_CAPABILITIES, "must be an object")),
            None => return Err(missing_or_bad(CLIENT_CAPABILITIES, "is required")),
        };
        let log_level = log_level(meta.get(LOG_LEVEL))?;
        let progress_token = progress_token(meta.remove(PROGRESS_TOKEN))?;
        let trace_context = trace_context(&meta);
        Ok(Self { protocol_version, client_capabilities, log_level, progress_token, trace_context })
    }
}

/// `logLevel`, when present: the name of a level. (The typed reading of a
/// call, `crate::call`, checks the same members with these functions.)
pub(crate) fn log_level(value: Option<&Value>) -> Result<Option<LoggingLevel>, ErrorObject> {
    value
        .map(|value| {
            value
                .as_str()
                .and_then(LoggingLevel::parse)
                .ok_or_else(|| missing_or_bad(LOG_LEVEL, "is not a logging level"))
        })
        .transpose()
}

/// `progressToken`, when present: a string or an integer.
pub(crate) fn progress_token(value: Option<Value>) -> Result<Option<Value>, ErrorObject> {
    match value {
        None => Ok(None),
        Some(token @ Value::String(_)) => Ok(Some(token)),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Ok(Some(Value::Number(n))),
        Some(_) => Err(missing_or_bad(PROGRESS_TOKEN, "must be a string or an integer")),
    }
}

/// `traceparent` and `tracestate` of a `_meta` object, when `traceparent`
/// is a string (legacy requests carry them the same way).
pub fn trace_context(meta: &Map<String, Value>) -> Option<(String, Option<String>)> {
    trace_members(meta.get(TRACEPARENT), meta.get(TRACESTATE))
}

/// [`trace_context`] of the two members' values.
pub(crate) fn trace_members(
    traceparent: Option<&Value>,
    tracestate: Option<&Value>,
) -> Option<(String, Option<String>)> {
    let traceparent = traceparent?.as_str()?.to_owned();
    Some((traceparent, tracestate.and_then(Value::as_str).map(str::to_owned)))
}

fn missing_or_bad(key: &str, why: &str) -> ErrorObject {
    ErrorObject::invalid_params(format!("params._meta[\"{key}\"] {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn params(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn requires_version_and_capabilities_but_not_client_info() {
        let ok = params(json!({"_meta": {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: {}}}));
        let mut ok = ok;
        assert_eq!(RequestMeta::take(&mut ok).unwrap().protocol_version, "2026-07-28");
        assert!(!ok.contains_key(META), "_meta is taken out of the params");
        for bad in [
            json!({}),
            json!({"_meta": 1}),
            json!({"_meta": {CLIENT_CAPABILITIES: {}}}),
            json!({"_meta": {PROTOCOL_VERSION: "2026-07-28"}}),
            json!({"_meta": {PROTOCOL_VERSION: 5, CLIENT_CAPABILITIES: {}}}),
            json!({"_meta": {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: []}}),
            json!({"_meta": {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: {}, LOG_LEVEL: "loud"}}),
            json!({"_meta": {PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: {}, PROGRESS_TOKEN: 1.5}}),
        ] {
            assert_eq!(RequestMeta::take(&mut params(bad.clone())).unwrap_err().code, -32602, "{bad}");
        }
    }
}
