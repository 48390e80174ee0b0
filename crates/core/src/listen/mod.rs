//! The listen hub: one bus subscription per process, fanned out to every local
//! `subscriptions/listen` stream whose filter asks for the event.
//!
//! Opt-in is strict: a stream only ever receives the notification types its
//! filter named. Each stream has a bounded queue; a stream that falls that far
//! behind is closed (the client re-listens and re-lists) rather than slowing
//! the others or growing memory. On shutdown every stream gets its final
//! result and ends cleanly.
//!
//! Fan-out is the hot path of a change (a thousand streams hear it at once)
//! and idle streams are most of a replica's memory, so: an event's message is
//! serialised once, and each stream adds only its serialised subscription id
//! ([`ListenNotification`]); and a stream's queue is empty until something is
//! queued ([`Mailbox`]), where a channel would preallocate a block per stream.

mod message;
mod registry;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::{Value, json};
use switchyard_bus::{Delivery, Event, NotificationBus};
use switchyard_protocol::meta::{META, SUBSCRIPTION_ID};
use switchyard_protocol::method::notification as names;
use tokio_util::sync::CancellationToken;

pub use message::ListenNotification;
use message::Mailbox;
pub use registry::Refusal;
use registry::{Listener, Registry};

use crate::policy::Caller;

/// What a listen stream asked to hear (`SubscriptionFilter`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// `toolsListChanged`
    pub tools: bool,
    /// `promptsListChanged`
    pub prompts: bool,
    /// `resourcesListChanged`
    pub resources: bool,
    /// `resourceSubscriptions`: URIs whose updates (or updates below them) are wanted.
    pub resource_uris: Vec<String>,
    /// `taskIds`: tasks (the caller's own) whose status changes are wanted.
    pub task_ids: Vec<String>,
}

impl Filter {
    /// The `notifications` object of the acknowledgement: what we will honour.
    pub fn acknowledged(&self) -> Value {
        let mut ack = serde_json::Map::new();
        for (on, key) in [
            (self.tools, "toolsListChanged"),
            (self.prompts, "promptsListChanged"),
            (self.resources, "resourcesListChanged"),
        ] {
            if on {
                ack.insert(key.into(), Value::Bool(true));
            }
        }
        if !self.resource_uris.is_empty() {
            ack.insert("resourceSubscriptions".into(), json!(self.resource_uris));
        }
        if !self.task_ids.is_empty() {
            ack.insert("taskIds".into(), json!(self.task_ids));
        }
        Value::Object(ack)
    }

    /// Whether this filter wants a list-changed `event`.
    fn wants(&self, event: &Event) -> bool {
        match event {
            Event::ToolsListChanged { .. } => self.tools,
            Event::PromptsListChanged { .. } => self.prompts,
            Event::ResourcesListChanged { .. } => self.resources,
            // Resource and task events are looked up in the hub's index.
            _ => false,
        }
    }
}

/// The notification method and params a listen stream hears for `event`
/// (none for events that only concern replicas).
fn notification_of(event: &Event) -> Option<(&'static str, Value)> {
    match event {
        Event::ToolsListChanged { .. } => Some((names::TOOLS_LIST_CHANGED, json!({}))),
        Event::PromptsListChanged { .. } => Some((names::PROMPTS_LIST_CHANGED, json!({}))),
        Event::ResourcesListChanged { .. } => Some((names::RESOURCES_LIST_CHANGED, json!({}))),
        Event::ResourceUpdated { uri } => Some((names::RESOURCES_UPDATED, json!({ "uri": uri }))),
        Event::TaskStatus { task, .. } => Some((names::TASKS, task.clone())),
        _ => None,
    }
}

/// One open listen stream. Dropping it (the client went away) unregisters it.
pub struct ListenStream {
    hub: Arc<HubInner>,
    id: u64,
    subscription_id: Value,
    ack: Option<ListenNotification>,
    mailbox: Arc<Mailbox>,
    finished: bool,
    /// The request's MCP span, kept open for the stream's whole life; each
    /// notification is a debug event in it.
    span: tracing::Span,
}

impl ListenStream {
    /// Keeps `span` (the listen request's) open until the stream ends.
    pub(crate) fn in_span(mut self, span: tracing::Span) -> Self {
        self.span = span;
        self
    }

