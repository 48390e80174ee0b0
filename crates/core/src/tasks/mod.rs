//! The Tasks extension (`io.modelcontextprotocol/tasks`, DIGEST §10): a
//! `tools/call` that cannot answer at once becomes a task the client polls
//! with `tasks/get` and may cancel with `tasks/cancel`, on any replica.
//!
//! How it works here:
//! - A tool whose plugin says it may run as a task ([`TaskSupport`]) is
//!   called as usual, and polled once. If it answers at once (a result, or an
//!   MRTR `input_required`), that answer goes back as for any call: the
//!   spec's immediate-result shortcut, and what lets an MRTR exchange end
//!   in a task on its last round. If it would wait, the task is stored
//!   durably ([`TaskStore`], the registry database in production) *before*
//!   `CreateTaskResult` is sent, and the call goes on in the background on
//!   this replica, which records its end in the store.
//! - Any replica answers `tasks/get` from the store; `tasks/cancel` marks the
//!   task cancelled in the store and tells the owning replica over the bus,
//!   which stops the call.
//! - The owner renews a lease on its running tasks. A task whose lease ran
//!   out (its replica died) is failed with a clear message by the next
//!   replica that reads it, so no task stays `working` forever. Tasks past
//!   their `ttlMs` are purged and then unknown.
//! - Tasks are bound to the principal that created them: to anyone else a
//!   task id is unknown (`-32602`), and ids carry 128 random bits.
//!
//! - Every status change goes on the bus as the task's detailed form, and
//!   listen streams that named the task (`taskIds`, the caller's own tasks
//!   only) on any replica send it as `notifications/tasks`.
//!
//! - When a task's call asks for input, the task becomes `input_required`
//!   with the requests (keys `r{round}.{key}`, never reused); `tasks/update`
//!   on any replica records answers (partial sets too) with a version check,
//!   and once all are in, the owner calls the tool again with them.
//!
//! - A tool of an upstream that offers the extension may answer with a task
//!   the upstream keeps ([`relayed`]): none of it is stored here, and our
//!   client's `tasks/*` requests about it go to that upstream.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

mod methods;
mod relayed;
mod run;
mod start;
mod store;

pub(crate) use relayed::is_relayed;
pub(crate) use run::{TaskCall, run_task};
pub use store::{MemoryTaskStore, StoreError, TaskRecord, TaskStatus, TaskStore, TaskSupport, Transition};

/// Task settings.
#[derive(Debug, Clone, Copy)]
pub struct TaskConfig {
    /// How long a task is kept from its creation (`ttlMs`). Default 1 hour.
    pub ttl: Duration,
    /// The polling interval suggested to clients. Default 1 s.
    pub poll_interval: Duration,
    /// How long a lease lasts; renewed at a third of it. Default 15 s.
    pub lease: Duration,
    /// How long one round of a task's call may run (waiting for the
    /// client's input does not count); `None`: the server's call timeout.
    pub deadline: Option<Duration>,
    /// Tasks one caller may have running or waiting for input on this
    /// replica. Default 16.
    pub max_per_caller: usize,
}

impl Default for TaskConfig {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(3600),
            poll_interval: Duration::from_secs(1),
            lease: Duration::from_secs(15),
            deadline: None,
            max_per_caller: 16,
        }
    }
}

/// A task whose call runs here.
pub(crate) struct Running {
    cancel: CancellationToken,
    counted_as: String,
}

/// The calls running here: by task id, and how many each caller holds.
#[derive(Default)]
pub(crate) struct RunningTasks {
    by_id: HashMap<String, Running>,
    per_caller: HashMap<String, usize>,
}

/// The tasks of one server: the store, and the calls this replica runs.
pub struct Tasks {
    pub(crate) store: Arc<dyn TaskStore>,
    pub(crate) config: TaskConfig,
    /// Cancellation of the calls running here, by task id.
    pub(crate) running: Mutex<RunningTasks>,
}

impl Tasks {
    /// Tasks kept in `store`.
    pub fn new(store: Arc<dyn TaskStore>, config: TaskConfig) -> Self {
        Self { store, config, running: Mutex::default() }
    }

    pub(crate) fn new_id() -> String {
        format!("tsk_{:032x}", rand::random::<u128>())
    }

    /// Stops the call of `id` if it runs here.
    pub(crate) fn stop(&self, id: &str) {
        let cancel = self.lock_running().by_id.get(id).map(|running| running.cancel.clone());
        if let Some(cancel) = cancel {
            self.untrack(id);
            cancel.cancel();
        }
    }

