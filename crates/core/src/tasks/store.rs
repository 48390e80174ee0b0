//! What a task is (its record, status and changes) and where tasks are
//! kept: the [`TaskStore`] trait (the registry database in production) and
//! [`MemoryTaskStore`] for one process.

use std::collections::HashMap;
use std::sync::Mutex;

use futures::future::BoxFuture;
use serde_json::Value;

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

/// A store that could not be used, or a task it cannot hand back.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The store itself failed (its database could not be reached, say);
    /// the message carries the cause's whole chain, for the logs that print it.
    #[error("task store unavailable: {}", crate::error::chain(.0.as_ref()))]
    Unavailable(Box<dyn std::error::Error + Send + Sync>),
    /// A stored task cannot be read back as one.
    #[error("task {id} is stored unreadably: {reason}")]
    Unreadable {
        /// The task.
        id: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Changes to one task kept conflicting (its version moved each time).
    #[error("too many concurrent changes to task {0}")]
    Contended(String),
}

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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
