//! What goes on the wire for [`McpClient`]: the headers every request to
//! an upstream carries (content negotiation, the revision, `Mcp-Method` and
//! `Mcp-Name`, our credentials, never the caller's), one POST with its
//! cancel notice armed for a 2025-era session (on our HTTP/1.1 connections
//! to an `http` upstream, on the connection of one marked `h2c`, or through
//! reqwest's pool to an `https` one: [`Response`] is any of the three
//! answers), and the answer read under the operator's bounds (JSON, or the
//! call's SSE stream).

use bytes::Bytes;
use futures::future::Either;
use futures::{Stream, StreamExt as _};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde::ser::{Serialize, SerializeMap as _, Serializer};
use serde_json::{Map, Value};
use switchyard_core::Caller;
use switchyard_protocol::method::request;
use switchyard_protocol::{headers, meta, version};

use super::answer::read_capped;
use super::cancel::CancelOnDrop;
use super::h2c::H2cResponse;
use super::http1::{Body, Http1Response};
use super::request_headers::RequestHeaders;
use super::{Answer, CallError, Era, McpClient, Relay, Weight};
use crate::counted::{self, Unparsed};
use crate::limits::Bound;

/// The headers every request to one upstream starts from, made once: those
/// of any era (content negotiation, our static credential), and those of a
/// stateless request (the revision too). A request's own are kept beside
/// them ([`RequestHeaders`]): our HTTP/1.1 connections write both as they
/// are, and only the transports that take a map clone them into one (#18).
pub(super) struct HeaderBase {
    any: HeaderMap,
    stateless: HeaderMap,
}

impl HeaderBase {
    /// With `credential`, the static header of the spec's `auth.header`, if any.
    pub(super) fn new(credential: Option<(HeaderName, HeaderValue)>) -> Self {
        let mut any = HeaderMap::new();
        any.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        any.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        if let Some((name, value)) = credential {
            any.insert(name, value);
        }
        let mut stateless = any.clone();
        stateless.insert(headers::PROTOCOL_VERSION, HeaderValue::from_static(version::LATEST));
        Self { any, stateless }
    }
}

/// The protocol's header names a request may carry, made when compiled
/// (`HeaderName::from_static` at run time checks each byte).
const METHOD: HeaderName = HeaderName::from_static(headers::METHOD);
const NAME: HeaderName = HeaderName::from_static(headers::NAME);
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static(headers::PROTOCOL_VERSION);
const SESSION_ID: HeaderName = HeaderName::from_static(headers::SESSION_ID);

