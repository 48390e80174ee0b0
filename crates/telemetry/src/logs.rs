//! Log lines on stderr, in one of two shapes: text for a person at a
//! terminal (coloured only there, or when asked), or one JSON object a line
//! for the aggregators operators ship pod logs to, carrying the trace and
//! span ids when the event happened inside a traced request.

use std::fmt;
use std::io::{IsTerminal as _, Write as _};
use std::sync::OnceLock;

use serde_json::{Map, Value};
use tracing::dispatcher::WeakDispatch;
use tracing::field::{Field, Visit};
use tracing::{Dispatch, Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime as _, SystemTime};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// How log lines are written (`log_format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// `2026-12-03T10:00:00.000000Z  INFO target: message key=value`,
    /// coloured when stderr is a terminal and `NO_COLOR` is not set, or when
    /// `FORCE_COLOR` or `CLICOLOR_FORCE` asks for it.
    #[default]
    Text,
    /// One JSON object a line: `timestamp`, `level`, `target`, `message`,
    /// the event's other `fields`, and `trace_id`/`span_id` inside a traced
    /// request.
    Json,
}

/// The logging layer for `format`, writing to stderr.
pub(crate) fn layer<S>(format: LogFormat) -> Box<dyn Layer<S> + Send + Sync>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    match format {
        LogFormat::Text => {
            let coloured = colour(std::io::stderr().is_terminal(), |name| std::env::var(name).ok());
            Box::new(tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_ansi(coloured))
        }
        LogFormat::Json => Box::new(JsonLines::new(std::io::stderr)),
    }
}

/// Whether text lines are coloured: on a terminal unless `NO_COLOR` says
/// otherwise, anywhere when `FORCE_COLOR` or `CLICOLOR_FORCE` asks
/// (<https://no-color.org>, <https://bixense.com/clicolors/>).
fn colour(terminal: bool, var: impl Fn(&str) -> Option<String>) -> bool {
    let set = |name: &str| var(name).is_some_and(|value| !value.is_empty() && value != "0");
    if set("FORCE_COLOR") || set("CLICOLOR_FORCE") {
        return true;
    }
    terminal && var("NO_COLOR").is_none_or(|value| value.is_empty())
}

/// Writes each event as one JSON object on a line. A layer of its own
/// rather than a format of `fmt`'s: it must find the OpenTelemetry context
/// of the span the event happened in, which takes the dispatcher the layer
/// is registered with (inside an event's dispatch, the default one cannot be
/// asked again).
struct JsonLines<W> {
    writer: W,
    dispatch: OnceLock<WeakDispatch>,
}

impl<W> JsonLines<W> {
    fn new(writer: W) -> Self {
        Self { writer, dispatch: OnceLock::new() }
    }

    /// The trace and span ids of the span `id`, when it is traced (with no
    /// OTLP endpoint no span is recorded, and this is `None`). A span's
    /// remote parent is set before anything inside it logs, as our spans do.
    fn trace_of(&self, id: &tracing::span::Id) -> Option<(String, String)> {
        let dispatch = self.dispatch.get()?.upgrade()?;
        crate::spans::record_of(&dispatch, id, |record| {
            (format!("{:032x}", record.context.trace_id), format!("{:016x}", record.context.span_id))
        })
    }
}

impl<S, W> Layer<S> for JsonLines<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    fn on_register_dispatch(&self, dispatch: &Dispatch) {
        let _ = self.dispatch.set(dispatch.downgrade());
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut line = Map::new();
        let mut timestamp = String::new();
        let _ = SystemTime.format_time(&mut Writer::new(&mut timestamp));
        line.insert("timestamp".into(), timestamp.into());
        line.insert("level".into(), event.metadata().level().as_str().into());
        line.insert("target".into(), event.metadata().target().into());
        let mut fields = Fields(Map::new());
        event.record(&mut fields);
        if let Some(message) = fields.0.remove("message") {
            line.insert("message".into(), message);
        }
        if !fields.0.is_empty() {
            line.insert("fields".into(), Value::Object(fields.0));
        }
        if let Some((trace_id, span_id)) = ctx.current_span().id().and_then(|id| self.trace_of(id)) {
            line.insert("trace_id".into(), trace_id.into());
            line.insert("span_id".into(), span_id.into());
        }
        let mut text = Value::Object(line).to_string();
        text.push('\n');
        // One write a line, so lines from several threads do not interleave.
        let _ = self.writer.make_writer().write_all(text.as_bytes());
    }
}

/// An event's fields as JSON values.
struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0.insert(field.name().into(), value.to_string().into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().into(), format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    #[test]
    fn colour_only_on_a_terminal_or_when_asked() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| (*v).to_owned())
        };
        assert!(colour(true, env(&[])));
        assert!(!colour(false, env(&[])), "a file or a pipe gets no escape codes");
        assert!(!colour(true, env(&[("NO_COLOR", "1")])));
        assert!(colour(true, env(&[("NO_COLOR", "")])), "an empty NO_COLOR is not set");
        assert!(colour(false, env(&[("FORCE_COLOR", "1")])));
        assert!(colour(false, env(&[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")])));
        assert!(!colour(false, env(&[("FORCE_COLOR", "0")])));
    }

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn json_lines_carry_fields_and_the_trace_of_a_traced_span() {
        let captured = Captured::default();
        let writer = captured.clone();
        let spans = crate::spans::Exporter::unstarted();
        let subscriber = tracing_subscriber::registry()
            // As `init` filters the log: events only.
            .with(
                JsonLines::new(move || writer.clone())
                    .with_filter(tracing_subscriber::filter::filter_fn(|m| !m.is_span())),
            )
            .with(crate::spans::SpanLayer::new(crate::spans::Sampler::ratio(1.0), false, spans));
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(missed = 3_u64, cause = "trimmed", "events were lost");
            tracing::info_span!("request").in_scope(|| tracing::info!("inside"));
        });
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<Value> = text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0]["level"], "WARN");
        assert_eq!(lines[0]["message"], "events were lost");
        assert_eq!(lines[0]["fields"], serde_json::json!({"missed": 3, "cause": "trimmed"}));
        assert!(lines[0].get("trace_id").is_none(), "outside a span there is no trace");
        assert!(lines[0]["timestamp"].as_str().unwrap().ends_with('Z'));
        let trace_id = lines[1]["trace_id"].as_str().unwrap();
        assert_eq!(trace_id.len(), 32, "{text}");
        assert_ne!(trace_id, "0".repeat(32));
        assert!(!text.contains('\u{1b}'), "no escape codes in JSON lines");
    }

    /// The span layer filters spans only: a log at `debug` still gets its
    /// debug events when spans are exported (no level cap from the layer).
    #[test]
    fn exporting_spans_keeps_debug_logs() {
        let captured = Captured::default();
        let writer = captured.clone();
        let spans = crate::spans::Exporter::unstarted();
        let subscriber = tracing_subscriber::registry()
            .with(JsonLines::new(move || writer.clone()).with_filter(tracing_subscriber::filter::FilterExt::and(
                tracing_subscriber::EnvFilter::new("debug"),
                tracing_subscriber::filter::filter_fn(|m| !m.is_span()),
            )))
            .with(crate::spans::SpanLayer::new(crate::spans::Sampler::ratio(1.0), false, spans));
        assert!(
            tracing::Subscriber::max_level_hint(&subscriber)
                .is_none_or(|max| max >= tracing::level_filters::LevelFilter::DEBUG),
            "the subscriber caps levels below debug"
        );
        tracing::subscriber::with_default(subscriber, || tracing::debug!("a detail"));
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(text.contains("a detail"), "{text:?}");
    }
}