    /// The next frame: the acknowledgement first, then notifications; on
    /// shutdown, or after a gap in the bus if the stream waits for
    /// resources or tasks, the final result; `None` once the stream is over
    /// (after the final result, or when it was dropped for being slow).
    pub async fn next(&mut self) -> Option<ListenFrame> {
        if let Some(ack) = self.ack.take() {
            return Some(ListenFrame::Notification(ack));
        }
        if self.finished {
            return None;
        }
        tokio::select! {
            biased;
            message = self.mailbox.recv() => match message {
                Some(message) => {
                    tracing::debug!(parent: &self.span, method = message.method(), "notification");
                    Some(ListenFrame::Notification(message))
                }
                None if self.mailbox.finished() => Some(self.final_result()),
                None => None,
            },
            () = self.hub.shutdown.cancelled() => Some(self.final_result()),
        }
    }
}

impl ListenStream {
    /// The listen request's result: the stream's graceful end.
    fn final_result(&mut self) -> ListenFrame {
        self.finished = true;
        ListenFrame::Final(json!({
            "resultType": "complete",
            META: { SUBSCRIPTION_ID: self.subscription_id },
        }))
    }
}

impl Drop for ListenStream {
    fn drop(&mut self) {
        self.hub.lock().remove(self.id);
        switchyard_telemetry::metrics().listen_streams(-1);
        // An OpenTelemetry span ends at its last exit: exit it now, so it
        // lasts as long as the stream did.
        drop(self.span.enter());
    }
}

/// Whether a subscription to `subscribed` covers an update of `updated`: the
/// same URI, or one below it. The hub does not call it: its index looks up
/// exactly the subscriptions this accepts (`registry::covering_prefixes`).
/// A plugin that subscribes elsewhere (an upstream) checks with it that an
/// update it is told of is one it asked for.
pub fn covers(subscribed: &str, updated: &str) -> bool {
    updated == subscribed
        || updated.strip_prefix(subscribed).is_some_and(|rest| subscribed.ends_with('/') || rest.starts_with('/'))
}

/// One frame of a listen stream.
#[derive(Debug, Clone, PartialEq)]
pub enum ListenFrame {
    /// A notification message, `_meta.subscriptionId` included.
    Notification(ListenNotification),
    /// The final result of the listen request (on a graceful end); the stream
    /// ends after it.
    Final(Value),
}

/// The bounds of the listen hub (docs/configuration.md, `[listen]`). One caller must not
/// hold the process's memory: each bound is per stream, per caller or per
/// process, and a refusal is an error the client can read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenLimits {
    /// How far one stream may fall behind before it is closed. Default 64.
    pub queue: usize,
    /// Open streams in this process. Default 10,000.
    pub max_streams: usize,
    /// Open streams per caller: per principal, or per peer address when
    /// unauthenticated. Default 64.
    pub max_streams_per_caller: usize,
    /// `resourceSubscriptions` entries per stream. Default 256.
    pub max_resource_subscriptions: usize,
    /// Their total length in bytes. Default 32 KiB.
    pub max_subscription_bytes: usize,
}

impl Default for ListenLimits {
    fn default() -> Self {
        Self {
            queue: 64,
            max_streams: 10_000,
            max_streams_per_caller: 64,
            max_resource_subscriptions: 256,
            max_subscription_bytes: 32 * 1024,
        }
    }
}

impl ListenLimits {
    /// Refuses a `resourceSubscriptions` list over the per-stream bounds;
    /// the message names the bound.
    pub fn check_subscriptions(&self, uris: &[String]) -> Result<(), String> {
        if uris.len() > self.max_resource_subscriptions {
            return Err(format!(
                "notifications.resourceSubscriptions holds {} URIs; this server accepts at most {} per stream",
                uris.len(),
                self.max_resource_subscriptions
            ));
        }
        let bytes: usize = uris.iter().map(String::len).sum();
        if bytes > self.max_subscription_bytes {
            return Err(format!(
                "notifications.resourceSubscriptions is {bytes} bytes long; this server accepts at most {} per stream",
                self.max_subscription_bytes
            ));
        }
        Ok(())
    }
}

