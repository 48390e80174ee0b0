//! A task's call in the background (the Tasks extension): each round runs
//! under the task deadline; a round that asks for input parks the task as
//! `input_required` until the client's answers land (woken by the bus, with
//! a slow fallback read of the store); the end is recorded and announced.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use switchyard_protocol::{ErrorObject, Produced};
use tokio_util::sync::CancellationToken;

use super::{TaskRecord, TaskStatus, Tasks, Transition, now_ms};
use crate::call::{check_tool_result, check_tool_value, undeclared_need};
use crate::catalog::Snapshot;
use crate::error::{Delivery, Error};
use crate::plugin::{CallContext, InputRound, Outcome, Plugin, PluginError, PluginResult};

/// What it takes to call a task's tool again with the client's answers.
pub(crate) struct TaskCall {
    pub(crate) plugin: Arc<dyn Plugin>,
    pub(crate) name: String,
    pub(crate) arguments: Map<String, Value>,
    /// The context of the first call; later rounds get its copy with their input.
    pub(crate) template: CallContext,
    /// How long one round may run.
    pub(crate) deadline: std::time::Duration,
}

pub(crate) type Running = BoxFuture<'static, PluginResult<Outcome>>;

impl TaskCall {
    pub(crate) fn start(&self, input: Option<InputRound>) -> Running {
        let (plugin, name, arguments) = (Arc::clone(&self.plugin), self.name.clone(), self.arguments.clone());
        let deadline = self.deadline;
        let cx = CallContext { input, deadline: std::time::Instant::now() + deadline, ..self.template.clone() };
        Box::pin(async move {
            match tokio::time::timeout(deadline, plugin.call_tool(&name, arguments, cx)).await {
                Ok(outcome) => outcome,
                Err(_) => Err(PluginError::Tool(format!("{name} timed out after {}", readable(deadline)))),
            }
        })
    }
}

/// Gives a task's place back when its call's background work ends.
struct Untrack<'a> {
    tasks: &'a Tasks,
    id: String,
}

impl Drop for Untrack<'_> {
    fn drop(&mut self) {
        self.tasks.untrack(&self.id);
    }
}

/// A duration as people read it: whole seconds, or milliseconds below one.
fn readable(duration: std::time::Duration) -> String {
    if duration < std::time::Duration::from_secs(1) {
        format!("{} ms", duration.as_millis())
    } else {
        format!("{} s", duration.as_secs())
    }
}

/// The most input rounds one task may ask for.
const MAX_TASK_ROUNDS: u64 = 16;

/// A task's call in the background: run it; when it asks for input, park the
/// task as `input_required` with the requests (keyed `r{round}.{key}`, so a
/// key is never reused), wait for the client's answers (`tasks/update`, on
/// any replica, lands them in the store) and call again; record the end.
pub(crate) async fn run_task(
    tasks: Arc<Tasks>,
    catalog: Arc<crate::catalog::Catalog>,
    mut task: TaskRecord,
    call: TaskCall,
    mut running: Running,
    token: CancellationToken,
) {
    // However the call ends (a panic included), its place is given back.
    let _counted = Untrack { tasks: &tasks, id: task.id.clone() };
    let bus = Arc::clone(catalog.bus());
    let mut round = 0;
    loop {
        let outcome = tokio::select! {
            // Cancellation first: a call that ends because it saw the
            // cancellation must not be recorded as its result.
            biased;
            // tasks/cancel (or shutdown) recorded the end already.
            () = token.cancelled() => break,
            outcome = &mut running => outcome,
        };
        let (requests, state) = match outcome {
            Ok(Outcome::InputRequired { requests, state }) if round < MAX_TASK_ROUNDS => (requests, state),
            outcome => {
                tasks.untrack(&task.id);
                let transition = task_end(&catalog.snapshot(), &call.name, outcome);
                record_task_end(&tasks, bus.as_ref(), &task, &transition).await;
                return;
            }
        };
        if let Some(missing) = undeclared_need(&requests, &call.template.client_capabilities) {
            tasks.untrack(&task.id);
            let error = ErrorObject::missing_capability(missing.as_required());
            let transition = Transition {
                status: TaskStatus::Failed,
                status_message: None,
                result: None,
                error: Some(json!(error)),
            };
            record_task_end(&tasks, bus.as_ref(), &task, &transition).await;
            return;
        }
        round += 1;
        let pending: Map<String, Value> = requests.into_iter().map(|(key, r)| (format!("r{round}.{key}"), r)).collect();
        let input = json!({ "round": round, "pending": pending, "answered": {}, "state": state });
        let now = now_ms();
        match tasks.store.change_input(&task.id, task.version, TaskStatus::InputRequired, &input, now).await {
            Ok(true) => {
                task.status = TaskStatus::InputRequired;
                task.input = Some(input);
                task.version += 1;
                task.updated_at_ms = now;
                super::announce(bus.as_ref(), &task, tasks.config.poll_interval).await;
            }
            // Cancelled meanwhile, or the store failed: the lease decides.
            Ok(false) | Err(_) => break,
        }
        let Some((answers, state, current)) = wait_for_answers(&tasks, bus.as_ref(), &task.id, round, &token).await
        else {
            break;
        };
        task = current;
        running = call.start(Some(InputRound { responses: answers, state }));
    }
    tasks.untrack(&task.id);
}

/// The first and the longest wait between reads of a waiting task's record.
const WAIT_POLL_MIN: std::time::Duration = std::time::Duration::from_millis(100);
const WAIT_POLL_MAX: std::time::Duration = std::time::Duration::from_secs(5);

