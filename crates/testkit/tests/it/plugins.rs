//! Registered plugins end to end, over real HTTP: the `switchyard plugin` CLI
//! and the admin API change the registry, the catalog follows, listen streams
//! hear of it, a restart serves the same catalog, and hostile WASM modules
//! are stopped while the server keeps answering. On SQLite and PostgreSQL.

// Helpers here are test code too; clippy only knows #[test] functions as such.
#![allow(clippy::unwrap_used)]

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use switchyard_registry::testing::FreshDatabase;
use switchyard_testkit::{App, Client, eventually, guest_module, switchyard_binary, until};

/// Runs `switchyard plugin ARGS --server BASE` on a blocking thread.
async fn cli(app: &App, args: &[&str]) -> (bool, String) {
    let mut command = Command::new(switchyard_binary());
    for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("SWITCHYARD_")) {
        command.env_remove(key);
    }
    command.arg("plugin").args(args).args(["--server", app.base_url()]);
    let output = tokio::task::spawn_blocking(move || command.output().expect("run switchyard")).await.unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

async fn tool_names(client: &Client) -> Vec<String> {
    let reply = client.request("tools/list", json!({})).await;
    reply.result()["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

/// Opens a tools listen stream on `listener`, registers `plugin` through
/// `admin` once the stream is acknowledged, and returns what the stream got
/// (the acknowledgement and, if all went well, `tools/list_changed`).
async fn register_while_listening(listener: &Client, admin: &Admin, plugin: Value) -> Vec<Value> {
    let reply = listener
        .stream(
            "subscriptions/listen",
            json!({ "notifications": { "toolsListChanged": true } }),
            2,
            Duration::from_secs(15),
            || async {
                let (status, body) = admin.post("/plugins", plugin).await;
                assert_eq!(status, 201, "{body}");
            },
        )
        .await;
    assert_eq!(reply.messages.len(), 2, "{:?}", reply.messages);
    assert_eq!(reply.messages[1]["method"], "notifications/tools/list_changed");
    reply.messages
}

/// The example module `name` in a file, as a plugin author has it.
fn write_module(name: &str) -> tempfile::TempPath {
    let file = tempfile::Builder::new().suffix(".wasm").tempfile().unwrap();
    std::fs::write(file.path(), guest_module(name)).unwrap();
    file.into_temp_path()
}

/// Register with the CLI, call, hear `list_changed`, disable, see it vanish,
/// enable again, restart, and find the same catalog.
async fn lifecycle(database_url: &str) {
    let env = [("SWITCHYARD_DATABASE_URL", database_url)];
    let app = App::start(&env).await;
    let client = app.client();
    let module = write_module("units");
    let module_arg = module.to_str().unwrap().to_owned();

    let trigger = (client.clone(), &app);
    let listen = client
        .stream(
            "subscriptions/listen",
            json!({ "notifications": { "toolsListChanged": true } }),
            3,
            Duration::from_secs(60),
            || async move {
                let (client, app) = trigger;
                let (ok, out) = cli(app, &["add", "units", "--wasm", &module_arg]).await;
                assert!(ok, "{out}");
                assert!(out.contains("tools: units_convert"), "{out}");
                let call = client
                    .request(
                        "tools/call",
                        json!({"name": "units_convert", "arguments": {"value": 1, "from": "mi", "to": "km"}}),
                    )
                    .await;
                let result = call.result();
                assert_eq!(result["structuredContent"]["unit"], "km", "{result}");
                let km = result["structuredContent"]["value"].as_f64().unwrap();
                assert!((km - 1.609_344).abs() < 1e-9, "{km}");
                let (ok, out) = cli(app, &["disable", "units"]).await;
                assert!(ok, "{out}");
                assert!(!tool_names(&client).await.contains(&"units_convert".to_owned()));
            },
        )
        .await;
    let methods: Vec<&str> = listen.messages.iter().map(|m| m["method"].as_str().unwrap_or_default()).collect();
    assert_eq!(
        methods,
        [
            "notifications/subscriptions/acknowledged",
            "notifications/tools/list_changed",
            "notifications/tools/list_changed"
        ]
    );

    let (ok, out) = cli(&app, &["enable", "units"]).await;
    assert!(ok, "{out}");
    let (ok, listed) = cli(&app, &["list"]).await;
    assert!(ok && listed.contains("units") && listed.contains("wasm") && listed.contains("true"), "{listed}");
    let before = client.request("tools/list", json!({})).await.result().clone();
    assert!(before["tools"].as_array().unwrap().iter().any(|t| t["name"] == "units_convert"));
    app.shut_down();
    drop(app);

    let restarted = App::start(&env).await;
    let after = restarted.client().request("tools/list", json!({})).await.result().clone();
    assert_eq!(after["tools"], before["tools"], "a restart serves the same catalog");
    let (ok, out) = cli(&restarted, &["remove", "units"]).await;
    assert!(ok, "{out}");
    assert!(!tool_names(&restarted.client()).await.contains(&"units_convert".to_owned()));
    drop(module);
}

#[tokio::test]
async fn lifecycle_on_sqlite() {
    let database = FreshDatabase::sqlite();
    lifecycle(database.url()).await;
    database.remove().await;
}

#[tokio::test]
async fn lifecycle_on_postgres() {
    let database = FreshDatabase::postgres().await;
    lifecycle(database.url()).await;
    database.remove().await;
}

/// A thin client of the admin API.
pub(crate) struct Admin {
    http: reqwest::Client,
    base: String,
}

impl Admin {
    pub(crate) fn of(app: &App) -> Self {
        Self { http: reqwest::Client::new(), base: app.admin_url() }
    }

    pub(crate) async fn upload(&self, bytes: Vec<u8>) -> String {
        let response = self
            .http
            .post(format!("{}/artifacts", self.base))
            .header("content-type", "application/wasm")
            .body(bytes)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201);
        response.json::<Value>().await.unwrap()["sha256"].as_str().unwrap().to_owned()
    }

    pub(crate) async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let response = self.http.post(format!("{}{path}", self.base)).json(&body).send().await.unwrap();
        (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
    }
}

fn wat_module(call_body: &str) -> Vec<u8> {
    let describe = r#"{"tools":[{"name":"run","inputSchema":{"type":"object"}}]}"#;
    format!(
        r#"(module (memory (export "memory") 1)
  (data (i32.const 1024) "{}")
  (func (export "switchyard_abi_version") (result i32) i32.const 1)
  (func (export "switchyard_alloc") (param i32) (result i32) i32.const 8192)
  (func (export "switchyard_describe") (result i64) i64.const {})
  (func (export "switchyard_call") (param i32 i32) (result i64) {call_body}))"#,
        describe.replace('"', "\\\""),
        (1024u64 << 32) | describe.len() as u64
    )
    .into_bytes()
}

