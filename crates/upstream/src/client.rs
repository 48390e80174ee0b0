//! [`McpClient`]: requests to an upstream MCP server, in whichever era it speaks.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{Map, Value, json};
use switchyard_core::CallContext;
use switchyard_protocol::capabilities::{self, ClientCapability};
use switchyard_protocol::error::MISSING_REQUIRED_CLIENT_CAPABILITY;
use switchyard_protocol::method::{notification, request};
use switchyard_protocol::result_text::ToolResultText;
use switchyard_protocol::{Produced, meta, version};
use tokio::sync::Mutex;
use tracing::Instrument as _;

use crate::breaker::{Breaker, RetryBudget};
use crate::limits::{Bound, UpstreamLimits};
use crate::outbound::OutboundPolicy;
use crate::parking::Parking;
use crate::spec::{Credentials, UpstreamSpec};

mod answer;
mod asked;
mod bounded;
mod cancel;
mod dial;
mod h2c;
mod http1;
mod listen;
mod relay;
mod request_headers;
mod token;
mod wire;

pub(crate) use asked::{Interrupted, Reply};
pub(crate) use relay::{Passes, Relay, is_passed_on};
use token::{ExchangedTokens, Token};
use wire::{Outgoing, RequestMeta, WithMeta};

/// The protocol revision we ask a legacy upstream for.
const LEGACY_VERSION: &str = "2025-11-25";

/// An HTTP client under `policy`, pooled and kept alive, speaking cleartext
/// HTTP/2 without asking when `h2c`.
fn http_client(policy: &OutboundPolicy, h2c: bool) -> reqwest::Result<reqwest::Client> {
    let http = reqwest::Client::builder()
        // A proxy would connect where our DNS check cannot see; a redirect
        // could lead anywhere. Neither is followed.
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(policy.resolver())
        .tcp_nodelay(true)
        .connect_timeout(Duration::from_secs(10))
        // An HTTP/2 connection with a request open (the listen stream) is
        // pinged, so one the upstream or a middlebox dropped is found.
        .http2_keep_alive_interval(Duration::from_secs(30))
        .http2_keep_alive_timeout(Duration::from_secs(10))
        // What an upstream's header block may take of our memory.
        .http2_max_header_list_size(64 * 1024);
    if h2c { http.http2_prior_knowledge() } else { http }.build()
}

/// How an upstream request failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The upstream could not be reached, or answered with something that is not MCP.
    #[error("upstream unreachable: {0}")]
    Transport(String),
    /// No answer within the deadline.
    #[error("upstream did not answer within {0:?}")]
    Timeout(Duration),
    /// The upstream answered with a JSON-RPC error.
    #[error("upstream error {code}: {message}")]
    Rpc {
        /// The JSON-RPC code.
        code: i64,
        /// The upstream's message.
        message: String,
    },
    /// A 2025-era upstream asked our client something mid-call; the call
    /// waits for the answer (see `client::asked`). Never reaches a caller
    /// of [`McpClient::request`].
    #[error("the upstream asked the client for input")]
    Asked,
    /// A call waiting for our client's input could not be parked, or is
    /// not parked here.
    #[error("{0}")]
    Parked(String),
    /// The upstream needs our client to declare a capability it did not
    /// (`-32021`): our client hears which.
    #[error("the upstream needs the client capability {0:?}")]
    MissingCapability(ClientCapability),
    /// A 2025-era upstream answered 404 to our session id: it no longer knows
    /// the session (it restarted, or the session expired).
    #[error("upstream forgot our session (HTTP 404)")]
    SessionLost,
    /// The upstream's breaker is open: its last requests failed, so this one
    /// was not sent.
    #[error("upstream not asked: its last {0} requests failed; {1}")]
    Open(usize, crate::breaker::Retry),
    /// Our credentials could not be obtained, or the upstream refused them.
    #[error("upstream credentials: {0}")]
    Credentials(String),
    /// The upstream's answer broke one of the operator's bounds (its size,
    /// its length); it was not read further.
    #[error("upstream answer refused: {1} ({setting})", setting = .0.setting())]
    Limit(Bound, String),
}

