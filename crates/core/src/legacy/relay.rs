//! Asking a legacy client for input within one request, and carrying its
//! answers back to the call that waits for them: here, or over the bus to
//! the replica whose id the answer carries.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{Map, Value, json};
use switchyard_bus::{Event, NotificationBus};
use switchyard_protocol::{ErrorObject, RequestId};
use tokio::sync::oneshot;

use super::{RecentIds, request_id, verified_owner};
use crate::plugin::Notifier;
use crate::state::StateSealer;

/// Where a legacy client's answer went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivered {
    /// To the call waiting here.
    Here,
    /// On the bus, to the replica that holds the call.
    Relayed,
    /// Nowhere: nothing waits for that id.
    Unknown,
}

/// Why a legacy client could not be asked.
pub(crate) enum LegacyAsk {
    /// The transport cannot stream requests to the client.
    Unavailable,
    /// The client answered with an error.
    Refused(String),
    /// No answer before the deadline.
    TimedOut,
}

type Answer = Result<Value, ErrorObject>;

/// The calls of this replica waiting for a legacy client's answers, and the
/// answers it relayed to other replicas lately.
#[derive(Debug)]
pub(crate) struct Relay {
    /// This process's name in the ids it mints.
    replica: String,
    /// Answers awaited, by the id of the request we sent.
    pending: Mutex<HashMap<RequestId, oneshot::Sender<Answer>>>,
    /// The ids of answers relayed lately: a client repeating an answer
    /// cannot make us publish it again.
    relayed: RecentIds,
}

impl Relay {
    /// The relay of replica `replica`.
    pub(crate) fn new(replica: String) -> Self {
        Self { replica, pending: Mutex::default(), relayed: RecentIds::default() }
    }

    /// This replica's name.
    pub(crate) fn replica(&self) -> &str {
        &self.replica
    }

    fn take_waiting(&self, id: &RequestId) -> Option<oneshot::Sender<Answer>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner()).remove(id)
    }

    /// Hands a legacy client's answer, from `principal`, to the request that
    /// asked for it: here, or over `bus` to the replica whose id it carries.
    /// An id we did not mint, or minted for another caller, goes nowhere,
    /// and neither does a second answer to an id already relayed.
    pub(crate) async fn deliver(
        &self,
        sealer: &StateSealer,
        bus: &dyn NotificationBus,
        id: &RequestId,
        outcome: Answer,
        principal: Option<&str>,
    ) -> Delivered {
        let RequestId::String(text) = id else { return Delivered::Unknown };
        let Some(owner) = verified_owner(sealer, text, principal) else {
            return Delivered::Unknown;
        };
        if owner == self.replica {
            return if self.take_waiting(id).is_some_and(|sender| sender.send(outcome).is_ok()) {
                Delivered::Here
            } else {
                Delivered::Unknown
            };
        }
        if !self.relayed.first_time(text) {
            return Delivered::Unknown;
        }
        let response = match outcome {
            Ok(result) => json!({ "result": result }),
            Err(error) => json!({ "error": error }),
        };
        let event = Event::RelayedAnswer { replica: owner.to_owned(), id: text.clone(), response };
        match bus.publish(event).await {
            Ok(()) => Delivered::Relayed,
            Err(error) => {
                // Not relayed: the client's retry must be.
                self.relayed.forget(text);
                tracing::warn!(%error, "could not relay a client's answer to its replica");
                Delivered::Unknown
            }
        }
    }

    /// An answer another replica relayed over the bus: handed to the call
    /// waiting here, if `replica` is this one.
    pub(crate) fn receive(&self, replica: &str, id: String, response: &Value) {
        if replica != self.replica {
            return;
        }
        let outcome = match response.get("error") {
            Some(error) => Err(serde_json::from_value(error.clone()).unwrap_or_else(|_| ErrorObject::internal())),
            None => Ok(response.get("result").cloned().unwrap_or(Value::Null)),
        };
        if let Some(sender) = self.take_waiting(&RequestId::String(id)) {
            let _ = sender.send(outcome);
        }
    }

    /// Sends input requests to a legacy client as JSON-RPC requests on the
    /// request's response stream (`notifier`) and waits for its answers,
    /// which arrive as separate POSTs and reach us through [`Relay::deliver`].
    pub(crate) async fn ask(
        &self,
        sealer: &StateSealer,
        notifier: &Notifier,
        principal: Option<&str>,
        requests: Map<String, Value>,
        deadline: tokio::time::Instant,
    ) -> Result<Map<String, Value>, LegacyAsk> {
        let mut waiting = Vec::with_capacity(requests.len());
        let registered = Unregister {
            relay: self,
            ids: requests.keys().map(|_| RequestId::String(request_id(sealer, &self.replica, principal))).collect(),
        };
        for ((key, input_request), id) in requests.into_iter().zip(&registered.ids) {
            let (sender, receiver) = oneshot::channel();
            self.pending.lock().unwrap_or_else(|p| p.into_inner()).insert(id.clone(), sender);
            let method = input_request.get("method").and_then(Value::as_str).unwrap_or("input").to_owned();
            let mut message = input_request;
            message["jsonrpc"] = json!("2.0");
            message["id"] = id.to_value();
            if !notifier.send(message).await {
                return Err(LegacyAsk::Unavailable);
            }
            waiting.push((key, method, receiver));
        }
        let mut responses = Map::new();
        for (key, method, receiver) in waiting {
            match tokio::time::timeout_at(deadline, receiver).await {
                Ok(Ok(Ok(answer))) => {
                    responses.insert(key, answer);
                }
                Ok(Ok(Err(error))) => {
                    return Err(LegacyAsk::Refused(format!("The client could not answer {method}: {}", error.message)));
                }
                Ok(Err(_)) | Err(_) => return Err(LegacyAsk::TimedOut),
            }
        }
        Ok(responses)
    }
}

/// Removes a request's pending input requests however its wait ends.
struct Unregister<'a> {
    relay: &'a Relay,
    ids: Vec<RequestId>,
}

impl Drop for Unregister<'_> {
    fn drop(&mut self) {
        let mut pending = self.relay.pending.lock().unwrap_or_else(|p| p.into_inner());
        for id in &self.ids {
            pending.remove(id);
        }
    }
}
