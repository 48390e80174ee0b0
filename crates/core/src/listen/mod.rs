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

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use switchyard_bus::{Delivery, Event, NotificationBus};
use switchyard_protocol::meta::{META, SUBSCRIPTION_ID};
use switchyard_protocol::method::notification as names;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

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

    /// Whether this filter wants `event`.
    fn wants(&self, event: &Event) -> bool {
        match event {
            Event::ToolsListChanged { .. } => self.tools,
            Event::PromptsListChanged { .. } => self.prompts,
            Event::ResourcesListChanged { .. } => self.resources,
            Event::ResourceUpdated { uri } => self.resource_uris.iter().any(|s| covers(s, uri)),
            Event::TaskStatus { id, .. } => self.task_ids.contains(id),
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

/// Whether a subscription to `subscribed` covers an update of `updated`: the
/// same URI, or one below it.
fn covers(subscribed: &str, updated: &str) -> bool {
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

/// What closes every listen notification: the `_meta` object, `params`, and
/// the message.
const CLOSING: &[u8] = b"}}}";

/// A listen-stream notification, serialised: the message up to the
/// subscription id (shared by every stream that hears the same event), the
/// stream's subscription id, and [`CLOSING`].
#[derive(Clone, PartialEq, Eq)]
pub struct ListenNotification {
    method: &'static str,
    head: Arc<[u8]>,
    subscription_id: Arc<[u8]>,
}

impl std::fmt::Debug for ListenNotification {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.to_vec()))
    }
}

impl ListenNotification {
    /// The message up to its subscription id: `{"jsonrpc":"2.0","method":…,
    /// "params":{…,"_meta":{"io.modelcontextprotocol/subscriptionId":`.
    /// Whatever `_meta` `params` had is replaced.
    fn head(method: &str, mut params: Value) -> Arc<[u8]> {
        if let Some(object) = params.as_object_mut() {
            object.remove(META);
        } else {
            params = json!({});
        }
        let mut head = format!(r#"{{"jsonrpc":"2.0","method":{},"params":"#, Value::from(method)).into_bytes();
        let mut params = serde_json::to_vec(&params).unwrap_or_else(|_| b"{}".to_vec());
        params.pop(); // the params object, left open for `_meta`
        head.extend_from_slice(&params);
        if params.len() > 1 {
            head.push(b',');
        }
        head.extend_from_slice(format!(r#""{META}":{{"{SUBSCRIPTION_ID}":"#).as_bytes());
        head.into()
    }

    /// The notification method.
    pub fn method(&self) -> &'static str {
        self.method
    }

    /// The length of the JSON-RPC message, in bytes.
    pub fn encoded_len(&self) -> usize {
        self.head.len() + self.subscription_id.len() + CLOSING.len()
    }

    /// Appends the JSON-RPC message to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        out.reserve(self.encoded_len());
        out.extend_from_slice(&self.head);
        out.extend_from_slice(&self.subscription_id);
        out.extend_from_slice(CLOSING);
    }

    /// The JSON-RPC message.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_to(&mut out);
        out
    }

    /// The message as a JSON value (for tests and logs; transports write the bytes).
    pub fn to_value(&self) -> Value {
        serde_json::from_slice(&self.to_vec()).unwrap_or(Value::Null)
    }
}

/// A stream's queue of notifications, shared by the hub (which pushes) and
/// the stream (which takes). An empty queue allocates nothing, so an idle
/// stream costs a few words here.
struct Mailbox {
    queue: Mutex<VecDeque<ListenNotification>>,
    ready: Notify,
    /// Set by the hub when it drops the stream; queued messages still go out.
    closed: AtomicBool,
}

