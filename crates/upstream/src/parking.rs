//! [`Parking`]: the calls of 2025-era upstreams that wait, on this replica,
//! for a client's answer to their question (see `client::asked`), and the
//! way a retry that lands on another replica reaches them, over the bus.
//!
//! A parked call can only go on where its upstream stream is open: here.
//! A retry on another replica publishes its client's answers
//! ([`Event::ParkedAnswer`], naming this replica in the parked id); this
//! replica says it has the call (so a retry whose call's replica is gone,
//! restarted or stopped, hears so within [`RECEIVED_WITHIN`] rather than
//! at its deadline), answers the upstream, reads on, passes the progress
//! and log messages the upstream sends meanwhile, and publishes the call's
//! next turn, each as an [`Event::ParkedTurn`] the retry waits for. One
//! replica, or none of the parking's bus traffic, is the common case: a
//! retry that lands where its call waits touches the bus not at all.
//!
//! Parked calls are bounded per upstream and per caller, kept at most
//! [`PARKED_FOR`], and resumed only for the caller that parked them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use switchyard_bus::{Delivery, Event, NotificationBus};
use switchyard_core::Caller;
use switchyard_protocol::logging::LoggingLevel;
use switchyard_protocol::method::notification;
use tokio::sync::mpsc;

use crate::client::{CallError, Interrupted, McpClient, Passes, Relay, Reply, Weight, is_passed_on};

/// How long a parked call waits for its client's answer.
pub(crate) const PARKED_FOR: Duration = Duration::from_secs(600);
/// Most calls parked at once for one upstream, and for one caller of it:
/// one caller cannot take the places of the others.
const MAX_PARKED: usize = 256;
const MAX_PARKED_PER_CALLER: usize = 16;
/// How soon the replica holding a parked call says it has it, when a retry
/// on another replica answers it: the bus carries that in milliseconds.
pub(crate) const RECEIVED_WITHIN: Duration = Duration::from_secs(5);
/// Most progress and log messages of one turn passed to another replica,
/// and most bytes of them.
const MAX_PASSED_PER_TURN: usize = 100;
const MAX_PASSED_BYTES_PER_TURN: usize = 256 * 1024;

/// A parked call, with when it was parked, for whom, and by which client.
pub(crate) struct Parked {
    pub(crate) call: Interrupted,
    since: Instant,
    pub(crate) caller: Caller,
    counted_as: String,
    upstream: Arc<str>,
    pub(crate) client: Weak<McpClient>,
}

/// This replica's parked calls, and its retries waiting for a turn of a
/// call parked on another replica.
pub struct Parking {
    /// Names this replica in the ids of the calls parked here.
    replica: String,
    bus: Arc<dyn NotificationBus>,
    parked: Mutex<HashMap<String, Parked>>,
    waiting: Mutex<HashMap<String, mpsc::UnboundedSender<Value>>>,
}

impl std::fmt::Debug for Parking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Parking").field("replica", &self.replica).finish_non_exhaustive()
    }
}

