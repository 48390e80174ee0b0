//! [`Breaker`]: stops sending to an upstream that keeps failing, probes it
//! back, and [`RetryBudget`]: how many retries an upstream's failures may
//! cost.
//!
//! An upstream that is down, hangs or answers 500 would otherwise take a
//! place (`max_in_flight`) and a deadline's worth of waiting from every call
//! of its tools, on every replica. After `breaker_failures` failures in a
//! row, its calls fail at once, for `breaker_open`; then one request goes
//! through as a probe, and its outcome closes the breaker or opens it again.
//! Each replica keeps its own breakers: what one replica sees of an upstream
//! is what its calls would meet.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The state of one upstream's breaker.
#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Requests go; `failures` in a row so far.
    Closed { failures: usize },
    /// Requests fail at once until `until`.
    Open { until: Instant },
    /// One probe is in flight; the others fail at once.
    Probing,
}

/// One upstream's breaker.
#[derive(Debug)]
pub(crate) struct Breaker {
    state: Mutex<State>,
    failures_to_open: usize,
    open_for: Duration,
    /// The upstream, as its metrics are labelled.
    upstream: Arc<str>,
}

/// Why a request was not sent: the breaker is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Open {
    pub(crate) failures: usize,
    pub(crate) retry: Retry,
}

/// When an upstream whose breaker is open is asked again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// A probe goes after this long.
    In(Duration),
    /// A probe is in flight now; its answer decides.
    Probing,
}

impl std::fmt::Display for Retry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::In(wait) => write!(f, "it is tried again in {:.1} s", wait.as_secs_f64()),
            Self::Probing => f.write_str("a request is probing it now"),
        }
    }
}

/// A request the breaker let through. Its outcome must be told with
/// [`Admitted::succeeded`] or [`Admitted::failed`]; one dropped untold (its
/// call was cancelled) tells nothing, except that a probe dropped so lets
/// the next request probe instead.
#[derive(Debug)]
pub(crate) struct Admitted<'a> {
    breaker: &'a Breaker,
    probe: bool,
    told: bool,
}

impl Breaker {
    /// A breaker for `upstream` that opens after `failures_to_open` failures
    /// in a row and stays open for `open_for`.
    pub(crate) fn new(failures_to_open: usize, open_for: Duration, upstream: &Arc<str>) -> Self {
        let upstream = Arc::clone(upstream);
        Self { state: Mutex::new(State::Closed { failures: 0 }), failures_to_open, open_for, upstream }
    }

    fn record(&self, event: &'static str) {
        switchyard_telemetry::metrics().upstream_breaker(event, &self.upstream);
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lets a request through, or says for how long the breaker stays open.
    pub(crate) fn admit(&self) -> Result<Admitted<'_>, Open> {
        let mut state = self.state();
        let probe = match *state {
            State::Closed { .. } => false,
            State::Open { until } if Instant::now() >= until => {
                *state = State::Probing;
                true
            }
            State::Open { until } => {
                self.record("rejected");
                let wait = until.saturating_duration_since(Instant::now());
                return Err(Open { failures: self.failures_to_open, retry: Retry::In(wait) });
            }
            State::Probing => {
                self.record("rejected");
                return Err(Open { failures: self.failures_to_open, retry: Retry::Probing });
            }
        };
        Ok(Admitted { breaker: self, probe, told: false })
    }
}

impl Admitted<'_> {
    /// The upstream answered: the breaker closes, and the count restarts.
    pub(crate) fn succeeded(mut self) {
        self.told = true;
        let mut state = self.breaker.state();
        if self.probe || !matches!(*state, State::Closed { .. }) {
            self.breaker.record("closed");
            tracing::info!("an upstream answered its probe; its calls go through again");
        }
        *state = State::Closed { failures: 0 };
    }

    /// The upstream failed: counted, and the breaker opens at the count
    /// (at once after a failed probe).
    pub(crate) fn failed(mut self) {
        self.told = true;
        let breaker = self.breaker;
        let mut state = breaker.state();
        let failures = match *state {
            State::Closed { failures } if !self.probe => failures + 1,
            // A failed probe, or a request sent before the breaker opened.
            _ => breaker.failures_to_open,
        };
        if failures >= breaker.failures_to_open {
            if matches!(*state, State::Closed { .. }) || self.probe {
                breaker.record("opened");
                tracing::warn!(failures, open_for = ?breaker.open_for, "an upstream keeps failing; its calls fail at once for a while");
            }
            *state = State::Open { until: Instant::now() + breaker.open_for };
        } else {
            *state = State::Closed { failures };
        }
    }
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        if self.probe && !self.told {
            let mut state = self.breaker.state();
            if *state == State::Probing {
                *state = State::Open { until: Instant::now() };
            }
        }
    }
}