/// Which revision the upstream speaks, learned on first contact.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Era {
    Unknown,
    /// 2026-07-28: stateless, `_meta` on every request.
    Stateless,
    /// 2025 and before: `initialize`, then a session id if the server minted one.
    Session {
        version: String,
        session: Option<String>,
    },
}

/// One message from the upstream, with the session id it minted (if any)
/// and the bytes it took on the wire.
struct Answer {
    message: Value,
    /// The message's `result`, kept as text (`counted::parse_keeping_text`):
    /// the message then has none.
    result_text: Option<ToolResultText>,
    session: Option<String>,
    weight: Weight,
}

/// What an answer took: its bytes on the wire and the JSON values it holds
/// (what its parsed form costs), as the answer cache weighs it.
pub(crate) use switchyard_answers::Weight;

/// A client of one upstream MCP server.
pub struct McpClient {
    http: reqwest::Client,
    /// Where requests go when the spec says `h2c` (`client::h2c` says why).
    h2c: Option<h2c::H2c>,
    /// Where requests go for any other `http` URL (`client::http1` says why).
    http1: Option<http1::Http1>,
    /// For the token endpoint: `http` itself, unless that speaks `h2c`.
    token_http: reqwest::Client,
    spec: UpstreamSpec,
    policy: OutboundPolicy,
    limits: UpstreamLimits,
    /// What the upstream speaks, once learned. Read by every request, so a
    /// plain lock held for a clone, never across an await: an async mutex here
    /// made concurrent calls queue behind one another and wake in turn.
    era: std::sync::Mutex<Era>,
    /// Held while the era is being learned, so that only one request asks.
    learning: Mutex<()>,
    /// Whether its `server/discover` offered the Tasks extension.
    offers_tasks: AtomicBool,
    /// The platform's own token (client credentials).
    token: Mutex<Option<Token>>,
    /// Tokens exchanged for callers' tokens (token exchange).
    exchanged: ExchangedTokens,
    /// What every request's headers start from (`wire::HeaderBase`).
    header_base: wire::HeaderBase,
    next_id: AtomicU64,
    /// Places for requests in flight (`max_in_flight`).
    in_flight: tokio::sync::Semaphore,
    /// Stops sending while the upstream keeps failing.
    breaker: Breaker,
    /// What retries this upstream's failures may still cost.
    retries: RetryBudget,
    /// The upstream as its metrics are labelled: its plugin's namespace.
    upstream: Arc<str>,
    /// Where its calls wait for our clients' input: this replica's parking.
    parking: Arc<Parking>,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient").field("url", &self.spec.url.as_str()).finish_non_exhaustive()
    }
}

