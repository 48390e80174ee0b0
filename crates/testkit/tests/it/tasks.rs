//! The Tasks extension across replicas: tasks stored in the shared database
//! before the client hears of them, read and cancelled on any replica, failed
//! when the replica running them dies, unknown once expired.

// Helpers here are test code too; clippy only knows #[test] functions as such.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use switchyard_registry::testing::FreshDatabase;
use switchyard_testkit::{App, Client, Reply, ServerProcess, eventually, meta, until};

/// The client capabilities of these tests: tasks, and elicitation for the
/// tasks that ask.
fn tasks_capability() -> Value {
    json!({ "extensions": { "io.modelcontextprotocol/tasks": {} }, "elicitation": {} })
}

async fn call(client: &Client, method: &str, params: Value) -> Reply {
    client.request_with(method, params, tasks_capability()).await
}

/// The task as `tasks/get` on `client` shows it once it is in `status`,
/// which must be `within`.
async fn until_status(client: &Client, id: &str, status: &str, within: Duration) -> Value {
    eventually(&format!("task {id} to be {status}"), within, || async {
        let task = call(client, "tasks/get", json!({ "taskId": id })).await.result().clone();
        (task["status"] == status).then_some(task)
    })
    .await
}

/// The task as `tasks/get` on `client` shows it once it has ended.
async fn until_ended(client: &Client, id: &str) -> Value {
    eventually(&format!("task {id} to end"), Duration::from_secs(10), || async {
        let task = call(client, "tasks/get", json!({ "taskId": id })).await.result().clone();
        ["completed", "failed", "cancelled"].contains(&task["status"].as_str().unwrap_or_default()).then_some(task)
    })
    .await
}

