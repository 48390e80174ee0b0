//! The batch exporter: finished spans wait in a bounded queue; one thread
//! of its own takes them in batches and POSTs them to the collector's
//! `/v1/traces`, off every request's path.
//!
//! A request pays for one uncontended lock and a push. The thread wakes when
//! a batch is full or the interval has passed, whichever comes first. When
//! the collector is slow or absent the queue fills and further spans are
//! dropped and counted: telemetry never makes a request wait, and never
//! grows past its bound.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::FinishedSpan;
use super::otlp::Envelope;

/// Spans a request body carries at most; a full batch wakes the exporter.
const BATCH: usize = 1024;
/// Spans waiting at most; beyond this they are dropped (about 2 MiB of
/// records, with their attributes).
pub(super) const CAPACITY: usize = 8 * BATCH;
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
    queue: Mutex<Vec<FinishedSpan>>,
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
    pub(crate) fn start(config: ExporterConfig) -> Result<Arc<Self>, String> {
        let exporter = Arc::new(Self {
            queue: Mutex::new(Vec::with_capacity(BATCH)),
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
            queue: Mutex::new(Vec::new()),
            wake: Condvar::new(),
            closing: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
            thread: Mutex::new(None),
        })
    }

    /// What is queued, taken out (tests).
    #[cfg(test)]
    pub(crate) fn take(&self) -> Vec<FinishedSpan> {
        std::mem::take(&mut *self.queue.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Queues a finished span; drops it when the queue is full.
    pub(crate) fn push(&self, span: FinishedSpan) {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if queue.len() >= CAPACITY {
            drop(queue);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        queue.push(span);
        let full = queue.len() == BATCH;
        drop(queue);
        if full {
            self.wake.notify_one();
        }
    }

    /// Sends what is queued and stops the thread; waits at most for one
    /// export per batch queued, each bounded by the timeout.
    pub(crate) fn shutdown(&self) {
        self.closing.store(true, Ordering::Release);
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
        let mut scratch = Vec::new();
        let mut last_complaint: Option<Instant> = None;
        let mut failed = 0u64;
        loop {
            let closing = self.closing.load(Ordering::Acquire);
            let batch = {
                let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
                if queue.len() < BATCH && !closing {
                    queue = self.wake.wait_timeout(queue, config.interval).unwrap_or_else(PoisonError::into_inner).0;
                }
                std::mem::replace(&mut *queue, Vec::with_capacity(BATCH))
            };
            for (sent_before, chunk) in (0..).step_by(BATCH).zip(batch.chunks(BATCH)) {
                let body = envelope.encode(chunk, &mut scratch);
                let sent = client
                    .post(&config.url)
                    .header(http::header::CONTENT_TYPE, "application/x-protobuf")
                    .body(body)
                    .send()
                    .and_then(reqwest::blocking::Response::error_for_status);
                if let Err(error) = sent {
                    failed += chunk.len() as u64;
                    if closing {
                        // Shutting down: one failed attempt is all a
                        // collector that does not answer gets, not one
                        // timeout per batch still queued.
                        let lost = batch.len() - sent_before;
                        eprintln!("switchyard: {lost} spans were not exported at shutdown: {error}");
                        return;
                    }
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
            if closing && self.queue.lock().unwrap_or_else(PoisonError::into_inner).is_empty() {
                return;
            }
        }
    }
}
