//! A request between the two steps of [`Server`](crate::Server):
//! [`Prepared`] (validated, bound to one catalog snapshot) and what running
//! it produced, [`Execution`].

use std::sync::Arc;

use serde_json::{Map, Value};
use switchyard_protocol::version::Era;
use switchyard_protocol::{ErrorObject, Finished, Malformed, Method, Params, Produced, RequestId, RequestMeta};

use crate::caching::CachePolicy;
use crate::catalog::{HeaderParam, Snapshot};
use crate::listen::ListenStream;
use crate::policy::{Caller, InsufficientScope};

/// A request that passed era, `_meta` and version validation.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The request id.
    pub id: RequestId,
    /// The method.
    pub method: Method,
    /// What the method reads from its parameters, typed; or why they do not
    /// fit it (answered `-32602` when the request is executed, after the
    /// transport's own checks, as DIGEST §8.6 orders them).
    pub params: Result<Params, Malformed>,
    /// The members of the parameters no method reads: a legacy request's
    /// `_meta` (a modern one's is in `meta`), extensions we do not serve.
    pub rest: Map<String, Value>,
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
        match (&self.method, self.name()) {
            (Method::CallTool, Some(tool)) => self.snapshot.tool(tool).map_or(&[], |t| t.header_params.as_slice()),
            _ => &[],
        }
    }

    /// The parameters, or the `-32602` their shape earns.
    pub(crate) fn typed(&self) -> Result<&Params, crate::Error> {
        self.params.as_ref().map_err(|malformed| crate::Error::Params(malformed.error.clone()))
    }

    /// The item the request names (`name`, `uri` or `taskId`), when that
    /// member is a string (even if another member is malformed: the
    /// header checks that come first compare it).
    pub fn name(&self) -> Option<&str> {
        match &self.params {
            Ok(params) => params.name(),
            Err(malformed) => malformed.name.as_deref(),
        }
    }

    /// The arguments of a `tools/call`, when they are an object.
    pub fn tool_arguments(&self) -> Option<&Map<String, Value>> {
        match (&self.method, &self.params) {
            (_, Ok(Params::CallTool { arguments, .. })) => arguments.as_ref(),
            (Method::CallTool, Err(malformed)) => malformed.arguments.as_ref(),
            _ => None,
        }
    }

    /// Whether this is a later round of a multi-round request (it carries
    /// `inputResponses` or `requestState`): its result may not be reused.
    pub fn is_retry(&self) -> bool {
        let typed = self.params.as_ref().ok().and_then(Params::retry).is_some_and(|retry| retry.is_retry());
        typed || self.rest.contains_key("inputResponses") || self.rest.contains_key("requestState")
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
    /// A result object (carrying `resultType` and `_meta` as the era wants,
    /// or to carry them when written), and who may reuse it for how long, as its `ttlMs` and
    /// `cacheScope` say: `None` when it may not be reused at all (an MRTR
    /// retry, a legacy client's answer, a result without caching hints).
    Result {
        /// The result object.
        result: Finished,
        /// Its caching, for a transport's cache headers.
        cache: Option<CachePolicy>,
    },
    /// A JSON-RPC error.
    Error {
        /// The error object.
        error: ErrorObject,
        /// For a refusal for lack of scopes, the scopes the operation needs
        /// (over HTTP: a 403 whose challenge names them).
        refusal: Option<InsufficientScope>,
    },
    /// A listen stream (`subscriptions/listen`).
    Listen(ListenStream),
}

impl Execution {
    /// A result that may not be reused.
    pub fn result(result: Finished) -> Self {
        Self::Result { result, cache: None }
    }

    /// An error that is not a refusal for lack of scopes.
    pub fn error(error: ErrorObject) -> Self {
        Self::Error { error, refusal: None }
    }
}

impl std::fmt::Debug for Execution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Result { result, cache } => {
                f.debug_struct("Result").field("result", result).field("cache", cache).finish()
            }
            Self::Error { error, refusal } => {
                f.debug_struct("Error").field("error", error).field("refusal", refusal).finish()
            }
            Self::Listen(_) => f.write_str("Listen"),
        }
    }
}

/// A result before its era's finishing touches, with its caching when it
/// has any: the policy whose `ttlMs` and `cacheScope` it carries.
pub(crate) struct Answer {
    pub(crate) result: Produced,
    pub(crate) cache: Option<CachePolicy>,
}

impl Answer {
    /// `result` carrying `policy`.
    pub(crate) fn cached(result: Value, policy: CachePolicy) -> Self {
        Self { result: policy.applied(result).into(), cache: Some(policy) }
    }
}

impl From<Value> for Answer {
    fn from(result: Value) -> Self {
        Self { result: result.into(), cache: None }
    }
}

impl From<Produced> for Answer {
    fn from(result: Produced) -> Self {
        Self { result, cache: None }
    }
}
