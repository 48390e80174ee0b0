//! Test harness: starts a real Switchyard (the binary's own `lib.rs`, so tests
//! run exactly what production runs) on `127.0.0.1:0`, and a small HTTP
//! client that checks every message the server sends against the official
//! MCP 2026-07-28 JSON schema (`../shared/spec/2026-07-28/schema.json`).
//!
//! ```no_run
//! # async fn demo() {
//! let app = switchyard_testkit::App::start(&[("SWITCHYARD_FIXTURE", "conformance")]).await;
//! let reply = app.client().request("tools/list", serde_json::json!({})).await;
//! assert_eq!(reply.status, 200);
//! # }
//! ```

mod deployment;
mod eventually;
mod externals;
mod hostile_upstream;
mod otlp;
mod schema;

use std::time::Duration;

use futures::StreamExt as _;
use serde_json::{Value, json};
use switchyard::Switchyard;
use switchyard::config::{Config, RawConfig};
use switchyard_protocol::version::LATEST;
use tokio_util::sync::CancellationToken;

pub use deployment::{Deployment, DeploymentBuilder};
pub use eventually::{eventually, until};
pub use externals::{
    AuthorizationServer, LegacyPythonServer, ServerProcess, guest_module, node_client, python_client, switchyard_binary,
};
pub use hostile_upstream::{Behaviour, HostileUpstream};
pub use otlp::{OtlpReceiver, ReceivedSpan};
pub use schema::SpecSchema;
pub use switchyard_bus::testing::RedisServer;

/// A running server. Dropping it shuts the server down.
pub struct App {
    base: String,
    endpoint: String,
    shutdown: CancellationToken,
    schema: SpecSchema,
    /// The registry's SQLite file when the test named no database; removed on drop.
    _database_dir: Option<tempfile::TempDir>,
}

/// The `state.keys` of a test deployment: replicas sharing Redis must share
/// keys, so [`App`] and [`ServerProcess`] use this one whenever `env` names
/// Redis and no keys, as the chart gives every replica the same Secret.
pub const SHARED_STATE_KEY: &str = "it:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

/// `env`, with [`SHARED_STATE_KEY`] when it names Redis but no keys.
pub fn with_shared_keys<'a>(env: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut env = env.to_vec();
    let named = |name: &str| env.iter().any(|(key, _)| *key == name);
    if named("SWITCHYARD_REDIS_URL") && !named("SWITCHYARD_STATE__KEYS") {
        env.push(("SWITCHYARD_STATE__KEYS", SHARED_STATE_KEY));
    }
    env
}

impl App {
    /// Starts a server configured by `env` (as `SWITCHYARD_*` variables would),
    /// bound to an ephemeral loopback port. Unless `env` names a
    /// `SWITCHYARD_DATABASE_URL`, the registry is a fresh SQLite file.
    ///
    /// # Panics
    /// When the configuration is invalid or the port cannot be bound.
    pub async fn start(env: &[(&str, &str)]) -> Self {
        let listener = switchyard_http::bind(([127, 0, 0, 1], 0).into(), 4096).expect("bind 127.0.0.1:0");
        Self::start_on(listener, env).await
    }

    /// Starts a server on a listener the caller bound already: the caller
    /// knows the address first (to configure an authorization server with
    /// the resource URI, say).
    ///
    /// # Panics
    /// When the configuration is invalid.
    pub async fn start_on(listener: tokio::net::TcpListener, env: &[(&str, &str)]) -> Self {
        let pairs = with_shared_keys(env).iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect::<Vec<_>>();
        let raw = RawConfig::load(None, pairs.clone()).expect("test configuration is valid");
        // The other variables stay the environment upstream grants are read from.
        Self::start_in(listener, raw, pairs).await
    }

    /// Starts a server configured by `raw` on `listener`; unless `raw` names
    /// a database, the registry is a fresh SQLite file.
    ///
    /// # Panics
    /// When the configuration is invalid.
    pub async fn start_raw(listener: tokio::net::TcpListener, raw: RawConfig) -> Self {
        Self::start_in(listener, raw, Vec::new()).await
    }

