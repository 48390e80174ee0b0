//! The Redis bus: every replica appends the events that concern other
//! replicas to one log in Redis (a stream, [`log`]) and reads it from where
//! it stands; inside the process, events fan out through the same bounded
//! broadcast channel as the in-process bus.
//!
//! - A publish is carried once it is appended, and only then delivered
//!   here (at once: a replica skips its own entries when it reads them
//!   back). An append that fails delivers nothing anywhere, so a retry is
//!   safe; with an idempotency key a retry after a lost answer is too.
//! - A replica that was cut off (Redis restarted, the network broke) reads
//!   what it missed when it is back, in order, each entry once. When it
//!   cannot (the log was trimmed past it, or Redis lost the log) its
//!   subscribers hear a [`crate::Delivery::Gap`], never silence.
//! - After a reconnect, subscribers also get [`Event::BusReconnected`]:
//!   what failed to publish meanwhile was carried nowhere, so state derived
//!   from a store is compared afresh. A replica whose publish failed also
//!   appends [`Event::EventsLost`] once it can, which every replica's
//!   subscribers hear as a gap: an event that was never carried (a task's
//!   status, say) is announced as lost, not silently missing.
//! - A heartbeat `PING` every second notices a dead connection even when
//!   nothing is published, and makes publishes fail at once while it is.
//! - Wire format ([`crate::wire`]), versioned and authenticated: an HMAC
//!   under a key every replica shares, over the log's key name and the
//!   message. Entries that do not verify (a forgery, an unknown version or
//!   key, a message appended long after it was signed) are dropped and
//!   counted.

mod link;
mod log;
mod marks;
mod own;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
pub use link::{Patience, RedisLink};
use log::{Appended, Appender, LogKeys, Reader};
pub use marks::RedisMarks;
use own::OwnPublishes;
use tokio::sync::broadcast;

use crate::wire::{self, BusKey};
use crate::{Error, Event, Local, NotificationBus, Published, Result, Subscription};

/// Local fan-out capacity, as for the in-process bus.
const CAPACITY: usize = 1024;

/// How to reach Redis.
#[derive(Clone)]
pub struct RedisConfig {
    /// `redis://[user:password@]host:port[/db]`, or `rediss://…` for TLS.
    /// In cluster mode, seed nodes separated by commas.
    pub url: String,
    /// With `rediss://`: the CA certificates (PEM) that sign Redis's
    /// certificate, instead of the system's roots.
    pub tls_ca_pem: Option<Vec<u8>>,
    /// Prefix of the channel name, so several deployments can share a Redis. Default `switchyard:`.
    pub prefix: String,
    /// A Redis Cluster: `url` lists seed nodes; the cluster client follows
    /// the topology, and a publish on any node reaches subscribers on all.
    pub cluster: bool,
    /// Keys for the bus messages' MACs; the first signs. Every replica must
    /// hold the signing key of the others. Unused by the limiter and marks.
    pub keys: Vec<BusKey>,
    /// About how many entries the bus's log keeps (Redis trims the oldest
    /// beyond it): how far a replica may fall behind, or how long it may be
    /// cut off at a given publish rate, and still catch up without a gap.
    pub log_max_len: usize,
}

/// The default of [`RedisConfig::log_max_len`].
pub const DEFAULT_LOG_MAX_LEN: usize = 10_000;

impl RedisConfig {
    /// The seed nodes of a Redis Cluster: `url` split at commas.
    ///
    /// # Errors
    /// When a node's URL is invalid.
    pub fn seed_nodes(&self) -> redis::RedisResult<Vec<redis::ConnectionInfo>> {
        self.url.split(',').map(|node| redis::IntoConnectionInfo::into_connection_info(node.trim())).collect()
    }

    fn certificates(&self) -> Option<redis::TlsCertificates> {
        self.tls_ca_pem.clone().map(|root| redis::TlsCertificates { client_tls: None, root_cert: Some(root) })
    }

