//! [`UpstreamLimits`]: what an upstream may make us read, wait for and redo.
//!
//! An upstream is run by whoever registered it, and it is asked by every
//! replica, so an upstream that lies (a list without end, an event that never
//! ends, JSON nested a million deep) or floods (`list_changed` without pause)
//! could otherwise take the memory or CPU of every replica at once. Each
//! bound here turns that into an error for that upstream alone.

use std::sync::Arc;
use std::time::Duration;

use switchyard_settings::Section;

/// The operator's bounds on every upstream plugin (`[upstream]` in the
/// server's configuration). The defaults are safe for a public deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UpstreamLimits {
    /// One JSON body, or one SSE event, from an upstream. Default 4 MiB.
    pub max_message_bytes: usize,
    /// JSON values in one message (counted as it is parsed, which stops
    /// at the bound, `counted`: a parsed value takes about 32 bytes, so
    /// `[0,0,…]` would take 16 times its size on the wire). Default 250,000 (about 8 MiB parsed).
    pub max_message_values: usize,
    /// Requests to one upstream in flight at once on a replica; more wait
    /// for a place until their deadline. With the two bounds above, what
    /// one upstream's answers can hold at once. Default 16.
    pub max_in_flight: usize,
    /// Everything one request's SSE answer may carry before its response
    /// (progress, logs, requests we do not relay). Default 16 MiB.
    pub max_stream_bytes: usize,
    /// Items in one list (tools, prompts, resources or templates), across its pages. Default 5,000.
    pub max_list_items: usize,
    /// Pages of one list. Default 100.
    pub max_list_pages: usize,
    /// Bytes of every page of one refresh together. Default 8 MiB.
    pub max_list_bytes: usize,
    /// JSON values of every page of one refresh together. Default 1,000,000
    /// (about 32 MiB parsed).
    pub max_list_values: usize,
    /// Deadline of one whole refresh (every page of every list); each page
    /// also has the spec's `timeout_ms`. Default 60 s.
    pub list_deadline: Duration,
    /// Least time between two refreshes the upstream asked for with
    /// `list_changed`: a flood of them costs one refresh per interval.
    /// Default 2 s.
    pub refresh_interval: Duration,
    /// The upstream's listen stream is reopened when it sends nothing (not
    /// even a keep-alive) for this long. Default 5 min.
    pub listen_idle_timeout: Duration,
    /// Longest wait between retries of an upstream that keeps failing
    /// (refresh, listen stream); the wait doubles from 1 s up to it. Default 5 min.
    pub max_backoff: Duration,
    /// How long loading the catalog waits for a newly built upstream's first
    /// lists before going on without them (they arrive later, as a list
    /// change). Default 5 s.
    pub first_lists_wait: Duration,
    /// Failures in a row (unreachable, reset, HTTP 5xx, no answer within the
    /// request's deadline) after which an upstream's requests fail at once,
    /// without being sent. Default 5.
    pub breaker_failures: usize,
    /// How long they do; then one request probes the upstream. Default 30 s.
    pub breaker_open: Duration,
    /// Times an idempotent request (discovery, lists, reads, prompts,
    /// completions; never a tool call) that failed in transport is sent
    /// again, within its deadline and a budget of one retry per ten
    /// requests. Default 2.
    pub max_retries: usize,
    /// What the answer cache of a replica may hold, all upstreams together
    /// (bytes on the wire plus 32 per JSON value); 0 keeps nothing. Default
    /// 64 MiB.
    pub cache_max_bytes: u64,
}

impl Default for UpstreamLimits {
    fn default() -> Self {
        Self {
            max_message_bytes: 4 << 20,
            max_message_values: 250_000,
            max_in_flight: 16,
            max_stream_bytes: 16 << 20,
            max_list_items: 5_000,
            max_list_pages: 100,
            max_list_bytes: 8 << 20,
            max_list_values: 1_000_000,
            list_deadline: Duration::from_secs(60),
            refresh_interval: Duration::from_secs(2),
            listen_idle_timeout: Duration::from_secs(300),
            max_backoff: Duration::from_secs(300),
            first_lists_wait: Duration::from_secs(5),
            breaker_failures: 5,
            breaker_open: Duration::from_secs(30),
            max_retries: 2,
            cache_max_bytes: 64 << 20,
        }
    }
}

