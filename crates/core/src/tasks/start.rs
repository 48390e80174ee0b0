//! A `tools/call` that may become a task: polled once, answered at once
//! when it can be, else stored and run on in the background.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use switchyard_protocol::Produced;
use tokio_util::sync::CancellationToken;

use super::{TaskCall, TaskRecord, TaskStatus, Tasks, millis, now_ms, run_task, wire};
use crate::call::{Call, check_tool_result, check_tool_value};
use crate::cancellation::Cancellation;
use crate::catalog::ToolEntry;
use crate::error::Error;
use crate::plugin::{CallContext, Notifier, Outcome, PluginError};

impl Call<'_> {
    /// A `tools/call` that may become a task: the call is polled once; an
    /// answer it has at once (a result, an MRTR `input_required`) goes back
    /// as for any call. Otherwise the task is stored before its
    /// `CreateTaskResult` is returned, and the call goes on in the
    /// background, where its end is recorded.
    pub(crate) async fn call_tool_as_task(
        &self,
        tool: &ToolEntry,
        tasks: &Arc<Tasks>,
        arguments: Map<String, Value>,
    ) -> Result<Value, Error> {
        let request = self.request;
        let binding = self.binding();
        let input = self.input_round(binding).await?;
        let round_deadline = tasks.config.deadline.unwrap_or(self.deps.config.call_timeout);
        let token = CancellationToken::new();
        let cx = CallContext {
            caller: request.caller.clone(),
            client_capabilities: Arc::clone(&self.capabilities),
            // Tasks are of the 2026-07-28 revision: their input is asked by retries.
            asks_on_stream: false,
            // Our task is the task: its call does not become another server's.
            accepts_task: false,
            // Its result is kept, as a value.
            takes_text: false,
            // Each round of the call has the task deadline (the call timeout
            // unless configured); waiting for the client's input does not count.
            deadline: std::time::Instant::now() + round_deadline,
            cancel: Cancellation::of(token.clone()),
            input: None,
            // Tasks send no progress or log notifications (the extension defines none).
            notifier: Notifier::default(),
            changes: Some(self.deps.catalog.change_sink()),
        };
        let call = TaskCall {
            plugin: Arc::clone(&tool.plugin),
            name: tool.name.clone(),
            arguments,
            template: cx,
            deadline: round_deadline,
        };
        // One caller's tasks are bounded here, before its call starts: a
        // refused call reaches no plugin (nor an upstream behind one).
        let id = Tasks::new_id();
        tasks.track(&id, token.clone(), request.caller.accounting_key()).map_err(|bound| {
            Error::OverLimit(format!("Too many tasks: this caller has {bound} running or waiting for input"))
        })?;
        // An MRTR retry's answers go to the first round.
        let mut running = call.start(input);
        if let Some(outcome) = futures::FutureExt::now_or_never(&mut running) {
            tasks.untrack(&id);
            let plugin_error = |source| Error::Plugin { plugin: tool.plugin.id().to_owned(), source };
            return match outcome.map_err(plugin_error)? {
                Outcome::Complete(result) => check_tool_value(tool, result),
                // Its context does not take text: only a plugin that ignores that gets here.
                Outcome::CompleteText(text) => check_tool_result(tool, text.into()).map(Produced::into_value),
                Outcome::InputRequired { requests, state } => {
                    self.ask_modern_client(tool.plugin.id(), requests, state, binding)
                }
                // Its context does not accept one: only a plugin that ignores that gets here.
                Outcome::Task(_) => {
                    Err(plugin_error(PluginError::Internal("a task's call answered with a task".into())))
                }
            };
        }
        let now = now_ms();
        let task = TaskRecord {
            id,
            principal: request.caller.principal.clone(),
            status: TaskStatus::Working,
            status_message: None,
            created_at_ms: now,
            updated_at_ms: now,
            ttl_ms: millis(tasks.config.ttl),
            owner: self.deps.relay.replica().to_owned(),
            lease_until_ms: now + millis(tasks.config.lease),
            result: None,
            error: None,
            input: None,
            version: 0,
        };
        // Durable before the client hears of it: an immediate tasks/get on
        // any replica must find it.
        if let Err(error) = tasks.store.create(&task).await {
            tasks.untrack(&task.id);
            token.cancel();
            return Err(Error::TaskStore(error));
        }
        let (tasks_handle, catalog) = (Arc::clone(tasks), Arc::clone(self.deps.catalog));
        tokio::spawn(run_task(tasks_handle, catalog, task.clone(), call, running, token));
        let mut created = wire(&task, tasks.config.poll_interval, false);
        created.insert("resultType".into(), json!("task"));
        Ok(Value::Object(created))
    }
}
