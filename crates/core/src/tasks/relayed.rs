//! Tasks an upstream keeps: the Tasks extension through a plugin whose call
//! became a task at its source ([`Outcome::Task`](crate::plugin::Outcome::Task)).
//!
//! Nothing of such a task is stored here. Our client gets a task id of ours,
//! `tsk_up.` and a sealed handle (see [`StateSealer::seal_handle`]) naming
//! the plugin, the tool and the source's own task id, bound to the caller's
//! principal: any replica opens it, the client can neither read nor change
//! it, and the ids of two upstreams (or an upstream's and ours) cannot
//! collide. The source's id is never shown to the client.
//!
//! `tasks/get`, `tasks/update` and `tasks/cancel` with such an id go to the
//! plugin ([`Plugin::task`](crate::plugin::Plugin::task)), for the principal
//! the id was sealed for only, while the catalog still has that plugin serve
//! the tool; otherwise the task is unknown (`-32602`), as another
//! principal's task of ours is. A caller that may no longer use the tool
//! gets the answer calling it would (a 403 step-up). What the source says
//! of its task is rebuilt field by field ([`checked`]), so a hostile
//! upstream passes nothing else on; a completed task's result is the tool's
//! result, checked and passed on as a plain call's would be (its
//! `outputSchema` too), and input requests reach the client only for what
//! its request declared it can answer.
//!
//! [`StateSealer::seal_handle`]: crate::state::StateSealer::seal_handle

use std::time::Duration;

use serde_json::{Map, Value, json};
use switchyard_protocol::{ErrorObject, Method, Params};

use super::TaskStatus;
use crate::call::{Call, check_tool_value, required_capability, undeclared_need};
use crate::catalog::ToolEntry;
use crate::error::Error;
use crate::plugin::{Plugin, PluginError, TaskRequest};

/// How our ids of tasks an upstream keeps begin (ours are `tsk_` and hex).
const PREFIX: &str = "tsk_up.";
/// What such an id is sealed for, beside its principal.
const PURPOSE: &str = "relayed-task";
/// Longest task id of a source's that we carry.
const MAX_SOURCE_ID_BYTES: usize = 512;
/// Longest status message, timestamp or error message of a source's passed on.
const MAX_TEXT_BYTES: usize = 4096;
/// Most input requests a source's task may show at once, and the longest key of one.
const MAX_INPUT_REQUESTS: usize = 16;
const MAX_KEY_BYTES: usize = 256;
/// How long our id opens: the source's `ttlMs`, within these (a task with
/// no limit gets the most).
const MIN_LIFETIME: Duration = Duration::from_secs(60);
const MAX_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

/// Whether `id` is one of ours for a task an upstream keeps.
pub(crate) fn is_relayed(id: &str) -> bool {
    id.starts_with(PREFIX)
}