/// Retries as a share of requests: each request adds `share` of a retry to
/// the budget (up to `cap`), and each retry spends one. When an upstream
/// fails everything, retries stop at that share instead of multiplying its
/// load; a healthy one keeps a few in hand for a dropped connection.
#[derive(Debug)]
pub(crate) struct RetryBudget {
    /// In thousandths of a retry, so that ten tenths make exactly one.
    balance: Mutex<u32>,
    share: u32,
    cap: u32,
    /// The upstream, as its metrics are labelled.
    upstream: Arc<str>,
}

/// One retry, in the budget's units.
const RETRY: u32 = 1000;

impl RetryBudget {
    /// A budget for `upstream` of `per_thousand` thousandths of a retry per
    /// request (100: one in ten), holding at most `cap` retries, full at the start.
    pub(crate) fn new(per_thousand: u32, cap: u32, upstream: &Arc<str>) -> Self {
        let cap = cap.saturating_mul(RETRY);
        Self { balance: Mutex::new(cap), share: per_thousand, cap, upstream: Arc::clone(upstream) }
    }

    /// A request was made.
    pub(crate) fn deposit(&self) {
        let mut balance = self.balance.lock().unwrap_or_else(|p| p.into_inner());
        *balance = balance.saturating_add(self.share).min(self.cap);
    }

    /// Takes one retry from the budget, if it holds one.
    pub(crate) fn withdraw(&self) -> bool {
        let mut balance = self.balance.lock().unwrap_or_else(|p| p.into_inner());
        let spent = *balance >= RETRY;
        if spent {
            *balance -= RETRY;
            switchyard_telemetry::metrics().upstream_retried(&self.upstream);
        }
        spent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_failures_in_a_row_and_a_probe_closes_it() {
        let breaker = Breaker::new(3, Duration::from_millis(50), &"test".into());
        breaker.admit().unwrap().failed();
        breaker.admit().unwrap().failed();
        breaker.admit().unwrap().succeeded(); // the count restarts
        for _ in 0..3 {
            breaker.admit().unwrap().failed();
        }
        let Retry::In(wait) = breaker.admit().unwrap_err().retry else { panic!("open, not probing") };
        assert!(wait > Duration::ZERO && wait <= Duration::from_millis(50), "{wait:?}");
        std::thread::sleep(Duration::from_millis(60));
        let probe = breaker.admit().unwrap();
        assert_eq!(breaker.admit().unwrap_err().retry, Retry::Probing, "one probe at a time");
        probe.succeeded();
        breaker.admit().unwrap().succeeded();
    }

    #[test]
    fn a_failed_probe_opens_it_again_and_a_dropped_one_lets_another_probe() {
        let breaker = Breaker::new(1, Duration::from_millis(30), &"test".into());
        breaker.admit().unwrap().failed();
        assert!(breaker.admit().is_err());
        std::thread::sleep(Duration::from_millis(40));
        breaker.admit().unwrap().failed();
        assert!(breaker.admit().is_err(), "open again after the failed probe");
        std::thread::sleep(Duration::from_millis(40));
        drop(breaker.admit().unwrap()); // the probe's call was cancelled
        breaker.admit().unwrap().succeeded();
        assert!(breaker.admit().is_ok());
    }

    #[test]
    fn retries_stay_within_their_share_of_requests() {
        let budget = RetryBudget::new(100, 2, &"test".into());
        assert!(budget.withdraw() && budget.withdraw() && !budget.withdraw(), "starts full, at the cap");
        for _ in 0..10 {
            budget.deposit();
        }
        assert!(budget.withdraw() && !budget.withdraw(), "ten requests earn one retry");
    }
}