/// Who may hear a `resources/updated`: the scopes a read of the URI needs,
/// or `None` when nothing in the catalog serves it. The server installs one
/// ([`ListenHub::gate_reads`]) over its catalog and scope policy, so a
/// stream hears updates only of what its caller could read.
pub trait ReadScopes: Send + Sync {
    /// The scopes `resources/read` of `uri` needs.
    fn needed(&self, uri: &str) -> Option<Vec<String>>;
}

struct HubInner {
    registry: Mutex<Registry>,
    next_id: AtomicU64,
    dropped_slow: AtomicU64,
    shutdown: CancellationToken,
    limits: ListenLimits,
    reads: RwLock<Option<Arc<dyn ReadScopes>>>,
}

/// Fans bus events out to this process's listen streams.
#[derive(Clone)]
pub struct ListenHub {
    inner: Arc<HubInner>,
}

impl ListenHub {
    /// Starts the hub: subscribes to `bus` and fans out until `shutdown`,
    /// within `limits`.
    pub fn spawn(bus: &Arc<dyn NotificationBus>, shutdown: CancellationToken, limits: ListenLimits) -> Self {
        let limits = ListenLimits { queue: limits.queue.max(1), ..limits };
        let inner = Arc::new(HubInner {
            registry: Mutex::new(Registry::default()),
            next_id: AtomicU64::new(0),
            dropped_slow: AtomicU64::new(0),
            shutdown,
            limits,
            reads: RwLock::new(None),
        });
        let mut subscription = bus.subscribe();
        let hub = Arc::clone(&inner);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = hub.shutdown.cancelled() => break,
                    delivery = subscription.recv() => match delivery {
                        Some(Delivery::Event(event)) => hub.fan_out(&[event]),
                        Some(Delivery::Gap { missed }) => {
                            tracing::warn!(?missed, "listen hub: events were lost; streams start afresh");
                            hub.start_afresh();
                        }
                        None => break,
                    },
                }
            }
        });
        Self { inner }
    }

    /// The bounds the hub was started with.
    pub fn limits(&self) -> &ListenLimits {
        &self.inner.limits
    }

    /// Decides who may hear `resources/updated` from now on. Until a gate
    /// is installed, only callers without scopes (authorization off) do.
    pub fn gate_reads(&self, reads: Arc<dyn ReadScopes>) {
        *self.inner.reads.write().unwrap_or_else(|p| p.into_inner()) = Some(reads);
    }

    /// Opens a stream for the listen request `subscription_id` (its JSON-RPC
    /// id, keeping its type), counted against `caller`. The acknowledgement
    /// is its first frame.
    pub fn open(&self, subscription_id: Value, filter: Filter, caller: &Caller) -> Result<ListenStream, Refusal> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let serialised: Arc<[u8]> = subscription_id.to_string().into_bytes().into();
        let ack = ListenNotification {
            method: names::SUBSCRIPTIONS_ACKNOWLEDGED,
            head: ListenNotification::head(
                names::SUBSCRIPTIONS_ACKNOWLEDGED,
                json!({ "notifications": filter.acknowledged() }),
            ),
            subscription_id: Arc::clone(&serialised),
        };
        let mailbox = Arc::new(Mailbox::new());
        let listener = Listener {
            filter,
            subscription_id: serialised,
            mailbox: Arc::clone(&mailbox),
            caller: caller.clone(),
            counted_as: caller.accounting_key(),
        };
        let limits = &self.inner.limits;
        self.inner.lock().admit(id, listener, limits.max_streams, limits.max_streams_per_caller)?;
        switchyard_telemetry::metrics().listen_streams(1);
        Ok(ListenStream {
            hub: Arc::clone(&self.inner),
            id,
            subscription_id,
            ack: Some(ack),
            mailbox,
            finished: false,
            span: tracing::Span::none(),
        })
    }

    /// Delivers `event` to this process's streams only, not through the bus:
    /// for what every replica learns by itself, such as an upstream's
    /// `resources/updated`, which each replica's own listen stream to that
    /// upstream brings (through the bus, each replica would repeat it).
    pub fn deliver_here(&self, event: Event) {
        self.inner.fan_out(&[event]);
    }

    /// Tells this process's streams that every resource they subscribed to
    /// for which `affected` holds may have changed: one `resources/updated`
    /// per such subscribed URI. For a source of updates that lost track (an
    /// upstream's stream broke), whatever the URIs below its templates that
    /// clients chose.
    pub fn deliver_here_to_subscribers(&self, affected: impl Fn(&str) -> bool) {
        let mut uris: Vec<String> = {
            let registry = self.inner.lock();
            let subscribed = registry.listeners.values().flat_map(|listener| listener.filter.resource_uris.iter());
            subscribed.filter(|uri| affected(uri)).cloned().collect()
        };
        uris.sort_unstable();
        uris.dedup();
        let events: Vec<Event> = uris.into_iter().map(|uri| Event::ResourceUpdated { uri }).collect();
        self.inner.fan_out(&events);
    }

    /// How many streams are open in this process.
    pub fn open_streams(&self) -> usize {
        self.inner.lock().listeners.len()
    }

    /// How many streams were closed because they could not keep up.
    pub fn dropped_slow_streams(&self) -> u64 {
        self.inner.dropped_slow.load(Ordering::Relaxed)
    }
}

