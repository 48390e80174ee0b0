//! The least forwarders: `POST /forward` of the bare server sends the body it
//! received, with the MCP headers it came with, to an upstream over one
//! cleartext HTTP/2 connection (the `h2` crate, as Switchyard's `h2c`
//! upstreams use); `POST /forward1` sends it over HTTP/1.1, on a pool of
//! kept-alive connections (hyper's own client connection, one request at a
//! time each, as an HTTP/1.1 upstream is reached through reqwest's pool).
//! Both answer with the upstream's body as it came. Nothing is parsed,
//! checked, bounded or stamped; no credential, no timeout, no breaker.
//!
//! They are what `plugin-call` weighs #18's upstream row against: how much
//! more CPU a call costs the front when its answer comes from an upstream
//! rather than from the front itself, for a front that does nothing else.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use h2::client::SendRequest;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

/// The headers passed on: what an MCP server needs of a `tools/call`.
const PASSED_ON: [&str; 5] = ["content-type", "accept", "mcp-protocol-version", "mcp-method", "mcp-name"];

/// The upstream's connection and the URI every request is sent to.
#[derive(Clone)]
pub(crate) struct Upstream {
    sender: SendRequest<Bytes>,
    uri: axum::http::Uri,
}

impl Upstream {
    /// One HTTP/2 connection (prior knowledge) to `url`, e.g.
    /// `http://127.0.0.1:8080/mcp`, driven by a task of its own.
    pub(crate) async fn connect(url: &str) -> anyhow::Result<Self> {
        let uri: axum::http::Uri = url.parse()?;
        let authority = uri.authority().ok_or_else(|| anyhow::anyhow!("{url} names no host"))?.as_str();
        let socket = tokio::net::TcpStream::connect(authority).await?;
        socket.set_nodelay(true)?;
        let (sender, connection) = h2::client::handshake(socket).await?;
        // Not reconnected: a run whose connection ends answers 502 from
        // then on, which `load` counts as a failure. Say why it ended.
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                eprintln!("the upstream connection ended: {error}");
            }
        });
        Ok(Self { sender, uri })
    }
}

/// `POST /forward`: the request's body and MCP headers to the upstream, and
/// its answer back with the upstream's status and content type.
pub(crate) async fn forward(State(upstream): State<Upstream>, headers: HeaderMap, body: Bytes) -> Response {
    relayed(exchange(upstream, &headers, body).await)
}

/// The upstream's status, head and whole body, as a forwarder had them.
type Answered = anyhow::Result<(StatusCode, HeaderMap, Bytes)>;

/// The upstream's answer with its status and content type, or 502 saying
/// why there was none.
fn relayed(answered: Answered) -> Response {
    match answered {
        Ok((status, headers, body)) => {
            let content_type =
                headers.get(header::CONTENT_TYPE).cloned().unwrap_or(HeaderValue::from_static("application/json"));
            (status, [(header::CONTENT_TYPE, content_type)], body).into_response()
        }
        Err(error) => (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    }
}

/// The first value of each header passed on (none of them is repeated in an
/// MCP request), onto `request`.
fn pass_on(headers: &HeaderMap, request: &mut HeaderMap) {
    for name in PASSED_ON {
        if let Some(value) = headers.get(name) {
            request.insert(name, value.clone());
        }
    }
}

async fn exchange(upstream: Upstream, headers: &HeaderMap, body: Bytes) -> Answered {
    let mut request = axum::http::Request::post(upstream.uri).body(())?;
    pass_on(headers, request.headers_mut());
    let mut sender = upstream.sender.ready().await?;
    let (answer, mut outgoing) = sender.send_request(request, false)?;
    outgoing.send_data(body, true)?;
    let (head, mut incoming) = answer.await?.into_parts();
    let mut answered = Vec::new();
    while let Some(chunk) = incoming.data().await {
        let chunk = chunk?;
        let _ = incoming.flow_control().release_capacity(chunk.len());
        answered.extend_from_slice(&chunk);
    }
    Ok((head.status, head.headers, answered.into()))
}

/// The upstream over HTTP/1.1: its address, the path and host every request
/// names, and the connections idle between requests.
#[derive(Clone)]
pub(crate) struct Http1Upstream {
    authority: String,
    path: String,
    host: HeaderValue,
    idle: std::sync::Arc<std::sync::Mutex<Vec<http1::SendRequest<Full<Bytes>>>>>,
}

impl Http1Upstream {
    /// The pool for `url`, empty: a connection is opened when no idle one is there.
    pub(crate) fn new(url: &str) -> anyhow::Result<Self> {
        let uri: axum::http::Uri = url.parse()?;
        let authority = uri.authority().ok_or_else(|| anyhow::anyhow!("{url} names no host"))?.as_str().to_owned();
        Ok(Self {
            host: HeaderValue::from_str(&authority)?,
            authority,
            path: uri.path().to_owned(),
            idle: std::sync::Arc::default(),
        })
    }

    /// An idle connection that may send, or a new one, driven by a task of its own.
    async fn take(&self) -> anyhow::Result<http1::SendRequest<Full<Bytes>>> {
        loop {
            let Some(mut sender) = self.idle.lock().expect("not poisoned").pop() else { break };
            // One the upstream closed is dropped, and the next one tried.
            if sender.ready().await.is_ok() {
                return Ok(sender);
            }
        }
        let socket = tokio::net::TcpStream::connect(&self.authority).await?;
        socket.set_nodelay(true)?;
        let (sender, connection) = http1::handshake(TokioIo::new(socket)).await?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                eprintln!("an upstream connection ended: {error}");
            }
        });
        Ok(sender)
    }
}

/// `POST /forward1`: as `POST /forward`, over HTTP/1.1.
pub(crate) async fn forward_http1(State(upstream): State<Http1Upstream>, headers: HeaderMap, body: Bytes) -> Response {
    relayed(exchange_http1(upstream, &headers, body).await)
}

async fn exchange_http1(upstream: Http1Upstream, headers: &HeaderMap, body: Bytes) -> Answered {
    let mut request = axum::http::Request::post(upstream.path.as_str()).body(Full::new(body))?;
    request.headers_mut().insert(header::HOST, upstream.host.clone());
    pass_on(headers, request.headers_mut());
    let mut sender = upstream.take().await?;
    let (head, incoming) = sender.send_request(request).await?.into_parts();
    let answered = incoming.collect().await?.to_bytes();
    // Read to its end, the connection may carry the next request.
    upstream.idle.lock().expect("not poisoned").push(sender);
    Ok((head.status, head.headers, answered))
}