    /// A client of the one server `url` names, over TLS for `rediss://`,
    /// trusting `tls_ca_pem` when given. The bus, the limiter and the marks
    /// all connect through it.
    ///
    /// # Errors
    /// When the URL or the certificates are invalid.
    pub fn client(&self) -> redis::RedisResult<redis::Client> {
        let info = redis::IntoConnectionInfo::into_connection_info(self.url.as_str())?;
        match self.certificates() {
            Some(certificates) => redis::Client::build_with_tls(info, certificates),
            None => redis::Client::open(info),
        }
    }

    /// A Redis Cluster client's builder over the seed nodes, with the same TLS.
    ///
    /// # Errors
    /// When a node's URL is invalid.
    pub fn cluster_builder(&self) -> redis::RedisResult<redis::cluster::ClusterClientBuilder> {
        let builder = redis::cluster::ClusterClientBuilder::new(self.seed_nodes()?);
        Ok(match self.certificates() {
            Some(certificates) => builder.certs(certificates),
            None => builder,
        })
    }
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Each URL (a cluster's seed nodes are several) may hold a password.
        let without_credentials = |url: &str| match url.split_once('@') {
            Some((credentials, host)) => {
                format!("{}***@{host}", &credentials[..credentials.find("//").map_or(0, |i| i + 2)])
            }
            None => url.to_owned(),
        };
        let url = self.url.split(',').map(without_credentials).collect::<Vec<_>>().join(",");
        f.debug_struct("RedisConfig")
            .field("url", &url)
            .field("prefix", &self.prefix)
            .field("cluster", &self.cluster)
            .field("tls_ca_pem", &self.tls_ca_pem.as_ref().map(|_| "(set)"))
            .field("keys", &self.keys)
            .field("log_max_len", &self.log_max_len)
            .finish()
    }
}

/// How the connection publishes go through waits: an append is not retried
/// by a cluster's client (a retry after a lost answer would append it
/// twice; the heartbeat reconnects; redis-rs may still re-send a request in
/// flight after a failed refresh of the slots, and readers drop a repeat), and
/// on one server a command during an outage fails after a short retry
/// instead of the default six (seven seconds holding a request), while the
/// heartbeat keeps trying to reconnect every second.
const PUBLISHING: Patience = Patience {
    connect: Duration::from_secs(2),
    respond: Duration::from_secs(2),
    retries: 2,
    cluster_retries: 0,
    max_delay: Some(Duration::from_secs(2)),
};

/// Asks the node that holds the log (in a cluster, a `PING` would go to any
/// node) whether it answers.
async fn ping(link: &mut RedisLink, keys: &LogKeys) -> redis::RedisResult<i64> {
    redis::cmd("EXISTS").arg(&keys.meta).query_async(link).await
}

/// Whether a command that failed with `error` may have run in Redis all the
/// same: it was sent and no answer came (the connection broke, the answer
/// was late, or it could not be read). A refused connection never sent it;
/// an error Redis answered means the script stopped before it appended
/// (nothing after the append can fail: see `log::APPEND`); anything the
/// client decided is before sending.
fn may_have_run(error: &redis::RedisError) -> bool {
    (error.is_io_error() && !error.is_connection_refusal()) || error.kind() == redis::ErrorKind::Parse
}

/// What a publish needs, shared with the task that appends (so that a
/// caller who stops waiting cannot leave an appended event undelivered here).
struct Writer {
    local: broadcast::Sender<Local>,
    link: RedisLink,
    appender: Appender,
    origin: String,
    keys: Arc<[BusKey]>,
    /// This replica's publishes not yet answered, or unanswered.
    own: Arc<OwnPublishes>,
    /// Whether the last heartbeat was answered.
    up: AtomicBool,
    /// A publish failed: the other replicas are owed an [`Event::EventsLost`].
    owed: AtomicBool,
}