impl McpClient {
    /// Headers every request carries: content negotiation, the revision, and
    /// our credentials (for `caller`, when made on a caller's behalf).
    /// The protocol's own headers (the revision, `Mcp-Method`, `Mcp-Name`,
    /// the session) are set after the static credential, so a credential
    /// header of the same name (which nobody means) cannot replace them.
    pub(super) async fn headers(
        &self,
        era: &Era,
        method: &str,
        name: Option<&str>,
        caller: Option<&Caller>,
    ) -> Result<RequestHeaders<'_>, CallError> {
        let value = |s: &str| {
            HeaderValue::from_str(s).map_err(|_| CallError::Transport(format!("{s:?} cannot be sent in a header")))
        };
        let mut request_headers = match era {
            Era::Stateless | Era::Unknown => {
                let mut request_headers = RequestHeaders::new(&self.header_base.stateless);
                request_headers.insert(METHOD, value(method)?);
                if let Some(name) = name {
                    request_headers.insert(NAME, value(&headers::encode_value(name))?);
                }
                request_headers
            }
            Era::Session { version, session } => {
                let mut request_headers = RequestHeaders::new(&self.header_base.any);
                if method != request::INITIALIZE {
                    request_headers.insert(PROTOCOL_VERSION, value(version)?);
                }
                if let Some(session) = session {
                    request_headers.insert(SESSION_ID, value(session)?);
                }
                request_headers
            }
        };
        if let Some(token) = self.access_token(caller).await? {
            let mut bearer = value(&format!("Bearer {token}"))?;
            bearer.set_sensitive(true);
            request_headers.insert(reqwest::header::AUTHORIZATION, bearer);
        }
        Ok(request_headers)
    }

    /// POSTs one message; returns the response to it (matched by id; `Null`
    /// for a notification) and any session id the upstream minted.
    pub(super) async fn post(
        &self,
        era: &Era,
        method: &str,
        name: Option<&str>,
        extra: &[(String, String)],
        message: &Outgoing,
        relay: Option<&Relay<'_>>,
    ) -> Result<Answer, CallError> {
        let caller = relay.map(Relay::caller);
        let mut request_headers = self.headers(era, method, name, caller).await?;
        for (key, value) in extra {
            if let (Ok(key), Ok(value)) = (HeaderName::from_bytes(key.as_bytes()), HeaderValue::from_str(value)) {
                request_headers.insert(key, value);
            }
        }
        let cancel = match era {
            Era::Session { session: Some(_), .. } if method != request::INITIALIZE => match &message.id {
                Some(id) => CancelOnDrop::armed(&self.http, &self.spec.url, request_headers.to_map(), id),
                None => CancelOnDrop::unarmed(),
            },
            _ => CancelOnDrop::unarmed(),
        };
        let answer = self.exchange(era, method, request_headers, message, relay, caller).await;
        match (&answer, relay) {
            // The call goes on, waiting for our client: cancelled if never answered.
            (Err(CallError::Asked), Some(relay)) => relay.cancel_asked_with(cancel),
            // Answered, or failed on the upstream's side or the wire: nothing is left to cancel.
            _ => cancel.disarm(),
        }
        answer
    }

    /// [`McpClient::post`] once its headers are made.
    async fn exchange(
        &self,
        era: &Era,
        method: &str,
        request_headers: RequestHeaders<'_>,
        message: &Outgoing,
        relay: Option<&Relay<'_>>,
        caller: Option<&Caller>,
    ) -> Result<Answer, CallError> {
        let response = match (&self.h2c, &self.http1) {
            (Some(h2c), _) => Response::H2c(h2c.post(|| request_headers.to_map(), message.text.clone()).await?),
            (None, Some(http1)) => Response::Http1(http1.post(request_headers.iter(), message.text.clone()).await?),
            (None, None) => Response::Pooled(
                self.http
                    .post(self.spec.url.clone())
                    .headers(request_headers.into_map())
                    .body(message.text.clone())
                    .send()
                    .await
                    .map_err(|e| CallError::Transport(switchyard_core::error::chain(&e)))?,
            ),
        };
        let status = response.status();
        let session = response.session();
        // Whatever the body says: the Python SDK, for one, sends a JSON-RPC
        // error with its 404, which would otherwise read as the upstream's answer.
        if status == reqwest::StatusCode::NOT_FOUND && matches!(era, Era::Session { session: Some(_), .. }) {
            return Err(CallError::SessionLost);
        }
        // Its body is not read: a failing upstream is not trusted to end it.
        if status.is_server_error() {
            return Err(CallError::Transport(format!("HTTP {status}")));
        }
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            self.forget_token(caller).await; // a fresh token next time
            return Err(CallError::Credentials(format!("the upstream answered {status}")));
        }
        let Some(id) = &message.id else {
            return if status.is_success() {
                Ok(Answer { message: Value::Null, result_text: None, session, weight: Weight::default() })
            } else {
                Err(CallError::Transport(format!("HTTP {status}")))
            };
        };
        let (reply, result_text, weight) = if response.is_event_stream() {
            let (reply, weight) = self.reply_from_events(response, id, relay, era).await?;
            (reply, None, weight)
        } else {
            let cap = self.limits.max_message_bytes;
            let bytes = read_capped(response, cap)
                .await?
                .ok_or_else(|| self.refused(Bound::MessageBytes, format!("a JSON answer exceeds {cap} bytes")))?;
            // A tool's result goes on to our client as it came, when it can
            // (#18); a task's is built at once, rather than scanned as text first.
            let keeps_text = method == request::TOOLS_CALL && relay.is_some_and(|relay| relay.takes_result_text());
            let parse = if keeps_text { counted::parse_keeping_text } else { counted::parse_built };
            let parsed = parse(&bytes, self.limits.max_message_values).map_err(|unparsed| match unparsed {
                Unparsed::Dense => {
                    let detail = format!("a JSON answer holds more than {} values", self.limits.max_message_values);
                    self.refused(Bound::MessageValues, detail)
                }
                Unparsed::NotJson(e) => CallError::Transport(format!("HTTP {status}: the answer is not JSON ({e})")),
            })?;
            (parsed.message, parsed.result, Weight { bytes: bytes.len(), values: parsed.values })
        };
        if result_text.is_some() || reply.get("result").is_some() || reply.get("error").is_some() {
            Ok(Answer { message: reply, result_text, session, weight })
        } else {
            Err(CallError::Transport(format!("HTTP {status} without a JSON-RPC response")))
        }
    }
}

