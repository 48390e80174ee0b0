//! Waiting on facts instead of sleeping for fixed times: [`eventually`]
//! asks until the answer is there, so a test takes as long as the system
//! needs and no longer, and fails with what it was waiting for.
//!
//! Every deadline is scaled by `SWITCHYARD_TEST_PATIENCE` (a factor, 1 by
//! default), which a slow machine or a loaded CI runner raises instead of
//! anyone lengthening a test's sleeps.

use std::time::{Duration, Instant};

/// `base` scaled by `SWITCHYARD_TEST_PATIENCE` (1 unless set; a malformed
/// or non-positive value counts as 1).
fn patience(base: Duration) -> Duration {
    let factor = std::env::var("SWITCHYARD_TEST_PATIENCE")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .filter(|f| f.is_finite() && *f > 0.0)
        .unwrap_or(1.0);
    base.mul_f64(factor)
}

/// Asks `check` until it answers `Some`, and returns that; first at once,
/// then at growing intervals (10 ms doubling up to 200 ms).
///
/// # Panics
/// When `within`, scaled by `SWITCHYARD_TEST_PATIENCE`, passes without an
/// answer, naming `what`.
pub async fn eventually<T>(what: &str, within: Duration, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let patience = patience(within);
    let deadline = Instant::now() + patience;
    let mut interval = Duration::from_millis(10);
    loop {
        if let Some(answer) = check().await {
            return answer;
        }
        let now = Instant::now();
        assert!(now < deadline, "waited {patience:?} for {what}");
        tokio::time::sleep(interval.min(deadline - now)).await;
        interval = (interval * 2).min(Duration::from_millis(200));
    }
}

/// [`eventually`] for a condition: returns once `check` says `true`.
///
/// # Panics
/// As [`eventually`].
pub async fn until(what: &str, within: Duration, mut check: impl AsyncFnMut() -> bool) {
    eventually(what, within, async || check().await.then_some(())).await;
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    #[tokio::test]
    async fn answers_as_soon_as_the_fact_holds() {
        let asked = AtomicU32::new(0);
        let started = Instant::now();
        let answer = eventually("the third ask", Duration::from_secs(5), || async {
            (asked.fetch_add(1, Ordering::SeqCst) == 2).then_some(42)
        })
        .await;
        assert_eq!(answer, 42);
        assert!(started.elapsed() < Duration::from_secs(1), "no fixed sleep: {:?}", started.elapsed());
    }

    #[tokio::test]
    #[should_panic(expected = "waited")]
    async fn names_what_never_came() {
        until("a fact that never holds", Duration::from_millis(50), || async { false }).await;
    }
}
