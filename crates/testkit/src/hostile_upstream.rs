//! [`HostileUpstream`]: an MCP server of the tests' own that behaves well
//! until told to lie or flood, as an upstream run by a hostile plugin author
//! would: a list without end, pages without end, an SSE event that never
//! ends, JSON nested 100,000 deep, an answer that never comes, HTTP 500,
//! an answer cut off mid-way, and `list_changed` notifications as fast as
//! the socket takes them.
//!
//! It speaks just enough of 2026-07-28 to be registered: `server/discover`,
//! the four lists, `tools/call` of its tools `ok`, `kept` (read-only) and
//! `marked` (not), the last two with results marked for a minute, `resources/read` of
//! `hostile://public` and `hostile://private` (kept for a minute, by every
//! caller or by one), `hostile://fresh` (not kept) and `hostile://slow` (not
//! kept, answered after 300 ms), `subscriptions/listen`, and the Tasks
//! extension: its tool `job` (read-only) answers a task to a client that
//! takes one, and `tasks/*` know only its own task ids. It counts what
//! it is asked, and the bearer token of each request, so a test can tell a
//! refresh that was refused from one that never happened, and whose token
//! a request carried.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::{Stream, StreamExt as _, stream};
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// How the upstream answers, from now on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Everything as a well-kept server answers it.
    Honest,
    /// `tools/list` streams a JSON body without `Content-Length` that never ends.
    EndlessList,
    /// `tools/list` gives a fresh `nextCursor` on every page, forever.
    EndlessPages,
    /// `tools/list` answers one page of 20,000 small tools.
    ManyItems,
    /// `tools/list` answers one tool whose schema holds 300,000 numbers:
    /// 600 KB on the wire, about 10 MB once parsed.
    DenseList,
    /// `tools/list` and `tools/call` answer JSON nested 100,000 levels deep
    /// (within the values bound, so the depth limit is what refuses it).
    DeepJson,
    /// `tools/call` answers SSE whose one event never ends.
    EndlessEvent,
    /// `tools/call` answers SSE with progress notifications without end,
    /// never the response.
    EndlessProgress,
    /// Every request but `subscriptions/listen` waits, unanswered, until
    /// the behaviour changes (as a server that stalls, then recovers).
    Hang,
    /// The listen stream carries `notifications/tools/list_changed` as fast
    /// as it can be written; everything else is honest.
    Flood,
    /// Every request but `subscriptions/listen` is answered HTTP 500.
    ServerError,
    /// `tasks/get` answers a task whose status the extension does not know.
    LyingTasks,
    /// `tasks/get` answers a task waiting for input, its input request
    /// carrying a member of its own.
    AskingTasks,
    /// `tasks/get` answers a failed task whose error carries data.
    FailedTasks,
}

/// What the upstream was asked, by method.
#[derive(Debug, Default)]
struct Asked(Mutex<HashMap<String, usize>>);

/// The bearer tokens each request came with, by method, in order.
#[derive(Debug, Default)]
struct Bearers(Mutex<HashMap<String, Vec<Option<String>>>>);

struct Shared {
    behaviour: Mutex<Behaviour>,
    asked: Asked,
    bearers: Bearers,
    /// What the open listen streams are to carry next: a `list_changed`, or
    /// a `resources/updated`.
    changed: broadcast::Sender<Bytes>,
    /// The `resourceSubscriptions` of the last listen stream opened.
    subscriptions: Mutex<Vec<String>>,
    listen_streams: AtomicUsize,
    /// Requests left hanging whose caller went away first.
    abandoned: AtomicUsize,
    /// How many of the next requests (but listen streams) have their answer
    /// cut off after its head, as a connection reset mid-answer.
    resets: AtomicUsize,
}

/// Counts a hanging request as abandoned if it is dropped (its connection
/// closed or its stream reset) before the hang ends.
struct WhileHanging<'a>(&'a AtomicUsize);