    async fn start_in(
        listener: tokio::net::TcpListener,
        mut raw: RawConfig,
        environment: Vec<(String, String)>,
    ) -> Self {
        let address = listener.local_addr().expect("local address");
        // The real address, so what derives from it (the OAuth resource URI)
        // is right, unless the test configures a bind of its own (to see
        // what a server bound beyond loopback decides).
        raw.bind.get_or_insert_with(|| address.to_string());
        let mut database_dir = None;
        if raw.database_url.is_none() {
            let dir = tempfile::tempdir().expect("a temporary directory");
            raw.database_url = Some(format!("sqlite://{}", dir.path().join("registry.db").display()));
            database_dir = Some(dir);
        }
        let config = Config::from_raw(raw, environment).expect("test configuration is valid");
        let endpoint = config.http.endpoint.clone();
        let app = Switchyard::build(config).await.expect("build switchyard");
        let shutdown = CancellationToken::new();
        let signal = shutdown.clone();
        tokio::spawn(async move { app.serve(listener, async move { signal.cancelled().await }).await });
        let base = format!("http://{address}");
        Self {
            endpoint: format!("{base}{endpoint}"),
            base,
            shutdown,
            schema: SpecSchema::load(),
            _database_dir: database_dir,
        }
    }

    /// The admin API's base URL (`…/admin/v1`).
    pub fn admin_url(&self) -> String {
        format!("{}/admin/v1", self.base)
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The MCP endpoint URL.
    pub fn url(&self) -> &str {
        &self.endpoint
    }

    /// Begins a graceful shutdown (as SIGTERM does).
    pub fn shut_down(&self) {
        self.shutdown.cancel();
    }

    /// A client for this server.
    pub fn client(&self) -> Client {
        self.client_over(reqwest::Client::new())
    }

    /// A client for this server that speaks cleartext HTTP/2 with prior
    /// knowledge: every request it sends, streams included, is a stream of
    /// one connection.
    ///
    /// # Panics
    /// When the HTTP client cannot be built.
    pub fn client_h2(&self) -> Client {
        self.client_over(reqwest::Client::builder().http2_prior_knowledge().build().expect("an HTTP/2 client"))
    }

    fn client_over(&self, http: reqwest::Client) -> Client {
        Client { http, url: self.endpoint.clone(), schema: self.schema.clone(), token: None }
    }
}

impl Drop for App {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// The `_meta` every modern request carries.
pub fn meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": LATEST,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": { "name": "switchyard-testkit", "version": "0" }
    })
}

/// What the server answered.
#[derive(Debug)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// The HTTP version it came over.
    pub version: reqwest::Version,
    /// Response headers.
    pub headers: reqwest::header::HeaderMap,
    /// The JSON-RPC messages: one for a JSON answer, every SSE event otherwise.
    pub messages: Vec<Value>,
}

impl Reply {
    /// The last message: the response.
    ///
    /// # Panics
    /// When there is none.
    pub fn response(&self) -> &Value {
        self.messages.last().expect("a response message")
    }

    /// `result` of the response.
    pub fn result(&self) -> &Value {
        &self.response()["result"]
    }

    /// `error.code` of the response.
    pub fn error_code(&self) -> Option<i64> {
        self.response()["error"]["code"].as_i64()
    }

    /// The `Content-Type` header.
    pub fn content_type(&self) -> &str {
        self.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("")
    }
}

/// An HTTP client that sends well-formed MCP requests (with the standard
/// headers) or anything at all, and validates what comes back.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    url: String,
    schema: SpecSchema,
    token: Option<String>,
}

impl Client {
    /// A client for the MCP endpoint at `url` (a server the test did not
    /// start through [`App`], such as a [`ServerProcess`]).
    pub fn for_url(url: &str) -> Self {
        Self { http: reqwest::Client::new(), url: url.to_owned(), schema: SpecSchema::load(), token: None }
    }

    /// The same client, sending `Authorization: Bearer {token}` on every request.
    #[must_use]
    pub fn with_token(&self, token: &str) -> Self {
        Self { token: Some(token.to_owned()), ..self.clone() }
    }

    /// The standard headers for `method` with `params`.
    pub fn headers_for(method: &str, params: &Value) -> Vec<(String, String)> {
        let mut headers = vec![
            ("content-type".into(), "application/json".into()),
            ("accept".into(), "application/json, text/event-stream".into()),
            ("mcp-protocol-version".into(), LATEST.into()),
            ("mcp-method".into(), method.into()),
        ];
        let name = match method {
            "tools/call" | "prompts/get" => params.get("name"),
            "resources/read" => params.get("uri"),
            "tasks/get" | "tasks/update" | "tasks/cancel" => params.get("taskId"),
            _ => None,
        };
        if let Some(Value::String(name)) = name {
            headers.push(("mcp-name".into(), switchyard_protocol::headers::encode_value(name)));
        }
        headers
    }

    /// Sends a modern request with `_meta` (no client capabilities) and the standard headers.
    pub async fn request(&self, method: &str, params: Value) -> Reply {
        self.request_with(method, params, json!({})).await
    }

    /// Sends a modern request declaring `capabilities`.
    pub async fn request_with(&self, method: &str, mut params: Value, capabilities: Value) -> Reply {
        if params.get("_meta").is_none() {
            params["_meta"] = meta(capabilities);
        }
        let headers = Self::headers_for(method, &params);
        let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
        self.send(body.to_string().into_bytes(), &headers, Some(method)).await
    }

