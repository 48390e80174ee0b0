//! A request's cancellation, whose token is made only when something asks
//! for it.
//!
//! Every request may be cancelled (its client goes away, its deadline
//! passes), but most calls finish on their first poll and never look. A
//! `CancellationToken` costs an allocation, and a mutex taken at each clone,
//! drop and cancel: about 800 instructions of a `tools/call` that never
//! waits (callgrind, #18). So the request carries a [`Cancellation`] (one
//! small allocation, atomic clones) and a plugin that wants to watch gets
//! the token from it, made then, already cancelled if the request was.

use std::sync::atomic::{AtomicBool, Ordering, fence};
use std::sync::{Arc, OnceLock};

use tokio_util::sync::CancellationToken;

/// Shared by the request and every context handed to its plugins.
#[derive(Clone, Default)]
pub(crate) struct Cancellation(Arc<Shared>);

#[derive(Default)]
struct Shared {
    token: OnceLock<CancellationToken>,
    cancelled: AtomicBool,
}

impl Cancellation {
    /// A cancellation with `token` made already (a task's call, which the
    /// task registry cancels through its own handle).
    pub(crate) fn of(token: CancellationToken) -> Self {
        Self(Arc::new(Shared { token: OnceLock::from(token), cancelled: AtomicBool::new(false) }))
    }

    /// The token; cancelled if the request was, or when it is.
    pub(crate) fn token(&self) -> &CancellationToken {
        let token = self.0.token.get_or_init(CancellationToken::new);
        // With `cancel`'s fence: either it sees this token, or this sees
        // its flag (both may: cancelling twice is nothing).
        fence(Ordering::SeqCst);
        if self.0.cancelled.load(Ordering::Relaxed) {
            token.cancel();
        }
        token
    }

    /// Cancels the request: the token if one was made, and any made later.
    pub(crate) fn cancel(&self) {
        self.0.cancelled.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if let Some(token) = self.0.token.get() {
            token.cancel();
        }
    }

    /// A guard that cancels when dropped (when the request's future is).
    pub(crate) fn on_drop(&self) -> CancelOnDrop {
        CancelOnDrop(self.clone())
    }
}

/// Cancels its [`Cancellation`] when dropped.
pub(crate) struct CancelOnDrop(Cancellation);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_made_after_the_cancel_is_cancelled() {
        let cancellation = Cancellation::default();
        drop(cancellation.on_drop());
        assert!(cancellation.token().is_cancelled());
    }

    #[test]
    fn a_token_made_before_the_cancel_is_cancelled_by_it() {
        let cancellation = Cancellation::default();
        let guard = cancellation.on_drop();
        let token = cancellation.clone().token().clone();
        assert!(!token.is_cancelled());
        drop(guard);
        assert!(token.is_cancelled());
    }

    #[test]
    fn a_given_token_is_the_one_cancelled() {
        let token = CancellationToken::new();
        let cancellation = Cancellation::of(token.clone());
        cancellation.cancel();
        assert!(token.is_cancelled());
    }

    #[test]
    fn racing_threads_never_leave_a_token_uncancelled() {
        for _ in 0..2_000 {
            let cancellation = Cancellation::default();
            let watcher = cancellation.clone();
            let watching = std::thread::spawn(move || watcher.token().clone());
            cancellation.cancel();
            let token = watching.join().expect("the watcher ran");
            assert!(token.is_cancelled());
        }
    }
}