impl Writer {
    /// Appends `event` to the log, then delivers it here. An error means it
    /// was delivered nowhere, unless Redis appended it without answering:
    /// then every replica delivers it as it reads it, this one included.
    async fn carry(&self, event: Event, once: Option<&str>) -> Result<Published> {
        let span = tracing::info_span!(
            "redis",
            otel.name = "EVALSHA",
            otel.kind = "client",
            db.system.name = "redis",
            db.operation.name = "EVALSHA",
            switchyard.bus.event = event.kind(),
        );
        let nonce = self.own.start();
        let message = wire::encode(&self.keys, &self.appender.keys().log, (&self.origin, nonce), &event, now_ms());
        let message = message.map_err(|e| {
            self.own.answered(nonce);
            Error::Transport(e)
        })?;
        let fingerprint = once.map(|_| crate::fingerprint(&event));
        let once = once.zip(fingerprint.as_deref());
        let mut link = self.link.clone();
        let appended = tracing::Instrument::instrument(self.appender.append(&mut link, message, once), span).await;
        switchyard_telemetry::metrics().bus_published(event.kind(), appended.is_ok());
        let appended = match appended {
            Ok(appended) => {
                self.own.answered(nonce);
                appended
            }
            // The reader found it in the log meanwhile: it was appended.
            Err(_) if self.own.failed(nonce) => Appended::Now,
            Err(error) => {
                self.owed.store(true, Ordering::SeqCst);
                return Err(if may_have_run(&error) {
                    Error::Unanswered(error.to_string())
                } else {
                    Error::Transport(error.to_string())
                });
            }
        };
        match appended {
            Appended::Now => {
                let _ = self.local.send(Local::Event(event));
                Ok(Published::Now)
            }
            Appended::Already => Ok(Published::Already),
            Appended::KeyReused => Err(Error::KeyReused),
        }
    }
}

/// A bus across replicas, through a log in Redis ([`log`]).
pub struct RedisBus {
    writer: Arc<Writer>,
    /// Whether the reader is connected (and so caught up, or catching up).
    reader_up: Arc<AtomicBool>,
    /// The reader and the heartbeat end when this is dropped.
    _alive: Arc<()>,
}

impl std::fmt::Debug for RedisBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBus")
            .field("log", &self.writer.appender.keys().log)
            .field("origin", &self.writer.origin)
            .finish_non_exhaustive()
    }
}

impl RedisBus {
    /// Connects, learns where the log stands, and starts reading it. Fails
    /// if Redis cannot be reached now (a replica should not start deaf), or
    /// without a key to sign with; later outages are survived.
    ///
    /// # Errors
    /// When the URL is invalid, no key is configured, or Redis does not answer.
    pub async fn connect(config: &RedisConfig) -> std::result::Result<Arc<Self>, redis::RedisError> {
        if config.keys.is_empty() {
            return Err(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "the Redis bus needs a key every replica shares (state.keys)",
            )));
        }
        let log_keys = LogKeys::new(&config.prefix);
        let own = Arc::new(OwnPublishes::default());
        let writer = Arc::new(Writer {
            local: broadcast::channel(CAPACITY).0,
            link: RedisLink::connect(config, PUBLISHING).await?,
            appender: Appender::new(log_keys.clone(), config.log_max_len),
            origin: format!("{:016x}", rand::random::<u64>()),
            keys: config.keys.clone().into(),
            own: Arc::clone(&own),
            up: AtomicBool::new(true),
            owed: AtomicBool::new(false),
        });
        let (alive, reader_up) = (Arc::new(()), Arc::new(AtomicBool::new(false)));
        Reader {
            config: config.clone(),
            keys: log_keys,
            bus_keys: Arc::clone(&writer.keys),
            origin: writer.origin.clone(),
            own,
            local: writer.local.clone(),
            up: Arc::clone(&reader_up),
            alive: Arc::downgrade(&alive),
        }
        .start()
        .await?;

        // Heartbeat: a connection that died quietly is noticed and rebuilt,
        // and publishes fail at once while it is down.
        let (weak, alive_while) = (Arc::downgrade(&writer), Arc::downgrade(&alive));
        tokio::spawn(async move {
            let mut timer = tokio::time::interval(Duration::from_secs(1));
            loop {
                timer.tick().await;
                let Some(writer) = weak.upgrade().filter(|_| alive_while.strong_count() > 0) else { return };
                let answered = ping(&mut writer.link.clone(), writer.appender.keys()).await.is_ok();
                if writer.up.swap(answered, Ordering::SeqCst) && !answered {
                    tracing::warn!("Redis does not answer; events cannot be published until it does");
                }
                if answered && writer.owed.swap(false, Ordering::SeqCst) {
                    match writer.carry(Event::EventsLost, None).await {
                        Ok(_) => switchyard_telemetry::metrics().bus_gap("unpublished"),
                        // `carry` owes it again.
                        Err(error) => tracing::debug!(%error, "cannot yet tell the other replicas events were lost"),
                    }
                }
            }
        });
        Ok(Arc::new(Self { writer, reader_up, _alive: alive }))
    }

    /// Whether Redis is reachable for publishing and for reading the log
    /// (for readiness and metrics).
    pub fn is_connected(&self) -> bool {
        self.writer.up.load(Ordering::SeqCst) && self.reader_up.load(Ordering::SeqCst)
    }

    fn publish_inner(&self, event: Event, once: Option<String>) -> BoxFuture<'_, Result<Published>> {
        Box::pin(async move {
            if !event.crosses_replicas() {
                switchyard_telemetry::metrics().bus_published(event.kind(), true);
                let _ = self.writer.local.send(Local::Event(event));
                return Ok(Published::Now);
            }
            if !self.writer.up.load(Ordering::SeqCst) {
                // The heartbeat saw Redis go: fail at once rather than make
                // the request that published wait for a reconnect.
                switchyard_telemetry::metrics().bus_published(event.kind(), false);
                self.writer.owed.store(true, Ordering::SeqCst);
                return Err(Error::Transport("Redis is unreachable".into()));
            }
            let writer = Arc::clone(&self.writer);
            tokio::spawn(async move { writer.carry(event, once.as_deref()).await })
                .await
                .map_err(|e| Error::Unanswered(format!("the publish was interrupted: {e}")))
                .flatten()
        })
    }
}

