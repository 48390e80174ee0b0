//! [`McpClient::bounded`]: every request to an upstream goes through its
//! breaker, waits for a place among `max_in_flight`, runs under the sooner of
//! the caller's deadline and the spec's timeout, and, when idempotent and
//! failed in transport, is sent again within a retry budget.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use switchyard_protocol::Produced;
use switchyard_protocol::method::request;

use super::{CallError, McpClient, Relay, Weight};
use crate::breaker::RetryBudget;
use crate::limits::Bound;

/// Retries earned per thousand requests to an upstream (one in ten), and
/// the most it keeps in hand.
const RETRIES_PER_THOUSAND_REQUESTS: u32 = 100;
const RETRIES_IN_HAND: u32 = 10;

/// A full retry budget for a new client of `upstream`.
pub(super) fn retry_budget(upstream: &Arc<str>) -> RetryBudget {
    RetryBudget::new(RETRIES_PER_THOUSAND_REQUESTS, RETRIES_IN_HAND, upstream)
}

/// Requests that change nothing at the upstream, so one that failed in
/// transport may be sent again: discovery, lists, reads, prompts,
/// completions and a task's state. A tool call may have done its work before the connection
/// broke, so it is never sent twice.
fn is_idempotent(method: &str) -> bool {
    matches!(
        method,
        request::DISCOVER
            | request::TOOLS_LIST
            | request::PROMPTS_LIST
            | request::RESOURCES_LIST
            | request::RESOURCE_TEMPLATES_LIST
            | request::RESOURCES_READ
            | request::PROMPTS_GET
            | request::COMPLETE
            | request::TASKS_GET
    )
}

impl McpClient {
    /// `exchange`, one exchange with the upstream, once the breaker admits
    /// it and in one of the places `max_in_flight` allows, until `deadline`
    /// (`timeout` from when it was set); its outcome tells the breaker
    /// whether the upstream is down.
    pub(super) async fn guarded<T>(
        &self,
        deadline: tokio::time::Instant,
        timeout: Duration,
        exchange: impl Future<Output = Result<T, CallError>>,
    ) -> Result<T, CallError> {
        let admitted = self.breaker.admit().map_err(|open| CallError::Open(open.failures, open.retry))?;
        // What one upstream's answers can hold at once is bounded by how many are awaited.
        let Ok(Ok(place)) = tokio::time::timeout_at(deadline, self.in_flight.acquire()).await else {
            let detail =
                format!("{} requests to it are in flight and none ended within {timeout:?}", self.limits.max_in_flight);
            return Err(self.refused(Bound::InFlight, detail));
        };
        let outcome = tokio::time::timeout_at(deadline, exchange).await.unwrap_or(Err(CallError::Timeout(timeout)));
        drop(place);
        // Only what says the upstream is down counts against it. An answer
        // over a bound may be one a caller asked for (a large read), and
        // credentials are the token endpoint's affair: those tell the
        // breaker nothing; nor does a call that is the client's to answer.
        match &outcome {
            Err(CallError::Transport(_) | CallError::Timeout(_)) => admitted.failed(),
            Err(CallError::Limit(..) | CallError::Credentials(_)) => drop(admitted),
            _ => admitted.succeeded(),
        }
        outcome
    }