/// Resolves when the bus announces a status of task `id` (or lags, or
/// closes: then the store is read anyway).
async fn announced(announcements: &mut switchyard_bus::Subscription, id: &str) {
    loop {
        match announcements.recv().await {
            Some(switchyard_bus::Delivery::Event(switchyard_bus::Event::TaskStatus { id: announced, .. }))
                if announced == id =>
            {
                return;
            }
            Some(switchyard_bus::Delivery::Event(_)) => {}
            Some(switchyard_bus::Delivery::Gap { .. }) => return,
            None => return std::future::pending().await,
        }
    }
}

/// Waits until every input request of `round` is answered (then
/// the answers under the plugin's own keys, the plugin's state, and the
/// task), or the task ends or is cancelled (`None`).
async fn wait_for_answers(
    tasks: &Tasks,
    bus: &dyn switchyard_bus::NotificationBus,
    id: &str,
    round: u64,
    token: &CancellationToken,
) -> Option<(Map<String, Value>, Option<Value>, TaskRecord)> {
    let prefix = format!("r{round}.");
    // Answers land through tasks/update on any replica, which announces the
    // task on the bus: that wakes us. The store is also read on a timer that
    // backs off to WAIT_POLL_MAX, for an announcement the bus lost.
    let mut announcements = bus.subscribe();
    let mut wait = WAIT_POLL_MIN;
    loop {
        tokio::select! {
            () = tokio::time::sleep(wait) => wait = (wait * 2).min(WAIT_POLL_MAX),
            () = announced(&mut announcements, id) => {}
            () = token.cancelled() => return None,
        }
        let task = match tasks.store.get(id).await {
            Ok(Some(task)) => task,
            Ok(None) => return None,
            Err(_) => continue,
        };
        if task.status.is_terminal() {
            return None;
        }
        let input = task.input.clone().unwrap_or_default();
        let complete = task.status == TaskStatus::Working
            && input["round"].as_u64() == Some(round)
            && input["pending"].as_object().is_none_or(Map::is_empty);
        if complete {
            let answers = input["answered"]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(key, answer)| key.strip_prefix(&prefix).map(|k| (k.to_owned(), answer.clone())))
                .collect();
            let state = Some(input["state"].clone()).filter(|s| !s.is_null());
            return Some((answers, state, task));
        }
    }
}

/// How a task's call ended, as the task records it: a result (a tool error
/// is a result with `isError`, so `completed`), or a protocol-level error
/// (`failed`).
fn task_end(snapshot: &Snapshot, tool: &str, outcome: PluginResult<Outcome>) -> Transition {
    let checked = match (outcome, snapshot.tool(tool)) {
        (Ok(Outcome::Complete(result)), Some(entry)) => check_tool_value(entry, result),
        // Its context does not take text: only a plugin that ignores that gets here.
        (Ok(Outcome::CompleteText(text)), Some(entry)) => {
            check_tool_result(entry, text.into()).map(Produced::into_value)
        }
        (Ok(Outcome::Complete(_) | Outcome::CompleteText(_)), None) => Err(Error::UnknownTool(tool.to_owned())),
        (Ok(Outcome::InputRequired { .. }), _) => Err(Error::Plugin {
            plugin: tool.to_owned(),
            source: PluginError::Internal("input requests during a task are not supported yet".into()),
        }),
        // Its context does not accept one: only a plugin that ignores that gets here.
        (Ok(Outcome::Task(_)), _) => Err(Error::Plugin {
            plugin: tool.to_owned(),
            source: PluginError::Internal("a task's call answered with a task of its own".into()),
        }),
        (Err(source), entry) => {
            Err(Error::Plugin { plugin: entry.map_or_else(|| tool.to_owned(), |e| e.plugin.id().to_owned()), source })
        }
    };
    let (status, result, error) = match checked {
        Ok(mut result) => {
            if let Value::Object(map) = &mut result {
                map.remove("resultType");
            }
            (TaskStatus::Completed, Some(result), None)
        }
        // A task's error becomes its result here, as a request's does in `Server::execute`.
        Err(error) => {
            error.log_internal();
            match error.delivery() {
                Delivery::ToolError(message) => (TaskStatus::Completed, Some(Delivery::tool_result(&message)), None),
                Delivery::Rpc(error) => (TaskStatus::Failed, None, Some(json!(error))),
            }
        }
    };
    Transition { status, status_message: None, result, error }
}

/// Records a task's end, retrying a store that is briefly unavailable, and
/// announces it to listen streams.
async fn record_task_end(
    tasks: &Tasks,
    bus: &dyn switchyard_bus::NotificationBus,
    task: &TaskRecord,
    transition: &Transition,
) {
    let id = &task.id;
    let mut wait = std::time::Duration::from_millis(100);
    for attempt in 1..=6 {
        let now = now_ms();
        match tasks.store.transition(id, transition, now).await {
            Ok(true) => {
                return super::announce(bus, &task.after(transition, now), tasks.config.poll_interval).await;
            }
            // Cancelled (or failed by a reader) first: that end stands.
            Ok(false) => return,
            Err(error) if attempt == 6 => {
                // No longer tracked, its lease is not renewed: readers fail it
                // when the lease runs out, so it does not stay `working`.
                tracing::error!(task = %id, %error, "could not record the end of a task; it fails when its lease runs out");
                return;
            }
            Err(error) => tracing::warn!(task = %id, %error, attempt, "could not record the end of a task; retrying"),
        }
        tokio::time::sleep(wait).await;
        wait *= 2;
    }
}