impl Mailbox {
    fn new() -> Self {
        Self { queue: Mutex::new(VecDeque::new()), ready: Notify::new(), closed: AtomicBool::new(false) }
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<ListenNotification>> {
        // Held for a push or pop only, never across an await.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `message`; false when `bound` messages are waiting already.
    /// Only the hub pushes, and only to streams it has not closed.
    fn push(&self, message: ListenNotification, bound: usize) -> bool {
        {
            let mut queue = self.queue();
            if queue.len() >= bound {
                return false;
            }
            queue.push_back(message);
        }
        self.ready.notify_one();
        true
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.ready.notify_one();
    }

    /// The next message; `None` once the mailbox is closed and empty.
    async fn recv(&self) -> Option<ListenNotification> {
        loop {
            // Read `closed` before popping: every push precedes the close,
            // so a closed mailbox found empty stays empty.
            let closed = self.closed.load(Ordering::Acquire);
            if let Some(message) = self.queue().pop_front() {
                return Some(message);
            }
            if closed {
                return None;
            }
            // A push between the pop and here left a permit: this returns at once.
            self.ready.notified().await;
        }
    }
}

struct Listener {
    filter: Filter,
    /// The subscription id, serialised once.
    subscription_id: Arc<[u8]>,
    mailbox: Arc<Mailbox>,
}

struct HubInner {
    listeners: Mutex<HashMap<u64, Listener>>,
    next_id: AtomicU64,
    dropped_slow: AtomicU64,
    shutdown: CancellationToken,
    queue: usize,
}

/// Fans bus events out to this process's listen streams.
#[derive(Clone)]
pub struct ListenHub {
    inner: Arc<HubInner>,
}

impl ListenHub {
    /// Starts the hub: subscribes to `bus` and fans out until `shutdown`.
    /// `queue` bounds each stream's backlog.
    pub fn spawn(bus: &Arc<dyn NotificationBus>, shutdown: CancellationToken, queue: usize) -> Self {
        let inner = Arc::new(HubInner {
            listeners: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            dropped_slow: AtomicU64::new(0),
            shutdown,
            queue: queue.max(1),
        });
        let mut subscription = bus.subscribe();
        let hub = Arc::clone(&inner);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = hub.shutdown.cancelled() => break,
                    delivery = subscription.recv() => match delivery {
                        Some(Delivery::Event(event)) => hub.fan_out(&[event]),
                        Some(Delivery::Lagged { missed }) => {
                            // We cannot know what was lost: every list may have changed.
                            tracing::warn!(missed, "listen hub lagged behind the bus");
                            hub.fan_out(&[
                                Event::ToolsListChanged { catalog_version: 0 },
                                Event::PromptsListChanged { catalog_version: 0 },
                                Event::ResourcesListChanged { catalog_version: 0 },
                            ]);
                        }
                        None => break,
                    },
                }
            }
        });
        Self { inner }
    }

    /// Opens a stream for the listen request `subscription_id` (its JSON-RPC
    /// id, keeping its type). The acknowledgement is its first frame.
    pub fn open(&self, subscription_id: Value, filter: Filter) -> ListenStream {
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
        self.inner.lock().insert(id, Listener { filter, subscription_id: serialised, mailbox: Arc::clone(&mailbox) });
        switchyard_telemetry::metrics().listen_streams(1);
        ListenStream {
            hub: Arc::clone(&self.inner),
            id,
            subscription_id,
            ack: Some(ack),
            mailbox,
            finished: false,
            span: tracing::Span::none(),
        }
    }

    /// How many streams are open in this process.
    pub fn open_streams(&self) -> usize {
        self.inner.lock().len()
    }

    /// How many streams were closed because they could not keep up.
    pub fn dropped_slow_streams(&self) -> u64 {
        self.inner.dropped_slow.load(Ordering::Relaxed)
    }
}

