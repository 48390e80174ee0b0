//! Reading an upstream's answer: an SSE stream up to the response to our
//! request (what comes before it relayed), or a JSON body, under the bounds.

use futures::StreamExt as _;
use serde_json::Value;

use super::{CallError, McpClient, Relay, Weight};
use crate::limits::Bound;
use crate::sse::{SseBuffer, SseError};

impl McpClient {
    /// The response to request `id` on an SSE answer, read under the bounds
    /// on each event and on the whole stream, with what it took; what comes
    /// before it goes to `relay`, if any, in order.
    pub(super) async fn reply_from_events(
        &self,
        response: reqwest::Response,
        id: &Value,
        relay: Option<&Relay<'_>>,
    ) -> Result<(Value, Weight), CallError> {
        let status = response.status();
        let mut events = SseBuffer::new(self.limits.max_message_bytes, self.limits.max_message_values);
        let mut read = 0_usize;
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| CallError::Transport(switchyard_core::error::chain(&e)))?;
            read = read.saturating_add(chunk.len());
            // Progress and log messages are relayed; the upstream's own
            // requests on the stream are not (yet).
            for message in events.push(&chunk).map_err(|e| self.sse_refused(e))? {
                if &message.value["id"] == id && message.value.get("method").is_none() {
                    return Ok((message.value, Weight { bytes: read, values: message.values }));
                }
                if let Some(relay) = relay {
                    relay.pass(&message.value, id).await;
                }
            }
            if read > self.limits.max_stream_bytes {
                return Err(self.refused(
                    Bound::StreamBytes,
                    format!("the SSE answer exceeds {} bytes without a response", self.limits.max_stream_bytes),
                ));
            }
        }
        Err(CallError::Transport(format!("the SSE stream (HTTP {status}) ended without a response")))
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
pub(super) async fn read_capped(response: reqwest::Response, cap: usize) -> Result<Option<Vec<u8>>, CallError> {
    if response.content_length().is_some_and(|length| length > cap as u64) {
        return Ok(None);
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| CallError::Transport(switchyard_core::error::chain(&e)))?;
        if body.len() + chunk.len() > cap {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}
