//! The Tasks extension through an upstream: a `tools/call` that became a
//! task the upstream keeps reaches our client as a task under an id of our
//! server's (`core::tasks`, which also checks every field the upstream
//! gives), and our client's `tasks/get`, `tasks/update` and `tasks/cancel`
//! about it come back here, for the caller the task is of, to be asked of
//! the upstream with that caller's credentials (an exchanged token, when the
//! spec asks for one) and under the upstream's bounds and breaker.

use serde_json::{Map, Value, json};
use switchyard_core::CallContext;
use switchyard_core::PluginError;
use switchyard_core::plugin::{PluginResult, TaskRequest};
use switchyard_protocol::method::request;

use crate::client::{CallError, McpClient};
use crate::input::rebuilt;
use crate::plugin::refused;

/// Asks the upstream `request` about its task `id` for the call `cx`: the
/// detailed task, its input requests rebuilt so nothing else the upstream
/// put there reaches our client, or its acknowledgement.
pub(crate) async fn ask(
    client: &McpClient,
    id: &str,
    request: TaskRequest<'_>,
    cx: CallContext,
) -> PluginResult<Value> {
    let mut params = Map::new();
    params.insert("taskId".into(), json!(id));
    let method = match request {
        TaskRequest::Get => request::TASKS_GET,
        TaskRequest::Cancel => request::TASKS_CANCEL,
        TaskRequest::Update(responses) => {
            params.insert("inputResponses".into(), Value::Object(responses.clone()));
            request::TASKS_UPDATE
        }
    };
    let asking = client.request_relayed(method, params, Some(id), &[], &cx).await;
    let (mut answer, _) = asking.map_err(|error| match error {
        // Our client declared the extension; the upstream no longer takes it (it was rediscovered without).
        CallError::MissingCapability(_) => PluginError::Tool(format!("{method}: the upstream no longer offers tasks")),
        other => refused(other),
    })?;
    let waits = answer.get("status").and_then(Value::as_str) == Some("input_required");
    if let (TaskRequest::Get, true, Some(Value::Object(asked))) =
        (request, waits, answer.get_mut("inputRequests").map(Value::take))
    {
        answer["inputRequests"] = Value::Object(rebuilt(asked)?);
    }
    Ok(answer)
}
