//! The hub's table of open streams, with what makes fan-out and admission
//! cheap: an index from subscribed URI and task id to the streams that asked
//! for them (so a `resources/updated` looks up a handful of keys instead of
//! scanning every stream's list), and a count of open streams per caller (so
//! one caller cannot hold the process's every stream).

use std::collections::HashMap;
use std::sync::Arc;

use super::Filter;
use super::message::Mailbox;
use crate::policy::Caller;

/// One open stream, as the hub sees it.
pub(super) struct Listener {
    pub(super) filter: Filter,
    /// The subscription id, serialised once.
    pub(super) subscription_id: Arc<[u8]>,
    pub(super) mailbox: Arc<Mailbox>,
    /// Who opened it: its scopes decide which `resources/updated` it hears.
    pub(super) caller: Caller,
    /// What it is counted against (see [`Caller::accounting_key`]).
    pub(super) counted_as: String,
}

/// Streams by a string key (a subscribed URI, a task id).
#[derive(Default)]
struct Index {
    streams: HashMap<Box<str>, Vec<u64>>,
    /// The longest key held: no longer prefix of an updated URI can match.
    longest: usize,
}

impl Index {
    fn insert(&mut self, key: &str, id: u64) {
        self.longest = self.longest.max(key.len());
        let ids = self.streams.entry(key.into()).or_default();
        if !ids.contains(&id) {
            ids.push(id);
        }
    }

    fn remove(&mut self, key: &str, id: u64) {
        if let Some(ids) = self.streams.get_mut(key) {
            ids.retain(|other| *other != id);
            if ids.is_empty() {
                self.streams.remove(key);
            }
        }
        if self.streams.is_empty() {
            self.longest = 0;
        }
    }

    fn get(&self, key: &str) -> &[u64] {
        self.streams.get(key).map_or(&[], Vec::as_slice)
    }
}

/// The keys a subscription covering `uri` can have: `uri` itself, and every
/// prefix that ends at a `/` (with it, or just before it); see
/// [`super::covers`]. Prefixes longer than `longest` cannot be subscribed.
fn covering_prefixes(uri: &str, longest: usize) -> impl Iterator<Item = &str> {
    let cuts = uri.char_indices().filter(|(_, c)| *c == '/').map(|(i, _)| i).take_while(move |i| *i <= longest);
    std::iter::once(uri).chain(cuts.flat_map(move |i| [&uri[..i], &uri[..=i]])).filter(move |p| p.len() <= longest)
}

/// Why a stream was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The process holds `listen.max_streams` streams already.
    Process(usize),
    /// The caller holds `listen.max_streams_per_caller` streams already.
    Caller(usize),
}

/// Every open stream of the process.
#[derive(Default)]
pub(super) struct Registry {
    /// Boxed: a listener is 184 bytes, and a map keeps up to twice as many
    /// slots as entries (2,048 for 1,000 streams), so inline entries cost an
    /// idle stream about 390 bytes of slots where a box costs 200.
    pub(super) listeners: HashMap<u64, Box<Listener>>,
    uris: Index,
    tasks: Index,
    per_caller: HashMap<String, usize>,
}

impl Registry {
    /// Admits `listener` under the two stream bounds.
    pub(super) fn admit(
        &mut self,
        id: u64,
        listener: Listener,
        total: usize,
        per_caller: usize,
    ) -> Result<(), Refusal> {
        if self.listeners.len() >= total {
            return Err(Refusal::Process(total));
        }
        let held = self.per_caller.get(&listener.counted_as).copied().unwrap_or(0);
        if held >= per_caller {
            return Err(Refusal::Caller(per_caller));
        }
        *self.per_caller.entry(listener.counted_as.clone()).or_default() += 1;
        for uri in &listener.filter.resource_uris {
            self.uris.insert(uri, id);
        }
        for task in &listener.filter.task_ids {
            self.tasks.insert(task, id);
        }
        self.listeners.insert(id, Box::new(listener));
        Ok(())
    }

    pub(super) fn remove(&mut self, id: u64) -> Option<Box<Listener>> {
        let listener = self.listeners.remove(&id)?;
        for uri in &listener.filter.resource_uris {
            self.uris.remove(uri, id);
        }
        for task in &listener.filter.task_ids {
            self.tasks.remove(task, id);
        }
        if let Some(held) = self.per_caller.get_mut(&listener.counted_as) {
            *held -= 1;
            if *held == 0 {
                self.per_caller.remove(&listener.counted_as);
            }
        }
        Some(listener)
    }

    /// The streams subscribed to `uri` or to a URI above it, each once.
    pub(super) fn subscribed_to(&self, uri: &str) -> Vec<u64> {
        let mut ids: Vec<u64> =
            covering_prefixes(uri, self.uris.longest).flat_map(|key| self.uris.get(key)).copied().collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The streams watching task `id`.
    pub(super) fn watching(&self, task: &str) -> &[u64] {
        self.tasks.get(task)
    }

    /// How many streams `key` holds (for tests).
    #[cfg(test)]
    pub(super) fn held_by(&self, key: &str) -> usize {
        self.per_caller.get(key).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefixes_are_exactly_the_uris_a_subscription_may_cover() {
        let uri = "file:///srv/a/b.txt";
        let prefixes: Vec<&str> = covering_prefixes(uri, usize::MAX).collect();
        // Brute force: every prefix that `covers` accepts is among them.
        for end in 0..=uri.len() {
            let candidate = &uri[..end];
            assert_eq!(super::super::covers(candidate, uri), prefixes.contains(&candidate), "{candidate}");
        }
        assert!(covering_prefixes(uri, 8).all(|p| p.len() <= 8));
    }
}