impl Drop for WhileHanging<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// The server; it stops when dropped.
pub struct HostileUpstream {
    url: String,
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl Drop for HostileUpstream {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl HostileUpstream {
    /// Starts it, honest, on a free loopback port.
    ///
    /// # Panics
    /// When no port can be bound.
    pub async fn start() -> Self {
        let shared = Arc::new(Shared {
            behaviour: Mutex::new(Behaviour::Honest),
            asked: Asked::default(),
            bearers: Bearers::default(),
            changed: broadcast::channel(16).0,
            subscriptions: Mutex::default(),
            listen_streams: AtomicUsize::new(0),
            abandoned: AtomicUsize::new(0),
            resets: AtomicUsize::new(0),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
        let url = format!("http://{}/mcp", listener.local_addr().expect("local address"));
        let app = axum::Router::new().route("/mcp", axum::routing::post(answer)).with_state(Arc::clone(&shared));
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, app).with_graceful_shutdown(async move { stopped.cancelled().await }).await
        });
        Self { url, shared, stop }
    }

    /// Its MCP endpoint.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Answers as `behaviour` from now on, and tells every open listen
    /// stream that the lists changed, so every replica comes to see it.
    pub fn become_(&self, behaviour: Behaviour) {
        *self.shared.behaviour.lock().expect("behaviour") = behaviour;
        let _ = self.shared.changed.send(Bytes::from_static(LIST_CHANGED));
    }

    /// Tells every open listen stream that the resource `uri` changed,
    /// whether or not it asked for it.
    pub fn update(&self, uri: &str) {
        let updated = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri}});
        let _ = self.shared.changed.send(Bytes::from(format!("data: {updated}\n\n")));
    }

    /// Ends every open listen stream, as an upstream that restarts would.
    pub fn end_listen_streams(&self) {
        let _ = self.shared.changed.send(Bytes::new());
    }

    /// The resources the last listen stream opened asked to hear of.
    pub fn subscriptions(&self) -> Vec<String> {
        self.shared.subscriptions.lock().expect("subscriptions").clone()
    }

    /// How many times `method` was asked so far.
    pub fn asked(&self, method: &str) -> usize {
        self.shared.asked.0.lock().expect("asked").get(method).copied().unwrap_or(0)
    }

    /// The bearer token each `method` request came with (`None`: without
    /// one), in the order they came.
    pub fn bearers(&self, method: &str) -> Vec<Option<String>> {
        self.shared.bearers.0.lock().expect("bearers").get(method).cloned().unwrap_or_default()
    }

    /// Listen streams open now.
    pub fn listen_streams(&self) -> usize {
        self.shared.listen_streams.load(Ordering::SeqCst)
    }

    /// Cuts off the answers to the next `requests` requests (listen streams
    /// aside) after their head, whatever the behaviour.
    pub fn reset_next(&self, requests: usize) {
        self.shared.resets.store(requests, Ordering::SeqCst);
    }

    /// How many requests were left while hanging ([`Behaviour::Hang`]): the
    /// caller closed the connection or reset the stream, as a client that
    /// cancels does.
    pub fn abandoned(&self) -> usize {
        self.shared.abandoned.load(Ordering::SeqCst)
    }
}