    /// A request under the sooner of `deadline` and the spec's timeout, in
    /// one of the places `max_in_flight` allows.
    pub(super) async fn bounded(
        &self,
        method: &str,
        params: Map<String, Value>,
        name: Option<&str>,
        extra: &[(String, String)],
        deadline: Option<Instant>,
        relay: Option<&Relay<'_>>,
    ) -> Result<(Produced, Weight), CallError> {
        // The caller's deadline itself, not a duration from now: the call's
        // own deadline must not pass before ours, or our error never shows.
        let own = tokio::time::Instant::now() + self.spec.timeout;
        let deadline = deadline.map_or(own, |d| tokio::time::Instant::from_std(d).min(own));
        let timeout = deadline.saturating_duration_since(tokio::time::Instant::now());
        // An idempotent request that failed in transport is sent again,
        // within the retry budget, the deadline and `max_retries`.
        let mut spare = is_idempotent(method).then(|| params.clone());
        let (mut params, mut attempt) = (params, 0);
        loop {
            let first = attempt == 0;
            // On the heap, once: this future is kilobytes, and inline it would
            // be in ours twice (`guarded` holds it and its timeout), and be
            // moved whole with ours at every layer of the call above (#18).
            let sending = Box::pin(async {
                if first {
                    self.retries.deposit();
                }
                self.request_in_era(method, params, name, extra, relay).await
            });
            let outcome = self.guarded(deadline, timeout, sending).await;
            let retry = match (&outcome, spare.take()) {
                (Err(CallError::Transport(_)), Some(again)) if attempt < self.limits.max_retries => again,
                _ => return outcome,
            };
            // A short pause, doubling: a connection the upstream dropped is
            // usually replaced at once; one restarting needs a moment.
            let pause = Duration::from_millis(50 << attempt.min(4));
            if tokio::time::Instant::now() + pause >= deadline || !self.retries.withdraw() {
                return outcome;
            }
            tokio::time::sleep(pause).await;
            spare = Some(retry.clone());
            params = retry;
            attempt += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use serde_json::{Map, json};
    use switchyard_bus::{InMemoryBus, NotificationBus};
    use switchyard_core::CallContext;

    use crate::client::McpClient;
    use crate::limits::UpstreamLimits;
    use crate::outbound::OutboundPolicy;
    use crate::parking::Parking;
    use crate::spec::UpstreamSpec;

    /// An upstream on loopback answering every request with a tool's result
    /// under the request's own id; its `/mcp` URL.
    async fn answering_tool_results() -> String {
        use http_body_util::BodyExt as _;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (tcp, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let answering = hyper::service::service_fn(|request: http::Request<hyper::body::Incoming>| async {
                        let body = request.into_body().collect().await?.to_bytes();
                        let id = serde_json::from_slice::<serde_json::Value>(&body).unwrap()["id"].clone();
                        let answer = json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "hi"}]}});
                        let mut response =
                            http::Response::new(http_body_util::Full::new(bytes::Bytes::from(answer.to_string())));
                        response
                            .headers_mut()
                            .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
                        Ok::<_, hyper::Error>(response)
                    });
                    let io = hyper_util::rt::TokioIo::new(tcp);
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, answering).await;
                });
            }
        });
        format!("http://{address}/mcp")
    }

    /// A `tools/call` answered at once gets its result as the text it came
    /// as; a task's (whose context takes no text) gets it built, at once.
    #[tokio::test]
    async fn a_tool_s_result_is_kept_as_text_only_for_a_call_that_takes_text() {
        use switchyard_protocol::Produced;

        use crate::client::asked::Reply;

        let url = answering_tool_results().await;
        let spec = UpstreamSpec::parse(&json!({ "url": url }), &Default::default()).unwrap();
        let policy =
            OutboundPolicy { allowed_ranges: vec!["127.0.0.0/8".parse().unwrap()], ..OutboundPolicy::default() };
        let bus: Arc<dyn NotificationBus> = Arc::new(InMemoryBus::new());
        let parking = Parking::new(bus);
        let client = McpClient::new(spec, policy, UpstreamLimits::default(), "tools", &parking).unwrap();
        // A call's context: a task's, or (`takes_text`) one answered at once.
        let call = |takes_text: bool| {
            let client = Arc::clone(&client);
            let cx = CallContext::detached(Instant::now() + std::time::Duration::from_secs(10));
            let cx = if takes_text { cx.taking_result_text() } else { cx };
            async move { client.request_interruptible("tools/call", Map::new(), Some("t"), &[], &cx).await.unwrap() }
        };
        let task_s = call(false).await;
        assert!(matches!(task_s, Reply::Answer(Produced::Value(_), _)), "a task's call was answered otherwise");
        let at_once = call(true).await;
        let Reply::Answer(Produced::ToolText(text), _) = at_once else { panic!("answered otherwise than as text") };
        assert_eq!(text.into_value(), json!({"content": [{"type": "text", "text": "hi"}]}));
    }

    /// A tool call's request future is moved whole at every layer above it,
    /// on every call: what only some requests do (learning the era, getting
    /// a token, opening a connection) is boxed where it happens, and the
    /// request itself once per attempt. Inline, the call's future was about
    /// 6.8 KB in this (debug) build and 11 KB in a release one, and copying
    /// it was a quarter of an upstream call's instructions (#18).
    #[test]
    fn a_call_s_request_future_stays_small() {
        // Over h2c, over HTTP/1.1 (our connections), and through reqwest.
        for spec in [
            json!({"url": "http://tools.example.com/mcp", "h2c": true}),
            json!({"url": "http://tools.example.com/mcp"}),
            json!({"url": "https://tools.example.com/mcp"}),
        ] {
            let spec = UpstreamSpec::parse(&spec, &Default::default()).unwrap();
            let bus: Arc<dyn NotificationBus> = Arc::new(InMemoryBus::new());
            let parking = Parking::new(bus);
            let limits = UpstreamLimits::default();
            let client = McpClient::new(spec, OutboundPolicy::default(), limits, "tools", &parking).unwrap();
            let cx = CallContext::detached(Instant::now());
            let request = client.request_interruptible("tools/call", Map::new(), Some("t"), &[], &cx);
            let size = std::mem::size_of_val(&request);
            assert!(size <= 2048, "a tool call's request future is {size} bytes");
        }
    }
}
