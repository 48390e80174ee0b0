//! The bus's log in Redis: one stream that every replica appends to and reads
//! from its own position, so a replica that was cut off reads what it missed
//! when it is back, in order, and knows when it cannot.
//!
//! Keys share the hash tag `{bus}`, so in a Redis Cluster they live on one
//! node and one script can touch them all:
//!
//! - `{prefix}{bus}:log`, the stream. Each entry has `n`, its sequence
//!   number, and `m`, the signed message ([`crate::wire`]). It is trimmed to
//!   about `max_len` entries from the oldest end at each append.
//! - `{prefix}{bus}:meta`, a hash: `seq`, the last sequence number given, and
//!   `epoch`, a random name the log gets when it is created. Redis restarted
//!   empty, or a flush, gives the log a new epoch.
//! - `{prefix}{bus}:once:{key}`, the entry id a publish with an idempotency
//!   key appended, for [`crate::IDEMPOTENCY_WINDOW`].
//!
//! A reader remembers the epoch, the id of the last entry it read (its
//! cursor) and that entry's sequence number. Sequence numbers are given in
//! the same script that appends, so they have no holes: a jump means the
//! trimming passed the reader (a gap of known size), a step back or a new
//! epoch means the log was lost (a gap of unknown size). Either is announced,
//! never skipped over in silence.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use redis::Value;
use tokio::sync::broadcast;

use super::RedisConfig;
use super::own::{OwnPublishes, ReadBack, Seen};
use crate::wire::{self, BusKey};
use crate::{Event, Local};

/// Appends a message under the next sequence number and the log's epoch,
/// unless its idempotency key was used already. Returns 1 when it appended,
/// 0 when the key was used for the same event (its fingerprint), 2 when it
/// was used for another. Nothing after the append can fail (the key is set
/// with `pcall`): an error answered means nothing was appended.
///
/// KEYS: log, meta, once key. ARGV: message, max_len, an epoch for a new log,
/// the key's lifetime in milliseconds (empty: no key), the event's fingerprint.
const APPEND: &str = r"
if ARGV[4] ~= '' then
  local earlier = redis.call('GET', KEYS[3])
  if earlier then
    if earlier == ARGV[5] then return 0 end
    return 2
  end
end
redis.call('HSETNX', KEYS[2], 'epoch', ARGV[3])
local epoch = redis.call('HGET', KEYS[2], 'epoch')
local n = redis.call('HINCRBY', KEYS[2], 'seq', 1)
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'n', n, 'e', epoch, 'm', ARGV[1])
if ARGV[4] ~= '' then redis.pcall('SET', KEYS[3], ARGV[5], 'PX', ARGV[4]) end
return 1
";

/// Where the log stands, and whether it still holds a reader's place:
/// `{epoch, id of the last entry or 0-0, the last sequence number given,
/// held}`, giving the log an epoch if it has none. `held` is 0 when the
/// entry at the reader's cursor is gone or renumbered and no later entry
/// explains it by trimming: the log was rolled back (a restart that lost
/// its last writes, a failover) or deleted.
///
/// KEYS: log, meta. ARGV: an epoch for a new log, the reader's cursor and
/// sequence number.
const LOCATE: &str = r"
local function n_of(entry)
  local fields = entry[2]
  for i = 1, #fields, 2 do
    if fields[i] == 'n' then return tonumber(fields[i + 1]) end
  end
  return nil
end
redis.call('HSETNX', KEYS[2], 'epoch', ARGV[1])
local epoch = redis.call('HGET', KEYS[2], 'epoch')
local seq = tonumber(redis.call('HGET', KEYS[2], 'seq') or '0')
local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
local last_id = '0-0'
if #last > 0 then last_id = last[1][1] end
local held = 1
if ARGV[2] ~= '0-0' then
  local at = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])
  if #at > 0 then
    if n_of(at[1]) ~= tonumber(ARGV[3]) then held = 0 end
  else
    local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
    if #first == 0 or (n_of(first[1]) or 0) <= tonumber(ARGV[3]) then held = 0 end
  end
end
return {epoch, last_id, seq, held}
";

/// How long a read waits for new entries before it asks again (and so how
/// soon a dead connection or a dropped bus is noticed).
const BLOCK: Duration = Duration::from_secs(1);
/// Entries read at once.
const BATCH: usize = 512;

/// The names of the log's keys.
#[derive(Debug, Clone)]
pub(super) struct LogKeys {
    pub(super) log: String,
    pub(super) meta: String,
    once_prefix: String,
}

