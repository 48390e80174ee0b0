//! The POST handler, in the validation order of DIGEST §8.6 (step 1, the
//! HTTP method, is the router's).

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Extensions, HeaderMap, StatusCode, header};
use axum::response::Response;
use futures::future::Either;
use std::pin::Pin;
use std::sync::Arc;
use switchyard_core::server::Delivered;
use switchyard_core::{Caller, Execution, Prepared};
use switchyard_protocol::error as codes;
use switchyard_protocol::jsonrpc::Incoming;
use switchyard_protocol::{ErrorObject, Method, ModernCall, RequestId, RequestMeta};

use tokio::sync::mpsc;

use crate::limit::{Decision, Key};
use crate::router::{AppState, Health};
use crate::{forwarded, guard, mirror, reply};

/// How many notifications a running request may queue before it waits for
/// the client to read them.
const OUTBOX: usize = 32;

/// The POST endpoint. Not an `async fn`: axum boxes the future a handler
/// returns, so its size is what each request in flight holds and what is
/// copied into that box, and an `async fn` keeps its arguments for its whole
/// life, the request's head as well as what was taken out of it. The head is
/// taken apart here, and the request's checks run in [`checked`], whose
/// locals are gone by the time the request runs: the async block below is
/// 1,264 bytes where `post`'s future was 3,064 (#18; `cargo rustc --release
/// -p switchyard-http --lib -- -Zprint-type-sizes` under `RUSTC_BOOTSTRAP=1`).
pub(crate) fn post(
    State(state): State<AppState>,
    request: Request<Body>,
) -> impl Future<Output = Response> + Send + 'static {
    let (parts, body) = request.into_parts();
    // Step 2: Origin and Host (DNS-rebinding protection).
    if let Some(refused) = guard::refusal(&state.config, parts.version, &parts.uri, &parts.headers) {
        return Either::Left(std::future::ready(refused));
    }
    let (headers, extensions) = (parts.headers, parts.extensions);
    Either::Right(async move {
        let (id, prepared, may_stream) = match checked(&state, &headers, &extensions, body).await {
            Ok(admitted) => admitted,
            Err(answered) => return answered,
        };
        // Steps 10-12 happen in `core`.
        if !may_stream {
            // Nothing can come before the result: skip the channel and the race.
            // Pinned where it is made, not moved into a wrapper.
            let execution = state.server.execute(prepared, None);
            tokio::pin!(execution);
            let execution = until_cut_off(execution, &state.health).await;
            return reply::finished(id, execution, &headers, state.config.keep_alive);
        }
        let (outbox, notifications) = mpsc::channel(OUTBOX);
        let (server, health) = (state.server.clone(), Arc::clone(&state.health));
        let running = Box::pin(async move {
            let execution = server.execute(prepared, Some(outbox));
            tokio::pin!(execution);
            until_cut_off(execution, &health).await
        });
        reply::run(id, running, notifications, &headers, state.config.keep_alive).await
    })
}

/// Steps 3 to 9 of DIGEST §8.6 (and step 3 again once the body named the
/// method): the request, prepared, and whether it may stream; or the answer
/// already due.
async fn checked(
    state: &AppState,
    headers: &HeaderMap,
    extensions: &Extensions,
    body: Body,
) -> Result<(RequestId, Prepared, bool), Response> {
    let mirrored = mirror::Mirrored::of(headers);
    // The caller, as an auth layer in front established it; without one, the
    // anonymous caller, which `core` refuses when authorization is on.
    let mut caller = extensions.get::<Caller>().cloned().unwrap_or_else(Caller::anonymous);
    caller.peer = extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|peer| forwarded::client_address(peer.0.ip(), headers, &state.config.trusted_proxies));
    // Step 3 (ours): the rate limit, from headers and the connection only, so
    // a refused request costs no body read or parse. That needs `Mcp-Method`;
    // a request without it (a legacy client) is limited once its body is
    // parsed, and a request with it must then carry a body that agrees (step
    // 6 and 9), so the headers cannot name a budget the body does not use.
    let limited = match &state.limiter {
        None => None,
        Some(limiter) => {
            let principal = caller.accounting_key();
            let (method, name) = mirrored.routing();
            let counted = match method {
                None => None,
                Some(method) => {
                    let name = name.and_then(|raw| switchyard_protocol::headers::decode_value(raw).ok());
                    let target = state.server.limit_target(method, name.as_deref());
                    limit(limiter.as_ref(), &principal, target).await?;
                    Some(target.to_owned())
                }
            };
            Some((principal, counted))
        }
    };

    // Step 4: a JSON body, within the size limit, that is one JSON-RPC message.
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| switchyard_protocol::headers::names_media_type(v, "application/json"));
    if !is_json {
        return Err(reply::transport_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            codes::INVALID_REQUEST,
            "Content-Type must be application/json",
        ));
    }
    // A body that trickles in (or never ends) must not hold the request,
    // its buffer and its connection for ever.
    let read = axum::body::to_bytes(body, state.config.max_body_bytes);
    let bytes = match tokio::time::timeout(state.config.body_read_timeout, read).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => {
            return Err(reply::transport_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                codes::INVALID_REQUEST,
                "Request body is too large",
            ));
        }
        Err(_) => {
            return Err(reply::transport_error(
                StatusCode::REQUEST_TIMEOUT,
                codes::INVALID_REQUEST,
                "The request body did not arrive within http.body_read_timeout",
            ));
        }
    };
    // A modern `tools/call` is read typed, without a map of its parameters
    // to take apart; anything else, and any call that reading does not take
    // whole, by the general path (boxed: it is the rarer one, and inline its
    // future would make every request's larger to move).
    let (id, prepared) = match ModernCall::parse(&bytes) {
        Some(call) => match prepare_call(state, call, &mirrored, caller) {
            (id, Ok(prepared)) => (id, prepared),
            (id, Err(e)) => return Err(reply::error(Some(&id), &e)),
        },
        None => Box::pin(read_request(state, &bytes, &mirrored, caller)).await?,
    };
    // Step 9: the standard headers are present and `Mcp-Name`/`Mcp-Param-*` match.
    if let Err(e) = mirror::require(headers, &mirrored, &prepared) {
        return Err(reply::error(Some(&id), &e));
    }

    // Step 3 again, by the body, unless the headers already named the same
    // target: a legacy request sends no headers, and one that sends
    // `Mcp-Method` without `Mcp-Name` was counted against the method only.
    if let (Some(limiter), Some((principal, counted))) = (&state.limiter, &limited) {
        let target = state.server.limit_target(prepared.method.as_str(), prepared.name());
        if counted.as_deref() != Some(target) {
            limit(limiter.as_ref(), principal, target).await?;
        }
    }
    let may_stream = prepared.may_stream();
    Ok((id, prepared, may_stream))
}