fn now_ms() -> u64 {
    let since_epoch = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX)
}

impl NotificationBus for RedisBus {
    fn publish(&self, event: Event) -> BoxFuture<'_, Result<()>> {
        let published = self.publish_inner(event, None);
        Box::pin(async move { published.await.map(|_| ()) })
    }

    fn publish_once<'a>(&'a self, event: Event, key: &'a str) -> BoxFuture<'a, Result<Published>> {
        self.publish_inner(event, Some(key.to_owned()))
    }

    fn subscribe(&self) -> Subscription {
        Subscription { inner: self.writer.local.subscribe() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_append_sent_without_an_answer_may_have_run() {
        let io = |kind| redis::RedisError::from(std::io::Error::from(kind));
        assert!(!may_have_run(&io(std::io::ErrorKind::ConnectionRefused)), "never sent");
        for kind in [std::io::ErrorKind::BrokenPipe, std::io::ErrorKind::TimedOut, std::io::ErrorKind::ConnectionReset]
        {
            assert!(may_have_run(&io(kind)), "{kind:?}: sent, perhaps run");
        }
        let client = redis::RedisError::from((redis::ErrorKind::Client, "refused before sending"));
        assert!(!may_have_run(&client));
    }

    #[test]
    fn debug_hides_the_password() {
        let config = RedisConfig {
            tls_ca_pem: None,
            url: "redis://:hunter2@cache:6379/0".into(),
            prefix: "s:".into(),
            cluster: false,
            keys: vec![BusKey { id: "k".into(), secret: b"hunter3-hunter3-hunter3-hunter3!".to_vec().into() }],
            log_max_len: DEFAULT_LOG_MAX_LEN,
        };
        assert!(!format!("{config:?}").contains("hunter2"));
        assert!(!format!("{config:?}").contains("hunter3"));
        let cluster = RedisConfig { url: "redis://:a1@n1:7000,redis://:b2@n2:7001".into(), cluster: true, ..config };
        let printed = format!("{cluster:?}");
        assert!(!printed.contains("a1@") && !printed.contains("b2@") && printed.contains("n2:7001"), "{printed}");
    }
}
