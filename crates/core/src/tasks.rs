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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

/// Whether a tool may, or must, run as a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaskSupport {
    /// Always answered within the request.
    #[default]
    Forbidden,
    /// Run as a task when the client declared the extension and the call
    /// would wait; answered within the request otherwise.
    Optional,
    /// Only as a task: a client without the extension gets `-32021`.
    Required,
}

/// Where a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Waiting for the client's input.
    InputRequired,
    /// Finished with a `CallToolResult` (which may carry `isError`).
    Completed,
    /// Ended by a protocol-level error.
    Failed,
    /// Cancelled by the client.
    Cancelled,
}

impl TaskStatus {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// Parses a stored value.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "working" => Self::Working,
            "input_required" => Self::InputRequired,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            _ => return None,
        })
    }

    /// Whether nothing changes it any more.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// A stored task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    /// The id: `tsk_` and 128 random bits in hex.
    pub id: String,
    /// The principal it is bound to (`None` when authorization is off).
    pub principal: Option<String>,
    /// Where it is.
    pub status: TaskStatus,
    /// A human-readable note on the status.
    pub status_message: Option<String>,
    /// Creation, Unix milliseconds.
    pub created_at_ms: i64,
    /// Last change, Unix milliseconds.
    pub updated_at_ms: i64,
    /// Lifetime from creation, milliseconds.
    pub ttl_ms: i64,
    /// The replica running it.
    pub owner: String,
    /// Until when the owner vouches it is still running, Unix milliseconds.
    pub lease_until_ms: i64,
    /// The `CallToolResult` of a completed task.
    pub result: Option<Value>,
    /// The JSON-RPC error object of a failed task.
    pub error: Option<Value>,
    /// Input requests: `{round, pending, answered, state}`, keys `r{round}.{key}`.
    pub input: Option<Value>,
    /// Grows on every change; input changes name the version they read.
    pub version: i64,
}

impl TaskRecord {
    /// This task after `transition` at `now_ms`.
    #[must_use]
    pub fn after(&self, transition: &Transition, now_ms: i64) -> Self {
        Self {
            status: transition.status,
            status_message: transition.status_message.clone(),
            result: transition.result.clone(),
            error: transition.error.clone(),
            updated_at_ms: now_ms,
            version: self.version + 1,
            ..self.clone()
        }
    }
}

/// The end (or another state) a task moves to.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    /// The new status.
    pub status: TaskStatus,
    /// Its note.
    pub status_message: Option<String>,
    /// The result (completed).
    pub result: Option<Value>,
    /// The error (failed).
    pub error: Option<Value>,
}

/// A store that could not be used.
#[derive(Debug, thiserror::Error)]
#[error("task store unavailable: {0}")]
pub struct StoreError(pub String);

/// Durable task storage shared by every replica.
pub trait TaskStore: Send + Sync + 'static {
    /// Stores a new task; when this returns, `get` on any replica finds it.
    fn create<'a>(&'a self, task: &'a TaskRecord) -> BoxFuture<'a, Result<(), StoreError>>;
    /// The task, if stored.
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<TaskRecord>, StoreError>>;
    /// Applies `transition` at `now_ms` if the task is not terminal yet;
    /// `true` when it did.
    fn transition<'a>(
        &'a self,
        id: &'a str,
        transition: &'a Transition,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
    /// Sets the status and input of a task that has not ended, if it is
    /// still at `expected_version`; `true` when it changed.
    fn change_input<'a>(
        &'a self,
        id: &'a str,
        expected_version: i64,
        status: TaskStatus,
        input: &'a Value,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
    /// Extends the leases of `ids` (the tasks this replica is running).
    fn renew<'a>(&'a self, ids: &'a [String], lease_until_ms: i64) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Deletes tasks whose lifetime ended before `now_ms`; how many.
    fn purge(&self, now_ms: i64) -> BoxFuture<'_, Result<u64, StoreError>>;
}

/// Tasks in this process only: for stdio and tests, where there is one replica.
#[derive(Debug, Default)]
pub struct MemoryTaskStore {
    tasks: Mutex<HashMap<String, TaskRecord>>,
}

impl MemoryTaskStore {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<String, TaskRecord>) -> T) -> T {
        f(&mut self.tasks.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl TaskStore for MemoryTaskStore {
    fn create<'a>(&'a self, task: &'a TaskRecord) -> BoxFuture<'a, Result<(), StoreError>> {
        self.with(|tasks| tasks.insert(task.id.clone(), task.clone()));
        Box::pin(async { Ok(()) })
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<TaskRecord>, StoreError>> {
        let task = self.with(|tasks| tasks.get(id).cloned());
        Box::pin(async move { Ok(task) })
    }

    fn transition<'a>(
        &'a self,
        id: &'a str,
        transition: &'a Transition,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let applied = self.with(|tasks| match tasks.get_mut(id) {
            Some(task) if !task.status.is_terminal() => {
                task.status = transition.status;
                task.status_message.clone_from(&transition.status_message);
                task.result.clone_from(&transition.result);
                task.error.clone_from(&transition.error);
                task.updated_at_ms = now_ms;
                task.version += 1;
                true
            }
            _ => false,
        });
        Box::pin(async move { Ok(applied) })
    }

    fn change_input<'a>(
        &'a self,
        id: &'a str,
        expected_version: i64,
        status: TaskStatus,
        input: &'a Value,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        let applied = self.with(|tasks| match tasks.get_mut(id) {
            Some(task) if !task.status.is_terminal() && task.version == expected_version => {
                task.status = status;
                task.input = Some(input.clone());
                task.updated_at_ms = now_ms;
                task.version += 1;
                true
            }
            _ => false,
        });
        Box::pin(async move { Ok(applied) })
    }

    fn renew<'a>(&'a self, ids: &'a [String], lease_until_ms: i64) -> BoxFuture<'a, Result<(), StoreError>> {
        self.with(|tasks| {
            for id in ids {
                if let Some(task) = tasks.get_mut(id) {
                    task.lease_until_ms = lease_until_ms;
                }
            }
        });
        Box::pin(async { Ok(()) })
    }

    fn purge(&self, now_ms: i64) -> BoxFuture<'_, Result<u64, StoreError>> {
        let purged = self.with(|tasks| {
            let before = tasks.len();
            tasks.retain(|_, t| t.created_at_ms + t.ttl_ms >= now_ms);
            (before - tasks.len()) as u64
        });
        Box::pin(async move { Ok(purged) })
    }
}

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

    #[tokio::test]
    async fn terminal_tasks_do_not_move() {
        let store = MemoryTaskStore::default();
        let task = TaskRecord {
            id: "t".into(),
            principal: None,
            status: TaskStatus::Working,
            status_message: None,
            created_at_ms: 0,
            updated_at_ms: 0,
            ttl_ms: 1000,
            owner: "r".into(),
            lease_until_ms: 0,
            result: None,
            error: None,
            input: None,
            version: 0,
        };
        store.create(&task).await.unwrap();
        let cancel = Transition { status: TaskStatus::Cancelled, status_message: None, result: None, error: None };
        assert!(store.transition("t", &cancel, 5).await.unwrap());
        let complete =
            Transition { status: TaskStatus::Completed, status_message: None, result: Some(json!({})), error: None };
        assert!(!store.transition("t", &complete, 6).await.unwrap(), "a cancelled task stays cancelled");
        assert_eq!(store.get("t").await.unwrap().unwrap().status, TaskStatus::Cancelled);
        assert_eq!(store.purge(2000).await.unwrap(), 1);
        assert!(store.get("t").await.unwrap().is_none());
    }
}
