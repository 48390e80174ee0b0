//! The listen hub: one bus subscription per process, fanned out to every local
//! `subscriptions/listen` stream whose filter asks for the event.
//!
//! Opt-in is strict: a stream only ever receives the notification types its
//! filter named. Each stream has a bounded queue; a stream that falls that far
//! behind is closed (the client re-listens and re-lists) rather than slowing
//! the others or growing memory. On shutdown every stream gets its final
//! result and ends cleanly.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use switchyard_bus::{Delivery, Event, NotificationBus};
use switchyard_protocol::jsonrpc::notification;
use switchyard_protocol::meta::{META, SUBSCRIPTION_ID};
use switchyard_protocol::method::notification as names;
use tokio::sync::mpsc;
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

    /// The notification for `event`, if this filter wants it.
    fn wants(&self, event: &Event) -> Option<(&'static str, Value)> {
        match event {
            Event::ToolsListChanged { .. } if self.tools => Some((names::TOOLS_LIST_CHANGED, json!({}))),
            Event::PromptsListChanged { .. } if self.prompts => Some((names::PROMPTS_LIST_CHANGED, json!({}))),
            Event::ResourcesListChanged { .. } if self.resources => Some((names::RESOURCES_LIST_CHANGED, json!({}))),
            Event::ResourceUpdated { uri } if self.resource_uris.iter().any(|s| covers(s, uri)) => {
                Some((names::RESOURCES_UPDATED, json!({ "uri": uri })))
            }
            Event::TaskStatus { id, task } if self.task_ids.contains(id) => Some((names::TASKS, task.clone())),
            _ => None,
        }
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
    Notification(Value),
    /// The final result of the listen request (on a graceful end); the stream
    /// ends after it.
    Final(Value),
}

struct Listener {
    filter: Filter,
    subscription_id: Value,
    sender: mpsc::Sender<Value>,
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
        let (sender, receiver) = mpsc::channel(self.inner.queue);
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let ack = frame(
            names::SUBSCRIPTIONS_ACKNOWLEDGED,
            json!({ "notifications": filter.acknowledged() }),
            &subscription_id,
        );
        self.inner.lock().insert(id, Listener { filter, subscription_id: subscription_id.clone(), sender });
        switchyard_telemetry::metrics().listen_streams(1);
        ListenStream {
            hub: Arc::clone(&self.inner),
            id,
            subscription_id,
            ack: Some(ack),
            receiver,
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
        for (id, listener) in listeners.iter() {
            for event in events {
                let Some((method, params)) = listener.filter.wants(event) else { continue };
                let message = frame(method, params, &listener.subscription_id);
                match listener.sender.try_send(message) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(_)) => slow.push(*id),
                    Err(mpsc::error::TrySendError::Closed(_)) => {}
                }
            }
        }
        for id in slow {
            // Dropping the sender ends that stream; the client re-listens.
            listeners.remove(&id);
            self.dropped_slow.fetch_add(1, Ordering::Relaxed);
            switchyard_telemetry::metrics().listen_dropped_slow();
            tracing::debug!(listener = id, "closed a listen stream that could not keep up");
        }
    }
}

/// Builds a listen-stream notification with the subscription id stamped in.
fn frame(method: &str, mut params: Value, subscription_id: &Value) -> Value {
    params[META] = json!({ SUBSCRIPTION_ID: subscription_id });
    notification(method, params)
}

/// One open listen stream. Dropping it (the client went away) unregisters it.
pub struct ListenStream {
    hub: Arc<HubInner>,
    id: u64,
    subscription_id: Value,
    ack: Option<Value>,
    receiver: mpsc::Receiver<Value>,
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
            message = self.receiver.recv() => {
                if let Some(message) = &message {
                    tracing::debug!(parent: &self.span, method = message["method"].as_str(), "notification");
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
            ListenFrame::Notification(n) => n["method"].as_str().unwrap(),
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
