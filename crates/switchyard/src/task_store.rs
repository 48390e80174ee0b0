//! The registry database as `core`'s task store: every replica reads and
//! writes the same task rows.

use futures::future::BoxFuture;
use serde_json::Value;
use switchyard_core::tasks::{StoreError, TaskRecord, TaskStatus, TaskStore, Transition};
use switchyard_registry::{Registry, TaskRow};

/// Tasks in the registry database.
pub struct RegistryTasks(pub Registry);

fn unavailable(error: switchyard_registry::Error) -> StoreError {
    StoreError::Unavailable(Box::new(error))
}

/// `''` for none, JSON text otherwise.
fn json_text(value: Option<&Value>) -> String {
    value.map(Value::to_string).unwrap_or_default()
}

fn json_value(text: &str) -> Option<Value> {
    (!text.is_empty()).then(|| serde_json::from_str(text).ok()).flatten()
}

fn record(row: TaskRow) -> Result<TaskRecord, StoreError> {
    Ok(TaskRecord {
        status: TaskStatus::parse(&row.status).ok_or_else(|| StoreError::Unreadable {
            id: row.id.clone(),
            reason: format!("unknown status {:?}", row.status),
        })?,
        principal: (!row.principal.is_empty()).then_some(row.principal),
        status_message: (!row.status_message.is_empty()).then_some(row.status_message),
        result: json_value(&row.result),
        error: json_value(&row.error),
        id: row.id,
        created_at_ms: row.created_at_ms,
        updated_at_ms: row.updated_at_ms,
        ttl_ms: row.ttl_ms,
        owner: row.owner,
        lease_until_ms: row.lease_until_ms,
        input: json_value(&row.input),
        version: row.version,
    })
}

impl TaskStore for RegistryTasks {
    fn create<'a>(&'a self, task: &'a TaskRecord) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let row = TaskRow {
                id: task.id.clone(),
                principal: task.principal.clone().unwrap_or_default(),
                status: task.status.as_str().to_owned(),
                status_message: task.status_message.clone().unwrap_or_default(),
                result: json_text(task.result.as_ref()),
                error: json_text(task.error.as_ref()),
                created_at_ms: task.created_at_ms,
                updated_at_ms: task.updated_at_ms,
                ttl_ms: task.ttl_ms,
                owner: task.owner.clone(),
                lease_until_ms: task.lease_until_ms,
                input: json_text(task.input.as_ref()),
                version: task.version,
            };
            self.0.create_task(&row).await.map_err(unavailable)
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<TaskRecord>, StoreError>> {
        Box::pin(async move { self.0.task(id).await.map_err(unavailable)?.map(record).transpose() })
    }

    fn transition<'a>(
        &'a self,
        id: &'a str,
        transition: &'a Transition,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            let message = transition.status_message.clone().unwrap_or_default();
            let (result, error) = (json_text(transition.result.as_ref()), json_text(transition.error.as_ref()));
            self.0
                .transition_task(id, transition.status.as_str(), &message, &result, &error, now_ms)
                .await
                .map_err(unavailable)
        })
    }

    fn change_input<'a>(
        &'a self,
        id: &'a str,
        expected_version: i64,
        status: TaskStatus,
        input: &'a Value,
        now_ms: i64,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
            self.0
                .change_task_input(id, expected_version, status.as_str(), &input.to_string(), now_ms)
                .await
                .map_err(unavailable)
        })
    }

    fn renew<'a>(&'a self, ids: &'a [String], lease_until_ms: i64) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move { self.0.renew_tasks(ids, lease_until_ms).await.map_err(unavailable) })
    }

    fn purge(&self, now_ms: i64) -> BoxFuture<'_, Result<u64, StoreError>> {
        Box::pin(async move { self.0.purge_tasks(now_ms).await.map_err(unavailable) })
    }
}
