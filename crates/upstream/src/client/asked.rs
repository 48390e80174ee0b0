//! A 2025-era upstream that asks our client something in the middle of a
//! tool call (`elicitation/create`, `sampling/createMessage`, `roots/list` on
//! the call's stream) and waits for the answer, which it expects POSTed in
//! its session.
//!
//! Our client answers by another request: a retry with `inputResponses` (a
//! 2026-07-28 client), or, for a 2025-era one, an answer on its own stream
//! that our server turns into the same retry. Meanwhile the upstream's call
//! stays open here, parked: its stream's reader, the request it asked, and
//! the notice that cancels it if nobody answers ([`Interrupted`]). The
//! retry POSTs the answer to the upstream and reads on, to the result or to
//! the next question.
//!
//! The parked call lives on the replica that made it, in its
//! [`crate::Parking`]; a retry that lands on another replica reaches it over the
//! bus. Parked calls are bounded, and let go after a while (the upstream is
//! then told the call was cancelled).

use std::sync::Arc;

use serde_json::{Map, Value, json};
use switchyard_core::{CallContext, Caller};
use switchyard_protocol::Produced;

use super::answer::{EventReader, Turn};
use super::cancel::CancelOnDrop;
use super::relay::Passes;
use super::{CallError, Era, McpClient, Relay, Weight};

/// An upstream call that waits for our client's answer to `request`.
pub(crate) struct Interrupted {
    reader: EventReader,
    /// The upstream's request to our client, as it sent it.
    request: Value,
    /// Our request's id: the call's response comes under it.
    id: Value,
    /// The session the answer must be POSTed in.
    era: Era,
    /// Tells the upstream the call is cancelled if this is dropped unanswered.
    cancel: CancelOnDrop,
}

impl Interrupted {
    pub(super) fn new(reader: EventReader, request: Value, id: Value, era: Era) -> Self {
        Self { reader, request, id, era, cancel: CancelOnDrop::unarmed() }
    }

    /// The notice to send if the call is never answered.
    pub(super) fn cancel_with(&mut self, cancel: CancelOnDrop) {
        self.cancel = cancel;
    }

    /// The upstream's question as ours, the call parked under `parked`.
    pub(crate) fn asked(&self, parked: String) -> Reply {
        Reply::Asked {
            parked,
            key: self.key(),
            request: json!({"method": self.request["method"], "params": self.request["params"]}),
        }
    }

    /// The key our client answers the upstream's request under.
    fn key(&self) -> String {
        let id = match &self.request["id"] {
            Value::String(id) => id.clone(),
            other => other.to_string(),
        };
        // At most 60 characters of it: 240 bytes at most, within a key's bound.
        format!("upstream-{}", id.chars().take(60).collect::<String>())
    }
}

/// What a relayed tool call came to.
pub(crate) enum Reply {
    /// The upstream's result, with what it took.
    Answer(Produced, Weight),
    /// The upstream asked our client `request` (`{method, params}`) under
    /// `key`, and waits, parked under `parked`.
    Asked { parked: String, key: String, request: Value },
}

impl McpClient {
    /// A tool call (or any request) on behalf of `cx`, as
    /// [`McpClient::request_relayed`], except that a 2025-era upstream's
    /// request to our client parks the call and is returned, to be answered
    /// through [`McpClient::resume`].
    ///
    /// # Errors
    /// See [`CallError`].
    pub(crate) async fn request_interruptible(
        self: &Arc<Self>,
        method: &str,
        params: Map<String, Value>,
        name: Option<&str>,
        extra: &[(String, String)],
        cx: &CallContext,
    ) -> Result<Reply, CallError> {
        let relay = Relay::to(cx).may_ask();
        match self.bounded(method, params, name, extra, Some(cx.deadline()), Some(&relay)).await {
            Ok((result, weight)) => Ok(Reply::Answer(result, weight)),
            Err(CallError::Asked) => {
                let call = relay.take_asked().ok_or_else(|| CallError::Transport("a question went missing".into()))?;
                self.parking.park(self, call, cx.caller())
            }
            Err(error) => Err(error),
        }
    }

