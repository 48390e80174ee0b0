//! The registry's contract, run on SQLite and on PostgreSQL alike: each test
//! gets a fresh, migrated database of each kind.
//!
//! PostgreSQL comes from `TEST_DATABASE_ADMIN_URL` (see `registry::testing`);
//! each test creates its own database there and drops it after.

// Helpers here are test code too; clippy only knows #[test] functions as such.
#![allow(clippy::unwrap_used)]

use serde_json::json;
use switchyard_registry::testing::FreshDatabase;
use switchyard_registry::{Config, Error, NewPlugin, PluginKind, Registry};

/// A fresh, migrated database of one kind.
struct Fresh {
    registry: Registry,
    url: String,
    database: FreshDatabase,
}

impl Fresh {
    async fn sqlite() -> Self {
        Self::connect(FreshDatabase::sqlite()).await
    }

    async fn postgres() -> Self {
        Self::connect(FreshDatabase::postgres().await).await
    }

    async fn connect(database: FreshDatabase) -> Self {
        let url = database.url().to_owned();
        let registry = Registry::connect(&Config { url: url.clone(), ..Config::default() }).await.unwrap();
        Self { registry, url, database }
    }

    async fn finish(self) {
        drop(self.registry);
        self.database.remove().await;
    }
}

/// Runs one contract test on both databases.
macro_rules! on_both {
    ($name:ident) => {
        mod $name {
            #[tokio::test]
            async fn sqlite() {
                let fresh = super::Fresh::sqlite().await;
                super::$name(&fresh).await;
                fresh.finish().await;
            }

            #[tokio::test]
            async fn postgres() {
                let fresh = super::Fresh::postgres().await;
                super::$name(&fresh).await;
                fresh.finish().await;
            }
        }
    };
}

fn units() -> NewPlugin {
    NewPlugin {
        namespace: "units".into(),
        kind: PluginKind::Wasm,
        spec: json!({ "artifact": "abc", "fuel": 1000 }),
        enabled: true,
        scopes: vec!["units:convert".into()],
    }
}

async fn create_read_list(fresh: &Fresh) {
    let registry = &fresh.registry;
    assert_eq!(registry.catalog_version().await.unwrap(), 0);
    let created = registry.create(units(), "alice").await.unwrap();
    assert_eq!(created.version, 1);
    assert!(created.id.starts_with("plg_") && created.id.len() > 30);
    assert_eq!(registry.get(&created.id).await.unwrap(), created);
    let mut second = units();
    second.namespace = "another".into();
    registry.create(second, "bob").await.unwrap();
    let namespaces: Vec<String> = registry.list().await.unwrap().into_iter().map(|p| p.namespace).collect();
    assert_eq!(namespaces, ["another", "units"]);
    assert_eq!(registry.catalog_version().await.unwrap(), 2, "every change bumps the catalog version");
}
on_both!(create_read_list);

async fn optimistic_concurrency(fresh: &Fresh) {
    let registry = &fresh.registry;
    let created = registry.create(units(), "alice").await.unwrap();
    let updated = registry.update_spec(&created.id, 1, json!({ "artifact": "def" }), "bob").await.unwrap();
    assert_eq!((updated.version, updated.updated_by.as_str()), (2, "bob"));
    assert_eq!(updated.spec, json!({ "artifact": "def" }));
    // A writer that read version 1 loses, and nothing changes.
    let stale = registry.set_enabled(&created.id, 1, false, "carol").await.unwrap_err();
    assert!(matches!(stale, Error::Conflict { expected: 1, actual: 2, .. }), "{stale}");
    assert!(registry.get(&created.id).await.unwrap().enabled);
    let disabled = registry.set_enabled(&created.id, 2, false, "carol").await.unwrap();
    assert!(!disabled.enabled);
    assert!(matches!(registry.delete(&created.id, 2).await.unwrap_err(), Error::Conflict { actual: 3, .. }));
    registry.delete(&created.id, 3).await.unwrap();
    assert!(matches!(registry.get(&created.id).await.unwrap_err(), Error::NotFound { .. }));
    assert!(matches!(registry.delete(&created.id, 3).await.unwrap_err(), Error::NotFound { .. }));
    assert_eq!(registry.catalog_version().await.unwrap(), 4);
}
on_both!(optimistic_concurrency);

async fn scopes_are_stored_and_changed(fresh: &Fresh) {
    let registry = &fresh.registry;
    let created = registry.create(units(), "alice").await.unwrap();
    assert_eq!(registry.get(&created.id).await.unwrap().scopes, ["units:convert"]);
    let changed = registry.set_scopes(&created.id, 1, &["units".into(), "metric:read".into()], "bob").await.unwrap();
    assert_eq!((changed.version, changed.scopes.clone()), (2, vec!["units".to_owned(), "metric:read".to_owned()]));
    // Not a scope token: refused, and nothing changes.
    let bad = registry.set_scopes(&created.id, 2, &["has space".into()], "bob").await.unwrap_err();
    assert!(matches!(bad, Error::Invalid { field: "scopes", .. }), "{bad}");
    assert_eq!(registry.get(&created.id).await.unwrap(), changed);
}
on_both!(scopes_are_stored_and_changed);

async fn invalid_records_change_nothing(fresh: &Fresh) {
    let registry = &fresh.registry;
    registry.create(units(), "alice").await.unwrap();
    let taken = registry.create(units(), "bob").await.unwrap_err();
    assert!(matches!(taken, Error::NamespaceTaken { .. }), "{taken}");
    let mut bad_namespace = units();
    bad_namespace.namespace = "Bad-Name".into();
    assert!(matches!(
        registry.create(bad_namespace, "bob").await.unwrap_err(),
        Error::Invalid { field: "namespace", .. }
    ));
    let mut bad_spec = units();
    bad_spec.namespace = "other".into();
    bad_spec.spec = json!([1, 2]);
    assert!(matches!(registry.create(bad_spec, "bob").await.unwrap_err(), Error::Invalid { field: "spec", .. }));
    assert_eq!(registry.list().await.unwrap().len(), 1);
    assert_eq!(registry.catalog_version().await.unwrap(), 1, "refused changes do not bump the version");
}
on_both!(invalid_records_change_nothing);

async fn artifacts_by_digest(fresh: &Fresh) {
    let registry = &fresh.registry;
    let module = b"\0asm\x01\0\0\0 not really a module".to_vec();
    let digest = registry.put_artifact(&module).await.unwrap();
    assert_eq!(digest.len(), 64);
    assert_eq!(registry.put_artifact(&module).await.unwrap(), digest, "idempotent");
    assert_eq!(registry.artifact(&digest).await.unwrap(), Some(module));
    assert_eq!(registry.artifact(&"0".repeat(64)).await.unwrap(), None);
}
on_both!(artifacts_by_digest);

async fn reopening_keeps_everything(fresh: &Fresh) {
    let created = fresh.registry.create(units(), "alice").await.unwrap();
    // A restart: a new connection runs the migrations again (a no-op) and sees the same rows.
    let reopened = Registry::connect(&Config { url: fresh.url.clone(), ..Config::default() }).await.unwrap();
    assert_eq!(reopened.get(&created.id).await.unwrap(), created);
    assert_eq!(reopened.catalog_version().await.unwrap(), 1);
}
on_both!(reopening_keeps_everything);
