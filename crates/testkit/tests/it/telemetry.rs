//! Telemetry as an operator's collector sees it: two real Switchyard
//! processes (a front and the upstream it republishes) export over OTLP/HTTP
//! to a real receiver on loopback; the span tree of one `tools/call` is
//! asserted across both, and the metrics on `/metrics` and over OTLP.

use std::time::Duration;

use serde_json::{Value, json};
use switchyard_testkit::{Client, OtlpReceiver, ReceivedSpan, ServerProcess, eventually, meta};

const SERVER: i32 = 2;
const CLIENT: i32 = 3;
/// An argument value that must never appear in telemetry.
const SECRET: &str = "argument-that-must-not-leak";

fn process_env<'a>(receiver: &'a OtlpReceiver, service: &'a str, database: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("SWITCHYARD_DATABASE_URL", database),
        ("SWITCHYARD_TELEMETRY__OTLP_ENDPOINT", receiver.url()),
        ("SWITCHYARD_TELEMETRY__SERVICE_NAME", service),
        // Nothing is exported on a timer in this test: what arrives was
        // flushed at shutdown.
        ("SWITCHYARD_TELEMETRY__TRACE_INTERVAL", "1h"),
        ("SWITCHYARD_TELEMETRY__METRICS_INTERVAL", "1h"),
        // The front replica reaches the other on loopback.
        ("SWITCHYARD_UPSTREAM__ALLOWED_RANGES", "127.0.0.0/8"),
        // The caller (and, for the upstream replica, the front) is trusted to name the trace.
        ("SWITCHYARD_TELEMETRY__FOLLOW_CLIENT_TRACES", "true"),
    ]
}

async fn call(base: &str, tool: &str, traceparent_meta: Option<&str>, traceparent_header: Option<&str>) -> Value {
    let mut params = json!({ "name": tool, "arguments": { "text": SECRET } });
    params["_meta"] = meta(json!({}));
    if let Some(traceparent) = traceparent_meta {
        params["_meta"]["traceparent"] = json!(traceparent);
    }
    let mut request = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params }));
    for (name, value) in Client::headers_for("tools/call", &params) {
        request = request.header(name, value);
    }
    if let Some(traceparent) = traceparent_header {
        request = request.header("traceparent", traceparent);
    }
    request.send().await.expect("an answer").json().await.expect("a JSON answer")
}

async fn terminate(server: &mut ServerProcess) {
    let pid = server.child().id().to_string();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("kill runs").success());
    let status = eventually("the server to exit after SIGTERM", Duration::from_secs(10), async || {
        server.child().try_wait().expect("the process can be waited for")
    })
    .await;
    assert!(status.success(), "{status:?}");
}

fn find<'a>(spans: &'a [ReceivedSpan], what: &str, wanted: impl Fn(&ReceivedSpan) -> bool) -> &'a ReceivedSpan {
    spans.iter().find(|s| wanted(s)).unwrap_or_else(|| panic!("no {what} among {spans:#?}"))
}

