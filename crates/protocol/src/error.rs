//! JSON-RPC and MCP error codes, and the error object that carries them.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Invalid JSON was received.
pub const PARSE_ERROR: i32 = -32700;
/// The JSON is not a valid request object (also used for batches, which
/// Streamable HTTP forbids).
pub const INVALID_REQUEST: i32 = -32600;
/// The method does not exist, was removed, or its capability is not advertised.
pub const METHOD_NOT_FOUND: i32 = -32601;
/// Invalid method parameters: missing `_meta`, unknown tool or prompt, bad
/// cursor, resource not found, tampered `requestState`.
pub const INVALID_PARAMS: i32 = -32602;
/// An internal server error; details stay in the server log.
pub const INTERNAL_ERROR: i32 = -32603;
/// An HTTP header is missing, malformed, or disagrees with the body.
pub const HEADER_MISMATCH: i32 = -32020;
/// Processing needs a client capability the request did not declare.
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i32 = -32021;
/// The requested protocol version is not served here.
pub const UNSUPPORTED_PROTOCOL_VERSION: i32 = -32022;
/// Switchyard's own (the implementation-defined range): the caller is over its
/// rate limit; sent with HTTP 429 and `Retry-After`, `data.retryAfterMs`.
pub const RATE_LIMITED: i32 = -32029;
/// Switchyard's own: the caller's token lacks a scope the operation needs;
/// sent with HTTP 403 and a `WWW-Authenticate` step-up challenge,
/// `data.requiredScopes` naming every scope the operation needs.
pub const INSUFFICIENT_SCOPE: i32 = -32030;

/// A JSON-RPC error object: `code`, `message` and optional `data`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The numeric error code (see the constants in this module).
    pub code: i32,
    /// A short, human-readable description; never internal details.
    pub message: String,
    /// Structured detail defined per code (e.g. `supported`/`requested`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error with a code and message and no data.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), data: None }
    }

    /// Adds structured `data`.
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// `-32700`: the body is not JSON.
    pub fn parse_error(detail: impl Into<String>) -> Self {
        Self::new(PARSE_ERROR, format!("Parse error: {}", detail.into()))
    }

    /// `-32600`: the body is JSON but not a valid request.
    pub fn invalid_request(detail: impl Into<String>) -> Self {
        Self::new(INVALID_REQUEST, format!("Invalid request: {}", detail.into()))
    }

    /// `-32601` for a method this server does not serve.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(METHOD_NOT_FOUND, format!("Method not found: {method}")).with_data(json!({ "method": method }))
    }

    /// `-32602` with a message naming what is wrong.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    /// `-32603`; the caller logs the cause, the client sees only this.
    pub fn internal() -> Self {
        Self::new(INTERNAL_ERROR, "Internal error")
    }

    /// `-32020`: a header disagrees with the body or is missing or malformed.
    pub fn header_mismatch(message: impl Into<String>) -> Self {
        Self::new(HEADER_MISMATCH, format!("Header mismatch: {}", message.into()))
    }

    /// `-32021` with `data.requiredCapabilities`, a `ClientCapabilities` object.
    pub fn missing_capability(required: Value) -> Self {
        Self::new(MISSING_REQUIRED_CLIENT_CAPABILITY, "Missing required client capability")
            .with_data(json!({ "requiredCapabilities": required }))
    }

    /// `-32022` with the versions we serve and the one that was asked for,
    /// echoed exactly.
    pub fn unsupported_version(supported: &[&str], requested: &str) -> Self {
        Self::new(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version")
            .with_data(json!({ "supported": supported, "requested": requested }))
    }
}

impl std::fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for ErrorObject {}