#[tokio::test]
async fn hostile_modules_are_stopped_and_the_server_keeps_answering() {
    let app = App::start(&[]).await;
    let admin = Admin::of(&app);
    let client = app.client();
    let spin = admin.upload(wat_module("(loop $l (br $l)) i64.const 0")).await;
    let bomb = admin.upload(wat_module("(loop $l (drop (memory.grow (i32.const 16))) (br $l)) i64.const 0")).await;
    let (status, body) = admin
        .post(
            "/plugins",
            json!({"namespace": "spin", "kind": "wasm", "spec": {"artifact": spin, "limits": {"timeout_ms": 2000, "fuel": 100_000_000_000_u64}}}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = admin
        .post(
            "/plugins",
            json!({"namespace": "bomb", "kind": "wasm", "spec": {"artifact": bomb, "limits": {"memory_mib": 8}}}),
        )
        .await;
    assert_eq!(status, 201, "{body}");

    let spinning = {
        let client = client.clone();
        tokio::spawn(async move { client.request("tools/call", json!({"name": "spin_run", "arguments": {}})).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    // While the module spins (for 2 s), the server answers others at once.
    let started = Instant::now();
    let sum = client
        .request("tools/call", json!({"name": "calculator_arithmetic", "arguments": {"expression": "2+2"}}))
        .await;
    assert_eq!(sum.result()["isError"], Value::Null, "{:?}", sum.response());
    assert!(started.elapsed() < Duration::from_millis(1000), "answered in {:?}", started.elapsed());

    let spun = spinning.await.unwrap();
    assert_eq!(spun.result()["isError"], true);
    assert!(spun.result()["content"][0]["text"].as_str().unwrap().contains("deadline"), "{:?}", spun.response());
    let bombed = client.request("tools/call", json!({"name": "bomb_run", "arguments": {}})).await;
    assert_eq!(bombed.result()["isError"], true);
    assert!(bombed.result()["content"][0]["text"].as_str().unwrap().contains("memory cap of 8 MiB"));
    assert_eq!(client.request("tools/list", json!({})).await.status, 200);
}

#[tokio::test]
async fn structured_output_of_a_wasm_tool_is_checked_and_passed_through() {
    let app = App::start(&[]).await;
    let admin = Admin::of(&app);
    let digest = admin.upload(guest_module("textstats")).await;
    let (status, body) =
        admin.post("/plugins", json!({"namespace": "text", "kind": "wasm", "spec": {"artifact": digest}})).await;
    assert_eq!(status, 201, "{body}");
    let client = app.client();
    let tools = client.request("tools/list", json!({})).await;
    let analyze =
        tools.result()["tools"].as_array().unwrap().iter().find(|t| t["name"] == "text_analyze").unwrap().clone();
    assert_eq!(analyze["outputSchema"]["required"][0], "characters");
    let reply = client
        .request("tools/call", json!({"name": "text_analyze", "arguments": {"text": "To be, or not to be.", "top": 2}}))
        .await;
    let stats = &reply.result()["structuredContent"];
    assert_eq!(stats["words"], 6);
    assert_eq!(stats["top_words"], json!([{"word": "be", "count": 2}, {"word": "to", "count": 2}]));
    // An input longer than the room the module keeps for one (64 KiB) goes
    // through `switchyard_alloc` instead, and reads the same.
    let long = "word ".repeat(15_000);
    let reply = client.request("tools/call", json!({"name": "text_analyze", "arguments": {"text": long}})).await;
    assert_eq!(reply.result()["structuredContent"]["words"], 15_000, "{:?}", reply.result()["content"]);
    // Arguments are checked against the schema before the module runs.
    let bad = client.request("tools/call", json!({"name": "text_analyze", "arguments": {"top": 2}})).await;
    assert_eq!(bad.result()["isError"], true);
}

#[tokio::test]
async fn the_admin_api_refuses_bad_input_and_changes_nothing() {
    let app = App::start(&[]).await;
    let admin = Admin::of(&app);
    let digest = admin.upload(guest_module("units")).await;
    let field = |body: &Value| body["error"]["field"].as_str().unwrap_or_default().to_owned();

    let (status, body) =
        admin.post("/plugins", json!({"namespace": "Units!", "kind": "wasm", "spec": {"artifact": digest}})).await;
    assert_eq!((status, field(&body).as_str()), (422, "namespace"), "{body}");
    let (status, body) = admin.post("/plugins", json!({"namespace": "u", "kind": "lua", "spec": {}})).await;
    assert_eq!((status, field(&body).as_str()), (422, "kind"), "{body}");
    let (status, body) = admin
        .post(
            "/plugins",
            json!({"namespace": "u", "kind": "wasm", "spec": {"artifact": digest, "limits": {"memory_mib": 100000}}}),
        )
        .await;
    assert_eq!((status, field(&body).as_str()), (422, "spec.limits.memory_mib"), "{body}");
    let missing: String = Sha256::digest(b"never uploaded").iter().map(|b| format!("{b:02x}")).collect();
    let (status, body) =
        admin.post("/plugins", json!({"namespace": "u", "kind": "wasm", "spec": {"artifact": missing}})).await;
    assert_eq!((status, field(&body).as_str()), (422, "spec.artifact"), "{body}");
    let garbage = admin.upload(b"\0asm\x01\0\0\0 not really".to_vec()).await;
    let (status, body) =
        admin.post("/plugins", json!({"namespace": "u", "kind": "wasm", "spec": {"artifact": garbage}})).await;
    assert_eq!((status, field(&body).as_str()), (422, "spec.artifact"), "{body}");
    let (status, body) =
        admin.post("/plugins", json!({"namespace": "u", "kind": "builtin", "spec": {"name": "nope"}})).await;
    assert_eq!((status, field(&body).as_str()), (422, "spec.name"), "{body}");
    let not_json = admin.http.post(format!("{}/plugins", admin.base)).body("{}").send().await.unwrap();
    assert_eq!(not_json.status(), 415);
    let broken = admin
        .http
        .post(format!("{}/plugins", admin.base))
        .header("content-type", "application/json")
        .body("{\"namespace\":")
        .send()
        .await
        .unwrap();
    assert_eq!(broken.status(), 400);
    let listed: Value = admin.http.get(format!("{}/plugins", admin.base)).send().await.unwrap().json().await.unwrap();
    assert_eq!(listed["plugins"], json!([]), "nothing was written");

    // Optimistic concurrency: a change based on a stale version is refused.
    let (status, created) =
        admin.post("/plugins", json!({"namespace": "u", "kind": "wasm", "spec": {"artifact": digest}})).await;
    assert_eq!(status, 201);
    let id = created["id"].as_str().unwrap();
    let (status, _) = admin.post(&format!("/plugins/{id}/disable"), json!({"version": 1})).await;
    assert_eq!(status, 200);
    let (status, body) = admin.post(&format!("/plugins/{id}/enable"), json!({"version": 1})).await;
    assert_eq!((status, &body["error"]["current_version"]), (409, &json!(2)), "{body}");
    let (status, body) =
        admin.post("/plugins", json!({"namespace": "u", "kind": "builtin", "spec": {"name": "echo"}})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (409, Some("namespace_taken")), "{body}");
    let unknown = admin.http.get(format!("{}/plugins/plg_nope", admin.base)).send().await.unwrap();
    assert_eq!(unknown.status(), 404);
}

#[tokio::test]
async fn a_token_opens_the_admin_api_to_other_peers() {
    let app = App::start(&[
        ("SWITCHYARD_ADMIN__TOKEN", "a-long-enough-admin-token"),
        ("SWITCHYARD_ADMIN__ALLOW_LOOPBACK", "false"),
    ])
    .await;
    let url = format!("{}/plugins", app.admin_url());
    let http = reqwest::Client::new();
    let anonymous = http.get(&url).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    assert_eq!(anonymous.headers()["www-authenticate"], "Bearer");
    let wrong = http.get(&url).bearer_auth("not-the-admin-token").send().await.unwrap();
    assert_eq!(wrong.status(), 401);
    let right = http.get(&url).bearer_auth("a-long-enough-admin-token").send().await.unwrap();
    assert_eq!(right.status(), 200);
    // A browser page (DNS rebinding) is refused before the token is even looked at.
    let rebinding = http
        .get(&url)
        .bearer_auth("a-long-enough-admin-token")
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebinding.status(), 403);
}

/// Two replicas on one PostgreSQL database, each with its own in-process
/// bus: a plugin registered through one reaches the other's catalog and its
/// listen streams through the registry version check alone.
#[tokio::test]
async fn another_replica_follows_the_registry() {
    let replicas = App::builder()
        .replicas(2)
        .postgres()
        .configure(|raw| raw.registry.sync_interval = Some("200ms".into()))
        .start()
        .await;
    let (one, two) = (&replicas[0], &replicas[1]);
    let admin = Admin::of(one);
    register_while_listening(
        &two.client(),
        &admin,
        json!({"namespace": "more", "kind": "builtin", "spec": {"name": "echo"}}),
    )
    .await;
    // The other replica picks the change up from the registry's version.
    until("the other replica to serve more_echo", Duration::from_secs(5), async || {
        tool_names(&two.client()).await.contains(&"more_echo".to_owned())
    })
    .await;
    replicas.remove().await;
}

/// The settings that let upstream plugins reach servers on loopback (the
/// tests' own) and read secrets from `secrets`: by default neither is allowed.
pub(crate) fn upstreams_on_loopback(secrets: &tempfile::TempDir) -> Vec<(&'static str, &str)> {
    vec![
        ("SWITCHYARD_UPSTREAM__ALLOWED_RANGES", "127.0.0.0/8"),
        ("SWITCHYARD_UPSTREAM__SECRET_DIRS", secrets.path().to_str().unwrap()),
    ]
}

/// An upstream plugin pointing at a second real Switchyard: its tools are
/// republished under the namespace and routed, and a change on the upstream
/// (announced on its own listen stream) reaches our listen stream.
#[tokio::test]
async fn an_upstream_server_is_republished_and_followed() {
    let upstream = App::start(&[]).await;
    let secrets = tempfile::tempdir().unwrap();
    let app = App::start(&upstreams_on_loopback(&secrets)).await;
    let admin = Admin::of(&app);
    let secret = secrets.path().join("api-key");
    std::fs::write(&secret, "platform-secret\n").unwrap();
    let spec = json!({"url": upstream.url(), "timeout_ms": 5000,
                      "auth": {"header": {"name": "X-Api-Key", "value_from_file": secret}}});
    let (status, body) = admin.post("/plugins", json!({"namespace": "up", "kind": "upstream", "spec": spec})).await;
    assert_eq!(status, 201, "{body}");
    let client = app.client();
    let names = tool_names(&client).await;
    assert!(
        names.contains(&"up_calculator_arithmetic".to_owned()) && names.contains(&"up_echo".to_owned()),
        "{names:?}"
    );
    let answer = client
        .request("tools/call", json!({"name": "up_calculator_arithmetic", "arguments": {"expression": "6*7"}}))
        .await;
    assert_eq!(answer.result()["structuredContent"]["result"], 42.0, "{:?}", answer.response());
    let failing = client
        .request("tools/call", json!({"name": "up_calculator_arithmetic", "arguments": {"expression": "1/"}}))
        .await;
    assert_eq!(failing.result()["isError"], true, "the upstream's tool error is relayed: {:?}", failing.response());

    let more = json!({"namespace": "more", "kind": "builtin", "spec": {"name": "echo"}});
    register_while_listening(&client, &Admin::of(&upstream), more).await;
    assert!(tool_names(&client).await.contains(&"up_more_echo".to_owned()));
    let echoed =
        client.request("tools/call", json!({"name": "up_more_echo", "arguments": {"text": "via upstream"}})).await;
    assert_eq!(echoed.result()["content"][0]["text"], "via upstream");
}

#[tokio::test]
async fn upstream_urls_and_secrets_are_checked_before_registering() {
    let secrets = tempfile::tempdir().unwrap();
    let app = App::start(&upstreams_on_loopback(&secrets)).await;
    let admin = Admin::of(&app);
    let field = |body: &Value| body["error"]["field"].as_str().unwrap_or_default().to_owned();
    let register = |spec: Value| admin.post("/plugins", json!({"namespace": "up", "kind": "upstream", "spec": spec}));
    let (status, body) = register(json!({"url": "http://169.254.169.254/latest/meta-data"})).await;
    assert_eq!((status, field(&body).as_str()), (422, "spec.url"), "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("link-local"), "{body}");
    // Nothing listens on the discard port: unreachable at registration is refused.
    let (status, body) = register(json!({"url": "http://127.0.0.1:9/mcp", "timeout_ms": 2000})).await;
    assert_eq!((status, field(&body).as_str()), (422, "spec.url"), "{body}");
    let missing = secrets.path().join("missing");
    let (status, body) =
        register(json!({"url": app.url(), "auth": {"header": {"name": "X-Key", "value_from_file": missing}}})).await;
    assert_eq!((status, field(&body).as_str()), (422, "spec.auth.header"), "{body}");
    assert!(!body.to_string().contains("platform-secret"));
    let (status, body) =
        register(json!({"url": app.url(), "auth": {"header": {"name": "X-Key", "value": "inline"}}})).await;
    assert_eq!((status, field(&body).as_str()), (422, "spec.auth.header.value"), "{body}");
}

/// A server that may reach loopback upstreams, with `legacy` registered as
/// the `py` namespace (and the directory its secrets could live in).
async fn serving_as_py(legacy: &switchyard_testkit::LegacyPythonServer) -> (App, tempfile::TempDir) {
    let secrets = tempfile::tempdir().unwrap();
    let app = App::start(&upstreams_on_loopback(&secrets)).await;
    let (status, body) = Admin::of(&app)
        .post("/plugins", json!({"namespace": "py", "kind": "upstream", "spec": {"url": legacy.url()}}))
        .await;
    assert_eq!(status, 201, "{body}");
    (app, secrets)
}

/// A 2025-era upstream (the official Python SDK, `initialize` and a session
/// id): Switchyard falls back, republishes its tool, prompt and resource, and
/// serves them to 2026-07-28 clients.
#[tokio::test]
async fn a_2025_era_upstream_is_reached_through_initialize() {
    let legacy = switchyard_testkit::LegacyPythonServer::start().await;
    let (app, _secrets) = serving_as_py(&legacy).await;
    let client = app.client();
    assert!(tool_names(&client).await.contains(&"py_add".to_owned()));
    let sum = client.request("tools/call", json!({"name": "py_add", "arguments": {"a": 20, "b": 22}})).await;
    assert_eq!(sum.result()["content"][0]["text"], "42", "{:?}", sum.response());
    let prompt = client.request("prompts/get", json!({"name": "py_greet", "arguments": {"name": "Ada"}})).await;
    assert_eq!(prompt.result()["messages"][0]["content"]["text"], "Hello, Ada!", "{:?}", prompt.response());
    let read = client.request("resources/read", json!({"uri": "legacy://motd"})).await;
    assert_eq!(read.result()["contents"][0]["text"], "legacy says hi", "{:?}", read.response());
}

/// A 2025-era upstream that restarts forgets its sessions and answers 404:
/// Switchyard starts a new session, and every call, eight of them at once,
/// succeeds.
#[tokio::test]
async fn a_2025_era_upstream_that_forgot_its_session_gets_a_new_one() {
    let mut legacy = switchyard_testkit::LegacyPythonServer::start().await;
    let (app, _secrets) = serving_as_py(&legacy).await;
    let client = app.client();
    let add = async |a: i64| {
        let sum = client.request("tools/call", json!({"name": "py_add", "arguments": {"a": a, "b": 1}})).await;
        sum.result()["content"][0]["text"].as_str().map(str::to_owned)
    };
    assert_eq!(add(1).await.as_deref(), Some("2"));
    legacy.restart().await;
    let sums = futures::future::join_all((0..8).map(add)).await;
    let expected: Vec<_> = (0..8).map(|a| Some((a + 1).to_string())).collect();
    assert_eq!(sums, expected);
}

#[tokio::test]
async fn the_admin_api_can_have_its_own_port() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let bind = format!("127.0.0.1:{port}");
    let app = App::start(&[("SWITCHYARD_ADMIN__BIND", &bind)]).await;
    let http = reqwest::Client::new();
    let on_admin_port = eventually("the admin port to answer", Duration::from_secs(2), async || {
        http.get(format!("http://{bind}/admin/v1/plugins")).send().await.ok().map(|r| r.status())
    })
    .await;
    assert_eq!(on_admin_port, reqwest::StatusCode::OK);
    let on_main_port = http.get(format!("{}/plugins", app.admin_url())).send().await.unwrap();
    assert_eq!(on_main_port.status(), 404, "the admin API is only on its own port");
    let mcp_on_admin_port = http.post(format!("http://{bind}/mcp")).body("{}").send().await.unwrap();
    assert_eq!(mcp_on_admin_port.status(), 404, "and MCP is not there");
}

/// Three replicas on one PostgreSQL and one Redis, their timers too slow to
/// matter: a plugin registered through replica 1 reaches the listen streams
/// held on replicas 2 and 3 through the Redis bus, and they serve it.
#[tokio::test]
async fn a_registration_reaches_every_replica_through_redis() {
    // The registry is checked hourly: only the bus can carry the change in time.
    let replicas = App::builder()
        .replicas(3)
        .redis()
        .postgres()
        .configure(|raw| raw.registry.sync_interval = Some("1h".into()))
        .start()
        .await;
    let admin = Admin::of(&replicas[0]);
    let (two, three) = (replicas[1].client(), replicas[2].client());
    let (acknowledged, opened) = tokio::sync::oneshot::channel();
    let listen_on_three = {
        let three = three.clone();
        tokio::spawn(async move {
            let params = json!({"notifications": {"toolsListChanged": true}});
            three
                .stream("subscriptions/listen", params, 2, Duration::from_secs(10), || async move {
                    let _ = acknowledged.send(());
                })
                .await
        })
    };
    opened.await.unwrap();
    let started = Instant::now();
    register_while_listening(&two, &admin, json!({"namespace": "shared", "kind": "builtin", "spec": {"name": "echo"}}))
        .await;
    let on_three = listen_on_three.await.unwrap();
    assert_eq!(on_three.messages.len(), 2, "{:?}", on_three.messages);
    assert_eq!(on_three.messages[1]["method"], "notifications/tools/list_changed");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "through the bus, not the hourly timer: {:?}",
        started.elapsed()
    );
    for client in [&two, &three] {
        let echoed =
            client.request("tools/call", json!({"name": "shared_echo", "arguments": {"text": "everywhere"}})).await;
        assert_eq!(echoed.result()["content"][0]["text"], "everywhere");
    }
    replicas.remove().await;
}

/// The registry database goes away (connections refused, open ones killed):
/// the replica keeps serving its last catalog, admin writes fail with 503 and
/// write nothing, and everything works again when the database returns.
#[tokio::test]
async fn a_database_outage_degrades_to_the_last_catalog() {
    use sqlx::Connection as _;
    let database = FreshDatabase::postgres().await;
    let env = [("SWITCHYARD_DATABASE_URL", database.url()), ("SWITCHYARD_REGISTRY__SYNC_INTERVAL", "200ms")];
    let app = App::start(&env).await;
    let admin = Admin::of(&app);
    let (status, _) =
        admin.post("/plugins", json!({"namespace": "kept", "kind": "builtin", "spec": {"name": "echo"}})).await;
    assert_eq!(status, 201);

    let name = database.url().rsplit('/').next().unwrap().to_owned();
    let admin_url = std::env::var("TEST_DATABASE_ADMIN_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let mut postgres = sqlx::AnyConnection::connect(&admin_url).await.unwrap();
    let run = |sql: String| sqlx::query(sqlx::AssertSqlSafe(sql));
    run(format!("ALTER DATABASE {name} ALLOW_CONNECTIONS false")).execute(&mut postgres).await.unwrap();
    run(format!("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"))
        .fetch_all(&mut postgres)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await; // a few failed version checks

    let client = app.client();
    assert!(tool_names(&client).await.contains(&"kept_echo".to_owned()), "the last catalog is still served");
    let echoed = client.request("tools/call", json!({"name": "kept_echo", "arguments": {"text": "still here"}})).await;
    assert_eq!(echoed.result()["content"][0]["text"], "still here");
    let (status, body) =
        admin.post("/plugins", json!({"namespace": "lost", "kind": "builtin", "spec": {"name": "echo"}})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (503, Some("registry_unavailable")), "{body}");

    run(format!("ALTER DATABASE {name} ALLOW_CONNECTIONS true")).execute(&mut postgres).await.unwrap();
    let listed: Value = admin.http.get(format!("{}/plugins", admin.base)).send().await.unwrap().json().await.unwrap();
    let namespaces: Vec<&str> =
        listed["plugins"].as_array().unwrap().iter().map(|p| p["namespace"].as_str().unwrap()).collect();
    assert_eq!(namespaces, ["kept"], "the refused write left nothing behind");
    let (status, body) =
        admin.post("/plugins", json!({"namespace": "back", "kind": "builtin", "spec": {"name": "echo"}})).await;
    assert_eq!(status, 201, "{body}");
    assert!(tool_names(&client).await.contains(&"back_echo".to_owned()));
    drop(app);
    database.remove().await;
}

/// An upstream plugin authenticating with OAuth client credentials against a
/// real authorization server (`oidc-provider`): the right secret gets a token
/// and the plugin registers; a wrong one is refused with the server's error.
#[tokio::test]
async fn upstream_client_credentials_come_from_a_real_authorization_server() {
    let authorization = switchyard_testkit::AuthorizationServer::start().await;
    let upstream = App::start(&[]).await;
    let secrets = tempfile::tempdir().unwrap();
    let app = App::start(&upstreams_on_loopback(&secrets)).await;
    let admin = Admin::of(&app);
    let spec = |secret: &std::path::Path| {
        json!({"url": upstream.url(), "auth": {"client_credentials": {
            "token_url": authorization.token_endpoint(), "client_id": "switchyard-upstream",
            "client_secret_from_file": secret, "scope": "tools:read"}}})
    };
    let wrong = secrets.path().join("wrong");
    std::fs::write(&wrong, "not-the-secret").unwrap();
    let (status, body) =
        admin.post("/plugins", json!({"namespace": "cc", "kind": "upstream", "spec": spec(&wrong)})).await;
    assert_eq!(status, 422, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("invalid_client"), "{body}");
    assert!(!body.to_string().contains("not-the-secret"), "the secret is never echoed");

    let right = secrets.path().join("right");
    std::fs::write(&right, "upstream-secret\n").unwrap();
    // With h2c the upstream gets HTTP/2, and the token endpoint still HTTP/1.1.
    for (namespace, h2c) in [("cc", false), ("cch", true)] {
        let mut spec = spec(&right);
        spec["h2c"] = json!(h2c);
        let (status, body) =
            admin.post("/plugins", json!({"namespace": namespace, "kind": "upstream", "spec": spec})).await;
        assert_eq!(status, 201, "{body}");
        let tool = format!("{namespace}_calculator_arithmetic");
        let sum = app.client().request("tools/call", json!({"name": tool, "arguments": {"expression": "2+3"}})).await;
        assert_eq!(sum.result()["structuredContent"]["result"], 5.0, "{:?}", sum.response());
    }
}