impl McpClient {
    /// A client for `spec` under `policy`, reading no more than `limits`
    /// allow; its metrics are labelled `upstream` (its plugin's namespace),
    /// and its calls that wait for a client's input wait in `parking`.
    /// Secrets are read now.
    ///
    /// # Errors
    /// A refused URL or an unreadable secret, as `(field, reason)`.
    pub fn new(
        spec: UpstreamSpec,
        policy: OutboundPolicy,
        limits: UpstreamLimits,
        upstream: &str,
        parking: &Arc<Parking>,
    ) -> Result<Arc<Self>, (String, String)> {
        let upstream: Arc<str> = upstream.into();
        policy.check_url(&spec.url).map_err(|e| ("spec.url".to_owned(), e))?;
        let header = match &spec.credentials {
            Credentials::Header { name, value } => {
                let secret = value.resolve().map_err(|e| ("spec.auth.header".to_owned(), e))?;
                let name = HeaderName::from_bytes(name.as_bytes())
                    .map_err(|e| ("spec.auth.header.name".to_owned(), e.to_string()))?;
                let mut value = HeaderValue::from_str(secret.expose()).map_err(|_| {
                    ("spec.auth.header".to_owned(), "the secret is not a valid header value".to_owned())
                })?;
                value.set_sensitive(true);
                Some((name, value))
            }
            Credentials::ClientCredentials(grant) | Credentials::TokenExchange { grant, .. } => {
                let field = spec.credentials.grant_field();
                let url =
                    reqwest::Url::parse(&grant.token_url).map_err(|e| (format!("{field}.token_url"), e.to_string()))?;
                policy.check_url(&url).map_err(|e| (format!("{field}.token_url"), e))?;
                grant.client_secret.resolve().map_err(|e| (field.to_owned(), e))?;
                None
            }
            Credentials::None => None,
        };
        let http = http_client(&policy, spec.h2c).map_err(|e| ("spec.url".to_owned(), e.to_string()))?;
        // `h2c` is the upstream's; the token endpoint is spoken to as it offers.
        let token_http = match (spec.credentials.grant(), spec.h2c) {
            (Some(_), true) => http_client(&policy, false)
                .map_err(|e| (format!("{}.token_url", spec.credentials.grant_field()), e.to_string()))?,
            _ => http.clone(),
        };
        let h2c = match spec.h2c {
            true => Some(h2c::H2c::new(&spec.url, &policy).map_err(|e| ("spec.url".to_owned(), e))?),
            false => None,
        };
        let http1 = match !spec.h2c && spec.url.scheme() == "http" {
            true => Some(http1::Http1::new(&spec.url, &policy).map_err(|e| ("spec.url".to_owned(), e))?),
            false => None,
        };
        Ok(Arc::new(Self {
            http,
            h2c,
            http1,
            token_http,
            spec,
            policy,
            limits,
            era: std::sync::Mutex::new(Era::Unknown),
            learning: Mutex::new(()),
            offers_tasks: AtomicBool::new(false),
            token: Mutex::new(None),
            exchanged: token::exchanged_tokens(),
            header_base: wire::HeaderBase::new(header),
            next_id: AtomicU64::new(1),
            in_flight: tokio::sync::Semaphore::new(limits.max_in_flight),
            breaker: Breaker::new(limits.breaker_failures, limits.breaker_open, &upstream),
            retries: bounded::retry_budget(&upstream),
            upstream,
            parking: Arc::clone(parking),
        }))
    }

    /// The spec this client was built from.
    pub fn spec(&self) -> &UpstreamSpec {
        &self.spec
    }

    /// The upstream as its metrics are labelled: its plugin's namespace.
    pub fn upstream(&self) -> &Arc<str> {
        &self.upstream
    }

    /// The upstream broke `bound`, as `detail` says: counted, and an error.
    pub(crate) fn refused(&self, bound: Bound, detail: impl Into<String>) -> CallError {
        bound.record(&self.upstream);
        CallError::Limit(bound, detail.into())
    }

    /// The bounds this client reads under.
    pub fn limits(&self) -> &UpstreamLimits {
        &self.limits
    }

    /// Whether the upstream speaks the stateless revision (after first contact).
    pub async fn is_stateless(&self) -> bool {
        self.known_era() == Era::Stateless
    }