impl Call<'_> {
    /// Our `CreateTaskResult` for `tool`'s call, which became the task
    /// `fields` describe at `plugin`'s source.
    pub(crate) fn relayed_task_created(
        &self,
        plugin: &dyn Plugin,
        tool: &str,
        fields: Map<String, Value>,
    ) -> Result<Value, Error> {
        let malformed = |why: &str| malformed(plugin.id(), why);
        if !self.accepts_task() || self.request.method != Method::CallTool {
            return Err(malformed("a task, where the request could not take one"));
        }
        // The entry the call was made through: `tool` is the catalog's name.
        let tool = self.snapshot.tool(tool).ok_or_else(|| Error::UnknownTool(tool.to_owned()))?;
        let source_id = fields
            .get("taskId")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty() && id.len() <= MAX_SOURCE_ID_BYTES)
            .ok_or_else(|| malformed(&format!("no taskId of 1 to {MAX_SOURCE_ID_BYTES} bytes")))?;
        let lifetime = match fields.get("ttlMs").and_then(Value::as_u64) {
            Some(ms) => Duration::from_millis(ms).clamp(MIN_LIFETIME, MAX_LIFETIME),
            None => MAX_LIFETIME,
        };
        let lifetime_ms = u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX);
        let handle = json!({ "plugin": plugin.id(), "tool": tool.name, "task": source_id, "ttl": lifetime_ms });
        let principal = self.request.caller.principal.as_deref();
        let id = format!("{PREFIX}{}", self.deps.sealer.seal_handle(PURPOSE, principal, handle, lifetime));
        let mut created = checked(&id, fields, tool, lifetime_ms, false).map_err(|why| malformed(&why))?;
        created.insert("resultType".into(), json!("task"));
        Ok(Value::Object(created))
    }

    /// `tasks/get`, `tasks/update` or `tasks/cancel` about a task an
    /// upstream keeps, answered by its plugin.
    pub(crate) async fn relayed_task(&self) -> Result<Value, Error> {
        let (task_id, request) = match (&self.request.method, self.params) {
            (Method::GetTask, Params::Task { task_id }) => (task_id, TaskRequest::Get),
            (Method::CancelTask, Params::Task { task_id }) => (task_id, TaskRequest::Cancel),
            (Method::UpdateTask, Params::UpdateTask { task_id, input_responses }) => {
                (task_id, TaskRequest::Update(input_responses))
            }
            _ => return Err(ErrorObject::method_not_found(self.request.method.as_str()).into()),
        };
        let unknown = || Error::UnknownTask(task_id.clone());
        let sealed = task_id.strip_prefix(PREFIX).ok_or_else(unknown)?;
        let principal = self.request.caller.principal.as_deref();
        let handle = self.deps.sealer.open_handle(PURPOSE, principal, sealed).map_err(|_| unknown())?;
        let (Some(plugin), Some(tool), Some(source_id), Some(lifetime_ms)) =
            (handle["plugin"].as_str(), handle["tool"].as_str(), handle["task"].as_str(), handle["ttl"].as_u64())
        else {
            return Err(unknown());
        };
        // A tool gone from the catalog, or served by another plugin now, takes its tasks along.
        let tool = self.snapshot.tool(tool).filter(|entry| entry.plugin.id() == plugin).ok_or_else(unknown)?;
        self.deps.config.policy.authorize(&self.request.caller, tool)?;
        let timeout = self.deps.config.call_timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        let asking = tool.plugin.task(source_id, request, self.context(deadline, None));
        let answer = tokio::time::timeout_at(deadline, asking).await.map_err(|_| {
            self.cancel.cancel();
            Error::Timeout {
                tool: format!("{} for {}", self.request.method.as_str(), tool.name),
                seconds: timeout.as_secs(),
            }
        })?;
        let answer = match answer {
            Ok(answer) => answer,
            // The source no longer knows it (it expired there, or was purged).
            Err(PluginError::InvalidParams(_)) => return Err(unknown()),
            Err(source) => return Err(Error::Plugin { plugin: plugin.to_owned(), source }),
        };
        match (request, answer) {
            (TaskRequest::Get, Value::Object(fields)) => {
                let task = checked(task_id, fields, tool, lifetime_ms, true).map_err(|why| malformed(plugin, &why))?;
                // As for an MRTR round: the client is asked only what it declared it can answer.
                let asked = task.get("inputRequests").and_then(Value::as_object);
                if let Some(needed) = asked.and_then(|asked| undeclared_need(asked, &self.capabilities)) {
                    return Err(ErrorObject::missing_capability(needed.as_required()).into());
                }
                Ok(Value::Object(task))
            }
            (TaskRequest::Get, _) => Err(malformed(plugin, "not an object")),
            // An acknowledgement: nothing of the source's is passed on.
            (TaskRequest::Update(_) | TaskRequest::Cancel, _) => Ok(json!({})),
        }
    }
}

/// The source of `plugin` answered a task that is not one: the model reads
/// why (a tool error) on `tools/call`, the client an internal error on `tasks/*`.
fn malformed(plugin: &str, why: &str) -> Error {
    Error::Plugin {
        plugin: plugin.to_owned(),
        source: PluginError::Tool(format!("{plugin} answered a malformed task: {why}")),
    }
}