/// A message on its way to an upstream: its JSON text, and the id an answer
/// to it carries (none for a notification).
pub(super) struct Outgoing {
    pub(super) id: Option<Value>,
    pub(super) text: Bytes,
}

impl Outgoing {
    /// `method` with `params`: a request under `id`, or a notification.
    /// Written straight from its parts, not first built as a `Value`
    /// whose members are allocated, ordered, written and dropped (#18).
    /// Not through `to_string` either: `Display` writes through the
    /// formatting machinery, which was 2.5% of an upstream call's CPU.
    pub(super) fn new<P: Serialize>(id: Option<Value>, method: &str, params: Option<P>) -> Result<Self, CallError> {
        #[derive(serde::Serialize)]
        struct Message<'a, P> {
            jsonrpc: &'static str,
            #[serde(skip_serializing_if = "Option::is_none")]
            id: Option<&'a Value>,
            method: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            params: Option<P>,
        }
        let message = Message { jsonrpc: "2.0", id: id.as_ref(), method, params };
        let text = serde_json::to_vec(&message)
            .map_err(|e| CallError::Transport(format!("the request cannot be written as JSON: {e}")))?;
        Ok(Self { id, text: Bytes::from(text) })
    }
}

/// What a request tells its upstream in `_meta`, written with the request
/// rather than first built as a map of its own whose keys are allocated,
/// ordered and dropped (#18: on an upstream's `echo`, that map and its
/// insertion into the parameters were about 1,100 of the 94,700
/// instructions a call cost the front).
#[derive(Debug, Default)]
pub(super) struct RequestMeta {
    /// A stateless request's client capabilities, beside the revision it
    /// states; `None` for a request in a 2025-era session, which states
    /// neither.
    pub(super) capabilities: Option<Map<String, Value>>,
    /// Progress asked for, under this token.
    pub(super) progress_token: Option<Value>,
    /// Log messages asked for, from this level.
    pub(super) log_level: Option<&'static str>,
    /// Our span's W3C `traceparent` and `tracestate`.
    pub(super) trace: Option<(String, Option<String>)>,
}

impl RequestMeta {
    /// A request's `_meta`: a `stateless` one states the revision and (as
    /// yet) no client capabilities; one in a 2025-era session, neither.
    pub(super) fn new(stateless: bool) -> Self {
        Self { capabilities: stateless.then(Map::new), ..Self::default() }
    }

    fn is_empty(&self) -> bool {
        self.capabilities.is_none() && self.progress_token.is_none() && self.log_level.is_none() && self.trace.is_none()
    }
}