impl UpstreamLimits {
    /// Reports what is wrong with these limits under `[upstream]`.
    pub fn check(&self, section: &mut Section<'_>) {
        for (key, value) in [
            ("max_message_bytes", self.max_message_bytes),
            ("max_message_values", self.max_message_values),
            ("max_in_flight", self.max_in_flight),
            ("max_stream_bytes", self.max_stream_bytes),
            ("max_list_items", self.max_list_items),
            ("max_list_pages", self.max_list_pages),
            ("max_list_bytes", self.max_list_bytes),
            ("max_list_values", self.max_list_values),
            ("breaker_failures", self.breaker_failures),
        ] {
            if value == 0 {
                section.push(key, "must be at least 1");
            }
        }
        if self.max_stream_bytes < self.max_message_bytes {
            let message_key = section.key("max_message_bytes");
            section.push("max_stream_bytes", format_args!("must be at least {message_key}"));
        }
        for (key, value) in [
            ("list_deadline", self.list_deadline),
            ("refresh_interval", self.refresh_interval),
            ("listen_idle_timeout", self.listen_idle_timeout),
            ("max_backoff", self.max_backoff),
            ("breaker_open", self.breaker_open),
        ] {
            if value.is_zero() {
                section.push(key, "must be longer than zero");
            }
        }
    }
}

/// Which of the operator's bounds an upstream broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// A JSON body or an SSE event too large.
    MessageBytes,
    /// A JSON body or an SSE event with too many values.
    MessageValues,
    /// Too many requests to the upstream already in flight.
    InFlight,
    /// An SSE answer too long before its response.
    StreamBytes,
    /// A list with too many items.
    ListItems,
    /// A list with too many pages.
    ListPages,
    /// A refresh too large, all pages together.
    ListBytes,
    /// A refresh with too many values, all pages together.
    ListValues,
    /// A listen stream carrying events faster than we take them.
    Flood,
}

impl Bound {
    /// The setting that sets this bound, for messages an operator reads.
    pub fn setting(self) -> &'static str {
        match self {
            Self::MessageBytes => "upstream.max_message_bytes",
            Self::MessageValues => "upstream.max_message_values",
            Self::InFlight => "upstream.max_in_flight",
            Self::StreamBytes => "upstream.max_stream_bytes",
            Self::ListItems => "upstream.max_list_items",
            Self::ListPages => "upstream.max_list_pages",
            Self::ListBytes => "upstream.max_list_bytes",
            Self::ListValues => "upstream.max_list_values",
            Self::Flood => "upstream.refresh_interval",
        }
    }

    /// The label of `switchyard.upstream.refusals`.
    pub fn label(self) -> &'static str {
        match self {
            Self::MessageBytes => "message_bytes",
            Self::MessageValues => "message_values",
            Self::InFlight => "in_flight",
            Self::StreamBytes => "stream_bytes",
            Self::ListItems => "list_items",
            Self::ListPages => "list_pages",
            Self::ListBytes => "list_bytes",
            Self::ListValues => "list_values",
            Self::Flood => "flood",
        }
    }

    /// Counts this refusal of `upstream`'s answer.
    pub(crate) fn record(self, upstream: &Arc<str>) {
        switchyard_telemetry::metrics().upstream_refused(self.label(), upstream);
    }
}

/// Waits that double after each failure, up to a bound, and start over
/// after a success.
#[derive(Debug)]
pub(crate) struct Backoff {
    next: Duration,
    max: Duration,
}

impl Backoff {
    const FIRST: Duration = Duration::from_secs(1);

    pub(crate) fn new(max: Duration) -> Self {
        Self { next: Self::FIRST.min(max), max }
    }

    /// The wait before the next attempt, doubling the one after.
    pub(crate) fn failed(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(self.max);
        wait
    }

    pub(crate) fn succeeded(&mut self) {
        self.next = Self::FIRST.min(self.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid_and_zeroes_are_not() {
        let problems = |limits: &UpstreamLimits| {
            let mut problems = switchyard_settings::Problems::new();
            limits.check(&mut problems.section("upstream"));
            problems.into_vec()
        };
        assert!(problems(&UpstreamLimits::default()).is_empty());
        let zero = UpstreamLimits { max_list_items: 0, refresh_interval: Duration::ZERO, ..UpstreamLimits::default() };
        assert_eq!(
            problems(&zero),
            ["upstream.max_list_items: must be at least 1", "upstream.refresh_interval: must be longer than zero"]
        );
    }

    #[test]
    fn backoff_doubles_to_its_bound_and_starts_over() {
        let mut backoff = Backoff::new(Duration::from_secs(5));
        let waits: Vec<u64> = (0..5).map(|_| backoff.failed().as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 5, 5]);
        backoff.succeeded();
        assert_eq!(backoff.failed(), Duration::from_secs(1));
    }
}
