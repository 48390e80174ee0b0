//! The batch exporter: finished spans, already encoded, wait in a bounded
//! batch; one thread of its own takes the batch and POSTs it to the
//! collector's `/v1/traces`, off every request's path.
//!
//! A span's close pays for its encoding and one uncontended lock held for a
//! copy. The thread wakes when a batch is full or the interval has passed,
//! whichever comes first. When the collector is slow or absent the batch
//! reaches its bound and further spans are dropped and counted: telemetry
//! never makes a request wait, and never grows past its bound.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use std::cell::RefCell;

use super::otlp::{self, Envelope};
use super::{KEPT_BUFFER, SpanRecord};

/// Spans that wake the exporter: a batch this full is sent at once.
const BATCH: usize = 1024;
/// Encoded spans waiting at most, in bytes (about 16,000 of our request
/// spans); beyond this they are dropped.
pub(super) const CAPACITY: usize = 4 << 20;
/// How long the last export at shutdown may take at most.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);
/// Failed exports are logged at most this often.
const COMPLAINT_INTERVAL: Duration = Duration::from_secs(60);

/// Where and how spans are sent.
#[derive(Debug, Clone)]
pub(crate) struct ExporterConfig {
    /// The full URL, `{endpoint}/v1/traces`.
    pub(crate) url: String,
    pub(crate) service_name: String,
    /// The longest a span waits before it is sent.
    pub(crate) interval: Duration,
    /// The longest one POST may take.
    pub(crate) timeout: Duration,
}