#[tokio::test]
async fn a_tool_call_is_one_trace_across_two_replicas_and_the_metrics_are_exported() {
    let receiver = OtlpReceiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (front_db, upstream_db) = (
        format!("sqlite://{}", dir.path().join("front.db").display()),
        format!("sqlite://{}", dir.path().join("upstream.db").display()),
    );
    let mut upstream = ServerProcess::start(&process_env(&receiver, "upstream", &upstream_db)).await;
    let mut front = ServerProcess::start(&process_env(&receiver, "front", &front_db)).await;
    let base = front.base_url().to_owned();
    let registered = reqwest::Client::new()
        .post(format!("{base}/admin/v1/plugins"))
        .json(&json!({ "namespace": "up", "kind": "upstream", "spec": { "url": format!("{}/mcp", upstream.base_url()) } }))
        .send()
        .await
        .unwrap();
    assert_eq!(registered.status(), 201, "{}", registered.text().await.unwrap());

    // 1. The caller's context in `_meta` only.
    let (trace_a, parent_a) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let answer = call(&base, "up_echo", Some(&format!("00-{trace_a}-{parent_a}-01")), None).await;
    assert_eq!(answer["result"]["content"][0]["text"], SECRET, "{answer}");
    // 2. The caller's context in the W3C header only.
    let (trace_b, parent_b) = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
    let answer = call(&base, "echo", None, Some(&format!("00-{trace_b}-{parent_b}-01"))).await;
    assert_eq!(answer["result"]["content"][0]["text"], SECRET, "{answer}");
    // A call that fails: the series bound to the calls that succeed must not
    // count it, and the failure gets series of its own.
    let answer = call(&base, "no_such_tool", None, None).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");

    let scrape = reqwest::get(format!("{base}/metrics")).await.unwrap();
    assert_eq!(scrape.status(), 200);
    assert!(scrape.headers()["content-type"].to_str().unwrap().starts_with("text/plain; version=0.0.4"));
    let scrape = scrape.text().await.unwrap();
    for expected in [
        r#"switchyard_tool_calls_total{gen_ai_tool_name="up_echo",outcome="ok"} 1"#,
        r#"switchyard_tool_calls_total{gen_ai_tool_name="echo",outcome="ok"} 1"#,
        r#"mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call"} 2"#,
        r#"mcp_server_operation_duration_seconds_count{error_type="-32602",mcp_method_name="tools/call"} 1"#,
        r#"http_server_request_duration_seconds_count{http_request_method="POST",http_response_status_code="200",http_route="/mcp"} 2"#,
        r#"http_server_request_duration_seconds_count{http_request_method="POST",http_response_status_code="400",http_route="/mcp"} 1"#,
        "switchyard_listen_streams 0",
        "# TYPE switchyard_catalog_version gauge",
    ] {
        assert!(scrape.contains(expected), "{expected} missing from\n{scrape}");
    }
    assert!(!scrape.contains(SECRET), "an argument reached a metric");

    // 3. (After the scrape, which counts two requests.) A listen stream held open for a while: its span lasts as long.
    let mut listen_params = json!({ "notifications": { "toolsListChanged": true } });
    listen_params["_meta"] = meta(json!({}));
    let mut listen = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .json(&json!({ "jsonrpc": "2.0", "id": 2, "method": "subscriptions/listen", "params": listen_params }));
    for (name, value) in Client::headers_for("subscriptions/listen", &listen_params) {
        listen = listen.header(name, value);
    }
    let mut listening = listen.send().await.unwrap();
    let acknowledged = listening.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&acknowledged).contains("acknowledged"));
    tokio::time::sleep(Duration::from_millis(400)).await;
    drop(listening);

    // SIGTERM flushes what the exporters hold.
    terminate(&mut front).await;
    terminate(&mut upstream).await;
    let spans = receiver.spans();
    assert!(
        spans.iter().all(|s| s.attributes.iter().all(|(_, v)| !v.contains(SECRET))),
        "an argument reached a span: {spans:#?}"
    );

    // Request 1: HTTP span (a root: no header), MCP span (child of `_meta`'s
    // parent, linked to the HTTP span), plugin span, upstream client span,
    // and on the upstream its HTTP and MCP spans, children of that client span.
    let front_mcp = find(&spans, "front MCP span of request 1", |s| {
        s.service == "front" && s.name == "tools/call up_echo" && s.trace_id == trace_a
    });
    assert_eq!(front_mcp.parent_span_id, parent_a, "{front_mcp:#?}");
    assert_eq!(front_mcp.kind, SERVER);
    assert_eq!(front_mcp.attribute("mcp.method.name"), Some("tools/call"));
    assert_eq!(front_mcp.attribute("gen_ai.tool.name"), Some("up_echo"));
    assert_eq!(front_mcp.attribute("jsonrpc.request.id"), Some("1"));
    assert_eq!(front_mcp.attribute("mcp.protocol.version"), Some("2026-07-28"));
    let front_http = find(&spans, "front HTTP span of request 1", |s| {
        s.service == "front" && s.name == "POST /mcp" && front_mcp.links.contains(&s.span_id)
    });
    assert_eq!((front_http.kind, front_http.parent_span_id.as_str()), (SERVER, ""), "{front_http:#?}");
    assert_eq!(front_http.attribute("http.response.status_code"), Some("200"));
    let plugin = find(&spans, "plugin span", |s| s.parent_span_id == front_mcp.span_id);
    assert!(plugin.name.starts_with("plugin "), "{plugin:#?}");
    let client = find(&spans, "upstream client span", |s| s.parent_span_id == plugin.span_id);
    assert_eq!((client.name.as_str(), client.kind), ("tools/call echo", CLIENT), "{client:#?}");
    let upstream_http = find(&spans, "upstream HTTP span", |s| {
        s.service == "upstream" && s.name == "POST /mcp" && s.parent_span_id == client.span_id
    });
    assert_eq!(upstream_http.trace_id, trace_a);
    let upstream_mcp = find(&spans, "upstream MCP span", |s| s.service == "upstream" && s.name == "tools/call echo");
    assert_eq!(upstream_mcp.parent_span_id, client.span_id, "parent taken from _meta: {upstream_mcp:#?}");
    assert_eq!(upstream_mcp.trace_id, trace_a);

    // Request 2: the header's parent for the HTTP span, which parents the MCP span.
    let http_b = find(&spans, "HTTP span of request 2", |s| {
        s.service == "front" && s.trace_id == trace_b && s.name == "POST /mcp"
    });
    assert_eq!(http_b.parent_span_id, parent_b);
    let mcp_b = find(&spans, "MCP span of request 2", |s| s.name == "tools/call echo" && s.trace_id == trace_b);
    assert_eq!(mcp_b.parent_span_id, http_b.span_id, "{mcp_b:#?}");
    assert!(
        !spans.iter().any(|s| s.parent_span_id == mcp_b.span_id),
        "a built-in's call has no plugin span of its own: {spans:#?}"
    );

    let listen_span = find(&spans, "listen stream span", |s| s.service == "front" && s.name == "subscriptions/listen");
    assert!(listen_span.duration >= Duration::from_millis(350), "one span for the stream's life: {listen_span:#?}");

    // Database work: the registration through the admin API wrote the registry.
    let insert = find(&spans, "registry INSERT span", |s| s.service == "front" && s.name == "INSERT plugins");
    assert_eq!((insert.kind, insert.attribute("db.system.name")), (CLIENT, Some("sqlite")), "{insert:#?}");

    let metrics = receiver.metric_names();
    for name in ["http.server.request.duration", "mcp.server.operation.duration", "switchyard.tool.calls"] {
        assert!(metrics.iter().any(|m| m == name), "{name} not exported over OTLP: {metrics:?}");
    }
}