/// The source's task as ours, under `id`: rebuilt from the fields the Tasks
/// extension defines, each checked, and nothing else; its `ttlMs` no longer
/// than our id opens (`lifetime_ms`). With `detailed` (the answer of
/// `tasks/get`), also what its status calls for: the result (checked, and
/// passed on, as `tool`'s result of a plain call would be), the error (its
/// code and message), or the input requests (of the kinds a client can be asked).
fn checked(
    id: &str,
    mut source: Map<String, Value>,
    tool: &ToolEntry,
    lifetime_ms: u64,
    detailed: bool,
) -> Result<Map<String, Value>, String> {
    let status = source.get("status").and_then(Value::as_str).and_then(TaskStatus::parse).ok_or("no known status")?;
    let text = |field: &str| match source.get(field) {
        None => Ok(None),
        Some(Value::String(text)) if text.len() <= MAX_TEXT_BYTES => Ok(Some(json!(text))),
        Some(_) => Err(format!("{field} is not a string of at most {MAX_TEXT_BYTES} bytes")),
    };
    let mut task = Map::new();
    task.insert("taskId".into(), json!(id));
    task.insert("status".into(), json!(status.as_str()));
    if let Some(message) = text("statusMessage")? {
        task.insert("statusMessage".into(), message);
    }
    for field in ["createdAt", "lastUpdatedAt"] {
        task.insert(field.into(), text(field)?.ok_or_else(|| format!("no {field}"))?);
    }
    // Never longer than our id opens: a task the client is told lives on must be one it can still ask about.
    let ttl = match source.get("ttlMs") {
        Some(Value::Null) => lifetime_ms,
        Some(ttl) if ttl.is_u64() => ttl.as_u64().unwrap_or(lifetime_ms).min(lifetime_ms),
        _ => return Err("ttlMs is neither a whole number of milliseconds nor null".into()),
    };
    task.insert("ttlMs".into(), json!(ttl));
    match source.get("pollIntervalMs") {
        None => {}
        Some(poll) if poll.is_u64() => {
            task.insert("pollIntervalMs".into(), poll.clone());
        }
        Some(_) => return Err("pollIntervalMs is not a whole number of milliseconds".into()),
    }
    if !detailed {
        return Ok(task);
    }
    match status {
        TaskStatus::Completed => {
            let Some(Value::Object(mut result)) = source.remove("result") else {
                return Err("a completed task without a result object".into());
            };
            for added in ["resultType", "ttlMs", "cacheScope"] {
                result.remove(added);
            }
            let result = check_tool_value(tool, Value::Object(result)).map_err(|error| error.to_string())?;
            task.insert("result".into(), result);
        }
        TaskStatus::Failed => {
            let error = source.get("error");
            let code = error.and_then(|e| e.get("code")).and_then(Value::as_i64).and_then(|c| i32::try_from(c).ok());
            let message = error.and_then(|e| e.get("message")).and_then(Value::as_str);
            let (Some(code), Some(message)) = (code, message.filter(|m| m.len() <= MAX_TEXT_BYTES)) else {
                return Err("a failed task without an error of a code and a message".into());
            };
            task.insert("error".into(), json!({ "code": code, "message": message }));
        }
        TaskStatus::InputRequired => {
            let Some(Value::Object(requests)) = source.remove("inputRequests") else {
                return Err("a task waiting for input without inputRequests".into());
            };
            if requests.is_empty() || requests.len() > MAX_INPUT_REQUESTS {
                return Err(format!("{} input requests (1 to {MAX_INPUT_REQUESTS} may be asked)", requests.len()));
            }
            if requests.keys().any(|key| key.len() > MAX_KEY_BYTES) {
                return Err(format!("an input request's key is longer than {MAX_KEY_BYTES} bytes"));
            }
            let known = |request: &Value| {
                required_capability(request).is_some() && request.get("params").is_none_or(Value::is_object)
            };
            if !requests.values().all(known) {
                return Err("an input request that is not elicitation, sampling or roots".into());
            }
            task.insert("inputRequests".into(), Value::Object(requests));
        }
        TaskStatus::Working | TaskStatus::Cancelled => {}
    }
    Ok(task)
}