impl LogKeys {
    pub(super) fn new(prefix: &str) -> Self {
        Self {
            log: format!("{prefix}{{bus}}:log"),
            meta: format!("{prefix}{{bus}}:meta"),
            once_prefix: format!("{prefix}{{bus}}:once:"),
        }
    }
}

/// The append script with what every append shares.
#[derive(Clone)]
pub(super) struct Appender {
    script: redis::Script,
    keys: LogKeys,
    max_len: usize,
}

impl Appender {
    pub(super) fn new(keys: LogKeys, max_len: usize) -> Self {
        Self { script: redis::Script::new(APPEND), keys, max_len: max_len.max(1) }
    }

    pub(super) fn keys(&self) -> &LogKeys {
        &self.keys
    }

    /// Appends `message`; `once` is an idempotency key and the event's
    /// fingerprint.
    pub(super) async fn append(
        &self,
        link: &mut impl redis::aio::ConnectionLike,
        message: String,
        once: Option<(&str, &str)>,
    ) -> redis::RedisResult<Appended> {
        let (key, fingerprint) = once.unwrap_or_default();
        let mut invocation = self.script.key(&self.keys.log);
        invocation
            .key(&self.keys.meta)
            .key(format!("{}{key}", self.keys.once_prefix))
            .arg(message)
            .arg(self.max_len)
            .arg(new_epoch())
            .arg(once.map(|_| crate::IDEMPOTENCY_WINDOW.as_millis().to_string()).unwrap_or_default())
            .arg(fingerprint);
        Ok(match invocation.invoke_async::<i64>(link).await? {
            1 => Appended::Now,
            0 => Appended::Already,
            _ => Appended::KeyReused,
        })
    }
}

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Appended {
    /// Appended now.
    Now,
    /// Not appended: its idempotency key was used for the same event.
    Already,
    /// Not appended: its idempotency key was used for another event.
    KeyReused,
}

fn new_epoch() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// Where a replica stands in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Position {
    epoch: String,
    /// The id of the last entry read, `0-0` before the first.
    cursor: String,
    /// That entry's sequence number.
    seq: u64,
}

/// Events this replica did not read, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Gap {
    /// The log was trimmed past the cursor: `missed` entries are gone.
    Trimmed { missed: u64 },
    /// The log was lost (Redis restarted empty, or it was flushed), or
    /// rolled back, or deleted.
    Reset,
    /// An entry a replica appended could not be read (signed with a key
    /// this replica lacks, or appended long after it was signed).
    Unreadable,
}

impl Gap {
    fn cause(self) -> &'static str {
        match self {
            Self::Trimmed { .. } => "trimmed",
            Self::Reset => "reset",
            Self::Unreadable => "unreadable",
        }
    }

    fn missed(self) -> Option<u64> {
        match self {
            Self::Trimmed { missed } => Some(missed),
            Self::Unreadable => Some(1),
            Self::Reset => None,
        }
    }
}

/// Where the log stands when a reader (re)connects.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Located {
    /// The log's epoch, its last entry and the last sequence number given.
    end: Position,
    /// Whether the log still holds the reader's place (see [`LOCATE`]).
    held: bool,
}

impl Position {
    /// Moves to the log as it is now after a reconnect: the same place when
    /// it is the same log and holds the place, the start of a new log, or
    /// the end of one that lost the place; a gap in the last two cases.
    fn resume_in(&mut self, located: Located) -> Option<Gap> {
        if located.end.epoch != self.epoch {
            // A new log: everything in it is news.
            *self = Position { epoch: located.end.epoch, cursor: "0-0".into(), seq: 0 };
            return Some(Gap::Reset);
        }
        if !located.held {
            // What came after our place is gone, or numbered anew: read on
            // from what the log holds now.
            *self = located.end;
            return Some(Gap::Reset);
        }
        None
    }

    /// Moves past `entry`; the gap before it, if there was one.
    fn advance(&mut self, entry: &Entry) -> Option<Gap> {
        self.cursor.clone_from(&entry.id);
        let seq = entry.seq?;
        if let Some(epoch) = entry.epoch.as_ref().filter(|e| **e != self.epoch) {
            // A new log while we read (a flush): renumbered from 1.
            self.epoch.clone_from(epoch);
            self.seq = seq;
            return Some(Gap::Reset);
        }
        let gap = match seq.checked_sub(self.seq) {
            Some(1) => None,
            Some(0) | None => Some(Gap::Reset),
            Some(step) => Some(Gap::Trimmed { missed: step - 1 }),
        };
        self.seq = seq;
        gap
    }
}

