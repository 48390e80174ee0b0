//! [`Relay`]: what an upstream says on a call's stream besides its answer
//! (progress, log messages), passed on to our client as its request asked.

use std::sync::Mutex;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use switchyard_core::{CallContext, Caller};
use switchyard_protocol::capabilities::TASKS_EXTENSION;
use switchyard_protocol::logging::LoggingLevel;
use switchyard_protocol::method::notification;

use super::asked::Interrupted;
use super::cancel::CancelOnDrop;
use super::wire::RequestMeta;

/// The call whose progress and log messages an upstream request relays.
///
/// What reaches our client goes through the call's own context, so the
/// rules of a local tool hold for an upstream one too: progress only when
/// our client gave a `progressToken`, and only increasing; log messages only
/// at or above the level our client set. Each message is rebuilt from its
/// typed fields, so nothing else an upstream put in it is passed on.
pub(crate) struct Relay<'a> {
    cx: &'a CallContext,
    /// Where a 2025-era upstream's request to our client is kept, with the
    /// call that waits on it, when this call can take one.
    asked: Option<Mutex<Option<Interrupted>>>,
}

impl<'a> Relay<'a> {
    /// Relays to `cx`'s request.
    pub(crate) fn to(cx: &'a CallContext) -> Self {
        Self { cx, asked: None }
    }

    /// This call can take the upstream's request to our client.
    pub(crate) fn may_ask(self) -> Self {
        Self { asked: Some(Mutex::new(None)), ..self }
    }

    /// Whether this call can take the upstream's request to our client.
    pub(crate) fn may_be_asked(&self) -> bool {
        self.asked.is_some()
    }

    /// Keeps the call the upstream asked our client something in.
    pub(crate) fn asked(&self, call: Interrupted) {
        if let Some(slot) = &self.asked {
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(call);
        }
    }

    /// The notice that cancels the asked call, should nobody answer it.
    pub(super) fn cancel_asked_with(&self, cancel: CancelOnDrop) {
        let Some(slot) = &self.asked else { return cancel.disarm() };
        match slot.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            Some(call) => call.cancel_with(cancel),
            None => cancel.disarm(),
        }
    }

    /// The call the upstream asked our client something in.
    pub(crate) fn take_asked(&self) -> Option<Interrupted> {
        self.asked.as_ref()?.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Who the call is for.
    pub(crate) fn caller(&self) -> &'a Caller {
        self.cx.caller()
    }

    /// Whether the call's result may stay the text it comes as
    /// ([`CallContext::takes_result_text`]): not a task's, which is kept as a value.
    pub(crate) fn takes_result_text(&self) -> bool {
        self.cx.takes_result_text()
    }

    /// What the call's client hears besides the answer: whether progress,
    /// and log messages from which level (`{"progress": bool, "logLevel": …}`).
    pub(crate) fn hears(&self) -> Value {
        json!({ "progress": self.cx.wants_progress(), "logLevel": self.cx.log_level().map(LoggingLevel::as_str) })
    }

    /// Asks the upstream, in the request's `_meta`, for what our client asked
    /// for: progress under `token` (the upstream request's own id), and log
    /// messages at our client's level; and tells it what our client may be
    /// asked for, so its `input_required` asks only for that; with `tasks`
    /// (an upstream that offers the extension), that our client takes a
    /// task, when it does. A 2025-era upstream (a `request_meta` without
    /// capabilities) has neither per-request level nor capabilities; what it
    /// logs is filtered here.
    pub(super) fn ask(&self, request_meta: &mut RequestMeta, token: &Value, tasks: bool) {
        if self.cx.wants_progress() {
            request_meta.progress_token = Some(token.clone());
        }
        let Some(capabilities) = &mut request_meta.capabilities else { return };
        request_meta.log_level = self.cx.log_level().map(LoggingLevel::as_str);
        *capabilities = self.cx.input_capabilities();
        if tasks && self.cx.accepts_task() {
            capabilities.insert("extensions".into(), json!({ TASKS_EXTENSION: {} }));
        }
    }

    /// Passes on `message`, one the upstream sent on the stream of request
    /// `token` before its answer, if it is progress under that token or a
    /// log message; anything else (a request of the upstream's, say) is
    /// dropped.
    pub(crate) async fn pass(&self, message: &Value, token: &Value) {
        if !is_passed_on(message, token) {
            return;
        }
        let params = &message["params"];
        match message["method"].as_str() {
            Some(notification::PROGRESS) => {
                let Some(progress) = params["progress"].as_f64() else { return };
                let total = params["total"].as_f64();
                self.cx.progress(progress, total, params["message"].as_str()).await;
            }
            Some(notification::MESSAGE) => {
                let Some(level) = params["level"].as_str().and_then(LoggingLevel::parse) else { return };
                let data = params.get("data").cloned().unwrap_or(Value::Null);
                self.cx.log(level, params["logger"].as_str(), data).await;
            }
            _ => {}
        }
    }
}

/// Whether `message`, sent on the stream of request `token` before its
/// answer, is one our client may hear: progress under that token, or a log
/// message.
pub(crate) fn is_passed_on(message: &Value, token: &Value) -> bool {
    match message["method"].as_str() {
        Some(notification::PROGRESS) => &message["params"]["progressToken"] == token,
        Some(notification::MESSAGE) => true,
        _ => false,
    }
}

/// Where what an upstream says on a call's stream before its answer goes:
/// to the call's client ([`Relay`]), or, for a call parked here and resumed
/// by a retry on another replica, to that replica (`crate::parking`).
pub(crate) trait Passes: Sync {
    /// Passes on `message`, sent on the stream of request `token`.
    fn pass<'s>(&'s self, message: &'s Value, token: &'s Value) -> BoxFuture<'s, ()>;
}

impl Passes for Relay<'_> {
    fn pass<'s>(&'s self, message: &'s Value, token: &'s Value) -> BoxFuture<'s, ()> {
        Box::pin(Relay::pass(self, message, token))
    }
}