#[tokio::test]
async fn a_task_created_on_one_replica_is_read_and_cancelled_on_the_others() {
    let replicas = App::builder()
        .replicas(3)
        .redis()
        .postgres()
        .configure(|raw| raw.fixture = Some("conformance".into()))
        .start()
        .await;
    let [one, two, three] = [replicas[0].client(), replicas[1].client(), replicas[2].client()];

    // Discovered, and without the extension a task-only tool is -32021.
    let discovered = one.request("server/discover", json!({})).await;
    assert_eq!(discovered.result()["capabilities"]["extensions"], tasks_capability()["extensions"]);
    let refused = one.request("tools/call", json!({ "name": "failing_job", "arguments": {} })).await;
    assert_eq!(refused.error_code(), Some(-32021));

    // Created on one, completed, read on two.
    let created =
        call(&one, "tools/call", json!({ "name": "slow_compute", "arguments": { "seconds": 0.3, "label": "x" } }))
            .await;
    let created = created.result().clone();
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "working");
    let id = created["taskId"].as_str().unwrap().to_owned();
    assert!(id.len() >= 36, "high entropy: {id}");
    let working = call(&two, "tasks/get", json!({ "taskId": id })).await;
    assert_eq!(working.status, 200);
    assert_eq!(working.result()["resultType"], "complete");
    let done = until_ended(&two, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(done["result"]["content"][0]["text"].as_str().unwrap().contains("finished after 0.3 s"), "{done}");
    assert!(done.get("resultType").is_some());

    // A tool error is a completed task with isError; a protocol error fails it.
    let failing = call(&one, "tools/call", json!({ "name": "failing_job", "arguments": {} })).await;
    let failed = until_ended(&three, failing.result()["taskId"].as_str().unwrap()).await;
    assert_eq!((failed["status"].as_str(), failed["result"]["isError"].as_bool()), (Some("completed"), Some(true)));
    let broken = call(&one, "tools/call", json!({ "name": "protocol_error_job", "arguments": {} })).await;
    let broken = until_ended(&two, broken.result()["taskId"].as_str().unwrap()).await;
    assert_eq!(broken["status"], "failed", "{broken}");
    assert_eq!(broken["error"]["code"], -32603);
    assert!(broken.get("result").is_none());

    // Created on one, cancelled through three, seen cancelled on two, and it
    // stays cancelled: the owner stopped the call rather than completing it.
    let long = call(&one, "tools/call", json!({ "name": "slow_compute", "arguments": { "seconds": 2 } })).await;
    let long_id = long.result()["taskId"].as_str().unwrap().to_owned();
    let ack = call(&three, "tasks/cancel", json!({ "taskId": long_id })).await;
    assert_eq!(ack.result()["resultType"], "complete");
    assert!(ack.result().get("taskId").is_none(), "an empty ack");
    assert_eq!(call(&two, "tasks/get", json!({ "taskId": long_id })).await.result()["status"], "cancelled");
    // Time is the subject here, on three real replicas: past the moment the
    // 2-second call would have completed, it must still be cancelled.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(call(&one, "tasks/get", json!({ "taskId": long_id })).await.result()["status"], "cancelled");

    // A listen stream on two that names a task created on one hears its
    // end; a task id it does not own (or that does not exist) is left out.
    let quick = call(&one, "tools/call", json!({ "name": "slow_compute", "arguments": { "seconds": 0.5 } })).await;
    let quick_id = quick.result()["taskId"].as_str().unwrap().to_owned();
    let mut params = json!({ "notifications": { "taskIds": [quick_id, "tsk_not_yours"] } });
    params["_meta"] = meta(tasks_capability());
    let heard = two.stream("subscriptions/listen", params, 2, Duration::from_secs(5), || async {}).await;
    assert_eq!(heard.messages[0]["params"]["notifications"], json!({ "taskIds": [quick_id] }));
    assert_eq!(heard.messages.len(), 2, "{:?}", heard.messages);
    assert_eq!(heard.messages[1]["method"], "notifications/tasks");
    assert_eq!(heard.messages[1]["params"]["taskId"], quick_id.as_str());
    assert_eq!(heard.messages[1]["params"]["status"], "completed");
    assert!(heard.messages[1]["params"]["result"]["content"].is_array());

    // A task that asks for input: input_required on any replica, answered
    // in parts through others, then resumed by its owner to the end.
    let asking = call(&one, "tools/call", json!({ "name": "multi_input", "arguments": {} })).await;
    let asking_id = asking.result()["taskId"].as_str().unwrap().to_owned();
    let parked = until_status(&two, &asking_id, "input_required", Duration::from_secs(10)).await;
    let keys: Vec<String> = parked["inputRequests"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, ["r1.first", "r1.second"], "{parked}");
    assert_eq!(parked["inputRequests"]["r1.first"]["method"], "elicitation/create");
    let answer = |text: &str| json!({ "action": "accept", "content": { "answer": text } });
    let partial =
        json!({ "taskId": asking_id, "inputResponses": { "r1.first": answer("one"), "unknown": answer("x") } });
    assert_eq!(call(&three, "tasks/update", partial).await.result()["resultType"], "complete");
    let still = call(&two, "tasks/get", json!({ "taskId": asking_id })).await.result().clone();
    assert_eq!(still["status"], "input_required");
    assert_eq!(still["inputRequests"].as_object().unwrap().keys().collect::<Vec<_>>(), ["r1.second"]);
    let rest = json!({ "taskId": asking_id, "inputResponses": { "r1.second": answer("two") } });
    call(&two, "tasks/update", rest).await;
    let answered = until_ended(&three, &asking_id).await;
    assert_eq!(answered["status"], "completed", "{answered}");
    let text = answered["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("one") && text.contains("two"), "{text}");

    // Unknown ids, and the removed methods.
    assert_eq!(call(&two, "tasks/get", json!({ "taskId": "tsk_nope" })).await.error_code(), Some(-32602));
    assert_eq!(call(&two, "tasks/cancel", json!({ "taskId": "tsk_nope" })).await.error_code(), Some(-32602));
    replicas.remove().await;
}

/// A replica killed (SIGKILL) while running a task: another replica fails it
/// once its lease runs out, instead of reporting it `working` forever.
#[tokio::test]
async fn a_task_of_a_killed_replica_fails_instead_of_hanging() {
    let database = FreshDatabase::postgres().await;
    let env = [
        ("SWITCHYARD_DATABASE_URL", database.url()),
        ("SWITCHYARD_FIXTURE", "conformance"),
        ("SWITCHYARD_TASKS__LEASE", "1s"),
    ];
    let mut doomed = ServerProcess::start(&env).await;
    let base = doomed.base_url().to_owned();
    let http = reqwest::Client::new();
    let mut params = json!({ "name": "slow_compute", "arguments": { "seconds": 60 } });
    params["_meta"] = meta(tasks_capability());
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params });
    let mut request = http.post(format!("{base}/mcp")).json(&body);
    for (name, value) in Client::headers_for("tools/call", &params) {
        request = request.header(name, value);
    }
    let created: Value = request.send().await.unwrap().json().await.unwrap();
    let id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("{created}")).to_owned();
    doomed.child().kill().unwrap();
    doomed.child().wait().unwrap();

    let survivor = App::start(&env).await;
    let client = survivor.client();
    let first = call(&client, "tasks/get", json!({ "taskId": id })).await;
    assert_eq!(first.result()["status"], "working", "the lease has not run out yet");
    // The lease is 1 s: failed soon after it runs out, not left `working`.
    let failed = until_status(&client, &id, "failed", Duration::from_secs(3)).await;
    assert!(failed["error"]["message"].as_str().unwrap().contains("stopped before it finished"), "{failed}");
    drop(survivor);
    database.remove().await;
}