async fn answer(State(shared): State<Arc<Shared>>, headers: axum::http::HeaderMap, body: Bytes) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(&body) else {
        return (axum::http::StatusCode::BAD_REQUEST, "not JSON").into_response();
    };
    let method = request["method"].as_str().unwrap_or_default().to_owned();
    *shared.asked.0.lock().expect("asked").entry(method.clone()).or_default() += 1;
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::to_owned);
    shared.bearers.0.lock().expect("bearers").entry(method.clone()).or_default().push(bearer);
    let id = request["id"].clone();
    if id.is_null() {
        return axum::http::StatusCode::ACCEPTED.into_response();
    }
    if method != "subscriptions/listen"
        && shared.resets.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok()
    {
        let broken = stream::once(async { Err::<Bytes, _>(std::io::Error::other("reset")) });
        return Response::new(Body::from_stream(broken));
    }
    // Subscribed before the behaviour is read, so no change falls between.
    let mut changed = shared.changed.subscribe();
    let mut behaviour = *shared.behaviour.lock().expect("behaviour");
    if behaviour == Behaviour::Hang && method != "subscriptions/listen" {
        // No answer until the test changes its mind; then the new behaviour's.
        let hanging = WhileHanging(&shared.abandoned);
        while behaviour == Behaviour::Hang {
            let _ = changed.recv().await;
            behaviour = *shared.behaviour.lock().expect("behaviour");
        }
        std::mem::forget(hanging);
    }
    let result = match (method.as_str(), behaviour) {
        ("subscriptions/listen", _) => {
            let asked = request["params"]["notifications"]["resourceSubscriptions"].as_array();
            let uris = asked.into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect();
            *shared.subscriptions.lock().expect("subscriptions") = uris;
            return listen(&shared, id, behaviour);
        }
        (_, Behaviour::ServerError) => return axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response(),
        ("tools/list", Behaviour::EndlessList) => {
            let head = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":["#);
            let tools = Bytes::from(r#"{"name":"t","inputSchema":{"type":"object"}},"#.repeat(1024));
            return streamed("application/json", stream::once(async move { Bytes::from(head) }).chain(repeat(tools)));
        }
        ("tools/list" | "tools/call", Behaviour::DeepJson) => {
            let depth = 100_000;
            let mut text = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":"#);
            text.push_str(&"[".repeat(depth));
            text.push_str(&"]".repeat(depth));
            text.push_str("}}");
            return ([(header::CONTENT_TYPE, "application/json")], text).into_response();
        }
        ("tools/call", Behaviour::EndlessEvent) => {
            let head = format!(r#"data: {{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":""#);
            let filler = Bytes::from(vec![b'a'; 16 * 1024]);
            return streamed("text/event-stream", stream::once(async move { Bytes::from(head) }).chain(repeat(filler)));
        }
        ("tools/call", Behaviour::EndlessProgress) => {
            let progress = format!(
                "data: {}\n\n",
                json!({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": 1, "progress": 1, "message": "a".repeat(4000)}})
            );
            return streamed("text/event-stream", repeat(Bytes::from(progress.repeat(16))));
        }
        ("tools/list", Behaviour::DenseList) => {
            let numbers = vec![0; 300_000];
            json!({"tools": [{"name": "dense", "inputSchema": {"type": "object", "enum": numbers}}]})
        }
        ("tools/list", Behaviour::EndlessPages) => {
            let page = request["params"]["cursor"].as_str().and_then(|c| c.parse::<u64>().ok()).unwrap_or(0);
            json!({"tools": [tool(&format!("page{page}"))], "nextCursor": (page + 1).to_string()})
        }
        ("tools/list", Behaviour::ManyItems) => {
            json!({"tools": (0..20_000).map(|n| tool(&format!("t{n}"))).collect::<Vec<_>>()})
        }
        ("server/discover", _) => json!({
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {"listChanged": true}, "extensions": {"io.modelcontextprotocol/tasks": {}}},
            "serverInfo": {"name": "hostile", "version": "0"}
        }),
        ("tools/list", _) => {
            let mut kept = tool("kept");
            kept["annotations"] = json!({"readOnlyHint": true});
            let mut job = tool("job");
            job["annotations"] = json!({"readOnlyHint": true});
            json!({"tools": [tool("ok"), kept, tool("marked"), job], "ttlMs": 3_600_000})
        }
        ("prompts/list", _) => json!({"prompts": []}),
        ("resources/list", _) => {
            let resources: Vec<Value> = ["public", "private", "fresh", "slow"]
                .into_iter()
                .map(|name| json!({"uri": format!("hostile://{name}"), "name": name}))
                .collect();
            json!({"resources": resources})
        }
        ("resources/read", _) => {
            let uri = request["params"]["uri"].as_str().unwrap_or_default().to_owned();
            let (ttl, scope) = match uri.as_str() {
                "hostile://public" => (60_000, "public"),
                "hostile://private" => (60_000, "private"),
                "hostile://slow" => {
                    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
                    (0, "public")
                }
                _ => (0, "public"),
            };
            let read = shared.asked.0.lock().expect("asked").get("resources/read").copied().unwrap_or(0);
            json!({"contents": [{"uri": uri, "text": format!("read {read}")}], "ttlMs": ttl, "cacheScope": scope})
        }
        ("resources/templates/list", _) => json!({"resourceTemplates": []}),
        // Results marked to be kept for a minute, of a read-only tool and of one that is not.
        ("tools/call", _) if matches!(request["params"]["name"].as_str(), Some("kept" | "marked")) => {
            let calls = shared.asked.0.lock().expect("asked").get("tools/call").copied().unwrap_or(0);
            json!({"content": [{"type": "text", "text": format!("call {calls}")}], "ttlMs": 60_000, "cacheScope": "public"})
        }
        // A task, with a field the extension does not define, for a client that takes one.
        ("tools/call", _)
            if request["params"]["name"] == "job"
                && request["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"]
                    .get(TASKS)
                    .is_some() =>
        {
            let calls = shared.asked.0.lock().expect("asked").get("tools/call").copied().unwrap_or(0);
            let mut task = task(&format!("hostile-task-{calls}"), "working");
            task["resultType"] = json!("task");
            task
        }
        ("tools/call", _) => json!({"content": [{"type": "text", "text": "ok"}]}),
        ("tasks/get" | "tasks/update" | "tasks/cancel", _)
            if !request["params"]["taskId"].as_str().is_some_and(|id| id.starts_with("hostile-task-")) =>
        {
            return axum::Json(
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": "unknown task"}}),
            )
            .into_response();
        }
        ("tasks/get", Behaviour::LyingTasks) => {
            task(request["params"]["taskId"].as_str().unwrap_or_default(), "finished")
        }
        ("tasks/get", Behaviour::AskingTasks) => {
            let mut waiting = task(request["params"]["taskId"].as_str().unwrap_or_default(), "input_required");
            waiting["inputRequests"] = json!({"confirm": {"method": "elicitation/create", "leak": "upstream-internal",
                "params": {"message": "Go on?", "requestedSchema": {"type": "object", "properties": {}}}}});
            waiting
        }
        ("tasks/get", Behaviour::FailedTasks) => {
            let mut failed = task(request["params"]["taskId"].as_str().unwrap_or_default(), "failed");
            failed["error"] = json!({"code": -32603, "message": "it broke", "data": {"leak": "upstream-internal"}});
            failed
        }
        ("tasks/get", _) => {
            let mut done = task(request["params"]["taskId"].as_str().unwrap_or_default(), "completed");
            done["result"] = json!({"content": [{"type": "text", "text": "done"}]});
            done
        }
        ("tasks/update" | "tasks/cancel", _) => json!({"leak": "upstream-internal"}),
        _ => {
            return axum::Json(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "unknown"}}))
                .into_response();
        }
    };
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A task of the upstream's, of unlimited life, carrying a field the extension does not define.
fn task(id: &str, status: &str) -> Value {
    json!({"taskId": id, "status": status, "createdAt": "2026-12-05T00:00:00Z",
           "lastUpdatedAt": "2026-12-05T00:00:01Z", "ttlMs": null, "pollIntervalMs": 100,
           "leak": "upstream-internal"})
}

