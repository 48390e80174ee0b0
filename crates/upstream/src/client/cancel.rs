//! [`CancelOnDrop`]: a request to a 2025-era upstream that our side gave up
//! on (its caller went away, cancelled, or ran out of time) is cancelled
//! there too, with `notifications/cancelled` in its session.
//!
//! A 2026-07-28 upstream needs nothing of the kind: closing the request's
//! stream cancels it. A session-era upstream keeps working on a request
//! whose stream closed, until it is told.

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use switchyard_protocol::method::notification;

/// How long the notice may take: it is sent after our side stopped waiting.
const NOTICE_DEADLINE: Duration = Duration::from_secs(5);

/// Armed while a request to a session-era upstream is awaited; dropped
/// armed, it sends the upstream `notifications/cancelled` for that request,
/// on a task of its own, with the request's own headers (session, credentials).
pub(super) struct CancelOnDrop {
    notice: Option<Notice>,
}

struct Notice {
    http: reqwest::Client,
    url: reqwest::Url,
    headers: HeaderMap,
    id: Value,
}

impl CancelOnDrop {
    /// Armed for request `id`, sent to `url` with `headers`.
    pub(super) fn armed(http: &reqwest::Client, url: &reqwest::Url, headers: HeaderMap, id: &Value) -> Self {
        let notice = Notice { http: http.clone(), url: url.clone(), headers, id: id.clone() };
        Self { notice: Some(notice) }
    }

    /// Not armed: nothing to cancel (a stateless upstream, a notification).
    pub(super) fn unarmed() -> Self {
        Self { notice: None }
    }

    /// The request ended (answered, or failed on the upstream's side): nothing to cancel.
    pub(super) fn disarm(mut self) {
        self.notice = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(Notice { http, url, headers, id }) = self.notice.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let body = json!({"jsonrpc": "2.0", "method": notification::CANCELLED,
                          "params": {"requestId": id, "reason": "the client no longer waits for it"}});
        runtime.spawn(async move {
            let sent = http.post(url).headers(headers).body(body.to_string()).timeout(NOTICE_DEADLINE).send();
            if let Err(error) = sent.await {
                tracing::debug!(error = %switchyard_core::error::chain(&error), "could not tell the upstream a request was cancelled");
            }
        });
    }
}
