//! Stored tasks (the Tasks extension): rows any replica reads and changes.
//! The registry knows nothing of what a task means; `core::tasks` does, and
//! the binary adapts these rows to its `TaskStore`.
//!
//! Text columns hold `''` rather than NULL for "none": NULLs decode
//! differently through the Any driver on each database.

use sqlx::Row as _;
use sqlx::any::AnyRow;

use crate::{Error, Registry, Result};

/// A stored task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRow {
    /// The id.
    pub id: String,
    /// The principal it is bound to; empty when authorization is off.
    pub principal: String,
    /// `working`, `input_required`, `completed`, `failed` or `cancelled`.
    pub status: String,
    /// The status note; empty for none.
    pub status_message: String,
    /// The result JSON; empty for none.
    pub result: String,
    /// The error JSON; empty for none.
    pub error: String,
    /// Creation, Unix milliseconds.
    pub created_at_ms: i64,
    /// Last change, Unix milliseconds.
    pub updated_at_ms: i64,
    /// Lifetime from creation, milliseconds.
    pub ttl_ms: i64,
    /// The replica running it.
    pub owner: String,
    /// Lease end, Unix milliseconds.
    pub lease_until_ms: i64,
    /// Input requests pending and answered (JSON); empty for none.
    pub input: String,
    /// Grows on every change.
    pub version: i64,
}

// The statements are constants: no SQL is ever built from input.
macro_rules! columns {
    () => {
        "id, principal, status, status_message, result, error, created_at, updated_at, ttl_ms, owner, lease_until, input, version"
    };
}
const SELECT: &str = concat!("SELECT ", columns!(), " FROM tasks WHERE id = $1");
const INSERT: &str =
    concat!("INSERT INTO tasks (", columns!(), ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)");
// Only a task that has not ended moves: a cancelled task stays cancelled when its call finishes later.
const TRANSITION: &str = "UPDATE tasks SET status = $1, status_message = $2, result = $3, error = $4, updated_at = $5, \
     version = version + 1 WHERE id = $6 AND status IN ('working', 'input_required')";
// Input changes apply only to the version read, so two answers cannot overwrite each other.
const CHANGE_INPUT: &str = "UPDATE tasks SET status = $1, input = $2, updated_at = $3, version = version + 1 \
     WHERE id = $4 AND version = $5 AND status IN ('working', 'input_required')";

impl Registry {
    /// Stores a new task.
    ///
    /// # Errors
    /// When the database fails.
    #[tracing::instrument(name = "registry", skip_all, fields(otel.name = "INSERT tasks", otel.kind = "client", db.system.name = self.system, db.operation.name = "INSERT", db.collection.name = "tasks"))]
    pub async fn create_task(&self, task: &TaskRow) -> Result<()> {
        sqlx::query(INSERT)
            .bind(&task.id)
            .bind(&task.principal)
            .bind(&task.status)
            .bind(&task.status_message)
            .bind(&task.result)
            .bind(&task.error)
            .bind(task.created_at_ms)
            .bind(task.updated_at_ms)
            .bind(task.ttl_ms)
            .bind(&task.owner)
            .bind(task.lease_until_ms)
            .bind(&task.input)
            .bind(task.version)
            .execute(self.pool())
            .await
            .map_err(Error::Database)?;
        Ok(())
    }

    /// The task `id`, if stored.
    ///
    /// # Errors
    /// When the database fails.
    #[tracing::instrument(name = "registry", skip_all, fields(otel.name = "SELECT tasks", otel.kind = "client", db.system.name = self.system, db.operation.name = "SELECT", db.collection.name = "tasks"))]
    pub async fn task(&self, id: &str) -> Result<Option<TaskRow>> {
        let row = sqlx::query(SELECT).bind(id).fetch_optional(self.pool()).await.map_err(Error::Database)?;
        row.map(|row| task_from_row(&row)).transpose()
    }

    /// Moves a task that has not ended to `status`; `true` when it moved.
    ///
    /// # Errors
    /// When the database fails.
    #[tracing::instrument(name = "registry", skip_all, fields(otel.name = "UPDATE tasks", otel.kind = "client", db.system.name = self.system, db.operation.name = "UPDATE", db.collection.name = "tasks"))]
    pub async fn transition_task(
        &self,
        id: &str,
        status: &str,
        status_message: &str,
        result: &str,
        error: &str,
        now_ms: i64,
    ) -> Result<bool> {
        let done = sqlx::query(TRANSITION)
            .bind(status)
            .bind(status_message)
            .bind(result)
            .bind(error)
            .bind(now_ms)
            .bind(id)
            .execute(self.pool())
            .await
            .map_err(Error::Database)?;
        Ok(done.rows_affected() > 0)
    }

    /// Sets a task's status and input, if it is still at `expected_version`
    /// and has not ended; `true` when it changed.
    ///
    /// # Errors
    /// When the database fails.
    #[tracing::instrument(name = "registry", skip_all, fields(otel.name = "UPDATE tasks", otel.kind = "client", db.system.name = self.system, db.operation.name = "UPDATE", db.collection.name = "tasks"))]
    pub async fn change_task_input(
        &self,
        id: &str,
        expected_version: i64,
        status: &str,
        input: &str,
        now_ms: i64,
    ) -> Result<bool> {
        let done = sqlx::query(CHANGE_INPUT)
            .bind(status)
            .bind(input)
            .bind(now_ms)
            .bind(id)
            .bind(expected_version)
            .execute(self.pool())
            .await
            .map_err(Error::Database)?;
        Ok(done.rows_affected() > 0)
    }

    /// Extends the leases of `ids`.
    ///
    /// # Errors
    /// When the database fails.
    pub async fn renew_tasks(&self, ids: &[String], lease_until_ms: i64) -> Result<()> {
        let mut tx = self.pool().begin().await.map_err(Error::Database)?;
        for id in ids {
            sqlx::query("UPDATE tasks SET lease_until = $1 WHERE id = $2")
                .bind(lease_until_ms)
                .bind(id)
                .execute(&mut *tx)
                .await
                .map_err(Error::Database)?;
        }
        tx.commit().await.map_err(Error::Database)
    }

    /// Deletes tasks whose lifetime ended before `now_ms`; how many.
    ///
    /// # Errors
    /// When the database fails.
    pub async fn purge_tasks(&self, now_ms: i64) -> Result<u64> {
        let done = sqlx::query("DELETE FROM tasks WHERE created_at + ttl_ms < $1")
            .bind(now_ms)
            .execute(self.pool())
            .await
            .map_err(Error::Database)?;
        Ok(done.rows_affected())
    }
}

fn task_from_row(row: &AnyRow) -> Result<TaskRow> {
    let text = |column: &str| row.try_get::<String, _>(column).map_err(Error::Database);
    let int = |column: &str| row.try_get::<i64, _>(column).map_err(Error::Database);
    Ok(TaskRow {
        id: text("id")?,
        principal: text("principal")?,
        status: text("status")?,
        status_message: text("status_message")?,
        result: text("result")?,
        error: text("error")?,
        created_at_ms: int("created_at")?,
        updated_at_ms: int("updated_at")?,
        ttl_ms: int("ttl_ms")?,
        owner: text("owner")?,
        lease_until_ms: int("lease_until")?,
        input: text("input")?,
        version: int("version")?,
    })
}