impl HubInner {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Listener>> {
        // The lock is never held across an await, so poisoning means a panic
        // elsewhere; the map is still consistent.
        self.listeners.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn fan_out(&self, events: &[Event]) {
        let mut listeners = self.lock();
        let mut slow = Vec::new();
        for event in events {
            let Some((method, params)) = notification_of(event) else { continue };
            let head = ListenNotification::head(method, params);
            for (id, listener) in listeners.iter().filter(|(_, listener)| listener.filter.wants(event)) {
                let message = ListenNotification {
                    method,
                    head: Arc::clone(&head),
                    subscription_id: Arc::clone(&listener.subscription_id),
                };
                if !listener.mailbox.push(message, self.queue) {
                    slow.push(*id);
                }
            }
        }
        for id in slow {
            // The stream ends after what is queued; the client re-listens.
            if let Some(listener) = listeners.remove(&id) {
                listener.mailbox.close();
                self.dropped_slow.fetch_add(1, Ordering::Relaxed);
                switchyard_telemetry::metrics().listen_dropped_slow();
                tracing::debug!(listener = id, "closed a listen stream that could not keep up");
            }
        }
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
    /// shutdown the final result; `None` once the stream is over (after the
    /// final result, or when the stream was dropped for being slow).
    pub async fn next(&mut self) -> Option<ListenFrame> {
        if let Some(ack) = self.ack.take() {
            return Some(ListenFrame::Notification(ack));
        }
        if self.finished {
            return None;
        }
        tokio::select! {
            biased;
            message = self.mailbox.recv() => {
                if let Some(message) = &message {
                    tracing::debug!(parent: &self.span, method = message.method(), "notification");
                }
                message.map(ListenFrame::Notification)
            }
            () = self.hub.shutdown.cancelled() => {
                self.finished = true;
                Some(ListenFrame::Final(json!({
                    "resultType": "complete",
                    META: { SUBSCRIPTION_ID: self.subscription_id },
                })))
            }
        }
    }
}

impl Drop for ListenStream {
    fn drop(&mut self) {
        self.hub.lock().remove(&self.id);
        switchyard_telemetry::metrics().listen_streams(-1);
        // An OpenTelemetry span ends at its last exit: exit it now, so it
        // lasts as long as the stream did.
        drop(self.span.enter());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_bus::InMemoryBus;

    fn method(frame: &ListenFrame) -> &str {
        match frame {
            ListenFrame::Notification(n) => n.method(),
            ListenFrame::Final(_) => "<final>",
        }
    }

    #[tokio::test]
    async fn acknowledges_first_and_honours_the_filter_strictly() {
        let bus: Arc<dyn NotificationBus> = Arc::new(InMemoryBus::new());
        let shutdown = CancellationToken::new();
        let hub = ListenHub::spawn(&bus, shutdown.clone(), 8);
        let mut prompts_only = hub.open(json!(7), Filter { prompts: true, ..Filter::default() });
        let first = prompts_only.next().await.unwrap();
        assert_eq!(method(&first), names::SUBSCRIPTIONS_ACKNOWLEDGED);
        let ListenFrame::Notification(ack) = first else { unreachable!() };
        let ack = ack.to_value();
        assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_ID], json!(7));
        assert_eq!(ack["params"]["notifications"], json!({"promptsListChanged": true}));

        bus.publish(Event::ToolsListChanged { catalog_version: 1 }).await.unwrap();
        bus.publish(Event::PromptsListChanged { catalog_version: 2 }).await.unwrap();
        let next = prompts_only.next().await.unwrap();
        assert_eq!(method(&next), names::PROMPTS_LIST_CHANGED, "the tools change must not leak");

        shutdown.cancel();
        let last = prompts_only.next().await.unwrap();
        assert_eq!(last, ListenFrame::Final(json!({"resultType": "complete", "_meta": {SUBSCRIPTION_ID: 7}})));
        assert_eq!(prompts_only.next().await, None);
    }

    #[test]
    fn a_notification_is_the_message_with_the_subscription_id_stamped_in() {
        let cases = [
            (json!({}), json!(7)),
            (json!({"uri": "file:///a \"b\"", "_meta": {"replaced": true}}), json!("s-1")),
            (json!({"taskId": "t", "status": "working", "ttlMs": 5}), json!(3.5)),
        ];
        for (params, id) in cases {
            let message = ListenNotification {
                method: names::RESOURCES_UPDATED,
                head: ListenNotification::head(names::RESOURCES_UPDATED, params.clone()),
                subscription_id: id.to_string().into_bytes().into(),
            };
            let mut expected = params;
            expected[META] = json!({ SUBSCRIPTION_ID: id });
            let expected = json!({"jsonrpc": "2.0", "method": names::RESOURCES_UPDATED, "params": expected});
            assert_eq!(message.to_value(), expected, "{message:?}");
        }
    }

    #[tokio::test]
    async fn resource_subscriptions_cover_sub_resources_only() {
        assert!(covers("file:///srv", "file:///srv/a.txt"));
        assert!(covers("file:///srv/", "file:///srv/a.txt"));
        assert!(covers("test://x", "test://x"));
        assert!(!covers("file:///srv", "file:///srv2"));
    }

    #[tokio::test]
    async fn a_slow_stream_is_closed_and_counted() {
        let bus: Arc<dyn NotificationBus> = Arc::new(InMemoryBus::new());
        let hub = ListenHub::spawn(&bus, CancellationToken::new(), 2);
        let mut slow = hub.open(json!("s"), Filter { tools: true, ..Filter::default() });
        assert!(slow.next().await.is_some()); // the ack
        for v in 0..5 {
            bus.publish(Event::ToolsListChanged { catalog_version: v }).await.unwrap();
        }
        // Two queued frames, then the end: the stream was closed, not grown.
        let mut frames = 0;
        while slow.next().await.is_some() {
            frames += 1;
        }
        assert_eq!(frames, 2);
        assert_eq!(hub.dropped_slow_streams(), 1);
        assert_eq!(hub.open_streams(), 0);
    }
}
