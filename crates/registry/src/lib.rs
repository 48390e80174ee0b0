//! The registry: the single source of truth for which plugins exist, stored
//! in SQL so that every replica (and a replica that starts later) serves the
//! same catalog. The embedded default is a SQLite file; PostgreSQL when the
//! configured URL names one. Queries are runtime queries through sqlx's Any
//! driver, against one migration set (`migrations/` at the repository root).
//!
//! It stores records (a kind plus a JSON spec), not running plugins: the
//! binary hands records to `plugins` to build them. It knows no HTTP and no
//! plugin runtime. Every change bumps the catalog version in the same
//! transaction, which is how a replica tells whether its view is current.
//!
//! The admin API (`switchyard-admin`) writes through it; the binary's catalog
//! sync reads it. It also keeps the Tasks extension's task rows, for the same
//! reason: every replica must see them. `testing` (the `testing` feature) makes fresh databases for
//! the test suites.

mod migrations;
mod record;
mod tasks;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Row};

pub use record::{NewPlugin, PluginKind, PluginRecord, parse_namespace, validate_scopes};
pub use tasks::TaskRow;

/// How to reach the database. `Debug` hides a password in the URL.
#[derive(Clone)]
pub struct Config {
    /// `sqlite://PATH` (the file is created on first run) or
    /// `postgres://…`. Default `sqlite://switchyard.db`.
    pub url: String,
    /// Most connections held open. Default 8.
    pub max_connections: u32,
    /// How long to wait for a connection before failing a call. Default 5 s.
    pub acquire_timeout: Duration,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("url", &redact_password(&self.url))
            .field("max_connections", &self.max_connections)
            .field("acquire_timeout", &self.acquire_timeout)
            .finish()
    }
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`.
fn redact_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let Some((userinfo, host)) = rest.split_once('@') else { return url.to_owned() };
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_owned(),
    }
}

impl Default for Config {
    fn default() -> Self {
        Self { url: "sqlite://switchyard.db".into(), max_connections: 8, acquire_timeout: Duration::from_secs(5) }
    }
}

/// What can go wrong with the registry.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database could not be reached or failed a query. Details are for the log.
    #[error("registry database error")]
    Database(#[source] sqlx::Error),
    /// The schema could not be brought up to date (or an applied migration was edited).
    #[error("registry migration failed")]
    Migration(#[source] sqlx::migrate::MigrateError),
    /// No plugin with that id.
    #[error("no plugin {id}")]
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// The plugin changed since the caller read it (optimistic concurrency).
    #[error("plugin {id} is at version {actual}, not {expected}")]
    Conflict {
        /// The plugin.
        id: String,
        /// The version the caller based its change on.
        expected: i64,
        /// The version stored now.
        actual: i64,
    },
    /// Another plugin already uses that namespace.
    #[error("namespace {namespace} is taken")]
    NamespaceTaken {
        /// The namespace.
        namespace: String,
    },
    /// The record is invalid; `field` names what is wrong.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// The offending field.
        field: &'static str,
        /// Why.
        reason: String,
    },
}

/// A crate-local result.
pub type Result<T> = std::result::Result<T, Error>;

/// The registry store.
#[derive(Debug, Clone)]
pub struct Registry {
    pool: AnyPool,
    /// `db.system.name` of the spans: `sqlite` or `postgresql`.
    system: &'static str,
}

// The statements are constants: no SQL is ever built from input.
macro_rules! columns {
    () => {
        "id, namespace, kind, spec, enabled, version, created_at, updated_at, updated_by, scopes"
    };
}
const SELECT_ONE: &str = concat!("SELECT ", columns!(), " FROM plugins WHERE id = $1");
const SELECT_ALL: &str = concat!("SELECT ", columns!(), " FROM plugins ORDER BY namespace");
const INSERT: &str = concat!("INSERT INTO plugins (", columns!(), ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)");
// A guarded change: it applies only while the row is at the version the caller read.
const UPDATE_SPEC: &str = "UPDATE plugins SET spec = $1, version = version + 1, updated_at = $2, updated_by = $3 WHERE id = $4 AND version = $5";
const UPDATE_SCOPES: &str = "UPDATE plugins SET scopes = $1, version = version + 1, updated_at = $2, updated_by = $3 WHERE id = $4 AND version = $5";
const UPDATE_ENABLED: &str = "UPDATE plugins SET enabled = $1, version = version + 1, updated_at = $2, updated_by = $3 WHERE id = $4 AND version = $5";

impl Registry {
    /// Connects (creating a SQLite file if needed) and applies pending migrations.
    ///
    /// # Errors
    /// When the database is unreachable or a migration fails.
    pub async fn connect(config: &Config) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let url = sqlite_create_if_missing(&config.url);
        let pool = AnyPoolOptions::new()
            .max_connections(config.max_connections)
            .acquire_timeout(config.acquire_timeout)
            .connect(&url)
            .await
            .map_err(Error::Database)?;
        migrations::migrator().run(&pool).await.map_err(Error::Migration)?;
        let system = if url.starts_with("sqlite:") { "sqlite" } else { "postgresql" };
        Ok(Self { pool, system })
    }

    pub(crate) fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// The catalog version: it grows with every change to any plugin.
    ///
    /// # Errors
    /// When the database fails.
    pub async fn catalog_version(&self) -> Result<i64> {
        let row = sqlx::query("SELECT version FROM catalog WHERE id = 1")
            .fetch_one(&self.pool)
            .await
            .map_err(Error::Database)?;
        row.try_get::<i64, _>("version").map_err(Error::Database)
    }

    /// Registers a plugin at version 1.
    ///
    /// # Errors
    /// `NamespaceTaken`, `Invalid`, or a database failure.
    #[tracing::instrument(name = "registry", skip_all, fields(otel.name = "INSERT plugins", otel.kind = "client", db.system.name = self.system, db.operation.name = "INSERT", db.collection.name = "plugins"))]
    pub async fn create(&self, new: NewPlugin, actor: &str) -> Result<PluginRecord> {
        new.validate()?;
        let now = now_ms();
        let record = PluginRecord {
            id: format!("plg_{:032x}", rand::random::<u128>()),
            namespace: new.namespace,
            kind: new.kind,
            spec: new.spec,
            enabled: new.enabled,
            version: 1,
            created_at_ms: now,
            updated_at_ms: now,
            updated_by: actor.to_owned(),
            scopes: new.scopes,
        };
        let mut tx = self.pool.begin().await.map_err(Error::Database)?;
        let inserted = sqlx::query(INSERT)
            .bind(&record.id)
            .bind(&record.namespace)
            .bind(record.kind.as_str())
            .bind(record.spec.to_string())
            .bind(i64::from(record.enabled))
            .bind(record.version)
            .bind(record.created_at_ms)
            .bind(record.updated_at_ms)
            .bind(&record.updated_by)
            .bind(scopes_json(&record.scopes))
            .execute(&mut *tx)
            .await;
        if let Err(error) = inserted {
            return Err(match &error {
                sqlx::Error::Database(db) if db.is_unique_violation() => {
                    Error::NamespaceTaken { namespace: record.namespace }
                }
                _ => Error::Database(error),
            });
        }
        bump_catalog(&mut tx).await?;
        tx.commit().await.map_err(Error::Database)?;
        Ok(record)
    }

    /// One plugin.
    ///
    /// # Errors
    /// `NotFound`, or a database failure.
    pub async fn get(&self, id: &str) -> Result<PluginRecord> {
        let row = sqlx::query(SELECT_ONE).bind(id).fetch_optional(&self.pool).await.map_err(Error::Database)?;
        row.map(|r| from_row(&r)).transpose()?.ok_or_else(|| Error::NotFound { id: id.to_owned() })
    }

    /// Every plugin, by namespace.
    ///
    /// # Errors
    /// When the database fails.
    pub async fn list(&self) -> Result<Vec<PluginRecord>> {
        let rows = sqlx::query(SELECT_ALL).fetch_all(&self.pool).await.map_err(Error::Database)?;
        rows.iter().map(from_row).collect()
    }

    /// Replaces a plugin's spec, if it is still at `expected_version`.
    ///
    /// # Errors
    /// `NotFound`, `Conflict`, `Invalid`, or a database failure.
    #[tracing::instrument(name = "registry", skip_all, fields(otel.name = "UPDATE plugins", otel.kind = "client", db.system.name = self.system, db.operation.name = "UPDATE", db.collection.name = "plugins"))]
    pub async fn update_spec(
        &self,
        id: &str,
        expected_version: i64,
        spec: serde_json::Value,
        actor: &str,
    ) -> Result<PluginRecord> {
        record::validate_spec(&spec)?;
        self.change(id, expected_version, actor, UPDATE_SPEC, Bind::Text(spec.to_string())).await
    }

    /// Replaces the scopes a plugin needs, if it is still at `expected_version`.
    ///
    /// # Errors
    /// `NotFound`, `Conflict`, `Invalid`, or a database failure.
    #[tracing::instrument(name = "registry", skip_all, fields(otel.name = "UPDATE plugins", otel.kind = "client", db.system.name = self.system, db.operation.name = "UPDATE", db.collection.name = "plugins"))]
    pub async fn set_scopes(
        &self,
        id: &str,
        expected_version: i64,
        scopes: &[String],
        actor: &str,
    ) -> Result<PluginRecord> {
        record::validate_scopes(scopes)?;
        self.change(id, expected_version, actor, UPDATE_SCOPES, Bind::Text(scopes_json(scopes))).await
    }

    /// Enables or disables a plugin, if it is still at `expected_version`.
    ///
    /// # Errors
    /// `NotFound`, `Conflict`, or a database failure.
    #[tracing::instrument(name = "registry", skip_all, fields(otel.name = "UPDATE plugins", otel.kind = "client", db.system.name = self.system, db.operation.name = "UPDATE", db.collection.name = "plugins"))]
    pub async fn set_enabled(
        &self,
        id: &str,
        expected_version: i64,
        enabled: bool,
        actor: &str,
    ) -> Result<PluginRecord> {
        self.change(id, expected_version, actor, UPDATE_ENABLED, Bind::Int(i64::from(enabled))).await
    }

    /// Removes a plugin, if it is still at `expected_version`.
    ///
    /// # Errors
    /// `NotFound`, `Conflict`, or a database failure.
    #[tracing::instrument(name = "registry", skip_all, fields(otel.name = "DELETE plugins", otel.kind = "client", db.system.name = self.system, db.operation.name = "DELETE", db.collection.name = "plugins"))]
    pub async fn delete(&self, id: &str, expected_version: i64) -> Result<()> {
        let mut tx = self.pool.begin().await.map_err(Error::Database)?;
        let done = sqlx::query("DELETE FROM plugins WHERE id = $1 AND version = $2")
            .bind(id)
            .bind(expected_version)
            .execute(&mut *tx)
            .await
            .map_err(Error::Database)?;
        if done.rows_affected() == 0 {
            drop(tx);
            return Err(self.why_unchanged(id, expected_version).await);
        }
        bump_catalog(&mut tx).await?;
        tx.commit().await.map_err(Error::Database)
    }

    /// Stores an artifact (a WASM module, say) and returns its SHA-256, hex.
    /// Storing the same bytes twice keeps one copy.
    ///
    /// # Errors
    /// When the database fails.
    #[tracing::instrument(name = "registry", skip_all, fields(otel.name = "INSERT artifacts", otel.kind = "client", db.system.name = self.system, db.operation.name = "INSERT", db.collection.name = "artifacts"))]
    pub async fn put_artifact(&self, bytes: &[u8]) -> Result<String> {
        let digest = sha256_hex(bytes);
        sqlx::query(
            "INSERT INTO plugin_artifacts (sha256, bytes, size, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (sha256) DO NOTHING",
        )
        .bind(&digest)
        .bind(bytes.to_vec())
        .bind(i64::try_from(bytes.len()).unwrap_or(i64::MAX))
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(Error::Database)?;
        Ok(digest)
    }

    /// The artifact with this SHA-256, if stored.
    ///
    /// # Errors
    /// When the database fails.
    pub async fn artifact(&self, sha256: &str) -> Result<Option<Vec<u8>>> {
        let row = sqlx::query("SELECT bytes FROM plugin_artifacts WHERE sha256 = $1")
            .bind(sha256)
            .fetch_optional(&self.pool)
            .await
            .map_err(Error::Database)?;
        row.map(|r| r.try_get::<Vec<u8>, _>("bytes")).transpose().map_err(Error::Database)
    }

    async fn change(
        &self,
        id: &str,
        expected_version: i64,
        actor: &str,
        update: &'static str,
        value: Bind,
    ) -> Result<PluginRecord> {
        let mut tx = self.pool.begin().await.map_err(Error::Database)?;
        let query = match value {
            Bind::Text(text) => sqlx::query(update).bind(text),
            Bind::Int(int) => sqlx::query(update).bind(int),
        };
        let done = query
            .bind(now_ms())
            .bind(actor)
            .bind(id)
            .bind(expected_version)
            .execute(&mut *tx)
            .await
            .map_err(Error::Database)?;
        if done.rows_affected() == 0 {
            drop(tx);
            return Err(self.why_unchanged(id, expected_version).await);
        }
        bump_catalog(&mut tx).await?;
        let row = sqlx::query(SELECT_ONE).bind(id).fetch_one(&mut *tx).await.map_err(Error::Database)?;
        tx.commit().await.map_err(Error::Database)?;
        from_row(&row)
    }

    /// Why a guarded change touched no row: the plugin is gone, or moved on.
    async fn why_unchanged(&self, id: &str, expected: i64) -> Error {
        match self.get(id).await {
            Ok(current) => Error::Conflict { id: id.to_owned(), expected, actual: current.version },
            Err(error) => error,
        }
    }
}

enum Bind {
    Text(String),
    Int(i64),
}

async fn bump_catalog(tx: &mut sqlx::Transaction<'_, sqlx::Any>) -> Result<()> {
    sqlx::query("UPDATE catalog SET version = version + 1 WHERE id = 1")
        .execute(&mut **tx)
        .await
        .map_err(Error::Database)?;
    Ok(())
}

fn from_row(row: &AnyRow) -> Result<PluginRecord> {
    let get_text = |column: &str| row.try_get::<String, _>(column).map_err(Error::Database);
    let get_int = |column: &str| row.try_get::<i64, _>(column).map_err(Error::Database);
    let kind = get_text("kind")?;
    Ok(PluginRecord {
        id: get_text("id")?,
        namespace: get_text("namespace")?,
        kind: PluginKind::parse(&kind)
            .ok_or(Error::Invalid { field: "kind", reason: format!("{kind:?} is stored but unknown") })?,
        spec: serde_json::from_str(&get_text("spec")?)
            .map_err(|e| Error::Invalid { field: "spec", reason: format!("stored spec is not JSON: {e}") })?,
        enabled: get_int("enabled")? != 0,
        version: get_int("version")?,
        created_at_ms: get_int("created_at")?,
        updated_at_ms: get_int("updated_at")?,
        updated_by: get_text("updated_by")?,
        scopes: serde_json::from_str(&get_text("scopes")?).map_err(|e| Error::Invalid {
            field: "scopes",
            reason: format!("stored scopes are not a JSON list: {e}"),
        })?,
    })
}

fn scopes_json(scopes: &[String]) -> String {
    serde_json::to_string(scopes).unwrap_or_else(|_| "[]".into())
}

/// SQLite creates a missing file only when asked (`mode=rwc`).
fn sqlite_create_if_missing(url: &str) -> String {
    if url.starts_with("sqlite:") && !url.contains("mode=") {
        let separator = if url.contains('?') { '&' } else { '?' };
        format!("{url}{separator}mode=rwc")
    } else {
        url.to_owned()
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_password() {
        let config = Config { url: "postgres://app:hunter2@db:5432/switchyard".into(), ..Config::default() };
        let debug = format!("{config:?}");
        assert!(!debug.contains("hunter2") && debug.contains("app:***@db"), "{debug}");
        assert_eq!(redact_password("sqlite://switchyard.db"), "sqlite://switchyard.db");
    }
}