impl Parking {
    /// A replica's parking, relaying over `bus`; it follows the bus until
    /// it is dropped.
    pub fn new(bus: Arc<dyn NotificationBus>) -> Arc<Self> {
        let parking = Arc::new(Self {
            replica: format!("{:016x}", rand::random::<u64>()),
            bus,
            parked: Mutex::default(),
            waiting: Mutex::default(),
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(follow(Arc::downgrade(&parking), parking.bus.subscribe()));
            runtime.spawn(sweep(Arc::downgrade(&parking)));
        }
        parking
    }

    /// Lets go of the calls that waited too long: their upstreams are told
    /// they are cancelled.
    fn let_go_of_the_stale(&self) {
        let stale: Vec<Parked> = {
            let mut parked = self.parked();
            let ids: Vec<String> = parked
                .iter()
                .filter(|(_, waiting)| waiting.since.elapsed() >= PARKED_FOR)
                .map(|(id, _)| id.clone())
                .collect();
            ids.iter().filter_map(|id| parked.remove(id)).collect()
        };
        // Dropped outside the lock: each sends its cancel notice.
        drop(stale);
    }

    fn parked(&self) -> std::sync::MutexGuard<'_, HashMap<String, Parked>> {
        self.parked.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<String, mpsc::UnboundedSender<Value>>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Parks `call` of `client` for `caller` under a fresh id, after letting
    /// go of the calls that waited too long; refused when full.
    pub(crate) fn park(&self, client: &Arc<McpClient>, call: Interrupted, caller: &Caller) -> Result<Reply, CallError> {
        let counted_as = caller.accounting_key();
        let upstream = Arc::clone(client.upstream());
        self.let_go_of_the_stale();
        let mut parked = self.parked();
        let of_upstream = parked.values().filter(|waiting| waiting.upstream == upstream);
        let (all, theirs) = of_upstream
            .fold((0, 0), |(all, theirs), waiting| (all + 1, theirs + usize::from(waiting.counted_as == counted_as)));
        if all >= MAX_PARKED || theirs >= MAX_PARKED_PER_CALLER {
            return Err(CallError::Parked(format!(
                "too many of the upstream's calls wait for their clients' input (at most {MAX_PARKED}, {MAX_PARKED_PER_CALLER} per caller)"
            )));
        }
        let id = format!("{}.{:032x}", self.replica, rand::random::<u128>());
        let reply = call.asked(id.clone());
        let waiting = Parked {
            call,
            since: Instant::now(),
            // Parked calls are of 2025-era upstreams, which never exchange a
            // caller's token: it is not kept.
            caller: Caller { subject_token: None, ..caller.clone() },
            counted_as,
            upstream,
            client: Arc::downgrade(client),
        };
        parked.insert(id, waiting);
        Ok(reply)
    }

    /// The call parked here under `id` for `caller` (its accounting key),
    /// if it still waits.
    pub(crate) fn take(&self, id: &str, caller: &str) -> Option<Parked> {
        let mut parked = self.parked();
        let theirs = parked.get(id).is_some_and(|waiting| waiting.counted_as == caller);
        theirs.then(|| parked.remove(id)).flatten().filter(|waiting| waiting.since.elapsed() < PARKED_FOR)
    }

    /// Lets go of the call parked under `id`: the upstream is told it is cancelled.
    pub(crate) fn let_go(&self, id: &str) {
        drop(self.parked().remove(id));
    }

    /// Whether the call parked under `id` is parked on this replica.
    pub(crate) fn is_here(&self, id: &str) -> bool {
        id.split_once('.').is_some_and(|(replica, _)| replica == self.replica)
    }

    /// Sends `responses` (from `caller`) to the call parked under `id` on
    /// another replica, passes what the upstream says meanwhile to `relay`,
    /// and waits until `deadline` for the call's next turn.
    pub(crate) async fn answer_elsewhere(
        &self,
        id: &str,
        caller: &str,
        responses: &Map<String, Value>,
        deadline: tokio::time::Instant,
        relay: &Relay<'_>,
    ) -> Result<Reply, CallError> {
        let Some((replica, _)) = id.split_once('.') else {
            return Err(CallError::Parked("the upstream's call is not known".into()));
        };
        let reply_to = format!("{}.{:032x}", self.replica, rand::random::<u128>());
        let (sender, mut turns) = mpsc::unbounded_channel();
        self.waiting().insert(reply_to.clone(), sender);
        // However this ends (the retry may be dropped), its place is given back.
        let _waiting = Waiting { parking: self, reply_to: &reply_to };
        let now = now_ms();
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let answer = Event::ParkedAnswer {
            replica: replica.to_owned(),
            parked: id.to_owned(),
            caller: caller.to_owned(),
            responses: Value::Object(responses.clone()),
            reply_to: reply_to.clone(),
            // A second less than this side waits: the holder's word must arrive in time.
            received_by_ms: now + millis(RECEIVED_WITHIN.saturating_sub(Duration::from_secs(1))),
            deadline_ms: now + millis(left),
            hears: relay.hears(),
        };
        match self.bus.publish(answer).await {
            Ok(()) => next_turn(&mut turns, deadline, relay).await,
            Err(error) => Err(CallError::Parked(format!(
                "the upstream's call waits on another replica, which cannot be reached: {error}"
            ))),
        }
    }

    /// Answers the call parked here under `id` with `responses`, as another
    /// replica asked: says it has the call, passes on what the upstream says
    /// meanwhile (what the retry's client hears), and returns how the call
    /// went on. An answer that comes too late for the retry to hear it was
    /// received, or whose receipt cannot be told, lets the call go: the
    /// retry's client has been told to call the tool again, so the upstream
    /// must not do its work a second time.
    async fn answer_here(&self, answer: &ParkedAnswer) -> Value {
        let Some(parked) = self.take(&answer.parked, &answer.caller) else {
            return json!({ "error": "the upstream's call no longer waits for this answer: it waited too long" });
        };
        let Some(client) = parked.client.upgrade() else {
            return json!({ "error": "the upstream was removed meanwhile" });
        };
        let late = answer.received_by_ms != 0 && now_ms() > answer.received_by_ms;
        let to_retry = ToRetry::new(&self.bus, &answer.reply_to, &answer.hears);
        if late || !to_retry.publish(json!({ "received": true })).await {
            // Dropped: the upstream is told the call is cancelled.
            drop(parked);
            return json!({ "error": "the answer reached the replica holding the upstream's call too late" });
        }
        let responses = answer.responses.as_object().cloned().unwrap_or_default();
        let mut deadline = tokio::time::Instant::now() + client.spec().timeout;
        if answer.deadline_ms != 0 {
            let left = Duration::from_millis(answer.deadline_ms.saturating_sub(now_ms()));
            deadline = deadline.min(tokio::time::Instant::now() + left);
        }
        match client.go_on(parked.call, &parked.caller, &responses, deadline, Some(&to_retry)).await {
            Ok(Reply::Answer(result, _)) => json!({ "result": result.into_value() }),
            Ok(Reply::Asked { parked, key, request }) => {
                json!({ "asked": { "parked": parked, "key": key, "request": request } })
            }
            Err(error) => json!({ "error": error.to_string() }),
        }
    }
}

/// A retry's place among those waiting here for a turn from another
/// replica, given back when the retry ends or is dropped.
struct Waiting<'a> {
    parking: &'a Parking,
    reply_to: &'a str,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.parking.waiting().remove(self.reply_to);
    }
}

