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
//! The parked call lives on the replica that made it: a retry that lands on
//! another replica finds nothing there and fails, saying so. Parked calls
//! are bounded per upstream and per caller, and let go after a while (the
//! upstream is then told the call was cancelled).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use switchyard_core::{CallContext, Caller};

use super::answer::{EventReader, Turn};
use super::cancel::CancelOnDrop;
use super::{CallError, Era, McpClient, Relay, Weight};

/// How long a parked call waits for its client's answer.
const PARKED_FOR: Duration = Duration::from_secs(600);
/// Most calls parked at once for one upstream, and for one caller of it:
/// one caller cannot take the places of the others.
const MAX_PARKED: usize = 256;
const MAX_PARKED_PER_CALLER: usize = 16;

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

    /// The key our client answers the upstream's request under.
    fn key(&self) -> String {
        let id = match &self.request["id"] {
            Value::String(id) => id.clone(),
            other => other.to_string(),
        };
        format!("upstream-{id:.200}")
    }
}

/// What a relayed tool call came to.
pub(crate) enum Reply {
    /// The upstream's result, with what it took.
    Answer(Value, Weight),
    /// The upstream asked our client `request` (`{method, params}`) under
    /// `key`, and waits, parked under `parked`.
    Asked { parked: String, key: String, request: Value },
}

/// A parked call, with when it was parked and for whom.
struct Parked {
    call: Interrupted,
    since: Instant,
    caller: String,
}

/// The calls of one upstream waiting for their clients' answers.
#[derive(Default)]
pub(super) struct ParkedCalls(Mutex<HashMap<String, Parked>>);

impl ParkedCalls {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Parked>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Parks `call` for `caller` under a fresh id, after letting go of the
    /// calls that waited too long; refused when full.
    fn park(&self, call: Interrupted, caller: &Caller) -> Result<Reply, CallError> {
        let caller = caller.accounting_key();
        let mut parked = self.lock();
        parked.retain(|_, waiting| waiting.since.elapsed() < PARKED_FOR);
        let theirs = parked.values().filter(|waiting| waiting.caller == caller).count();
        if parked.len() >= MAX_PARKED || theirs >= MAX_PARKED_PER_CALLER {
            return Err(CallError::Parked(format!(
                "too many of the upstream's calls wait for their clients' input (at most {MAX_PARKED}, {MAX_PARKED_PER_CALLER} per caller)"
            )));
        }
        let id = format!("{:032x}", rand::random::<u128>());
        let reply = Reply::Asked {
            parked: id.clone(),
            key: call.key(),
            request: json!({"method": call.request["method"], "params": call.request["params"]}),
        };
        parked.insert(id, Parked { call, since: Instant::now(), caller });
        Ok(reply)
    }

    /// The call parked under `id` for `caller`, if it still waits.
    fn take(&self, id: &str, caller: &Caller) -> Option<Parked> {
        let mut parked = self.lock();
        let theirs = parked.get(id).is_some_and(|waiting| waiting.caller == caller.accounting_key());
        theirs.then(|| parked.remove(id)).flatten().filter(|waiting| waiting.since.elapsed() < PARKED_FOR)
    }
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
        &self,
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
                self.parked.park(call, cx.caller())
            }
            Err(error) => Err(error),
        }
    }

    /// Lets go of the call parked under `parked`: the upstream is told it is
    /// cancelled.
    pub(crate) fn let_go(&self, parked: &str) {
        drop(self.parked.lock().remove(parked));
    }

    /// Answers the question the call parked under `parked` waits on with
    /// `answers` (our client's `inputResponses`), and reads on, to the
    /// upstream's result or its next question (parked anew). Without an
    /// answer to it, the same question is asked again.
    ///
    /// # Errors
    /// [`CallError::Parked`] when no call waits under `parked` here.
    pub(crate) async fn resume(
        &self,
        parked: &str,
        answers: &Map<String, Value>,
        cx: &CallContext,
    ) -> Result<Reply, CallError> {
        let Some(Parked { mut call, .. }) = self.parked.take(parked, cx.caller()) else {
            return Err(CallError::Parked(
                "the upstream's call no longer waits for this answer here: it waited too long, or waits on another replica"
                    .into(),
            ));
        };
        let Some(answer) = answers.get(&call.key()) else {
            return self.parked.park(call, cx.caller());
        };
        let response = json!({"jsonrpc": "2.0", "id": call.request["id"], "result": answer});
        let headers = self.headers(&call.era, "", None, Some(cx.caller())).await?;
        let posting = self.http.post(self.spec.url.clone()).headers(headers).body(response.to_string()).send();
        let deadline = tokio::time::Instant::from_std(cx.deadline());
        let posted = tokio::time::timeout_at(deadline, posting)
            .await
            .map_err(|_| CallError::Timeout(self.spec.timeout))?
            .map_err(|e| CallError::Transport(switchyard_core::error::chain(&e)))?;
        if !posted.status().is_success() {
            return Err(CallError::Transport(format!("the answer was refused: HTTP {}", posted.status())));
        }
        let relay = Relay::to(cx);
        let id = call.id.clone();
        let turn = tokio::time::timeout_at(deadline, self.next_turn(&mut call.reader, &id, Some(&relay), true))
            .await
            .map_err(|_| CallError::Timeout(self.spec.timeout))??;
        match turn {
            Turn::Answer(message, weight) => {
                std::mem::replace(&mut call.cancel, CancelOnDrop::unarmed()).disarm();
                Ok(Reply::Answer(Self::result(message)?, weight))
            }
            Turn::Asked(request) => {
                call.request = request;
                self.parked.park(call, cx.caller())
            }
        }
    }
}
