//! Single-use marks: "has this been used before?", answered once per mark
//! for every replica. `core` marks each `requestState` it opens with input
//! answers, so a captured or repeated retry cannot run a tool's next round
//! twice. In process ([`LocalMarks`]) for one replica, in Redis
//! ([`crate::RedisMarks`], `SET NX` with the mark's expiry, with the `redis`
//! feature) for many.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;

/// Records marks, each until its expiry.
pub trait Marks: Send + Sync + 'static {
    /// Marks `id` until `expires_at` (Unix seconds): `Ok(true)` the first
    /// time, `Ok(false)` when it was marked already.
    ///
    /// # Errors
    /// When the store cannot be asked; the caller decides (it refuses).
    fn first_use<'a>(&'a self, id: &'a str, expires_at: u64) -> BoxFuture<'a, Result<bool, String>>;
}

pub(crate) fn seconds_until(expires_at: u64) -> Duration {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    Duration::from_secs(expires_at.saturating_sub(now).max(1))
}

/// Marks of one process, bounded: an entry leaves at its expiry, and past
/// `capacity` the least used are evicted (a mark evicted before its expiry
/// could be used again, so size `capacity` above the marks one lifetime sees).
pub struct LocalMarks {
    marks: moka::sync::Cache<String, Duration>,
}

struct UntilExpiry;

impl moka::Expiry<String, Duration> for UntilExpiry {
    fn expire_after_create(&self, _: &String, ttl: &Duration, _: std::time::Instant) -> Option<Duration> {
        Some(*ttl)
    }
}

impl LocalMarks {
    /// Keeps at most `capacity` marks.
    pub fn new(capacity: u64) -> Self {
        Self { marks: moka::sync::Cache::builder().max_capacity(capacity).expire_after(UntilExpiry).build() }
    }
}

impl std::fmt::Debug for LocalMarks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalMarks").finish_non_exhaustive()
    }
}

impl Marks for LocalMarks {
    fn first_use<'a>(&'a self, id: &'a str, expires_at: u64) -> BoxFuture<'a, Result<bool, String>> {
        let ttl = seconds_until(expires_at);
        // One step per key: two concurrent uses cannot both be first.
        let entry = self.marks.entry(id.to_owned()).or_insert_with(|| ttl);
        Box::pin(std::future::ready(Ok(entry.is_fresh())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_a_minute() -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() + 60
    }

    #[tokio::test]
    async fn a_local_mark_is_new_once() {
        let marks = LocalMarks::new(1000);
        assert_eq!(marks.first_use("a", in_a_minute()).await, Ok(true));
        assert_eq!(marks.first_use("a", in_a_minute()).await, Ok(false));
        assert_eq!(marks.first_use("b", in_a_minute()).await, Ok(true));
    }
}
