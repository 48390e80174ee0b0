//! Turning what `core` produced into HTTP: the status table, JSON bodies,
//! SSE streams, and cache headers.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde_json::Value;
use sha2::{Digest, Sha256};
use switchyard_core::policy::InsufficientScope;
use switchyard_core::{CachePolicy, CacheScope, Execution, ListenFrame, ListenStream};
use switchyard_protocol::error::{self as codes};
use switchyard_protocol::{ErrorObject, Finished, RequestId, jsonrpc};
use tokio::sync::mpsc;

const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";

/// The one table from JSON-RPC error code to HTTP status (DIGEST §1.4, §8.4):
/// request-shape and validation errors are 400, an unknown method is 404,
/// a refusal for lack of scopes is 403 (the auth layer adds the challenge),
/// everything else travels in a 200.
pub(crate) fn status_of(code: i32) -> StatusCode {
    match code {
        codes::PARSE_ERROR
        | codes::INVALID_REQUEST
        | codes::INVALID_PARAMS
        | codes::HEADER_MISMATCH
        | codes::MISSING_REQUIRED_CLIENT_CAPABILITY
        | codes::UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
        codes::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        codes::INSUFFICIENT_SCOPE => StatusCode::FORBIDDEN,
        codes::RATE_LIMITED => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::OK,
    }
}

