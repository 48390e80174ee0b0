//! The schema, embedded at compile time from `migrations/` at the repository
//! root, so a binary always carries the schema it expects.

use std::borrow::Cow;

use sqlx::SqlStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

/// Every migration, in order: (version, description, SQL).
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "plugins", include_str!("../../../migrations/0001_plugins.sql")),
    (2, "plugin scopes", include_str!("../../../migrations/0002_plugin_scopes.sql")),
    (3, "tasks", include_str!("../../../migrations/0003_tasks.sql")),
    (4, "task input", include_str!("../../../migrations/0004_task_input.sql")),
];

pub(crate) fn migrator() -> Migrator {
    Migrator::with_migrations(
        MIGRATIONS
            .iter()
            .map(|(version, description, sql)| {
                Migration::new(
                    *version,
                    Cow::Borrowed(*description),
                    MigrationType::Simple,
                    SqlStr::from_static(sql),
                    false,
                )
            })
            .collect(),
    )
}
