//! The Tasks extension through an upstream (#19): a tool of an upstream that
//! offers tasks answers our client with a task the upstream keeps, under a
//! task id of ours (sealed: the upstream's id is never shown, nor can two
//! upstreams' ids collide), and `tasks/get`, `tasks/update` and
//! `tasks/cancel` on any front replica reach the upstream for the caller
//! the task is of, and for no one else. What the upstream says of its task
//! is rebuilt from the fields the extension defines, and never kept.

// Helpers here are test code too; clippy only knows #[test] functions as such.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use serde_json::{Value, json};
use switchyard_testkit::{App, AuthorizationServer, Behaviour, Client, HostileUpstream, eventually, meta};

use crate::plugins::{Admin, upstreams_on_loopback};
use crate::token_exchange::{claims, exchanging, front};
use switchyard::config::StringList;

/// What our clients declare: tasks, and elicitation for the tasks that ask.
fn takes_tasks() -> Value {
    json!({ "extensions": { "io.modelcontextprotocol/tasks": {} }, "elicitation": {} })
}

async fn call(client: &Client, method: &str, params: Value) -> Value {
    let reply = client.request_with(method, params, takes_tasks()).await;
    assert_eq!(reply.status, 200, "{:?}", reply.messages);
    reply.response().clone()
}

fn tool(name: &str, arguments: Value) -> Value {
    json!({ "name": name, "arguments": arguments })
}

/// The task `id` as `tasks/get` on `client` shows it once it is in one of `statuses`.
async fn until(client: &Client, id: &str, statuses: &[&str]) -> Value {
    eventually(&format!("task {id} to be one of {statuses:?}"), Duration::from_secs(10), || async {
        let task = call(client, "tasks/get", json!({ "taskId": id })).await["result"].clone();
        statuses.contains(&task["status"].as_str().unwrap_or_default()).then_some(task)
    })
    .await
}

/// A created task of ours: `resultType: task`, an id of ours.
fn created(response: &Value) -> String {
    let result = &response["result"];
    assert_eq!(result["resultType"], "task", "{response}");
    let id = result["taskId"].as_str().unwrap();
    assert!(id.starts_with("tsk_up.") && id.len() > 100, "an id of ours, sealed: {id}");
    id.to_owned()
}