/// A [`Event::ParkedAnswer`]'s fields.
struct ParkedAnswer {
    parked: String,
    caller: String,
    responses: Value,
    reply_to: String,
    received_by_ms: u64,
    deadline_ms: u64,
    hears: Value,
}

/// What the upstream says on a parked call's stream, resumed here for a
/// retry on another replica, published for that replica to pass on to its
/// client: only what that client hears (progress if it asked, log messages
/// at its level), at most [`MAX_PASSED_PER_TURN`] messages and
/// [`MAX_PASSED_BYTES_PER_TURN`] bytes a turn, so the bus every replica
/// shares carries no more of an upstream's chatter than that.
struct ToRetry<'a> {
    bus: &'a Arc<dyn NotificationBus>,
    reply_to: &'a str,
    progress: bool,
    level: Option<LoggingLevel>,
    /// Messages and bytes this turn may still pass.
    left: Mutex<(usize, usize)>,
}

impl<'a> ToRetry<'a> {
    fn new(bus: &'a Arc<dyn NotificationBus>, reply_to: &'a str, hears: &Value) -> Self {
        Self {
            bus,
            reply_to,
            progress: hears["progress"] == true,
            level: hears["logLevel"].as_str().and_then(LoggingLevel::parse),
            left: Mutex::new((MAX_PASSED_PER_TURN, MAX_PASSED_BYTES_PER_TURN)),
        }
    }

    /// Publishes `turn` for the retry; false when it could not be.
    async fn publish(&self, turn: Value) -> bool {
        let event = Event::ParkedTurn { reply_to: self.reply_to.to_owned(), turn };
        match self.bus.publish(event).await {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(%error, "could not tell the replica of a retry how a parked upstream call goes on");
                false
            }
        }
    }

    /// Whether the retry's client hears `message`.
    fn heard(&self, message: &Value) -> bool {
        match message["method"].as_str() {
            Some(notification::PROGRESS) => self.progress,
            Some(notification::MESSAGE) => {
                let level = message["params"]["level"].as_str().and_then(LoggingLevel::parse);
                matches!((level, self.level), (Some(level), Some(threshold)) if level >= threshold)
            }
            _ => false,
        }
    }
}