/// Steps 6 to 8 for a modern `tools/call` read typed: checked against the
/// mirrored headers (its `_meta` claims the modern era), and prepared.
fn prepare_call(
    state: &AppState,
    call: ModernCall,
    mirrored: &mirror::Mirrored<'_>,
    caller: Caller,
) -> (RequestId, Result<Prepared, ErrorObject>) {
    let id = call.id.clone();
    let prepared = mirror::cross_check(mirrored, Method::CallTool.as_str(), Some(&call.meta.protocol_version))
        .and_then(|()| state.server.prepare_call(call, caller));
    (id, prepared)
}

/// Steps 5 to 8 by the general path: the body read as one message, checked
/// against the mirrored headers, and prepared; or the answer already due (to
/// a notification, a legacy client's response, or an error).
async fn read_request(
    state: &AppState,
    bytes: &[u8],
    mirrored: &mirror::Mirrored<'_>,
    caller: Caller,
) -> Result<(RequestId, Prepared), Response> {
    let (id, method, params) = match Incoming::parse(bytes) {
        Ok(Incoming::Request { id, method, params }) => (id, method, params),
        // No reply for a notification: a client sends none over HTTP in this
        // revision, and legacy ones (`notifications/initialized`) are dropped.
        Ok(Incoming::Notification { .. }) => return Err(reply::accepted()),
        // A legacy client answering a sampling or elicitation request we sent
        // on a tool call's stream.
        Ok(Incoming::Response { id, outcome }) => {
            if bytes.len() > state.config.max_answer_bytes {
                return Err(reply::transport_error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    codes::INVALID_REQUEST,
                    "The answer is larger than http.max_answer_bytes",
                ));
            }
            let principal = caller.principal.as_deref();
            return Err(if state.server.deliver_response(&id, outcome, principal).await != Delivered::Unknown {
                reply::accepted()
            } else {
                let error = ErrorObject::invalid_request(format!("no request here awaits a response with id {id}"));
                reply::error(None, &error)
            });
        }
        Err(envelope) => return Err(reply::error(envelope.id.as_ref(), &envelope.error)),
    };
    // Step 6: header and body agree where both carry a value.
    let claimed_version = RequestMeta::claimed_version(&params);
    if let Err(e) = mirror::cross_check(mirrored, &method, claimed_version) {
        return Err(reply::error(Some(&id), &e));
    }
    // Steps 5, 7, 8: era, required `_meta`, supported version.
    match state.server.prepare(id.clone(), &method, params, mirrored.modern_hint(), caller) {
        Ok(prepared) => Ok((id, prepared)),
        Err(e) => Err(reply::error(Some(&id), &e)),
    }
}

/// The request's execution, or, if the drain's grace period ends first, a
/// JSON-RPC error saying the server is shutting down (the work is dropped):
/// the client gets an answer it can retry elsewhere, not a closed connection.
async fn until_cut_off(execution: Pin<&mut impl Future<Output = Execution>>, health: &Health) -> Execution {
    tokio::select! {
        biased;
        execution = execution => execution,
        () = health.requests_cut_off() => {
            Execution::error(ErrorObject::new(codes::INTERNAL_ERROR, "the server is shutting down; retry the request"))
        }
    }
}

/// Counts one request; the 429 to send when it is over its limit.
async fn limit(limiter: &dyn crate::limit::RateLimiter, principal: &str, target: &str) -> Result<(), Response> {
    match limiter.check(Key { principal, target }).await {
        Decision::Allow => Ok(()),
        Decision::Deny { retry_after } => {
            switchyard_telemetry::metrics().rate_limited();
            Err(reply::rate_limited(retry_after))
        }
    }
}