    fn known_era(&self) -> Era {
        self.era.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set_era(&self, era: Era) {
        *self.era.lock().unwrap_or_else(|p| p.into_inner()) = era;
    }

    /// Forgets `failed`, so the next request learns the era again, unless a
    /// request that failed alongside has learned a new one already.
    fn forget_era(&self, failed: &Era) {
        let mut current = self.era.lock().unwrap_or_else(|p| p.into_inner());
        if *current == *failed {
            *current = Era::Unknown;
        }
    }

    /// Sends `method` and returns its result. `name` goes into `Mcp-Name`,
    /// `extra` are further headers (`Mcp-Param-*`). The deadline is the
    /// sooner of `deadline` and the spec's timeout.
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn request(
        &self,
        method: &str,
        params: Map<String, Value>,
        name: Option<&str>,
        extra: &[(String, String)],
        deadline: Option<Instant>,
    ) -> Result<Value, CallError> {
        self.request_sized(method, params, name, extra, deadline).await.map(|(result, _)| result)
    }

    /// [`McpClient::request`] on behalf of the call `cx`, under its
    /// deadline: the upstream is asked for progress and log messages as the
    /// call's request asked, and those it sends on the call's stream are
    /// passed on to it.
    ///
    /// # Errors
    /// See [`CallError`].
    pub(crate) async fn request_relayed(
        &self,
        method: &str,
        params: Map<String, Value>,
        name: Option<&str>,
        extra: &[(String, String)],
        cx: &CallContext,
    ) -> Result<(Value, Weight), CallError> {
        let answer = self.bounded(method, params, name, extra, Some(cx.deadline()), Some(&Relay::to(cx))).await;
        answer.map(|(result, weight)| (result.into_value(), weight))
    }

    /// [`McpClient::request`], also returning what the answer took.
    ///
    /// # Errors
    /// See [`CallError`].
    pub(crate) async fn request_sized(
        &self,
        method: &str,
        params: Map<String, Value>,
        name: Option<&str>,
        extra: &[(String, String)],
        deadline: Option<Instant>,
    ) -> Result<(Value, Weight), CallError> {
        let answer = self.bounded(method, params, name, extra, deadline, None).await;
        answer.map(|(result, weight)| (result.into_value(), weight))
    }

    async fn request_in_era(
        &self,
        method: &str,
        params: Map<String, Value>,
        name: Option<&str>,
        extra: &[(String, String)],
        relay: Option<&Relay<'_>>,
    ) -> Result<(Produced, Weight), CallError> {
        let era = self.era().await?;
        let Era::Session { session: Some(_), .. } = &era else {
            return self.send(&era, method, params, name, extra, relay).await;
        };
        let outcome = self.send(&era, method, params.clone(), name, extra, relay).await;
        match outcome {
            // A legacy session the upstream forgot (restart, expiry): start another, once.
            Err(CallError::SessionLost) => {
                self.forget_era(&era);
                let era = self.era().await?;
                self.send(&era, method, params, name, extra, relay).await
            }
            outcome => outcome,
        }
    }

    /// The era: known after the first request, else learned (boxed: the
    /// learning's requests would make every request's future larger).
    async fn era(&self) -> Result<Era, CallError> {
        match self.known_era() {
            Era::Unknown => Box::pin(self.learn_era()).await,
            known => Ok(known),
        }
    }

    /// Learns the era on first use: `server/discover` first; a server that
    /// does not know it (or the stateless revision) gets `initialize`.
    async fn learn_era(&self) -> Result<Era, CallError> {
        let _learning = self.learning.lock().await;
        let known = self.known_era();
        if known != Era::Unknown {
            return Ok(known); // learned while this request waited
        }
        let era = match self.send(&Era::Stateless, request::DISCOVER, Map::new(), None, &[], None).await {
            Ok((discovered, _)) => {
                let discovered = discovered.into_value();
                let extensions = &discovered["capabilities"]["extensions"];
                let offers_tasks = extensions.get(capabilities::TASKS_EXTENSION).is_some();
                self.offers_tasks.store(offers_tasks, Ordering::Relaxed);
                Era::Stateless
            }
            Err(CallError::Rpc { .. }) => self.initialize().await?,
            Err(CallError::Transport(discovery)) => match self.initialize().await {
                Ok(era) => era,
                // Neither era answered: the discovery's failure says more, and
                // one in transport (a connection reset) may be retried.
                Err(_) => return Err(CallError::Transport(discovery)),
            },
            Err(other) => return Err(other),
        };
        if matches!(era, Era::Session { .. }) && matches!(self.spec.credentials, Credentials::TokenExchange { .. }) {
            // One session for every caller would carry each one's exchanged
            // token in it: an upstream that binds sessions to users refuses
            // the rest, a lax one mixes their state.
            return Err(CallError::Credentials(
                "token exchange needs a 2026-07-28 upstream; this one speaks a 2025 revision, whose session every caller would share"
                    .into(),
            ));
        }
        tracing::debug!(upstream = %self.spec.url, era = ?era, "upstream protocol learned");
        self.set_era(era.clone());
        Ok(era)
    }

    async fn initialize(&self) -> Result<Era, CallError> {
        let params = json!({
            "protocolVersion": LEGACY_VERSION,
            // What a tool of its may ask our clients mid-call: each is relayed
            // (`client::asked`), and a client that cannot answer is told so.
            "capabilities": {"elicitation": {}, "sampling": {}, "roots": {}},
            "clientInfo": {"name": "switchyard", "version": env!("CARGO_PKG_VERSION")}
        });
        let message = Outgoing::new(Some(json!(self.id())), request::INITIALIZE, Some(&params))?;
        let fresh = Era::Session { version: LEGACY_VERSION.into(), session: None };
        let answer = self.post(&fresh, request::INITIALIZE, None, &[], &message, None).await?;
        let (result, session) = (Self::result(answer.message, None)?.into_value(), answer.session);
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .filter(|v| version::LEGACY.contains(v))
            .ok_or_else(|| {
                CallError::Transport(format!(
                    "initialize answered an unsupported protocolVersion: {}",
                    result.get("protocolVersion").unwrap_or(&Value::Null)
                ))
            })?
            .to_owned();
        let era = Era::Session { version, session };
        let initialized = Outgoing::new(None, notification::INITIALIZED, None::<Value>)?;
        self.post(&era, notification::INITIALIZED, None, &[], &initialized, None).await?;
        Ok(era)
    }

    fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    async fn send(
        &self,
        era: &Era,
        method: &str,
        params: Map<String, Value>,
        name: Option<&str>,
        extra: &[(String, String)],
        relay: Option<&Relay<'_>>,
    ) -> Result<(Produced, Weight), CallError> {
        let span = tracing::info_span!(
            "upstream",
            otel.name = %format_args!("{method}{}{}", if name.is_some() { " " } else { "" }, name.unwrap_or_default()),
            otel.kind = "client",
            mcp.method.name = method,
            server.address = self.spec.url.host_str().unwrap_or_default(),
        );
        let mut extra = extra.to_vec();
        let mut request_meta = RequestMeta::new(*era == Era::Stateless);
        // Our span goes upstream as the parent (in `_meta`, as MCP carries it,
        // and as W3C headers); the client's own context and token never do.
        if let Some((traceparent, tracestate)) = span.in_scope(switchyard_telemetry::context::current) {
            extra.push((meta::TRACEPARENT.into(), traceparent.clone()));
            if let Some(tracestate) = &tracestate {
                extra.push((meta::TRACESTATE.into(), tracestate.clone()));
            }
            request_meta.trace = Some((traceparent, tracestate));
        }
        let id = json!(self.id());
        if let Some(relay) = relay {
            let tasks = *era == Era::Stateless && self.offers_tasks.load(Ordering::Relaxed);
            relay.ask(&mut request_meta, &id, tasks);
        }
        // (Written now: the parameters are not held while the answer is awaited.)
        let message = Outgoing::new(Some(id), method, Some(WithMeta { params: &params, meta: &request_meta }))?;
        drop(params);
        let answer = self.post(era, method, name, &extra, &message, relay).instrument(span).await?;
        Ok((Self::result(answer.message, answer.result_text)?, answer.weight))
    }

    /// The result of `response` (or, kept as text, `text`), or its error.
    fn result(mut response: Value, text: Option<ToolResultText>) -> Result<Produced, CallError> {
        if let Some(error) = response.get("error") {
            if error.get("code").and_then(Value::as_i64) == Some(MISSING_REQUIRED_CLIENT_CAPABILITY.into())
                && let Some(needed) = ClientCapability::from_required(&error["data"]["requiredCapabilities"])
            {
                return Err(CallError::MissingCapability(needed));
            }
            return Err(CallError::Rpc {
                code: error.get("code").and_then(Value::as_i64).unwrap_or(-32603),
                message: error.get("message").and_then(Value::as_str).unwrap_or("no message").to_owned(),
            });
        }
        if let Some(text) = text {
            return Ok(Produced::ToolText(text));
        }
        // Moved out, not cloned: a result can be large.
        response
            .get_mut("result")
            .map(|result| Produced::Value(result.take()))
            .ok_or_else(|| CallError::Transport("a response without result or error".into()))
    }
}
