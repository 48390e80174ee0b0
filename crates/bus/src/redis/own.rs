//! Which publishes a replica has delivered, so that each event reaches its
//! subscribers once, whatever Redis answered.
//!
//! A replica delivers its own publish itself, as soon as the append is
//! answered, and its reader skips the entry when it reads it back. Two cases
//! need more: an append whose answer was lost (Redis ran it, the command
//! timed out) must still be delivered here when the reader finds it, and a
//! publish appended twice (a retried command) must be delivered once.
//! [`OwnPublishes`] tracks this replica's publishes by number; [`Seen`]
//! remembers the last publishes read from each other replica.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many unanswered publishes are remembered: older ones are forgotten
/// (an append that failed long ago and was never read back did not happen).
const REMEMBERED_FAILURES: usize = 4096;
/// How many publishes of other replicas are remembered, to drop a repeat.
const REMEMBERED_SEEN: usize = 8192;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Appending; the reader has not read it back.
    Appending,
    /// Appending, and the reader already read it back (before the answer).
    ReadBack,
    /// The append failed or its answer was lost: if the reader finds it, it
    /// was appended after all.
    Unanswered,
}

/// What to do with one of this replica's own entries, read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ReadBack {
    /// Deliver it here: its append was reported failed, but it happened.
    Deliver,
    /// Skip it: delivered here already, or will be when the append returns.
    Skip,
}

/// This replica's publishes in flight, or unanswered.
#[derive(Debug, Default)]
pub(super) struct OwnPublishes {
    next: AtomicU64,
    states: Mutex<BTreeMap<u64, State>>,
}

impl OwnPublishes {
    fn states(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, State>> {
        self.states.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A number for a new publish, about to be appended.
    pub(super) fn start(&self) -> u64 {
        let nonce = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.states().insert(nonce, State::Appending);
        nonce
    }

    /// The append was answered: deliver it here now (the reader will skip it).
    pub(super) fn answered(&self, nonce: u64) {
        self.states().remove(&nonce);
    }

    /// The append failed. True if the reader has read it back meanwhile:
    /// it was appended, so it counts as carried.
    pub(super) fn failed(&self, nonce: u64) -> bool {
        let mut states = self.states();
        if states.remove(&nonce) == Some(State::ReadBack) {
            return true;
        }
        states.insert(nonce, State::Unanswered);
        let unanswered = states.values().filter(|s| **s == State::Unanswered).count();
        if unanswered > REMEMBERED_FAILURES
            && let Some(oldest) = states.iter().find(|(_, s)| **s == State::Unanswered).map(|(n, _)| *n)
        {
            states.remove(&oldest);
        }
        false
    }

    /// The reader found publish `nonce` of this replica in the log.
    pub(super) fn read_back(&self, nonce: u64) -> ReadBack {
        let mut states = self.states();
        match states.get(&nonce).copied() {
            Some(State::Appending) => {
                states.insert(nonce, State::ReadBack);
                ReadBack::Skip
            }
            Some(State::Unanswered) => {
                states.remove(&nonce);
                ReadBack::Deliver
            }
            Some(State::ReadBack) | None => ReadBack::Skip,
        }
    }
}

/// The last publishes read from other replicas, by origin and number.
#[derive(Debug, Default)]
pub(super) struct Seen {
    order: VecDeque<(String, u64)>,
    set: HashSet<(String, u64)>,
}

impl Seen {
    /// True the first time a publish is read; false for a repeat.
    pub(super) fn first(&mut self, origin: &str, nonce: u64) -> bool {
        let key = (origin.to_owned(), nonce);
        if !self.set.insert(key.clone()) {
            return false;
        }
        self.order.push_back(key);
        if self.order.len() > REMEMBERED_SEEN
            && let Some(oldest) = self.order.pop_front()
        {
            self.set.remove(&oldest);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answered_publish_is_skipped_when_read_back_before_or_after_the_answer() {
        let own = OwnPublishes::default();
        let (early, late) = (own.start(), own.start());
        assert_eq!(own.read_back(early), ReadBack::Skip, "read back before its answer");
        own.answered(early);
        own.answered(late);
        assert_eq!(own.read_back(late), ReadBack::Skip, "read back after its answer");
        assert_eq!(own.read_back(early), ReadBack::Skip, "and a second copy of it");
    }

    #[test]
    fn a_failed_publish_found_in_the_log_is_delivered_once() {
        let own = OwnPublishes::default();
        let seen_first = own.start();
        assert_eq!(own.read_back(seen_first), ReadBack::Skip);
        assert!(own.failed(seen_first), "read back before the error: it was carried");
        let lost_answer = own.start();
        assert!(!own.failed(lost_answer));
        assert_eq!(own.read_back(lost_answer), ReadBack::Deliver, "appended after all");
        assert_eq!(own.read_back(lost_answer), ReadBack::Skip, "once");
    }

    #[test]
    fn a_repeat_from_another_replica_is_dropped() {
        let mut seen = Seen::default();
        assert!(seen.first("a", 1));
        assert!(seen.first("b", 1));
        assert!(!seen.first("a", 1));
        for n in 2..(REMEMBERED_SEEN as u64 + 10) {
            assert!(seen.first("a", n));
        }
        assert!(seen.first("b", 1), "forgotten after REMEMBERED_SEEN others");
    }
}