fn with_type(status: StatusCode, content_type: &'static str, body: impl Into<Body>) -> Response {
    let mut response = (status, body.into()).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// A JSON-RPC error response with the status from the table.
pub(crate) fn error(id: Option<&RequestId>, error: &ErrorObject) -> Response {
    let mut response = with_type(status_of(error.code), JSON, jsonrpc::failure(id, error));
    no_store(response.headers_mut());
    response
}

/// The error a request's execution ended with. A refusal for lack of
/// scopes also carries the [`InsufficientScope`] extension, from which the
/// auth layer in front writes the `WWW-Authenticate` challenge.
pub(crate) fn failed(id: &RequestId, failure: &ErrorObject, refusal: Option<InsufficientScope>) -> Response {
    let mut response = error(Some(id), failure);
    if let Some(refusal) = refusal {
        response.extensions_mut().insert(refusal);
    }
    response
}

/// An error that is not about a JSON-RPC message (413, 415), still with a
/// JSON-RPC body so clients can tell a modern server from an old one.
pub(crate) fn transport_error(status: StatusCode, code: i32, message: &str) -> Response {
    with_type(status, JSON, jsonrpc::failure(None, &ErrorObject::new(code, message)))
}

/// 429 with `Retry-After` (whole seconds, at least 1) and a JSON-RPC error
/// whose data carries the exact wait.
pub(crate) fn rate_limited(retry_after: Duration) -> Response {
    let seconds = retry_after.as_secs_f64().ceil().max(1.0) as u64;
    let error = ErrorObject::new(codes::RATE_LIMITED, "Rate limit exceeded; retry later")
        .with_data(serde_json::json!({ "retryAfterMs": retry_after.as_millis() as u64 }));
    let mut response = with_type(StatusCode::TOO_MANY_REQUESTS, JSON, jsonrpc::failure(None, &error));
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

/// 403 for a refused Host or Origin.
pub(crate) fn forbidden(message: &str) -> Response {
    transport_error(StatusCode::FORBIDDEN, codes::INVALID_REQUEST, message)
}

/// A plain-text response.
pub(crate) fn plain(status: StatusCode, message: &'static str) -> Response {
    with_type(status, "text/plain; charset=utf-8", message)
}

/// 202 for an accepted notification.
pub(crate) fn accepted() -> Response {
    StatusCode::ACCEPTED.into_response()
}

fn no_store(headers: &mut HeaderMap) {
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

/// A single JSON response for a finished request, with cache headers from
/// the caching `core` decided (`cache`, the policy its `ttlMs` and
/// `cacheScope` say; `None`: not to be reused, `no-store`).
pub(crate) fn json_result(
    id: &RequestId,
    result: &Finished,
    cache: Option<CachePolicy>,
    request_headers: &HeaderMap,
) -> Response {
    let Some(cache) = cache else {
        let mut response = with_type(StatusCode::OK, JSON, jsonrpc::finished(id, result));
        no_store(response.headers_mut());
        return response;
    };
    // The ETag covers the result, not the envelope: the id differs per request.
    let etag = etag(result);
    let not_modified = request_headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut response = if not_modified {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        with_type(StatusCode::OK, JSON, jsonrpc::finished(id, result))
    };
    let headers = response.headers_mut();
    let scope = cache.scope.as_str();
    let control = if cache.ttl.is_zero() {
        format!("no-cache, {scope}")
    } else {
        format!("max-age={}, {scope}", cache.ttl.as_secs())
    };
    if let Ok(value) = HeaderValue::from_str(&control) {
        headers.insert(header::CACHE_CONTROL, value);
    }
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    if cache.scope == CacheScope::Private {
        headers.insert(header::VARY, HeaderValue::from_static("authorization"));
    }
    response
}

/// The response to a finished execution as one JSON body.
pub(crate) fn finished(
    id: RequestId,
    execution: Execution,
    request_headers: &HeaderMap,
    keep_alive: Duration,
) -> Response {
    match execution {
        Execution::Result { result, cache } => json_result(&id, &result, cache, request_headers),
        Execution::Error { error, refusal } => failed(&id, &error, refusal),
        Execution::Listen(stream) => listen(id, stream, keep_alive),
    }
}

fn etag(result: &Finished) -> String {
    let mut bytes = Vec::new();
    result.write_canonical(&mut bytes);
    let digest = Sha256::digest(&bytes);
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// An SSE event whose data `write` appends: `capacity` bytes, or about.
/// (Exactly is cheaper: a `Vec` filled to its capacity becomes `Bytes`
/// without a second allocation for the shared count.)
fn sse_event_from(capacity: usize, write: impl FnOnce(&mut Vec<u8>)) -> Bytes {
    let mut event = Vec::with_capacity(capacity + 8);
    event.extend_from_slice(b"data: ");
    write(&mut event);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

fn sse_event(message: &[u8]) -> Bytes {
    sse_event_from(message.len(), |out| out.extend_from_slice(message))
}

/// One JSON-RPC message as an SSE event.
fn sse_message(message: &Value) -> Bytes {
    sse_event(&serde_json::to_vec(message).unwrap_or_default())
}

/// The end of a request's stream: whatever notifications are still queued,
/// then its final answer.
fn closing_events(outbox: &mut mpsc::Receiver<Value>, id: &RequestId, execution: Execution) -> VecDeque<Bytes> {
    let mut events = VecDeque::new();
    while let Ok(message) = outbox.try_recv() {
        events.push_back(sse_message(&message));
    }
    events.push_back(sse_event(&final_message(id, execution)));
    events
}

fn sse_response(stream: impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static) -> Response {
    let mut response = with_type(StatusCode::OK, EVENT_STREAM, Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // Proxies such as nginx must not buffer the stream.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

fn final_message(id: &RequestId, execution: Execution) -> Vec<u8> {
    match execution {
        Execution::Result { result, .. } => jsonrpc::finished(id, &result),
        Execution::Error { error, .. } => jsonrpc::failure(Some(id), &error),
        // A listen stream is never the result of a streamed ordinary request.
        Execution::Listen(_) => jsonrpc::failure(Some(id), &ErrorObject::internal()),
    }
}

type Running = Pin<Box<dyn std::future::Future<Output = Execution> + Send>>;

/// Waits for a request to finish. A listen request finishes at once with its
/// stream. If a request finishes before it sends anything, the answer is one
/// JSON body; if a notification comes first, the answer
/// becomes an SSE stream carrying the notifications and then the result.
/// Dropping the response (the client went away) drops the request: it is
/// cancelled.
pub(crate) async fn run(
    id: RequestId,
    mut running: Running,
    mut outbox: mpsc::Receiver<Value>,
    request_headers: &HeaderMap,
    keep_alive: Duration,
) -> Response {
    let first = tokio::select! {
        biased;
        execution = &mut running => {
            if outbox.is_empty() {
                return finished(id, execution, request_headers, keep_alive);
            }
            // Notifications sent just before the end still go out, before the result.
            let events = closing_events(&mut outbox, &id, execution);
            return sse_response(futures::stream::iter(events.into_iter().map(Ok)));
        }
        Some(message) = outbox.recv() => message,
    };
    enum State {
        Running { running: Running, outbox: mpsc::Receiver<Value>, id: RequestId },
        Flushing(VecDeque<Bytes>),
    }
    let head = sse_message(&first);
    let rest = futures::stream::unfold(State::Running { running, outbox, id }, |state| async move {
        match state {
            State::Running { mut running, mut outbox, id } => {
                tokio::select! {
                    biased;
                    Some(message) = outbox.recv() => {
                        Some((Ok(sse_message(&message)), State::Running { running, outbox, id }))
                    }
                    execution = &mut running => {
                        let mut events = closing_events(&mut outbox, &id, execution);
                        let first = events.pop_front()?;
                        Some((Ok(first), State::Flushing(events)))
                    }
                }
            }
            State::Flushing(mut events) => events.pop_front().map(|e| (Ok(e), State::Flushing(events))),
        }
    });
    sse_response(futures::stream::StreamExt::chain(futures::stream::once(async move { Ok(head) }), rest))
}

/// A listen stream as SSE: frames as they come, a comment line every
/// `keep_alive`, and the final result on a graceful end.
pub(crate) fn listen(id: RequestId, stream: ListenStream, keep_alive: Duration) -> Response {
    let mut ticker = tokio::time::interval(keep_alive);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let events = futures::stream::unfold(Some((stream, ticker, id, true)), |state| async move {
        let (mut stream, mut ticker, id, first) = state?;
        if first {
            ticker.reset(); // the first tick of an interval fires at once
        }
        tokio::select! {
            biased;
            frame = stream.next() => match frame {
                Some(ListenFrame::Notification(message)) => {
                    let event = sse_event_from(message.encoded_len(), |out| message.write_to(out));
                    Some((Ok(event), Some((stream, ticker, id, false))))
                }
                Some(ListenFrame::Final(result)) => Some((Ok(sse_event(&jsonrpc::success(&id, &result))), None)),
                None => None,
            },
            _ = ticker.tick() => Some((Ok(Bytes::from_static(b":\n\n")), Some((stream, ticker, id, false)))),
        }
    });
    sse_response(events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_table() {
        assert_eq!(status_of(codes::METHOD_NOT_FOUND), StatusCode::NOT_FOUND);
        assert_eq!(status_of(codes::UNSUPPORTED_PROTOCOL_VERSION), StatusCode::BAD_REQUEST);
        assert_eq!(status_of(codes::INTERNAL_ERROR), StatusCode::OK);
    }

    #[test]
    fn cache_headers_follow_ttl_and_scope() {
        let id = RequestId::Number(1);
        let headers = HeaderMap::new();
        let public =
            Finished::plain(json!({"resultType": "complete", "ttlMs": 60000, "cacheScope": "public", "tools": []}));
        let minute = Some(CachePolicy::new(Duration::from_secs(60), CacheScope::Public));
        let response = json_result(&id, &public, minute, &headers);
        assert_eq!(response.headers()[header::CACHE_CONTROL], "max-age=60, public");
        assert!(response.headers().get(header::VARY).is_none());
        let etag = response.headers()[header::ETAG].clone();

        let mut conditional = HeaderMap::new();
        conditional.insert(header::IF_NONE_MATCH, etag);
        assert_eq!(
            json_result(&RequestId::Number(2), &public, minute, &conditional).status(),
            StatusCode::NOT_MODIFIED
        );

        let private = Finished::plain(json!({"resultType": "complete", "ttlMs": 0, "cacheScope": "private"}));
        let response =
            json_result(&id, &private, Some(CachePolicy::new(Duration::ZERO, CacheScope::Private)), &headers);
        assert_eq!(response.headers()[header::CACHE_CONTROL], "no-cache, private");
        assert_eq!(response.headers()[header::VARY], "authorization");

        // What core does not let be reused (an MRTR retry, a tool result,
        // whatever its body says) is not cached.
        assert_eq!(json_result(&id, &public, None, &headers).headers()[header::CACHE_CONTROL], "no-store");
    }
}
