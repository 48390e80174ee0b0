//! Several replicas of one deployment, as the multi-replica tests need them:
//! the same registry database, the running Redis under a prefix of the
//! deployment's own, the same `state.keys`, each replica on its own port,
//! configured through the binary's typed [`RawConfig`] rather than pairs
//! of environment strings.
//!
//! ```no_run
//! # async fn demo() {
//! use switchyard_testkit::App;
//! let deployment = App::builder().replicas(3).redis().postgres()
//!     .configure(|raw| raw.fixture = Some("conformance".into()))
//!     .start()
//!     .await;
//! let reply = deployment[2].client().request("tools/list", serde_json::json!({})).await;
//! # deployment.remove().await;
//! # }
//! ```

use std::ops::Index;

use switchyard::config::RawConfig;
use switchyard_registry::testing::FreshDatabase;

use crate::{App, SHARED_STATE_KEY};

/// A setting applied to every replica's configuration.
type Setting = Box<dyn Fn(&mut RawConfig) + Send + Sync>;

/// Builds a [`Deployment`]; from [`App::builder`].
#[must_use]
pub struct DeploymentBuilder {
    replicas: usize,
    redis: bool,
    postgres: bool,
    settings: Vec<Setting>,
}

impl App {
    /// One replica on a SQLite file of its own until told otherwise.
    pub fn builder() -> DeploymentBuilder {
        DeploymentBuilder { replicas: 1, redis: false, postgres: false, settings: Vec::new() }
    }
}

impl DeploymentBuilder {
    /// How many replicas.
    pub fn replicas(mut self, replicas: usize) -> Self {
        self.replicas = replicas;
        self
    }

    /// The bus, marks and rate limits on the running Redis (`TEST_REDIS_URL`,
    /// default `redis://127.0.0.1:6379`), under a prefix no other test uses.
    pub fn redis(mut self) -> Self {
        self.redis = true;
        self
    }

    /// The registry on a fresh PostgreSQL database (`registry::testing`),
    /// which [`Deployment::remove`] drops.
    pub fn postgres(mut self) -> Self {
        self.postgres = true;
        self
    }

    /// Sets something on every replica's configuration.
    pub fn configure(mut self, setting: impl Fn(&mut RawConfig) + Send + Sync + 'static) -> Self {
        self.settings.push(Box::new(setting));
        self
    }

    /// Starts the replicas, one after another.
    ///
    /// # Panics
    /// When a replica's configuration is invalid or it cannot start.
    pub async fn start(self) -> Deployment {
        let database = if self.postgres { Some(FreshDatabase::postgres().await) } else { None };
        let redis = self.redis.then(|| {
            let url = std::env::var("TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
            (url, format!("switchyard-it-{:x}:", rand::random::<u64>()))
        });
        // Replicas share one SQLite file when no PostgreSQL is asked for.
        let sqlite = (database.is_none() && self.replicas > 1).then(|| tempfile::tempdir().expect("a directory"));
        let database_url = match (&database, &sqlite) {
            (Some(database), _) => Some(database.url().to_owned()),
            (None, Some(dir)) => Some(format!("sqlite://{}", dir.path().join("registry.db").display())),
            (None, None) => None,
        };
        let mut replicas = Vec::with_capacity(self.replicas);
        for _ in 0..self.replicas {
            let mut raw = RawConfig::default();
            raw.database_url.clone_from(&database_url);
            if let Some((url, prefix)) = &redis {
                raw.redis_url = Some(url.clone());
                raw.redis_prefix = Some(prefix.clone());
                raw.state.keys = Some(switchyard::config::StringList::List(vec![SHARED_STATE_KEY.into()]));
            }
            for setting in &self.settings {
                setting(&mut raw);
            }
            let listener = switchyard_http::bind(([127, 0, 0, 1], 0).into(), 4096).expect("bind 127.0.0.1:0");
            replicas.push(App::start_raw(listener, raw).await);
        }
        Deployment { replicas, database, _sqlite: sqlite }
    }
}

/// Replicas of one deployment; index it for one of them.
pub struct Deployment {
    replicas: Vec<App>,
    database: Option<FreshDatabase>,
    _sqlite: Option<tempfile::TempDir>,
}

impl Deployment {
    /// Stops every replica and drops the PostgreSQL database, if any.
    pub async fn remove(self) {
        let Self { replicas, database, _sqlite } = self;
        drop(replicas);
        if let Some(database) = database {
            database.remove().await;
        }
    }
}

impl Index<usize> for Deployment {
    type Output = App;

    fn index(&self, replica: usize) -> &App {
        &self.replicas[replica]
    }
}
