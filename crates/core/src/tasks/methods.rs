//! The task methods as any replica answers them from the store (`tasks/get`,
//! `tasks/update`, `tasks/cancel`), the failing of tasks whose replica died,
//! and the end of the tasks running here at shutdown.

use std::time::Duration;

use serde_json::{Map, Value, json};
use switchyard_bus::{Event, NotificationBus};
use switchyard_protocol::error::INTERNAL_ERROR;
use switchyard_protocol::{ErrorObject, Method, Params};

use super::{TaskRecord, TaskStatus, Tasks, Transition, announce, now_ms, wire};
use crate::error::Error;
use crate::policy::Caller;

impl Tasks {
    /// `tasks/get`, `tasks/update` or `tasks/cancel` for `caller`. Changes
    /// are announced on `bus`; a cancelled task running on another replica
    /// than `replica` (this one) is stopped there through the bus.
    pub(crate) async fn serve(
        &self,
        method: &Method,
        params: &Params,
        caller: &Caller,
        bus: &dyn NotificationBus,
        replica: &str,
    ) -> Result<Value, Error> {
        match (method, params) {
            (Method::GetTask, Params::Task { task_id }) => {
                let task = self.find(task_id, caller, bus).await?;
                Ok(Value::Object(wire(&task, self.config.poll_interval, true)))
            }
            (Method::CancelTask, Params::Task { task_id }) => {
                let task = self.find(task_id, caller, bus).await?;
                self.cancel(&task, bus, replica).await?;
                Ok(json!({}))
            }
            (Method::UpdateTask, Params::UpdateTask { task_id, input_responses }) => {
                let task = self.find(task_id, caller, bus).await?;
                self.answer(task, input_responses, bus).await?;
                Ok(json!({}))
            }
            _ => Err(Error::Protocol(ErrorObject::method_not_found(method.as_str()))),
        }
    }

    /// Marks `task` cancelled unless it ended, and stops its call: here, or
    /// through the bus on the replica that runs it.
    async fn cancel(&self, task: &TaskRecord, bus: &dyn NotificationBus, replica: &str) -> Result<(), Error> {
        if task.status.is_terminal() {
            return Ok(());
        }
        let cancelled = Transition {
            status: TaskStatus::Cancelled,
            status_message: Some("cancelled by the client".into()),
            result: None,
            error: None,
        };
        let now = now_ms();
        if self.store.transition(&task.id, &cancelled, now).await.map_err(Error::TaskStore)? {
            announce(bus, &task.after(&cancelled, now), self.config.poll_interval).await;
        }
        if task.owner == replica {
            self.stop(&task.id);
        } else if let Err(error) = bus.publish(Event::TaskCancelled { id: task.id.clone() }).await {
            // Recorded anyway: the owner's result will not overwrite it.
            tracing::warn!(%error, "could not tell the owning replica to stop a cancelled task");
        }
        Ok(())
    }

    /// Records answers to a task's pending input requests: keys it does not
    /// wait for are ignored; once nothing is pending, the task is `working`
    /// again and its owner resumes it. Several replicas may answer at once:
    /// each change names the version it read and is retried on a conflict.
    async fn answer(
        &self,
        mut task: TaskRecord,
        responses: &Map<String, Value>,
        bus: &dyn NotificationBus,
    ) -> Result<(), Error> {
        for _ in 0..8 {
            if task.status != TaskStatus::InputRequired {
                return Ok(());
            }
            let mut input = task.input.clone().unwrap_or_else(|| json!({}));
            let mut changed = false;
            for (key, answer) in responses {
                if input["pending"].as_object_mut().and_then(|pending| pending.remove(key)).is_some() {
                    input["answered"][key] = answer.clone();
                    changed = true;
                }
            }
            if !changed {
                return Ok(());
            }
            let all_in = input["pending"].as_object().is_none_or(Map::is_empty);
            let status = if all_in { TaskStatus::Working } else { TaskStatus::InputRequired };
            let now = now_ms();
            if self.store.change_input(&task.id, task.version, status, &input, now).await.map_err(Error::TaskStore)? {
                let updated =
                    TaskRecord { status, input: Some(input), updated_at_ms: now, version: task.version + 1, ..task };
                announce(bus, &updated, self.config.poll_interval).await;
                return Ok(());
            }
            let id = task.id.clone();
            task = self.store.get(&id).await.map_err(Error::TaskStore)?.ok_or(Error::UnknownTask(id))?;
        }
        Err(Error::TaskStore(super::StoreError::Contended(task.id)))
    }

    /// The caller's task `id`: unknown when it does not exist, expired, or
    /// belongs to another principal. A task whose owner stopped renewing its
    /// lease (the replica died) is failed here, so it never stays `working`.
    pub(crate) async fn find(&self, id: &str, caller: &Caller, bus: &dyn NotificationBus) -> Result<TaskRecord, Error> {
        let unknown = || Error::UnknownTask(id.to_owned());
        let mut task = self.store.get(id).await.map_err(Error::TaskStore)?.ok_or_else(unknown)?;
        let now = now_ms();
        if task.principal != caller.principal || task.created_at_ms + task.ttl_ms < now {
            return Err(unknown());
        }
        if !task.status.is_terminal() && task.lease_until_ms < now {
            let orphaned = failed(
                "the replica running this task stopped before it finished",
                "The server running this task stopped before it finished; run the tool again",
            );
            let failed_here = self.store.transition(id, &orphaned, now).await.map_err(Error::TaskStore)?;
            task = self.store.get(id).await.map_err(Error::TaskStore)?.ok_or_else(unknown)?;
            if failed_here {
                announce(bus, &task, self.config.poll_interval).await;
            }
        }
        Ok(task)
    }

    /// At shutdown: lets the tasks running here finish within `grace`, then
    /// stops the rest and fails them with a message saying why, so no client
    /// waits for a lease to run out.
    pub(crate) async fn end_all(&self, grace: Duration, bus: &dyn NotificationBus) {
        let deadline = tokio::time::Instant::now() + grace;
        while !self.running_ids().is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        for id in self.running_ids() {
            // Recorded first, stopped second: the call's own end (it sees the
            // cancellation too) must not win the race and be recorded instead.
            let shut_down = failed(
                "the replica running this task shut down",
                "The server running this task shut down before it finished; run the tool again",
            );
            match self.store.transition(&id, &shut_down, now_ms()).await {
                Ok(true) => {
                    if let Ok(Some(task)) = self.store.get(&id).await {
                        announce(bus, &task, self.config.poll_interval).await;
                    }
                }
                Ok(false) => {}
                Err(error) => tracing::warn!(task = %id, %error, "could not fail a task at shutdown; its lease will"),
            }
            self.stop(&id);
        }
    }
}

/// A task failed for a reason of the server's, not the tool's: `status`
/// for the task's status message, `message` for its error.
fn failed(status: &str, message: &str) -> Transition {
    Transition {
        status: TaskStatus::Failed,
        status_message: Some(status.into()),
        result: None,
        error: Some(json!(ErrorObject::new(INTERNAL_ERROR, message))),
    }
}