/// Tasks are kept for their `ttlMs`, then unknown.
#[tokio::test]
async fn expired_tasks_are_unknown() {
    let app = App::start(&[("SWITCHYARD_FIXTURE", "conformance"), ("SWITCHYARD_TASKS__TTL", "1s")]).await;
    let client = app.client();
    let created = call(&client, "tools/call", json!({ "name": "slow_compute", "arguments": { "seconds": 0.2 } })).await;
    assert_eq!(created.result()["ttlMs"], 1000);
    let id = created.result()["taskId"].as_str().unwrap().to_owned();
    assert_eq!(until_ended(&client, &id).await["status"], "completed");
    until("the task to be purged after its ttlMs", Duration::from_secs(3), || async {
        call(&client, "tasks/get", json!({ "taskId": id })).await.error_code() == Some(-32602)
    })
    .await;
}

/// One caller cannot hold a replica's tasks: beyond `tasks.max_per_caller`
/// running or input-waiting tasks a new one is refused (429, `-32029`) and
/// nothing is stored; a task that ends gives its place back. A round of a
/// task's call runs at most `tasks.deadline` (by default the call timeout),
/// then the task ends with a tool error saying so.
#[tokio::test]
async fn tasks_are_bounded_per_caller_and_by_a_deadline() {
    let app = App::start(&[
        ("SWITCHYARD_FIXTURE", "conformance"),
        ("SWITCHYARD_TASKS__MAX_PER_CALLER", "2"),
        ("SWITCHYARD_TASKS__DEADLINE", "1s"),
    ])
    .await;
    let client = app.client();
    let slow = |seconds: f64| json!({ "name": "slow_compute", "arguments": { "seconds": seconds } });
    let first = call(&client, "tools/call", slow(0.5)).await;
    let second = call(&client, "tools/call", slow(3.0)).await;
    for created in [&first, &second] {
        assert_eq!(created.result()["resultType"], "task", "{:?}", created.messages);
    }
    let refused = call(&client, "tools/call", slow(0.5)).await;
    assert_eq!((refused.status, refused.error_code()), (429, Some(-32029)), "{:?}", refused.messages);
    let echo = call(&client, "tools/call", json!({ "name": "echo", "arguments": { "text": "hi" } })).await;
    assert_eq!(echo.status, 200, "other calls go on");

    let first_id = first.result()["taskId"].as_str().unwrap().to_owned();
    assert_eq!(until_ended(&client, &first_id).await["status"], "completed");
    let third = call(&client, "tools/call", slow(0.1)).await;
    assert_eq!(third.result()["resultType"], "task", "an ended task gave its place back: {:?}", third.messages);

    let second_id = second.result()["taskId"].as_str().unwrap().to_owned();
    let started = Instant::now();
    let ended = until_ended(&client, &second_id).await;
    assert!(started.elapsed() < Duration::from_millis(2500), "the 3 s call was not stopped at its 1 s deadline");
    assert_eq!((ended["status"].as_str(), ended["result"]["isError"].as_bool()), (Some("completed"), Some(true)));
    let text = ended["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("timed out after 1 s"), "{ended}");
}