    /// Sends raw bytes with exactly these headers. `method` names the request
    /// (for schema checks of the result), if it is one.
    ///
    /// # Panics
    /// When the server cannot be reached or a message fails the schema.
    pub async fn send(&self, body: Vec<u8>, headers: &[(String, String)], method: Option<&str>) -> Reply {
        let response = self.post(body, headers).await;
        self.read(response, method, Validate::Spec).await
    }

    /// Sends raw bytes and checks nothing of the answer: for legacy-era
    /// exchanges, whose results follow the 2025 schemas (no `resultType`),
    /// which `shared/` does not carry.
    ///
    /// # Panics
    /// When the server cannot be reached.
    pub async fn send_legacy(&self, body: Vec<u8>, headers: &[(String, String)]) -> Reply {
        let response = self.post(body, headers).await;
        self.read(response, None, Validate::Nothing).await
    }

    /// POSTs `body` with exactly these headers.
    /// Sends `method` with the standard headers and returns the response
    /// unread: a listen stream stays open for as long as it is held.
    pub async fn open(&self, method: &str, mut params: Value) -> reqwest::Response {
        if params.get("_meta").is_none() {
            params["_meta"] = meta(json!({}));
        }
        let headers = Self::headers_for(method, &params);
        let body = json!({ "jsonrpc": "2.0", "id": 42, "method": method, "params": params });
        self.post(body.to_string(), &headers).await
    }

    async fn post(&self, body: impl Into<reqwest::Body>, headers: &[(String, String)]) -> reqwest::Response {
        let mut request = self.http.post(&self.url).body(body);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.send().await.expect("server reachable")
    }

    /// Sends `method` and reads its SSE stream until `count` messages arrived
    /// or `patience` passed; `during` runs once the first message is in.
    pub async fn stream<F: std::future::Future<Output = ()>>(
        &self,
        method: &str,
        mut params: Value,
        count: usize,
        patience: Duration,
        during: impl FnOnce() -> F,
    ) -> Reply {
        if params.get("_meta").is_none() {
            params["_meta"] = meta(json!({}));
        }
        let headers = Self::headers_for(method, &params);
        let body = json!({ "jsonrpc": "2.0", "id": 42, "method": method, "params": params });
        let response = self.post(body.to_string(), &headers).await;
        let (status, version) = (response.status().as_u16(), response.version());
        let response_headers = response.headers().clone();
        let mut messages = Vec::new();
        let mut bytes = response.bytes_stream();
        let mut buffer = Vec::new();
        let mut during = Some(during);
        let deadline = tokio::time::Instant::now() + patience;
        while messages.len() < count {
            let Ok(Some(Ok(chunk))) = tokio::time::timeout_at(deadline, bytes.next()).await else { break };
            buffer.extend_from_slice(&chunk);
            for message in drain_events(&mut buffer) {
                self.schema.check_message(&message, Some(method));
                messages.push(message);
            }
            if let Some(during) = during.take().filter(|_| !messages.is_empty()) {
                during().await;
            }
        }
        Reply { status, version, headers: response_headers, messages }
    }

    async fn read(&self, response: reqwest::Response, method: Option<&str>, validate: Validate) -> Reply {
        let (status, version) = (response.status().as_u16(), response.version());
        let headers = response.headers().clone();
        let is_sse = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let body = response.bytes().await.expect("body");
        let messages = if body.is_empty() {
            Vec::new()
        } else if is_sse {
            let mut buffer = body.to_vec();
            drain_events(&mut buffer)
        } else {
            serde_json::from_slice::<Value>(&body).map(|v| vec![v]).unwrap_or_default()
        };
        if validate == Validate::Spec {
            for message in &messages {
                self.schema.check_message(message, method);
            }
        }
        Reply { status, version, headers, messages }
    }
}

/// Whether an answer is checked against the 2026-07-28 schema.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Validate {
    /// Every message must conform.
    Spec,
    /// Legacy-era answers: `shared/` has no 2025 schema to check them with.
    Nothing,
}

/// Takes the complete SSE events out of `buffer`, parsing each `data:` payload.
///
/// # Panics
/// When an event's data is not JSON.
pub fn drain_events(buffer: &mut Vec<u8>) -> Vec<Value> {
    let mut messages = Vec::new();
    while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
        let event: Vec<u8> = buffer.drain(..end + 2).collect();
        let text = String::from_utf8_lossy(&event);
        let data: String = text.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start).collect();
        if !data.is_empty() {
            messages.push(serde_json::from_str(&data).expect("SSE data is JSON"));
        }
    }
    messages
}