/// By default a client cannot name the trace: its `traceparent` (header or
/// `_meta`, sampled) is linked from a new trace of the server's own, so
/// anonymous traffic cannot force every request to be traced and exported.
#[tokio::test]
async fn a_clients_trace_context_is_linked_not_followed_by_default() {
    let receiver = OtlpReceiver::start().await;
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("db").display());
    let mut env = process_env(&receiver, "lone", &database);
    env.retain(|(key, _)| *key != "SWITCHYARD_TELEMETRY__FOLLOW_CLIENT_TRACES");
    let mut server = ServerProcess::start(&env).await;
    let (trace, in_meta, in_header) = ("5bf92f3577b34da6a3ce929d0e0e4736", "10f067aa0ba902b7", "20f067aa0ba902b7");
    let answer = call(
        server.base_url(),
        "echo",
        Some(&format!("00-{trace}-{in_meta}-01")),
        Some(&format!("00-{trace}-{in_header}-01")),
    )
    .await;
    assert_eq!(answer["result"]["content"][0]["text"], SECRET, "{answer}");
    terminate(&mut server).await;
    let spans = receiver.spans();
    assert!(spans.iter().all(|s| s.trace_id != trace), "a client named the trace: {spans:#?}");
    let http = find(&spans, "HTTP span", |s| s.name == "POST /mcp" && s.links.iter().any(|l| l == in_header));
    assert_eq!(http.parent_span_id, "", "{http:#?}");
    let mcp = find(&spans, "MCP span", |s| s.name == "tools/call echo");
    assert!(mcp.links.iter().any(|l| l == in_meta), "{mcp:#?}");
    assert_eq!((mcp.trace_id.as_str(), mcp.parent_span_id.as_str()), (http.trace_id.as_str(), http.span_id.as_str()));
}