impl HubInner {
    fn lock(&self) -> std::sync::MutexGuard<'_, Registry> {
        // The lock is never held across an await, so poisoning means a panic
        // elsewhere; the table is still consistent.
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `caller` may hear an update of `uri`: always without scopes
    /// (authorization is off); with scopes, only when it could read it.
    /// `needed` is asked at most once per event.
    fn may_hear(&self, caller: &Caller, uri: &str, needed: &mut Option<Option<Vec<String>>>) -> bool {
        if !caller.is_scoped() {
            return true;
        }
        let needed = needed.get_or_insert_with(|| {
            let reads = self.reads.read().unwrap_or_else(|p| p.into_inner()).clone();
            reads.and_then(|reads| reads.needed(uri))
        });
        needed.as_ref().is_some_and(|scopes| caller.may_use(scopes))
    }

    /// After a gap in the bus: nobody can know what was lost, so every list
    /// may have changed, and every stream that waits for particular
    /// resources or tasks ends with its final result (the client listens
    /// again and reads afresh) rather than silently miss an update.
    fn start_afresh(&self) {
        self.fan_out(&[
            Event::ToolsListChanged { catalog_version: 0 },
            Event::PromptsListChanged { catalog_version: 0 },
            Event::ResourcesListChanged { catalog_version: 0 },
        ]);
        let mut registry = self.lock();
        let ended: Vec<u64> = registry
            .listeners
            .iter()
            .filter(|(_, l)| !l.filter.resource_uris.is_empty() || !l.filter.task_ids.is_empty())
            .map(|(id, _)| *id)
            .collect();
        for id in ended {
            if let Some(listener) = registry.remove(id) {
                listener.mailbox.finish();
            }
        }
    }

    fn fan_out(&self, events: &[Event]) {
        let mut registry = self.lock();
        let mut slow = Vec::new();
        for event in events {
            let Some((method, params)) = notification_of(event) else { continue };
            let head = ListenNotification::head(method, params);
            let hearing: Vec<u64> = match event {
                Event::ResourceUpdated { uri } => {
                    let mut needed = None;
                    let subscribed = registry.subscribed_to(uri);
                    subscribed
                        .into_iter()
                        .filter(|id| {
                            registry.listeners.get(id).is_some_and(|l| self.may_hear(&l.caller, uri, &mut needed))
                        })
                        .collect()
                }
                Event::TaskStatus { id, .. } => registry.watching(id).to_vec(),
                _ => registry.listeners.iter().filter(|(_, l)| l.filter.wants(event)).map(|(id, _)| *id).collect(),
            };
            for id in hearing {
                let Some(listener) = registry.listeners.get(&id) else { continue };
                let message = ListenNotification {
                    method,
                    head: Arc::clone(&head),
                    subscription_id: Arc::clone(&listener.subscription_id),
                };
                if !listener.mailbox.push(message, self.limits.queue) {
                    slow.push(id);
                }
            }
        }
        for id in slow {
            // The stream ends after what is queued; the client re-listens.
            if let Some(listener) = registry.remove(id) {
                listener.mailbox.close();
                self.dropped_slow.fetch_add(1, Ordering::Relaxed);
                switchyard_telemetry::metrics().listen_dropped_slow();
                tracing::debug!(listener = id, "closed a listen stream that could not keep up");
            }
        }
    }
}

#[cfg(test)]
mod tests;