impl Serialize for RequestMeta {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if let Some(capabilities) = &self.capabilities {
            map.serialize_entry(meta::PROTOCOL_VERSION, version::LATEST)?;
            map.serialize_entry(meta::CLIENT_CAPABILITIES, capabilities)?;
        }
        if let Some(token) = &self.progress_token {
            map.serialize_entry(meta::PROGRESS_TOKEN, token)?;
        }
        if let Some(level) = self.log_level {
            map.serialize_entry(meta::LOG_LEVEL, level)?;
        }
        if let Some((traceparent, tracestate)) = &self.trace {
            map.serialize_entry(meta::TRACEPARENT, traceparent)?;
            if let Some(tracestate) = tracestate {
                map.serialize_entry(meta::TRACESTATE, tracestate)?;
            }
        }
        map.end()
    }
}

/// A request's parameters with its [`RequestMeta`] as their `_meta`, written
/// as one object; when ours says nothing, `_meta` is left to the parameters.
pub(super) struct WithMeta<'a> {
    pub(super) params: &'a Map<String, Value>,
    pub(super) meta: &'a RequestMeta,
}

impl Serialize for WithMeta<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        let ours = !self.meta.is_empty();
        for (key, value) in self.params {
            // Ours replaces any the parameters had.
            if !(ours && key == meta::META) {
                map.serialize_entry(key, value)?;
            }
        }
        if ours {
            map.serialize_entry(meta::META, self.meta)?;
        }
        map.end()
    }
}

/// An upstream's answer to a POST, by whichever way it came: reqwest's pool
/// (`https`), the connection of an upstream marked `h2c`, or one of our
/// HTTP/1.1 connections, given back once the answer is read to its end.
pub(super) enum Response {
    Pooled(reqwest::Response),
    H2c(H2cResponse),
    Http1(Http1Response),
}

impl Response {
    pub(super) fn status(&self) -> StatusCode {
        match self {
            Self::Pooled(response) => response.status(),
            Self::H2c(response) => response.status(),
            Self::Http1(response) => response.status,
        }
    }

    /// Its `Mcp-Session-Id`, if that is text.
    pub(super) fn session(&self) -> Option<String> {
        let headers = match self {
            Self::Pooled(response) => response.headers(),
            Self::H2c(response) => response.headers(),
            Self::Http1(response) => return response.session.clone(),
        };
        headers.get(headers::SESSION_ID).and_then(|v| v.to_str().ok()).map(str::to_owned)
    }

    /// Whether its `Content-Type` is `text/event-stream`.
    pub(super) fn is_event_stream(&self) -> bool {
        let headers = match self {
            Self::Pooled(response) => response.headers(),
            Self::H2c(response) => response.headers(),
            Self::Http1(response) => return response.event_stream,
        };
        headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("text/event-stream"))
    }

    /// The length its head announces for its body (for an HTTP/1.1 answer,
    /// the one its framing uses: 0 for a 204 or 304).
    pub(super) fn content_length(&self) -> Option<u64> {
        match self {
            Self::Pooled(response) => response.content_length(),
            Self::H2c(response) => announced_length(response.headers()),
            Self::Http1(response) => response.length,
        }
    }

    /// Its body, chunk by chunk as it arrives; a failure ends it.
    pub(super) fn chunks(self) -> impl Stream<Item = Result<Bytes, CallError>> + Send + 'static {
        match self {
            Self::Pooled(response) => {
                Either::Left(response.bytes_stream().map(move |chunk| chunk.map_err(|e| transport(&e))))
            }
            Self::Http1(response) => Either::Right(Either::Left(http1_chunks(response.body))),
            Self::H2c(response) => {
                Either::Right(Either::Right(futures::stream::unfold(
                    Some(response.into_body()),
                    move |body| async move {
                        let mut body = body?;
                        match body.data().await? {
                            Ok(chunk) => {
                                // What was read may be sent again: the window is what
                                // this reader has not yet taken, never the whole answer.
                                let _ = body.flow_control().release_capacity(chunk.len());
                                Some((Ok(chunk), Some(body)))
                            }
                            Err(e) => Some((Err(transport(&e)), None)),
                        }
                    },
                )))
            }
        }
    }
}

