//! hyper's timer for one HTTP/1.1 connection, whose head deadline hyper
//! arms before every request head and drops once the head is in.
//!
//! Through hyper-util's `TokioTimer` each request made a boxed
//! `tokio::time::Sleep`, registered it in the runtime's timer wheel (behind
//! a lock every worker shares) and took it out again. [`HeadTimer`] keeps the
//! connection's one `Sleep` between heads and moves its deadline on, which
//! for a later deadline (always, here) is one compare-and-swap in tokio
//! while the `Sleep` is in the wheel: the wheel finds the new deadline when
//! the old one comes round. It goes into the wheel (under the lock) the
//! first time it is polled or moved, and again after it fired: when a
//! request outlasted the deadline, which also wakes the connection's task
//! once for nothing. What this saves is the shared lock, twice a request,
//! more than instructions: callgrind counts the timer's part of a
//! `tools/call` down from about 545 to 457 (#18, one core, uncontended).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::rt::{Sleep, Timer};

/// A `Sleep` the connection is not using: kept for its next head.
type Spare = Arc<Mutex<Option<Pin<Box<tokio::time::Sleep>>>>>;

/// The timer of one connection (make one per connection: its spare `Sleep`
/// is that connection's).
#[derive(Default)]
pub(crate) struct HeadTimer {
    spare: Spare,
}

impl HeadTimer {
    fn take_spare(&self) -> Option<Pin<Box<tokio::time::Sleep>>> {
        self.spare.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

impl Timer for HeadTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        self.sleep_until(self.now() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        let sleep = match self.take_spare() {
            Some(mut sleep) => {
                sleep.as_mut().reset(deadline.into());
                sleep
            }
            None => Box::pin(tokio::time::sleep_until(deadline.into())),
        };
        Box::pin(Lent { sleep: Some(sleep), spare: Arc::clone(&self.spare) })
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<Lent>() {
            Some(mut lent) => lent.reset(new_deadline),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }

    fn now(&self) -> Instant {
        // tokio's clock, which tests may pause, as `TokioTimer` reads it.
        tokio::time::Instant::now().into()
    }
}

/// The connection's `Sleep`, lent to hyper until it drops it.
struct Lent {
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    spare: Spare,
}

impl Lent {
    fn reset(&mut self, deadline: Instant) {
        if let Some(sleep) = &mut self.sleep {
            sleep.as_mut().reset(deadline.into());
        }
    }
}

impl Future for Lent {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match &mut self.sleep {
            Some(sleep) => sleep.as_mut().poll(cx),
            None => Poll::Ready(()),
        }
    }
}

impl Sleep for Lent {}

impl Drop for Lent {
    fn drop(&mut self) {
        if let Some(sleep) = self.sleep.take() {
            *self.spare.lock().unwrap_or_else(PoisonError::into_inner) = Some(sleep);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_reused_sleep_fires_at_its_new_deadline_not_its_old_one() {
        let timer = HeadTimer::default();
        let first = timer.sleep(Duration::from_secs(30));
        drop(first);
        tokio::time::advance(Duration::from_secs(20)).await;
        // The same `Sleep`, moved on to 30 s from now: 50 s from the start.
        let second = timer.sleep(Duration::from_secs(30));
        assert!(timer.take_spare().is_none(), "the spare was lent again");
        let started = tokio::time::Instant::now();
        second.await;
        assert_eq!(started.elapsed(), Duration::from_secs(30));
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_sleep_is_kept_for_the_next_head() {
        let timer = HeadTimer::default();
        drop(timer.sleep(Duration::from_secs(30)));
        assert!(timer.take_spare().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn reset_moves_a_lent_sleep() {
        let timer = HeadTimer::default();
        let mut sleep = timer.sleep(Duration::from_secs(30));
        let started = tokio::time::Instant::now();
        timer.reset(&mut sleep, timer.now() + Duration::from_secs(5));
        sleep.await;
        assert_eq!(started.elapsed(), Duration::from_secs(5));
    }
}