impl Passes for ToRetry<'_> {
    fn pass<'s>(&'s self, message: &'s Value, token: &'s Value) -> BoxFuture<'s, ()> {
        Box::pin(async move {
            if !is_passed_on(message, token) || !self.heard(message) {
                return;
            }
            let turn = json!({ "message": message, "token": token });
            let bytes = turn.to_string().len();
            {
                let mut left = self.left.lock().unwrap_or_else(|p| p.into_inner());
                let (Some(messages), Some(bytes)) = (left.0.checked_sub(1), left.1.checked_sub(bytes)) else {
                    return;
                };
                *left = (messages, bytes);
            }
            self.publish(turn).await;
        })
    }
}

/// Now, in Unix milliseconds.
fn now_ms() -> u64 {
    millis(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default())
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The next turn of a call parked on another replica, from what that
/// replica publishes for a retry: it must say it has the call within
/// [`RECEIVED_WITHIN`]; the messages it passes go to `relay`; then the turn,
/// by `deadline`.
async fn next_turn(
    turns: &mut mpsc::UnboundedReceiver<Value>,
    deadline: tokio::time::Instant,
    relay: &Relay<'_>,
) -> Result<Reply, CallError> {
    let mut received = false;
    loop {
        let patience = if received { deadline } else { deadline.min(tokio::time::Instant::now() + RECEIVED_WITHIN) };
        let Ok(Some(mut turn)) = tokio::time::timeout_at(patience, turns.recv()).await else {
            return Err(CallError::Parked(if received {
                "the upstream's call waits on another replica, which did not answer in time".into()
            } else {
                "the replica where the upstream's call waited does not answer (it restarted or stopped); call the tool again"
                    .into()
            }));
        };
        if turn["received"] == true {
            received = true;
        } else if let Some(message) = turn.get_mut("message").map(Value::take) {
            relay.pass(&message, &turn["token"]).await;
        } else {
            return from_turn(turn);
        }
    }
}

/// A turn another replica published, as the retry waiting for it sees it.
fn from_turn(mut turn: Value) -> Result<Reply, CallError> {
    if let Some(result) = turn.get_mut("result").map(Value::take) {
        let text = result.to_string();
        let weight = Weight::of(&result, text.len());
        return Ok(Reply::Answer(result.into(), weight));
    }
    let asked = &turn["asked"];
    if let (Some(parked), Some(key)) = (asked["parked"].as_str(), asked["key"].as_str()) {
        return Ok(Reply::Asked { parked: parked.to_owned(), key: key.to_owned(), request: asked["request"].clone() });
    }
    let error = turn["error"].as_str().unwrap_or("the upstream's call went on elsewhere and said nothing");
    Err(CallError::Parked(error.to_owned()))
}

/// Lets go of `parking`'s stale calls every minute, while it lives.
async fn sweep(parking: Weak<Parking>) {
    loop {
        tokio::time::sleep(Duration::from_secs(60)).await;
        let Some(parking) = parking.upgrade() else { return };
        parking.let_go_of_the_stale();
    }
}

/// Follows the bus for `parking`: answers for calls parked here, and turns
/// for retries waiting here.
async fn follow(parking: Weak<Parking>, mut subscription: switchyard_bus::Subscription) {
    while let Some(delivery) = subscription.recv().await {
        let Some(parking) = parking.upgrade() else { return };
        match delivery {
            Delivery::Event(Event::ParkedAnswer {
                replica,
                parked,
                caller,
                responses,
                reply_to,
                received_by_ms,
                deadline_ms,
                hears,
            }) if replica == parking.replica => {
                tokio::spawn(async move {
                    let answer =
                        ParkedAnswer { parked, caller, responses, reply_to, received_by_ms, deadline_ms, hears };
                    let turn = parking.answer_here(&answer).await;
                    let event = Event::ParkedTurn { reply_to: answer.reply_to, turn };
                    if let Err(error) = parking.bus.publish(event).await {
                        tracing::warn!(%error, "could not tell another replica how a parked upstream call went on");
                    }
                });
            }
            Delivery::Event(Event::ParkedTurn { reply_to, turn }) => {
                let mut waiting = parking.waiting();
                // A retry that went away is forgotten here too.
                if waiting.get(&reply_to).is_some_and(|retry| retry.send(turn).is_err()) {
                    waiting.remove(&reply_to);
                }
            }
            _ => {}
        }
    }
}