    fn lock_running(&self) -> std::sync::MutexGuard<'_, RunningTasks> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts a task's call as running here for `counted_as`; `Err` with
    /// the bound when that caller holds `max_per_caller` already.
    pub(crate) fn track(&self, id: &str, token: CancellationToken, counted_as: String) -> Result<(), usize> {
        let bound = self.config.max_per_caller;
        let mut running = self.lock_running();
        let held = running.per_caller.entry(counted_as.clone()).or_default();
        if *held >= bound {
            return Err(bound);
        }
        *held += 1;
        running.by_id.insert(id.to_owned(), Running { cancel: token, counted_as });
        Ok(())
    }

    /// The tasks whose calls run here.
    pub(crate) fn running_ids(&self) -> Vec<String> {
        self.lock_running().by_id.keys().cloned().collect()
    }

    pub(crate) fn untrack(&self, id: &str) {
        let mut running = self.lock_running();
        if let Some(ended) = running.by_id.remove(id)
            && let Some(held) = running.per_caller.get_mut(&ended.counted_as)
        {
            *held -= 1;
            if *held == 0 {
                running.per_caller.remove(&ended.counted_as);
            }
        }
    }

    /// Renews the leases of the tasks running here and purges expired
    /// tasks, until `shutdown`. A task whose call ended is no longer
    /// renewed, so one whose end could not be recorded fails when its lease
    /// runs out instead of staying `working`.
    pub fn spawn_upkeep(self: &Arc<Self>, shutdown: CancellationToken) {
        let tasks = Arc::clone(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(tasks.config.lease / 3);
            let mut ticks = 0u64;
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = ticker.tick() => {}
                }
                let running = tasks.running_ids();
                if !running.is_empty() {
                    let lease_until = now_ms() + millis(tasks.config.lease);
                    if let Err(error) = tasks.store.renew(&running, lease_until).await {
                        tracing::warn!(%error, "could not renew task leases");
                    }
                }
                ticks += 1;
                if ticks % 12 == 1 {
                    match tasks.store.purge(now_ms()).await {
                        Ok(0) => {}
                        Ok(purged) => tracing::debug!(purged, "expired tasks purged"),
                        Err(error) => tracing::warn!(%error, "could not purge expired tasks"),
                    }
                }
            }
        });
    }
}

/// Announces a task's new state to the listen streams of every replica.
pub(crate) async fn announce(bus: &dyn switchyard_bus::NotificationBus, task: &TaskRecord, poll_interval: Duration) {
    let event =
        switchyard_bus::Event::TaskStatus { id: task.id.clone(), task: Value::Object(wire(task, poll_interval, true)) };
    if let Err(error) = bus.publish(event).await {
        tracing::warn!(%error, "could not announce a task's status; clients polling tasks/get still see it");
    }
}

/// Now, in Unix milliseconds.
pub(crate) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// The wire form of a task: the `Task` fields, plus `result` or `error` once
/// it ended (the `DetailedTask` of `tasks/get`).
pub(crate) fn wire(task: &TaskRecord, poll_interval: Duration, detailed: bool) -> Map<String, Value> {
    let mut fields = Map::new();
    fields.insert("taskId".into(), json!(task.id));
    fields.insert("status".into(), json!(task.status.as_str()));
    if let Some(message) = &task.status_message {
        fields.insert("statusMessage".into(), json!(message));
    }
    fields.insert("createdAt".into(), json!(iso8601(task.created_at_ms)));
    fields.insert("lastUpdatedAt".into(), json!(iso8601(task.updated_at_ms)));
    fields.insert("ttlMs".into(), json!(task.ttl_ms));
    if !task.status.is_terminal() {
        fields.insert("pollIntervalMs".into(), json!(millis(poll_interval)));
    }
    if detailed {
        match task.status {
            TaskStatus::Completed => {
                fields.insert("result".into(), task.result.clone().unwrap_or_else(|| json!({ "content": [] })));
            }
            TaskStatus::Failed => {
                let error = task.error.clone().unwrap_or_else(|| json!({ "code": -32603, "message": "task failed" }));
                fields.insert("error".into(), error);
            }
            TaskStatus::InputRequired => {
                let pending = task.input.as_ref().and_then(|i| i.get("pending")).cloned().unwrap_or_else(|| json!({}));
                fields.insert("inputRequests".into(), pending);
            }
            _ => {}
        }
    }
    fields
}

/// `2026-08-01T10:00:00.000Z` from Unix milliseconds (proleptic Gregorian, UTC).
pub(crate) fn iso8601(ms: i64) -> String {
    let (days, rest) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (hours, minutes, seconds, millis) = (rest / 3_600_000, rest / 60_000 % 60, rest / 1000 % 60, rest % 1000);
    format!("{year:04}-{month:02}-{day:02}T{hours:02}:{minutes:02}:{seconds:02}.{millis:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_iso8601() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_796_105_373_123), "2026-12-01T06:09:33.123Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