/// A failure reading an answer's body.
fn transport(error: &dyn std::error::Error) -> CallError {
    CallError::Transport(switchyard_core::error::chain(error))
}

/// The length a head announces.
fn announced_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

/// The chunks of an answer that came on one of our HTTP/1.1 connections,
/// which its body gives back once the last is read (`client::http1`).
fn http1_chunks(body: Body) -> impl Stream<Item = Result<Bytes, CallError>> + Send + 'static {
    futures::stream::unfold(body, |mut body| async move { Some((body.next().await?, body)) })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_message_is_written_as_json_rpc_with_its_id_and_parameters_only_when_it_has_them() {
        let request = Outgoing::new(Some(json!(7)), "tools/call", Some(&json!({"name": "echo"}))).unwrap();
        let text: Value = serde_json::from_slice(&request.text).unwrap();
        assert_eq!(text, json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "echo"}}));
        assert_eq!(request.id, Some(json!(7)));
        let notification = Outgoing::new(None, "notifications/initialized", None::<Value>).unwrap();
        assert_eq!(&notification.text[..], br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert_eq!(notification.id, None);
    }

    #[test]
    fn a_request_s_meta_is_written_with_its_parameters() {
        let written = |params: Value, meta: &RequestMeta| {
            let params = params.as_object().unwrap();
            let request = Outgoing::new(Some(json!(1)), "tools/call", Some(WithMeta { params, meta })).unwrap();
            serde_json::from_slice::<Value>(&request.text).unwrap()["params"].take()
        };
        // Stateless: the revision and the capabilities, none by default.
        let stateless = RequestMeta::new(true);
        assert_eq!(
            written(json!({"name": "echo"}), &stateless),
            json!({"name": "echo", "_meta": {meta::PROTOCOL_VERSION: version::LATEST, meta::CLIENT_CAPABILITIES: {}}})
        );
        // In a 2025-era session with nothing asked, no `_meta` at all, and
        // one the parameters had stays; once ours says something, it is ours.
        let session = RequestMeta::new(false);
        assert_eq!(written(json!({"uri": "a://b"}), &session), json!({"uri": "a://b"}));
        assert_eq!(written(json!({"_meta": {"k": 1}}), &session), json!({"_meta": {"k": 1}}));
        let asked = RequestMeta {
            capabilities: Some(json!({"roots": {}}).as_object().unwrap().clone()),
            progress_token: Some(json!(9)),
            log_level: Some("info"),
            trace: Some(("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(), Some("k=v".into()))),
        };
        assert_eq!(
            written(json!({"name": "echo", "_meta": {"k": 1}}), &asked),
            json!({"name": "echo", "_meta": {
                meta::PROTOCOL_VERSION: version::LATEST,
                meta::CLIENT_CAPABILITIES: {"roots": {}},
                meta::PROGRESS_TOKEN: 9,
                meta::LOG_LEVEL: "info",
                meta::TRACEPARENT: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                meta::TRACESTATE: "k=v",
            }})
        );
    }

    #[test]
    fn the_protocol_s_headers_are_not_replaced_by_a_credential_of_the_same_name() {
        let credential = (HeaderName::from_static(headers::PROTOCOL_VERSION), HeaderValue::from_static("secret"));
        let base = HeaderBase::new(Some(credential));
        assert_eq!(base.stateless[headers::PROTOCOL_VERSION], version::LATEST);
        assert_eq!(base.stateless[CONTENT_TYPE], "application/json");
        // A session's revision is set per request, after the credential too.
        assert_eq!(base.any[headers::PROTOCOL_VERSION], "secret");
        let base = HeaderBase::new(Some((HeaderName::from_static("x-api-key"), HeaderValue::from_static("k"))));
        assert_eq!(base.any["x-api-key"], "k");
        assert_eq!(base.stateless["x-api-key"], "k");
    }
}