/// Through a second Switchyard, which offers tasks: created on one front
/// replica, read, answered and cancelled through another; a client that does
/// not take tasks is answered at once, or told the tool needs them; an MRTR
/// round before the task goes through too.
#[tokio::test]
async fn an_upstreams_task_is_followed_through_any_front_replica() {
    let upstream = App::start(&[("SWITCHYARD_FIXTURE", "conformance")]).await;
    let offered = upstream.client().request("server/discover", json!({})).await;
    assert!(offered.result()["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"].is_object());
    // Two replicas of one deployment: one registry (the plugin is the same
    // on both), one Redis, the keys that seal state and task ids.
    let front = App::builder()
        .replicas(2)
        .redis()
        .configure(|raw| raw.upstream.allowed_ranges = Some(StringList::List(vec!["127.0.0.0/8".into()])))
        .start()
        .await;
    let plugin = json!({"namespace": "up", "kind": "upstream", "spec": {"url": upstream.url()}});
    let (status, body) = Admin::of(&front[0]).post("/plugins", plugin).await;
    assert_eq!(status, 201, "{body}");
    let (one, two) = (front[0].client(), front[1].client());
    eventually("the other replica to serve the upstream's tools", Duration::from_secs(10), || async {
        let listed = two.request("tools/list", json!({})).await;
        listed.result()["tools"].as_array().unwrap().iter().any(|t| t["name"] == "up_slow_compute").then_some(())
    })
    .await;

    let slow = call(&one, "tools/call", tool("up_slow_compute", json!({ "seconds": 0.5, "label": "x" }))).await;
    let id = created(&slow);
    assert_eq!(slow["result"]["status"], "working");
    assert!(slow["result"]["createdAt"].is_string() && slow["result"].get("ttlMs").is_some(), "{slow}");
    let done = until(&two, &id, &["completed"]).await;
    assert_eq!(done["taskId"], id.as_str());
    assert!(done["result"]["content"][0]["text"].as_str().unwrap().contains("finished after 0.5 s"), "{done}");

    // Without tasks the upstream is not told our client takes them: it answers at once.
    let plain = one.request("tools/call", tool("up_slow_compute", json!({ "seconds": 0.1 }))).await;
    assert_eq!(plain.result()["resultType"], "complete", "{:?}", plain.messages);
    assert!(plain.result()["content"][0]["text"].as_str().unwrap().contains("finished"));
    let refused = one.request("tools/call", tool("up_failing_job", json!({}))).await;
    assert_eq!(refused.error_code(), Some(-32021), "{:?}", refused.messages);
    let needed = &refused.response()["error"]["data"]["requiredCapabilities"];
    assert!(needed["extensions"]["io.modelcontextprotocol/tasks"].is_object(), "{needed}");

    // A tool error completes the task with isError; a protocol error fails it.
    let failing = created(&call(&one, "tools/call", tool("up_failing_job", json!({}))).await);
    let failed = until(&two, &failing, &["completed", "failed"]).await;
    assert_eq!((failed["status"].as_str(), failed["result"]["isError"].as_bool()), (Some("completed"), Some(true)));
    let broken = created(&call(&one, "tools/call", tool("up_protocol_error_job", json!({}))).await);
    let broken = until(&one, &broken, &["completed", "failed"]).await;
    assert_eq!((broken["status"].as_str(), broken["error"]["code"].as_i64()), (Some("failed"), Some(-32603)));

    // Cancelled through the other replica: the upstream's task is.
    let long = created(&call(&one, "tools/call", tool("up_slow_compute", json!({ "seconds": 30 }))).await);
    let ack = call(&two, "tasks/cancel", json!({ "taskId": long })).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert!(ack["result"].get("taskId").is_none(), "an empty ack: {ack}");
    assert_eq!(until(&one, &long, &["cancelled", "completed", "failed"]).await["status"], "cancelled");

    // A task that asks: its input requests under the upstream's keys, answered through the other replica.
    let asking = created(&call(&one, "tools/call", tool("up_multi_input", json!({}))).await);
    let waiting = until(&two, &asking, &["input_required"]).await;
    let keys: Vec<&String> = waiting["inputRequests"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["r1.first", "r1.second"], "{waiting}");
    let answer = |text: &str| json!({ "action": "accept", "content": { "answer": text } });
    let answers =
        json!({ "taskId": asking, "inputResponses": { "r1.first": answer("one"), "r1.second": answer("two") } });
    assert_eq!(call(&one, "tasks/update", answers).await["result"]["resultType"], "complete");
    let answered = until(&two, &asking, &["completed", "failed"]).await;
    let text = answered["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("one") && text.contains("two"), "{answered}");

    // An MRTR round first (the retry on the other replica), then the task.
    let params = tool("up_test_tool_with_task", json!({}));
    let asked = call(&one, "tools/call", params.clone()).await;
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let mut retry = params;
    retry["inputResponses"] = json!({ "user_name": { "action": "accept", "content": { "name": "Ada" } } });
    retry["requestState"] = asked["result"]["requestState"].clone();
    let greeting = created(&call(&two, "tools/call", retry).await);
    let greeted = until(&one, &greeting, &["completed", "failed"]).await;
    assert_eq!(greeted["result"]["content"][0]["text"], "Hello, Ada! (answered from a task)", "{greeted}");

    // An id changed by one character, or made up, is unknown.
    let mut tampered = id.clone().into_bytes();
    let at = tampered.len() - 10;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    for unknown in [tampered.as_str(), "tsk_up.v2.k.AAAA", "tsk_up."] {
        let reply = one.request_with("tasks/get", json!({ "taskId": unknown }), takes_tasks()).await;
        assert_eq!(reply.error_code(), Some(-32602), "{unknown}: {:?}", reply.messages);
    }
    front.remove().await;
}

/// A hostile upstream's task reaches our client rebuilt: its id is ours,
/// fields the extension does not define are dropped, a status it does not
/// define is an error naming the upstream. A task is never served from the
/// answer cache, though the tool is read-only and the task carries a `ttlMs`.
/// An id that does not open never reaches the upstream.
#[tokio::test]
async fn a_hostile_upstreams_task_is_rebuilt_and_never_kept() {
    let upstream = HostileUpstream::start().await;
    let secrets = tempfile::tempdir().unwrap();
    let app = App::start(&upstreams_on_loopback(&secrets)).await;
    let plugin = json!({"namespace": "h", "kind": "upstream", "spec": {"url": upstream.url()}});
    let (status, body) = Admin::of(&app).post("/plugins", plugin).await;
    assert_eq!(status, 201, "{body}");
    let client = app.client();
    // The upstream has marked a read-only tool's result: its calls are looked up in the cache from now on.
    call(&client, "tools/call", tool("h_kept", json!({}))).await;

    let plain = client.request("tools/call", tool("h_job", json!({}))).await;
    assert_eq!(plain.result()["content"][0]["text"], "ok", "not told, the upstream answers at once");
    let first = call(&client, "tools/call", tool("h_job", json!({}))).await;
    let second = call(&client, "tools/call", tool("h_job", json!({}))).await;
    assert_eq!(first["result"]["ttlMs"], 7 * 24 * 3600 * 1000, "no longer than our id lives: {first}");
    let (first, second) = (created(&first), created(&second));
    assert_ne!(first, second);
    assert_eq!(upstream.asked("tools/call"), 4, "a task is never served from the cache");
    let text = |value: &Value| value.to_string();
    // What the upstream slips in is a member named "leak" holding
    // "upstream-internal"; a task id of ours, random base64, may hold the
    // four letters by chance (it did, once in about 40,000 runs).
    let leaks = |value: &Value| text(value).contains("\"leak\"") || text(value).contains("upstream-internal");
    let task = call(&client, "tasks/get", json!({ "taskId": first })).await;
    assert_eq!(task["result"]["status"], "completed", "{task}");
    assert_eq!(task["result"]["result"]["content"][0]["text"], "done");
    assert_eq!(task["result"]["taskId"], first.as_str());
    assert!(!leaks(&task) && !text(&task).contains("hostile-task"), "{task}");
    let ack = call(&client, "tasks/cancel", json!({ "taskId": second })).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert!(!leaks(&ack), "nothing of the upstream's ack: {ack}");
    assert_eq!(upstream.asked("tasks/get") + upstream.asked("tasks/cancel"), 2);

    upstream.become_(Behaviour::LyingTasks);
    let lying = client.request_with("tasks/get", json!({ "taskId": first }), takes_tasks()).await;
    assert_eq!(lying.error_code(), Some(-32603), "{:?}", lying.messages);
    let message = lying.response()["error"]["message"].as_str().unwrap();
    assert!(message.contains("malformed task") && message.contains("status"), "{message}");

    // Waiting for input: the request rebuilt, and asked only of a client that declared what it needs.
    upstream.become_(Behaviour::AskingTasks);
    let waiting = call(&client, "tasks/get", json!({ "taskId": first })).await;
    assert_eq!(waiting["result"]["status"], "input_required", "{waiting}");
    let asked = &waiting["result"]["inputRequests"]["confirm"];
    assert_eq!(asked["method"], "elicitation/create");
    assert_eq!(asked["params"]["message"], "Go on?");
    assert!(!leaks(&waiting), "{waiting}");
    let tasks_only = json!({ "extensions": { "io.modelcontextprotocol/tasks": {} } });
    let unable = client.request_with("tasks/get", json!({ "taskId": first }), tasks_only).await;
    assert_eq!(unable.error_code(), Some(-32021), "{:?}", unable.messages);
    let update = json!({ "taskId": first, "inputResponses": { "confirm": { "action": "accept", "content": {} } } });
    let ack = call(&client, "tasks/update", update).await;
    assert!(ack["result"].get("leak").is_none() && ack["result"]["resultType"] == "complete", "{ack}");
    // Failed: its error's code and message, nothing more.
    upstream.become_(Behaviour::FailedTasks);
    let failed = call(&client, "tasks/get", json!({ "taskId": first })).await;
    assert_eq!(failed["result"]["error"], json!({ "code": -32603, "message": "it broke" }), "{failed}");

    let before = upstream.asked("tasks/get");
    let forged = client.request_with("tasks/get", json!({ "taskId": "tsk_up.hostile-task-1" }), takes_tasks()).await;
    assert_eq!(forged.error_code(), Some(-32602));
    let undeclared = client.request("tasks/get", json!({ "taskId": first })).await;
    assert_eq!(undeclared.error_code(), Some(-32021), "tasks/* need the extension declared");
    assert_eq!(upstream.asked("tasks/get"), before, "neither reached the upstream");

    // A listen stream is not told of a task an upstream keeps: only ours are pushed.
    let mut params = json!({ "notifications": { "taskIds": [first] } });
    params["_meta"] = meta(takes_tasks());
    let heard = client.stream("subscriptions/listen", params, 1, Duration::from_secs(5), || async {}).await;
    assert_eq!(heard.messages[0]["method"], "notifications/subscriptions/acknowledged", "{:?}", heard.messages);
    assert!(heard.messages[0]["params"]["notifications"].get("taskIds").is_none(), "{:?}", heard.messages);
}

/// A task is its caller's: another caller (another subject) gets -32602 for
/// it, and the upstream hears nothing; its own caller's requests about it
/// carry a token exchanged for that caller's, as its calls do.
#[tokio::test]
async fn an_upstreams_task_is_its_callers_alone() {
    let authorization = AuthorizationServer::start().await;
    let secrets = tempfile::tempdir().unwrap();
    let (app, resource) = front(&authorization, &secrets).await;
    let upstream = HostileUpstream::start().await;
    let spec = exchanging(&authorization, &secrets, upstream.url());
    let (status, body) =
        Admin::of(&app).post("/plugins", json!({"namespace": "h", "kind": "upstream", "spec": spec})).await;
    assert_eq!(status, 201, "{body}");

    let mine = authorization.token("mcp-test", "mcp tools:call", &resource).await;
    let owner = app.client().with_token(&mine);
    let id = created(&call(&owner, "tools/call", tool("h_job", json!({}))).await);
    let other = app.client().with_token(&authorization.token("mcp-short", "mcp", &resource).await);
    let answers = json!({ "taskId": id, "inputResponses": {} });
    for (method, params) in
        [("tasks/get", json!({ "taskId": id })), ("tasks/cancel", json!({ "taskId": id })), ("tasks/update", answers)]
    {
        let reply = other.request_with(method, params, takes_tasks()).await;
        assert_eq!(reply.error_code(), Some(-32602), "{method}: {:?}", reply.messages);
    }
    assert_eq!(upstream.asked("tasks/get") + upstream.asked("tasks/cancel") + upstream.asked("tasks/update"), 0);

    let task = call(&owner, "tasks/get", json!({ "taskId": id })).await;
    assert_eq!(task["result"]["status"], "completed", "{task}");
    let sent = upstream.bearers("tasks/get");
    let exchanged = claims(sent[0].as_deref().expect("a token"));
    assert_eq!(exchanged["sub"], claims(&mine)["sub"], "for the task's caller: {exchanged}");
    assert_eq!(exchanged["aud"], upstream.url(), "meant for the upstream: {exchanged}");
}
