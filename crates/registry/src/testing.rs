//! Fresh, empty databases for tests: a SQLite file in the temp directory, or
//! a new database on the test PostgreSQL server, removed by
//! [`FreshDatabase::remove`].
//!
//! PostgreSQL comes from `TEST_DATABASE_ADMIN_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`, a trust-auth server on
//! loopback); each fresh database is created there and dropped after.

use sqlx::Connection as _;

/// A database made for one test.
#[derive(Debug)]
pub struct FreshDatabase {
    url: String,
    cleanup: Cleanup,
}

#[derive(Debug)]
enum Cleanup {
    SqliteFile(std::path::PathBuf),
    PostgresDatabase { admin_url: String, name: String },
}

impl FreshDatabase {
    /// A new SQLite file (created on first connect).
    pub fn sqlite() -> Self {
        let path = std::env::temp_dir().join(format!("switchyard-test-{:x}.db", rand::random::<u64>()));
        Self { url: format!("sqlite://{}", path.display()), cleanup: Cleanup::SqliteFile(path) }
    }

    /// A new database on the test PostgreSQL server.
    ///
    /// # Panics
    /// When the server cannot be reached: a test that needs it must not pass without it.
    pub async fn postgres() -> Self {
        sqlx::any::install_default_drivers();
        let admin_url = std::env::var("TEST_DATABASE_ADMIN_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        let name = format!("switchyard_test_{:x}", rand::random::<u64>());
        let mut connection = sqlx::AnyConnection::connect(&admin_url)
            .await
            .unwrap_or_else(|e| panic!("the test PostgreSQL server (TEST_DATABASE_ADMIN_URL): {e}"));
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut connection)
            .await
            .unwrap_or_else(|e| panic!("CREATE DATABASE {name}: {e}"));
        let base = admin_url.rsplit_once('/').map_or(admin_url.as_str(), |(base, _)| base).to_owned();
        Self { url: format!("{base}/{name}"), cleanup: Cleanup::PostgresDatabase { admin_url, name } }
    }

    /// The URL to connect to.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Deletes the database. Close every pool on it first.
    pub async fn remove(self) {
        match self.cleanup {
            Cleanup::SqliteFile(path) => {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
            }
            Cleanup::PostgresDatabase { admin_url, name } => {
                if let Ok(mut connection) = sqlx::AnyConnection::connect(&admin_url).await {
                    let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                    let _ = sqlx::query(sqlx::AssertSqlSafe(drop)).execute(&mut connection).await;
                }
            }
        }
    }
}
