//! Metrics pushed over OTLP from the one reader `/metrics` renders too.
//!
//! The SDK's `PeriodicReader` would be a second reader, and every reader is
//! a pipeline of its own: each measurement (several a request) was then
//! aggregated twice, once for Prometheus and once for OTLP. Here a thread
//! collects the shared reader's cumulative sums every interval and hands
//! them to the OTLP exporter; a measurement is aggregated once.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter as _;
use opentelemetry_sdk::metrics::reader::MetricReader as _;

use crate::prometheus::SharedReader;

/// The pushing thread; [`MetricsPush::shutdown`] pushes once more and stops it.
#[derive(Debug)]
pub(crate) struct MetricsPush {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<()>,
}

impl MetricsPush {
    /// Pushes what `reader` collects through `exporter` every `interval`.
    ///
    /// # Errors
    /// When the thread cannot be started.
    pub(crate) fn spawn(
        reader: SharedReader,
        exporter: opentelemetry_otlp::MetricExporter,
        interval: Duration,
    ) -> Result<Self, String> {
        let (stop, stopped) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("switchyard-metrics".into())
            .spawn(move || {
                loop {
                    let last = match stopped.recv_timeout(interval) {
                        Err(RecvTimeoutError::Timeout) => false,
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
                    };
                    let mut collected = ResourceMetrics::default();
                    let pushed = reader
                        .collect(&mut collected)
                        .and_then(|()| futures::executor::block_on(exporter.export(&collected)));
                    if let Err(error) = pushed {
                        if last {
                            eprintln!("switchyard: flushing metrics: {error}");
                        } else {
                            tracing::warn!("pushing metrics over OTLP: {error}");
                        }
                    }
                    if last {
                        let _ = exporter.shutdown();
                        return;
                    }
                }
            })
            .map_err(|e| format!("the metrics thread: {e}"))?;
        Ok(Self { stop, thread })
    }

    /// Pushes once more, then stops (bounded by the exporter's timeout).
    pub(crate) fn shutdown(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}
