//! A request between the two steps of [`Server`](crate::Server):
//! [`Prepared`] (validated, bound to one catalog snapshot) and what running
//! it produced, [`Execution`].

use std::sync::Arc;

use serde_json::{Map, Value};
use switchyard_protocol::version::Era;
use switchyard_protocol::{ErrorObject, Method, RequestId, RequestMeta};

use crate::catalog::{HeaderParam, Snapshot};
use crate::listen::ListenStream;
use crate::policy::Caller;

/// A request that passed era, `_meta` and version validation.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The request id.
    pub id: RequestId,
    /// The method.
    pub method: Method,
    /// The parameters; for a modern request without `_meta`, which is in `meta`.
    pub params: Map<String, Value>,
    /// Modern or legacy.
    pub era: Era,
    /// The validated `_meta` (modern requests only).
    pub meta: Option<RequestMeta>,
    /// Who is calling.
    pub caller: Caller,
    /// The catalog as it was when the request was prepared: its headers are
    /// checked and it is executed against this one snapshot, so a rebuild in
    /// between cannot check one tool's headers and call another's.
    pub snapshot: Arc<Snapshot>,
}

impl Prepared {
    /// The `x-mcp-header` arguments of the tool a `tools/call` names (none
    /// for any other request, or a tool the catalog does not have).
    pub fn header_params(&self) -> &[HeaderParam] {
        match (&self.method, self.params.get("name").and_then(Value::as_str)) {
            (Method::CallTool, Some(tool)) => self.snapshot.tool(tool).map_or(&[], |t| t.header_params.as_slice()),
            _ => &[],
        }
    }

    /// Whether running this request may send anything before its result
    /// (progress, log messages, requests to a legacy client). When it cannot,
    /// a transport may skip the machinery for streaming.
    pub fn may_stream(&self) -> bool {
        match &self.meta {
            Some(meta) => meta.progress_token.is_some() || meta.log_level.is_some(),
            None => true,
        }
    }
}

/// What a request produced.
pub enum Execution {
    /// A result object (already carrying `resultType` and `_meta` as the era wants).
    Result(Value),
    /// A JSON-RPC error.
    Error(ErrorObject),
    /// A listen stream (`subscriptions/listen`).
    Listen(ListenStream),
}

impl std::fmt::Debug for Execution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Result(v) => f.debug_tuple("Result").field(v).finish(),
            Self::Error(e) => f.debug_tuple("Error").field(e).finish(),
            Self::Listen(_) => f.write_str("Listen"),
        }
    }
}