/// One entry of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    id: String,
    /// `None` when the entry has no readable `n` (not one of ours).
    seq: Option<u64>,
    /// The log's epoch when it was appended.
    epoch: Option<String>,
    message: Vec<u8>,
    /// When Redis appended it (the id's milliseconds).
    appended_ms: u64,
}

/// The reader's own connection: a blocking read holds its connection, so it
/// cannot share the one publishes go through.
enum ReadLink {
    Single(redis::aio::MultiplexedConnection),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl ReadLink {
    async fn connect(config: &RedisConfig) -> redis::RedisResult<Self> {
        // A read may block for BLOCK: answers take that long, and a bit.
        let (connect, respond) = (Duration::from_secs(2), BLOCK + Duration::from_secs(2));
        if config.cluster {
            let client =
                config.cluster_builder()?.connection_timeout(connect).response_timeout(respond).retries(0).build()?;
            return Ok(Self::Cluster(client.get_async_connection().await?));
        }
        let settings = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(connect))
            .set_response_timeout(Some(respond));
        Ok(Self::Single(config.client()?.get_multiplexed_async_connection_with_config(&settings).await?))
    }

    /// Where the log stands, and whether it holds `place` (none at start).
    async fn locate(&mut self, keys: &LogKeys, place: Option<&Position>) -> redis::RedisResult<Located> {
        let script = redis::Script::new(LOCATE);
        let mut invocation = script.key(&keys.log);
        let (cursor, seq) = place.map_or(("0-0", 0), |p| (p.cursor.as_str(), p.seq));
        invocation.key(&keys.meta).arg(new_epoch()).arg(cursor).arg(seq);
        let (epoch, cursor, seq, held): (String, String, u64, i64) = match self {
            Self::Single(connection) => invocation.invoke_async(connection).await?,
            Self::Cluster(connection) => invocation.invoke_async(connection).await?,
        };
        Ok(Located { end: Position { epoch, cursor, seq }, held: held == 1 })
    }

    /// The entries after `cursor`, waiting up to [`BLOCK`] for one.
    async fn read(&mut self, keys: &LogKeys, cursor: &str) -> redis::RedisResult<Vec<Entry>> {
        let mut command = redis::cmd("XREAD");
        command.arg("COUNT").arg(BATCH).arg("BLOCK").arg(BLOCK.as_millis().to_string());
        command.arg("STREAMS").arg(&keys.log).arg(cursor);
        let reply: Value = match self {
            Self::Single(connection) => command.query_async(connection).await?,
            Self::Cluster(connection) => command.query_async(connection).await?,
        };
        entries(reply)
    }
}

/// The entries of an `XREAD` reply on one stream (RESP2 or RESP3).
fn entries(reply: Value) -> redis::RedisResult<Vec<Entry>> {
    let malformed = || redis::RedisError::from((redis::ErrorKind::Parse, "an XREAD reply of an unexpected shape"));
    let stream = match reply {
        Value::Nil => return Ok(Vec::new()),
        Value::Array(mut streams) if streams.len() == 1 => match streams.pop() {
            Some(Value::Array(mut pair)) if pair.len() == 2 => pair.pop(),
            _ => None,
        },
        Value::Map(mut streams) if streams.len() == 1 => streams.pop().map(|(_, entries)| entries),
        _ => None,
    };
    let Some(Value::Array(items)) = stream else { return Err(malformed()) };
    items
        .into_iter()
        .map(|item| {
            let Value::Array(mut parts) = item else { return Err(malformed()) };
            let (Some(fields), Some(Value::BulkString(id))) = (parts.pop(), parts.pop()) else {
                return Err(malformed());
            };
            let id = String::from_utf8(id).map_err(|_| malformed())?;
            let fields: Vec<(Vec<u8>, Vec<u8>)> = match fields {
                Value::Array(flat) => flat
                    .chunks(2)
                    .filter_map(|pair| match pair {
                        [Value::BulkString(name), Value::BulkString(value)] => Some((name.clone(), value.clone())),
                        _ => None,
                    })
                    .collect(),
                Value::Map(pairs) => pairs
                    .into_iter()
                    .filter_map(|pair| match pair {
                        (Value::BulkString(name), Value::BulkString(value)) => Some((name, value)),
                        _ => None,
                    })
                    .collect(),
                _ => return Err(malformed()),
            };
            let field = |name: &[u8]| fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
            let seq = field(b"n").and_then(|n| std::str::from_utf8(&n).ok()?.parse().ok());
            let appended_ms = id.split('-').next().and_then(|ms| ms.parse().ok()).unwrap_or(0);
            let epoch = field(b"e").and_then(|e| String::from_utf8(e).ok());
            Ok(Entry { id, seq, epoch, message: field(b"m").unwrap_or_default(), appended_ms })
        })
        .collect()
}