/// Series name → label names, from a Prometheus text scrape.
fn parse_scrape(text: &str, into: &mut std::collections::BTreeMap<String, std::collections::BTreeSet<String>>) {
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("not a sample: {line}"));
        assert!(value == "+Inf" || value.parse::<f64>().is_ok(), "not a value in {line}");
        let (name, labels) = match series.split_once('{') {
            Some((name, labels)) => {
                (name, labels.strip_suffix('}').unwrap_or_else(|| panic!("unclosed labels: {line}")))
            }
            None => (series, ""),
        };
        assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "bad name in {line}");
        let entry = into.entry(name.to_owned()).or_default();
        // Label values here never hold `,` or `=`.
        for pair in labels.split(',').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or_else(|| panic!("bad label in {line}"));
            assert!(value.starts_with('"') && value.ends_with('"'), "unquoted label value in {line}");
            entry.insert(key.to_owned());
        }
    }
}

/// Metric names and label names an expression uses.
#[derive(Default, Debug)]
struct Uses {
    metrics: Vec<String>,
    labels: Vec<String>,
}

fn walk(expr: &promql_parser::parser::Expr, uses: &mut Uses) {
    use promql_parser::parser::{Expr, LabelModifier, VectorSelector};
    let selector = |vs: &VectorSelector, uses: &mut Uses| {
        uses.metrics.extend(vs.name.clone());
        let or = vs.matchers.or_matchers.iter().flatten();
        uses.labels.extend(vs.matchers.matchers.iter().chain(or).map(|m| m.name.clone()));
    };
    match expr {
        Expr::Aggregate(aggregate) => {
            if let Some(LabelModifier::Include(labels) | LabelModifier::Exclude(labels)) = &aggregate.modifier {
                uses.labels.extend(labels.labels.iter().cloned());
            }
            walk(&aggregate.expr, uses);
            if let Some(param) = &aggregate.param {
                walk(param, uses);
            }
        }
        Expr::Unary(unary) => walk(&unary.expr, uses),
        Expr::Binary(binary) => {
            walk(&binary.lhs, uses);
            walk(&binary.rhs, uses);
        }
        Expr::Paren(paren) => walk(&paren.expr, uses),
        Expr::Subquery(subquery) => walk(&subquery.expr, uses),
        Expr::VectorSelector(vs) => selector(vs, uses),
        Expr::MatrixSelector(matrix) => selector(&matrix.vs, uses),
        Expr::Call(call) => call.args.args.iter().for_each(|arg| walk(arg, uses)),
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

/// The Grafana dashboard in the Helm chart: every PromQL expression parses,
/// and every metric and label it names is one that real servers expose
/// (scraped from two replicas on Redis after traffic that touches each
/// panel: tool calls, an MCP error, a rate-limit refusal, a refused token,
/// a cross-replica event). Labels the scraper adds (namespace, pod) are allowed.
#[tokio::test]
async fn the_dashboard_queries_name_real_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("dashboard-{:x}:", rand::random::<u64>());
    let (db_a, db_b) = (
        format!("sqlite://{}", dir.path().join("a.db").display()),
        format!("sqlite://{}", dir.path().join("b.db").display()),
    );
    let shared = [("SWITCHYARD_REDIS_URL", "redis://127.0.0.1:6379"), ("SWITCHYARD_REDIS_PREFIX", prefix.as_str())];
    let mut env_a = vec![("SWITCHYARD_DATABASE_URL", db_a.as_str()), ("SWITCHYARD_RATE_LIMIT__RATE", "1/m")];
    env_a.extend(shared);
    let a = ServerProcess::start(&env_a).await;
    // B checks bearer tokens (against an issuer that is never asked: the token is malformed).
    // B serves /metrics on its own port, as the Helm chart configures it.
    let metrics_port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let metrics_bind = format!("127.0.0.1:{metrics_port}");
    let mut env_b = vec![
        ("SWITCHYARD_TELEMETRY__METRICS_BIND", metrics_bind.as_str()),
        ("SWITCHYARD_DATABASE_URL", db_b.as_str()),
        ("SWITCHYARD_AUTH__RESOURCE", "http://127.0.0.1/mcp"),
        (
            "SWITCHYARD_AUTH__ISSUERS",
            r#"[{issuer = "http://127.0.0.1:9/issuer", jwks_uri = "http://127.0.0.1:9/jwks"}]"#,
        ),
    ];
    env_b.extend(shared);
    let b = ServerProcess::start(&env_b).await;

    assert_eq!(call(a.base_url(), "echo", None, None).await["result"]["content"][0]["text"], SECRET);
    let unknown = call(a.base_url(), "no_such_tool", None, None).await;
    assert!(unknown["error"]["code"].is_i64(), "an MCP error: {unknown}");
    let refused = call(a.base_url(), "echo", None, None).await;
    assert_eq!(refused["error"]["code"], switchyard_protocol::error::RATE_LIMITED, "{refused}");
    let http = reqwest::Client::new();
    let unauthorized = http
        .post(format!("{}/mcp", b.base_url()))
        .header("authorization", "Bearer not-a-token")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorized.status(), 401);
    let published = http
        .post(format!("{}/admin/v1/notifications/resources/updated", a.base_url()))
        .json(&json!({ "uri": "file:///dashboard" }))
        .send()
        .await
        .unwrap();
    assert!(published.status().is_success(), "{}", published.status());

    // A scraper names the pod's address in Host: the metrics port takes it;
    // the MCP port's Host check would not (and B's MCP port has no /metrics).
    let scrape = |url: String| {
        let http = http.clone();
        async move { http.get(url).header("host", "10.1.2.3:9464").send().await.unwrap() }
    };
    assert_eq!(scrape(format!("{}/metrics", a.base_url())).await.status(), 403);
    assert_eq!(reqwest::get(format!("{}/metrics", b.base_url())).await.unwrap().status(), 404);
    let exposed = eventually("B to record the bus's lag", Duration::from_secs(5), async || {
        let mut exposed = std::collections::BTreeMap::new();
        for url in [format!("{}/metrics", a.base_url()), format!("http://{metrics_bind}/metrics")] {
            let text = reqwest::get(url).await.unwrap().text().await.unwrap();
            parse_scrape(&text, &mut exposed);
        }
        let foreign_host = scrape(format!("http://{metrics_bind}/metrics")).await;
        assert_eq!(foreign_host.status(), 200, "the metrics port takes any Host");
        exposed.contains_key("switchyard_bus_lag_seconds_bucket").then_some(exposed)
    })
    .await;

    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../helm/switchyard/dashboards/switchyard.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let scraper_labels = ["namespace", "pod", "instance", "job", "service", "container", "endpoint"];
    let mut checked = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            // Grafana's variables, as Grafana would substitute them.
            let query = expr.replace("$__rate_interval", "5m").replace("$namespace", ".*");
            let parsed = promql_parser::parser::parse(&query)
                .unwrap_or_else(|e| panic!("panel {:?}: {expr}: {e}", panel["title"]));
            let mut uses = Uses::default();
            walk(&parsed, &mut uses);
            assert!(!uses.metrics.is_empty(), "{expr} names no metric");
            let mut known_labels: std::collections::BTreeSet<String> =
                scraper_labels.iter().map(|l| (*l).to_owned()).collect();
            for metric in &uses.metrics {
                let labels = exposed.get(metric).unwrap_or_else(|| {
                    panic!(
                        "panel {:?} queries {metric}, which no server exposes; exposed: {:?}",
                        panel["title"],
                        exposed.keys()
                    )
                });
                known_labels.extend(labels.iter().cloned());
            }
            for label in &uses.labels {
                assert!(
                    known_labels.contains(label),
                    "panel {:?}: label {label} is not on {:?}",
                    panel["title"],
                    uses.metrics
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 13, "only {checked} queries checked");
}