/// The queue and the thread that drains it.
#[derive(Debug)]
pub(crate) struct Exporter {
    queue: Mutex<Batch>,
    wake: Condvar,
    closing: AtomicBool,
    dropped: AtomicU64,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Exporter {
    /// Starts the exporter thread.
    ///
    /// # Errors
    /// When the HTTP client or the thread cannot be built.
    pub(crate) fn spawn(config: ExporterConfig) -> Result<Arc<Self>, String> {
        let exporter = Arc::new(Self {
            queue: Mutex::new(Batch::default()),
            wake: Condvar::new(),
            closing: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
            thread: Mutex::new(None),
        });
        let draining = Arc::clone(&exporter);
        // The blocking client runs a runtime of its own, which may be neither
        // built nor dropped inside the server's: it lives on the thread.
        let (built, started) = std::sync::mpsc::sync_channel(1);
        let thread = std::thread::Builder::new()
            .name("switchyard-spans".into())
            .spawn(move || {
                let client = reqwest::blocking::Client::builder()
                    .timeout(config.timeout)
                    .build()
                    .map_err(|e| format!("the trace exporter's HTTP client: {e}"));
                match client {
                    Ok(client) => {
                        let _ = built.send(Ok(()));
                        draining.run(&config, &client);
                    }
                    Err(error) => {
                        let _ = built.send(Err(error));
                    }
                }
            })
            .map_err(|e| format!("the trace exporter's thread: {e}"))?;
        started.recv().map_err(|_| "the trace exporter's thread ended at its start".to_owned())??;
        *exporter.thread.lock().unwrap_or_else(PoisonError::into_inner) = Some(thread);
        Ok(exporter)
    }

    /// An exporter with no thread: spans stay queued for a test to take.
    #[cfg(test)]
    pub(crate) fn unstarted() -> Arc<Self> {
        Arc::new(Self {
            queue: Mutex::new(Batch::default()),
            wake: Condvar::new(),
            closing: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
            thread: Mutex::new(None),
        })
    }

    /// What is queued, taken out (tests).
    #[cfg(test)]
    pub(crate) fn take(&self) -> Batch {
        std::mem::take(&mut *self.queue.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Adds the finished span `record` to the batch; drops it when the
    /// batch is at its bound.
    pub(crate) fn push(&self, record: &SpanRecord, end_unix_nanos: u64) {
        thread_local! {
            /// A span's encoding, while its length is not yet known.
            static SCRATCH: RefCell<(Vec<u8>, Vec<u8>)> = const { RefCell::new((Vec::new(), Vec::new())) };
        }
        let queued = SCRATCH.try_with(|scratch| {
            // Only a span closed while this thread is already pushing one
            // (from inside the lock, which nothing here does) finds it taken.
            let Ok(mut scratch) = scratch.try_borrow_mut() else { return false };
            let (body, entry) = &mut *scratch;
            entry.clear();
            otlp::span(record, end_unix_nanos, body, entry);
            let queued = self.append(entry);
            if body.capacity() > KEPT_BUFFER || entry.capacity() > KEPT_BUFFER {
                *body = Vec::new();
                *entry = Vec::new();
            }
            queued
        });
        if queued != Ok(true) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Appends one encoded span; false when the batch is at its bound.
    fn append(&self, entry: &[u8]) -> bool {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if queue.bytes.len() + entry.len() > CAPACITY {
            return false;
        }
        queue.bytes.extend_from_slice(entry);
        queue.spans += 1;
        let full = queue.spans == BATCH;
        drop(queue);
        if full {
            self.wake.notify_one();
        }
        true
    }

    /// Sends what is queued and stops the thread; waits at most for one
    /// export per batch queued, each bounded by the timeout.
    pub(crate) fn shutdown(&self) {
        {
            // Under the lock, so the thread cannot miss it between reading
            // the flag and waiting.
            let _queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            self.closing.store(true, Ordering::Release);
        }
        self.wake.notify_one();
        let thread = self.thread.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }

    /// How many spans were dropped because the queue was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn run(&self, config: &ExporterConfig, client: &reqwest::blocking::Client) {
        let envelope = Envelope::new(&config.service_name);
        let mut last_complaint: Option<Instant> = None;
        let mut failed = 0u64;
        let mut reported_dropped = 0u64;
        loop {
            let (batch, closing) = {
                let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
                if queue.spans < BATCH && !self.closing.load(Ordering::Acquire) {
                    queue = self.wake.wait_timeout(queue, config.interval).unwrap_or_else(PoisonError::into_inner).0;
                }
                let closing = self.closing.load(Ordering::Acquire);
                // The next batch is likely the size of this one; an
                // exceptional one is not kept as the norm.
                let expected = queue.bytes.len().min(1 << 20);
                (std::mem::replace(&mut *queue, Batch { bytes: Vec::with_capacity(expected), spans: 0 }), closing)
            };
            if batch.spans > 0 {
                // At shutdown a collector gets little time: the pod's grace
                // period is shared with the metrics' last push.
                let timeout = if closing { config.timeout.min(SHUTDOWN_TIMEOUT) } else { config.timeout };
                let sent = client
                    .post(&config.url)
                    .header(http::header::CONTENT_TYPE, "application/x-protobuf")
                    .timeout(timeout)
                    .body(envelope.wrap(&batch.bytes))
                    .send()
                    .and_then(reqwest::blocking::Response::error_for_status)
                    // Read to the end, so the connection is kept for the next batch.
                    .and_then(|mut answer| answer.copy_to(&mut std::io::sink()));
                if let Err(error) = sent {
                    if closing {
                        // Shutting down: one failed attempt is all a
                        // collector that does not answer gets.
                        eprintln!("switchyard: {} spans were not exported at shutdown: {error}", batch.spans);
                        return;
                    }
                    failed += batch.spans as u64;
                    if last_complaint.is_none_or(|at| at.elapsed() >= COMPLAINT_INTERVAL) {
                        last_complaint = Some(Instant::now());
                        // The URL is the operator's; the error names no span content.
                        tracing::warn!(
                            spans_lost = failed,
                            spans_dropped = self.dropped(),
                            "exporting spans failed: {error}"
                        );
                    }
                }
            }
            let dropped = self.dropped();
            if dropped > reported_dropped && last_complaint.is_none_or(|at| at.elapsed() >= COMPLAINT_INTERVAL) {
                last_complaint = Some(Instant::now());
                reported_dropped = dropped;
                tracing::warn!(spans_dropped = dropped, "spans are dropped: the collector does not keep up");
            }
            if closing && self.queue.lock().unwrap_or_else(PoisonError::into_inner).spans == 0 {
                return;
            }
        }
    }
}

/// Encoded spans, each a `ScopeSpans.spans` entry, and how many.
#[derive(Debug, Default)]
pub(crate) struct Batch {
    pub(crate) bytes: Vec<u8>,
    pub(crate) spans: usize,
}