/// Reads the log from where this replica stands and delivers other
/// replicas' events to its subscribers, until the bus is dropped.
pub(super) struct Reader {
    pub(super) config: RedisConfig,
    pub(super) keys: LogKeys,
    pub(super) bus_keys: Arc<[BusKey]>,
    pub(super) origin: String,
    pub(super) own: Arc<OwnPublishes>,
    pub(super) local: broadcast::Sender<Local>,
    /// Whether the reader is connected and caught up to its position.
    pub(super) up: Arc<AtomicBool>,
    /// Gone when the bus is dropped.
    pub(super) alive: Weak<()>,
}

impl Reader {
    /// Connects and learns where the log stands now: a replica starts
    /// hearing what is published after it started.
    pub(super) async fn start(self) -> redis::RedisResult<()> {
        let mut link = ReadLink::connect(&self.config).await?;
        let position = link.locate(&self.keys, None).await?.end;
        self.up.store(true, Ordering::SeqCst);
        tokio::spawn(self.run(link, position));
        Ok(())
    }

    async fn run(self, link: ReadLink, mut position: Position) {
        let (mut link, mut seen) = (Some(link), Seen::default());
        let mut backoff = Duration::from_millis(100);
        while self.alive.strong_count() > 0 {
            let connected = match link.as_mut() {
                Some(connected) => connected,
                None => match self.reconnect(&mut position).await {
                    Ok(reconnected) => link.insert(reconnected),
                    Err(error) => {
                        tracing::debug!(%error, "the bus's log is still unreachable");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(2));
                        continue;
                    }
                },
            };
            match connected.read(&self.keys, &position.cursor).await {
                Ok(entries) => {
                    // Only a read that works ends the backoff: a connection
                    // that connects and then fails is retried slowly too.
                    backoff = Duration::from_millis(100);
                    for entry in entries {
                        self.take(&mut position, &mut seen, &entry);
                    }
                }
                Err(error) => {
                    if self.up.swap(false, Ordering::SeqCst) {
                        tracing::warn!(%error, "lost the bus's log; events from other replicas wait until it is back");
                    }
                    link = None;
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    async fn reconnect(&self, position: &mut Position) -> redis::RedisResult<ReadLink> {
        let mut link = ReadLink::connect(&self.config).await?;
        let located = link.locate(&self.keys, Some(position)).await?;
        if let Some(gap) = position.resume_in(located) {
            self.announce(gap);
        }
        if !self.up.swap(true, Ordering::SeqCst) {
            tracing::info!("the bus's log is back; reading what other replicas published meanwhile");
            let _ = self.local.send(Local::Event(Event::BusReconnected));
        }
        Ok(link)
    }

    fn take(&self, position: &mut Position, seen: &mut Seen, entry: &Entry) {
        let gap = position.advance(entry);
        if let Some(gap) = gap {
            self.announce(gap);
        }
        // A message is fresh when Redis appended it soon after it was
        // signed: a signed message appended again later is a replay.
        let received = match wire::decode(&self.bus_keys, &self.keys.log, &entry.message, entry.appended_ms) {
            Ok(received) => received,
            Err(why) => {
                switchyard_telemetry::metrics().bus_rejected();
                tracing::warn!(%why, entry = %entry.id, "dropping a bus message");
                // A numbered entry is one a replica appended (with a key
                // this one lacks, say): an event lost, and said so.
                if entry.seq.is_some() && gap.is_none() {
                    self.announce(Gap::Unreadable);
                }
                return;
            }
        };
        let deliver = if received.origin == self.origin {
            // Ours: delivered when its append was answered, unless that
            // answer never came.
            self.own.read_back(received.nonce) == ReadBack::Deliver
        } else {
            // A publish appended twice (a retried command) is read once.
            received.nonce == 0 || seen.first(&received.origin, received.nonce)
        };
        if !deliver {
            return;
        }
        // Wall clocks of two hosts: a skewed clock reads as no lag.
        let lag = Some(Duration::from_millis(super::now_ms().saturating_sub(received.sent_ms)));
        switchyard_telemetry::metrics().bus_received(received.event.kind(), lag);
        if received.event == Event::EventsLost {
            switchyard_telemetry::metrics().bus_gap("unpublished");
        }
        let _ = self.local.send(Local::Event(received.event));
    }

    fn announce(&self, gap: Gap) {
        switchyard_telemetry::metrics().bus_gap(gap.cause());
        tracing::warn!(
            cause = gap.cause(),
            missed = gap.missed(),
            "events from other replicas were lost; telling subscribers to start afresh"
        );
        let _ = self.local.send(Local::Gap { missed: gap.missed() });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, seq: u64) -> Entry {
        Entry { id: id.into(), seq: Some(seq), epoch: Some("e".into()), message: Vec::new(), appended_ms: 0 }
    }

    fn at(epoch: &str, cursor: &str, seq: u64) -> Position {
        Position { epoch: epoch.into(), cursor: cursor.into(), seq }
    }

    fn located(end: Position, held: bool) -> Located {
        Located { end, held }
    }

    #[test]
    fn consecutive_entries_are_no_gap_and_a_jump_counts_what_was_trimmed() {
        let mut position = at("e", "5-0", 5);
        assert_eq!(position.advance(&entry("6-0", 6)), None);
        assert_eq!(position.advance(&entry("9-0", 10)), Some(Gap::Trimmed { missed: 3 }));
        assert_eq!(position, at("e", "9-0", 10));
        let foreign = Entry { seq: None, epoch: None, ..entry("9-1", 0) };
        assert_eq!(position.advance(&foreign), None, "an entry without n moves the cursor only");
        assert_eq!(position, at("e", "9-1", 10));
    }

    #[test]
    fn a_counter_that_went_back_or_a_new_epoch_is_a_lost_log() {
        let mut position = at("e", "5-0", 5);
        assert_eq!(position.advance(&entry("7-0", 1)), Some(Gap::Reset), "restarted, then appended to");
        let mut position = at("e", "5-0", 5);
        let flushed = Entry { epoch: Some("f".into()), ..entry("8-0", 1) };
        assert_eq!(position.advance(&flushed), Some(Gap::Reset), "a new log while reading");
        assert_eq!(position, at("f", "8-0", 1), "and its epoch is adopted: a reconnect does not read it again");
        assert_eq!(position.resume_in(located(at("f", "9-0", 2), true)), None);

        let mut position = at("e", "5-0", 5);
        assert_eq!(position.resume_in(located(at("e", "9-0", 9), true)), None, "the same log: read on from the cursor");
        assert_eq!(position, at("e", "5-0", 5));
        assert_eq!(position.resume_in(located(at("f", "2-0", 2), true)), Some(Gap::Reset));
        assert_eq!(position, at("f", "0-0", 0), "the new log is read from its start");
        assert_eq!(position.advance(&Entry { epoch: Some("f".into()), ..entry("1-0", 1) }), None);
    }

    #[test]
    fn a_log_that_lost_the_readers_place_is_a_gap_and_read_from_its_end() {
        let mut position = at("e", "5-0", 5);
        assert_eq!(position.resume_in(located(at("e", "4-0", 4), false)), Some(Gap::Reset), "rolled back");
        assert_eq!(position, at("e", "4-0", 4));
        assert_eq!(position.advance(&entry("6-0", 5)), None, "numbered on from what the log holds");
    }

    #[test]
    fn xread_replies_are_read_in_both_protocols() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let item = |id: &str, n: &str| {
            Value::Array(vec![
                bulk(id),
                Value::Array(vec![bulk("n"), bulk(n), bulk("e"), bulk("ep"), bulk("m"), bulk("x")]),
            ])
        };
        let resp2 = Value::Array(vec![Value::Array(vec![
            bulk("log"),
            Value::Array(vec![item("17-0", "4"), item("17-1", "5")]),
        ])]);
        let read = entries(resp2).unwrap();
        assert_eq!(read.len(), 2);
        let expected = Entry {
            id: "17-1".into(),
            seq: Some(5),
            epoch: Some("ep".into()),
            message: b"x".to_vec(),
            appended_ms: 17,
        };
        assert_eq!(read[1], expected);
        let resp3 = Value::Map(vec![(bulk("log"), Value::Array(vec![item("18-0", "six")]))]);
        assert_eq!(entries(resp3).unwrap()[0].seq, None, "an unreadable n");
        assert!(entries(Value::Nil).unwrap().is_empty());
        assert!(entries(Value::Int(3)).is_err());
    }
}
