//! What a listen stream carries: a notification serialised once per event
//! and stamped with each stream's subscription id ([`ListenNotification`]),
//! and the stream's queue ([`Mailbox`]), empty until something is queued.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use switchyard_protocol::meta::{META, SUBSCRIPTION_ID};
use tokio::sync::Notify;

/// What closes every listen notification: the `_meta` object, `params`, and
/// the message.
const CLOSING: &[u8] = b"}}}";

/// A listen-stream notification, serialised: the message up to the
/// subscription id (shared by every stream that hears the same event), the
/// stream's subscription id, and [`CLOSING`].
#[derive(Clone, PartialEq, Eq)]
pub struct ListenNotification {
    pub(super) method: &'static str,
    pub(super) head: Arc<[u8]>,
    pub(super) subscription_id: Arc<[u8]>,
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
    pub(super) fn head(method: &str, mut params: Value) -> Arc<[u8]> {
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
pub(super) struct Mailbox {
    queue: Mutex<VecDeque<ListenNotification>>,
    ready: Notify,
    /// Set by the hub when it drops the stream; queued messages still go out.
    closed: AtomicBool,
    /// Set with `closed` when the stream ends gracefully (with its final
    /// result) rather than for being slow.
    finished: AtomicBool,
}

impl Mailbox {
    pub(super) fn new() -> Self {
        Self {
            queue: Mutex::new(VecDeque::new()),
            ready: Notify::new(),
            closed: AtomicBool::new(false),
            finished: AtomicBool::new(false),
        }
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<ListenNotification>> {
        // Held for a push or pop only, never across an await.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `message`; false when `bound` messages are waiting already.
    /// Only the hub pushes, and only to streams it has not closed.
    pub(super) fn push(&self, message: ListenNotification, bound: usize) -> bool {
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

    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.ready.notify_one();
    }

    /// Closes it gracefully: after what is queued, the stream's final result.
    pub(super) fn finish(&self) {
        self.finished.store(true, Ordering::Release);
        self.close();
    }

    /// Whether it was closed gracefully.
    pub(super) fn finished(&self) -> bool {
        self.finished.load(Ordering::Acquire)
    }

    /// The next message; `None` once the mailbox is closed and empty.
    pub(super) async fn recv(&self) -> Option<ListenNotification> {
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