fn tool(name: &str) -> Value {
    json!({"name": name, "inputSchema": {"type": "object"}})
}

fn repeat(chunk: Bytes) -> impl Stream<Item = Bytes> + Send + 'static {
    stream::unfold(chunk, |chunk| async move {
        // Yield between chunks, so an endless body never starves the runtime.
        tokio::task::yield_now().await;
        Some((chunk.clone(), chunk))
    })
}

fn streamed(content_type: &'static str, body: impl Stream<Item = Bytes> + Send + 'static) -> Response {
    let mut response = Response::new(Body::from_stream(body.map(Ok::<_, Infallible>)));
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

const LIST_CHANGED: &[u8] = b"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n";

/// A listen stream: acknowledged, then a `list_changed` each time the
/// behaviour changes (or, flooding, without pause). An honest stream ends
/// when the upstream turns to flooding, so the next one floods.
fn listen(shared: &Arc<Shared>, id: Value, behaviour: Behaviour) -> Response {
    let changed = Bytes::from_static(LIST_CHANGED);
    let acknowledged = Bytes::from(format!(
        "data: {}\n\n",
        json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": {"id": id}})
    ));
    let head = stream::once(async move { acknowledged });
    if behaviour == Behaviour::Flood {
        return streamed("text/event-stream", head.chain(repeat(changed)));
    }
    let open = OpenStream::new(Arc::clone(shared));
    let changes = stream::unfold((shared.changed.subscribe(), open), move |(mut receiver, open)| {
        let changed = changed.clone();
        async move {
            let flooding = || *open.0.behaviour.lock().expect("behaviour") == Behaviour::Flood;
            match receiver.recv().await {
                // Nothing to send: the stream ends.
                Ok(event) if event.is_empty() => None,
                Ok(event) if !flooding() => Some((event, (receiver, open))),
                Err(broadcast::error::RecvError::Lagged(_)) if !flooding() => Some((changed, (receiver, open))),
                _ => None,
            }
        }
    });
    streamed("text/event-stream", head.chain(changes))
}

/// Counts an open listen stream while it lives.
struct OpenStream(Arc<Shared>);

impl OpenStream {
    fn new(shared: Arc<Shared>) -> Self {
        shared.listen_streams.fetch_add(1, Ordering::SeqCst);
        Self(shared)
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.listen_streams.fetch_sub(1, Ordering::SeqCst);
    }
}
