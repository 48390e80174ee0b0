//! [`McpClient::listen`]: the upstream's own `subscriptions/listen` stream,
//! read under the bounds on each event and on its silence.

use std::ops::ControlFlow;

use futures::StreamExt as _;
use serde_json::{Map, Value, json};
use switchyard_protocol::method::request;

use super::wire::{Outgoing, RequestMeta, WithMeta};
use super::{CallError, Era, McpClient};
use crate::sse::SseBuffer;

impl McpClient {
    /// Opens the upstream's `subscriptions/listen` stream for list changes
    /// and updates of the resources `subscriptions` names, and calls
    /// `on_event` for each event on it (with the message, `None` for
    /// anything else: comments, events without a message),
    /// until the stream ends, `on_event` breaks, or the stream stays silent
    /// (not even a keep-alive) for `listen_idle_timeout`. Only for stateless
    /// upstreams.
    ///
    /// # Errors
    /// When the stream cannot be opened in time, breaks, or breaks a bound.
    pub async fn listen(
        &self,
        subscriptions: &[String],
        mut on_event: impl FnMut(Option<&Value>) -> ControlFlow<()>,
    ) -> Result<(), CallError> {
        let era = Era::Stateless;
        let mut notifications =
            json!({"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true});
        if !subscriptions.is_empty() {
            notifications["resourceSubscriptions"] = json!(subscriptions);
        }
        let params = Map::from_iter([("notifications".to_owned(), notifications)]);
        // A stateless request's `_meta`, as every other request of ours states it.
        let meta = RequestMeta::new(true);
        let listen =
            Outgoing::new(Some(json!(self.id())), request::LISTEN, Some(WithMeta { params: &params, meta: &meta }))?;
        let opening = async {
            let headers = self.headers(&era, request::LISTEN, None, None).await?;
            let sent =
                self.http.post(self.spec.url.clone()).headers(headers.into_map()).body(listen.text.clone()).send();
            sent.await.map_err(|e| CallError::Transport(switchyard_core::error::chain(&e)))
        };
        let response = tokio::time::timeout(self.spec.timeout, opening)
            .await
            .map_err(|_| CallError::Timeout(self.spec.timeout))??;
        if !response.status().is_success() {
            return Err(CallError::Transport(format!("listen answered HTTP {}", response.status())));
        }
        let mut events = SseBuffer::new(self.limits.max_message_bytes, self.limits.max_message_values);
        let mut stream = response.bytes_stream();
        loop {
            let Ok(chunk) = tokio::time::timeout(self.limits.listen_idle_timeout, stream.next()).await else {
                return Err(CallError::Timeout(self.limits.listen_idle_timeout));
            };
            let Some(chunk) = chunk else { return Ok(()) };
            let chunk = chunk.map_err(|e| CallError::Transport(switchyard_core::error::chain(&e)))?;
            let before = events.events();
            let messages = events.push(&chunk).map_err(|e| self.sse_refused(e))?;
            // Every event counts, not only notifications: comments and other
            // messages cost reading too.
            let others = (events.events() - before).saturating_sub(messages.len());
            for _ in 0..others {
                if on_event(None).is_break() {
                    return Ok(());
                }
            }
            for message in messages.iter().map(|m| &m.value) {
                if message.get("id") == listen.id.as_ref() {
                    return Ok(()); // the listen result: the upstream is shutting the stream
                }
                if on_event(Some(message)).is_break() {
                    return Ok(());
                }
            }
        }
    }
}