    /// Answers the question the call parked under `parked` waits on with
    /// `answers` (our client's `inputResponses`), here or, over the bus, on
    /// the replica where it waits, and returns how it went on: the
    /// upstream's result or its next question (parked anew).
    ///
    /// # Errors
    /// [`CallError::Parked`] when no call waits under `parked` for this caller.
    pub(crate) async fn resume(
        self: &Arc<Self>,
        parked: &str,
        answers: &Map<String, Value>,
        cx: &CallContext,
    ) -> Result<Reply, CallError> {
        let deadline = tokio::time::Instant::from_std(cx.deadline());
        let caller = cx.caller().accounting_key();
        if !self.parking.is_here(parked) {
            return self.parking.answer_elsewhere(parked, &caller, answers, deadline, &Relay::to(cx)).await;
        }
        let Some(waiting) = self.parking.take(parked, &caller) else {
            return Err(CallError::Parked(
                "the upstream's call no longer waits for this answer: it waited too long".into(),
            ));
        };
        // The client the call was made by: the plugin may have been rebuilt since.
        let Some(client) = waiting.client.upgrade() else {
            return Err(CallError::Parked("the upstream was changed or removed while its call waited".into()));
        };
        client.go_on(waiting.call, cx.caller(), answers, deadline, Some(&Relay::to(cx))).await
    }

    /// Lets go of the call parked under `parked`: the upstream is told it is
    /// cancelled.
    pub(crate) fn let_go(&self, parked: &str) {
        self.parking.let_go(parked);
    }

    /// POSTs `caller`'s answer from `answers` to the question `call` waits
    /// on, and reads on until `deadline`, passing what comes to `relay`
    /// (the call's client, or the replica its retry landed on).
    /// Without an answer to it, the same question is asked again.
    pub(crate) async fn go_on(
        self: &Arc<Self>,
        mut call: Interrupted,
        caller: &Caller,
        answers: &Map<String, Value>,
        deadline: tokio::time::Instant,
        relay: Option<&dyn Passes>,
    ) -> Result<Reply, CallError> {
        let Some(answer) = answers.get(&call.key()) else {
            return self.parking.park(self, call, caller);
        };
        let response = json!({"jsonrpc": "2.0", "id": call.request["id"], "result": answer});
        let id = call.id.clone();
        let reader = &mut call.reader;
        let exchange = async {
            let headers = self.headers(&call.era, "", None, Some(caller)).await?;
            let posting = self.http.post(self.spec.url.clone()).headers(headers.into_map()).body(response.to_string());
            let posted = posting.send().await.map_err(|e| CallError::Transport(switchyard_core::error::chain(&e)))?;
            match posted.status() {
                status if status.is_success() => {}
                reqwest::StatusCode::NOT_FOUND => {
                    return Err(CallError::Parked("the upstream forgot the session its call waited in".into()));
                }
                status @ (reqwest::StatusCode::UNAUTHORIZED | reqwest::StatusCode::FORBIDDEN) => {
                    self.forget_token(Some(caller)).await;
                    return Err(CallError::Credentials(format!("the upstream answered {status}")));
                }
                status => return Err(CallError::Transport(format!("the answer was refused: HTTP {status}"))),
            }
            self.next_turn(reader, &id, relay, true).await
        };
        // Under the upstream's breaker and `max_in_flight`, as every request to it.
        let timeout = deadline.saturating_duration_since(tokio::time::Instant::now());
        let turn = self.guarded(deadline, timeout, exchange).await?;
        match turn {
            Turn::Answer(message, weight) => {
                std::mem::replace(&mut call.cancel, CancelOnDrop::unarmed()).disarm();
                Ok(Reply::Answer(Self::result(message, None)?, weight))
            }
            Turn::Asked(request) => {
                call.request = request;
                self.parking.park(self, call, caller)
            }
        }
    }
}
