//! Reading an upstream's answer: an SSE stream up to the response to our
//! request (what comes before it relayed, or a request of the upstream's to
//! our client), or a JSON body, under the bounds.

use std::collections::VecDeque;

use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use serde_json::Value;
use switchyard_protocol::method::input;

use super::asked::Interrupted;
use super::relay::Passes;
use super::wire::Response;
use super::{CallError, Era, McpClient, Relay, Weight};
use crate::limits::{Bound, UpstreamLimits};
use crate::sse::{Message, SseBuffer, SseError};

/// An SSE answer being read: the stream, what of it is buffered, and the
/// messages taken out of it but not yet looked at (a chunk can hold several).
pub(crate) struct EventReader {
    stream: BoxStream<'static, Result<Bytes, CallError>>,
    events: SseBuffer,
    queued: VecDeque<Message>,
    read: usize,
    status: reqwest::StatusCode,
}

impl EventReader {
    fn new(response: Response, limits: &UpstreamLimits) -> Self {
        Self {
            status: response.status(),
            stream: response.chunks().boxed(),
            events: SseBuffer::new(limits.max_message_bytes, limits.max_message_values),
            queued: VecDeque::new(),
            read: 0,
        }
    }
}

/// What reading an SSE answer came to.
pub(crate) enum Turn {
    /// The response to our request, with what it took.
    Answer(Value, Weight),
    /// A request of the upstream's to our client (elicitation, sampling,
    /// roots), which the upstream's call now waits on.
    Asked(Value),
}

impl McpClient {
    /// The response to request `id` on an SSE answer, read under the bounds
    /// on each event and on the whole stream, with what it took; what comes
    /// before it goes to `relay`, if any, in order. A 2025-era upstream's
    /// request to our client, when `relay` can take one, ends the read: the
    /// rest of the stream waits in `relay` ([`CallError::Asked`]).
    pub(super) async fn reply_from_events(
        &self,
        response: Response,
        id: &Value,
        relay: Option<&Relay<'_>>,
        era: &Era,
    ) -> Result<(Value, Weight), CallError> {
        let mut reader = EventReader::new(response, &self.limits);
        let waiting =
            relay.filter(|relay| relay.may_be_asked() && matches!(era, Era::Session { session: Some(_), .. }));
        let passes = relay.map(|relay| relay as &dyn Passes);
        match self.next_turn(&mut reader, id, passes, waiting.is_some()).await? {
            Turn::Answer(message, weight) => Ok((message, weight)),
            Turn::Asked(request) => {
                if let Some(relay) = waiting {
                    relay.asked(Interrupted::new(reader, request, id.clone(), era.clone()));
                }
                Err(CallError::Asked)
            }
        }
    }

    /// Reads on until the response to request `id` (or, when `may_ask`,
    /// a request of the upstream's to our client); what comes before goes
    /// to `relay`, if any.
    pub(super) async fn next_turn(
        &self,
        reader: &mut EventReader,
        id: &Value,
        relay: Option<&dyn Passes>,
        may_ask: bool,
    ) -> Result<Turn, CallError> {
        loop {
            while let Some(message) = reader.queued.pop_front() {
                if &message.value["id"] == id && message.value.get("method").is_none() {
                    return Ok(Turn::Answer(message.value, Weight { bytes: reader.read, values: message.values }));
                }
                if may_ask && message.value.get("id").is_some() && asks_our_client(&message.value) {
                    return Ok(Turn::Asked(message.value));
                }
                if let Some(relay) = relay {
                    relay.pass(&message.value, id).await;
                }
            }
            if reader.read > self.limits.max_stream_bytes {
                return Err(self.refused(
                    Bound::StreamBytes,
                    format!("the SSE answer exceeds {} bytes without a response", self.limits.max_stream_bytes),
                ));
            }
            let Some(chunk) = reader.stream.next().await else {
                let status = reader.status;
                return Err(CallError::Transport(format!("the SSE stream (HTTP {status}) ended without a response")));
            };
            let chunk = chunk?;
            reader.read = reader.read.saturating_add(chunk.len());
            let messages = reader.events.push(&chunk).map_err(|e| self.sse_refused(e))?;
            reader.queued.extend(messages);
        }
    }

    /// An SSE event that broke a bound, counted, as the [`CallError`] naming it.
    pub(super) fn sse_refused(&self, error: SseError) -> CallError {
        let bound = match error {
            SseError::EventTooLarge(_) => Bound::MessageBytes,
            SseError::EventTooDense(_) => Bound::MessageValues,
        };
        self.refused(bound, error.to_string())
    }
}

/// The whole body of `response`, or `None` as soon as it is known to
/// exceed `cap` bytes: from its `Content-Length` before reading, or while
/// reading (the rest is not read).
pub(super) async fn read_capped(response: Response, cap: usize) -> Result<Option<Vec<u8>>, CallError> {
    if response.content_length().is_some_and(|length| length > cap as u64) {
        return Ok(None);
    }
    let mut body = Vec::new();
    let mut stream = std::pin::pin!(response.chunks());
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        if body.len() + chunk.len() > cap {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// Whether `message` is a request our client can be asked to answer: what
/// a 2025-era upstream sends on a call's stream when its tool needs input.
fn asks_our_client(message: &Value) -> bool {
    matches!(message["method"].as_str(), Some(input::ELICIT | input::CREATE_MESSAGE | input::LIST_ROOTS))
}
