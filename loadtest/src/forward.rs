//! The least forwarder: `POST /forward` of the bare server sends the body it
//! received, with the MCP headers it came with, to an upstream over one
//! cleartext HTTP/2 connection (the `h2` crate, as Switchyard's `h2c`
//! upstreams use), and answers with the upstream's body as it came. Nothing
//! is parsed, checked, bounded or stamped; no credential, no timeout, no
//! breaker.
//!
//! It is what `plugin-call` weighs #18's upstream row against: how much more
//! CPU a call costs the front when its answer comes from an upstream rather
//! than from the front itself, for a front that does nothing else.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use h2::client::SendRequest;

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
    match exchange(upstream, &headers, body).await {
        Ok(response) => response,
        Err(error) => (StatusCode::BAD_GATEWAY, error.to_string()).into_response(),
    }
}

async fn exchange(upstream: Upstream, headers: &HeaderMap, body: Bytes) -> anyhow::Result<Response> {
    let mut request = axum::http::Request::post(upstream.uri).body(())?;
    // The first value of each (none of these is repeated in an MCP request).
    for name in PASSED_ON {
        if let Some(value) = headers.get(name) {
            request.headers_mut().insert(name, value.clone());
        }
    }
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
    let content_type =
        head.headers.get(header::CONTENT_TYPE).cloned().unwrap_or(HeaderValue::from_static("application/json"));
    Ok((head.status, [(header::CONTENT_TYPE, content_type)], answered).into_response())
}
