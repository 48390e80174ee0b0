//! Log lines on stderr, in one of two shapes: text for a person at a
//! terminal (coloured only there, or when asked), or one JSON object a line
//! for the aggregators operators ship pod logs to, carrying the trace and
//! span ids when the event happened inside a traced request.

use std::fmt::{self, Write as _};
use std::io::{IsTerminal as _, Write as _};

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime as _, SystemTime};
use tracing_subscriber::layer::{Context, Filter};
use tracing_subscriber::registry::{LookupSpan, SpanRef};

use crate::spans::SpanRecord;

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

/// The logging layer for `format`, writing to stderr the events `filter`
/// lets through. `spans_recorded`: another layer records spans (an OTLP
/// endpoint is configured), so this one must let them be created.
pub(crate) fn layer(format: LogFormat, filter: EnvFilter, spans_recorded: bool) -> LogLines<fn() -> std::io::Stderr> {
    let shape = match format {
        LogFormat::Text => {
            Shape::Text { coloured: colour(std::io::stderr().is_terminal(), |name| std::env::var(name).ok()) }
        }
        LogFormat::Json => Shape::Json,
    };
    LogLines { writer: std::io::stderr, shape, filter, spans_recorded }
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

#[derive(Debug, Clone, Copy)]
enum Shape {
    Text { coloured: bool },
    Json,
}

/// Writes each event the filter passes as one line, and takes no part in
/// spans. A layer of our own, filtering itself, rather than `fmt`'s layer
/// under a per-layer filter: a per-layer filter looks every span up in the
/// registry at each enter, exit, record and close, to learn that the log
/// does not want it: 3,880 of the 22,346 instructions tracing added to a
/// traced `tools/call` (#18), for nothing.
pub(crate) struct LogLines<W> {
    writer: W,
    shape: Shape,
    /// Decides which events are written, as an `EnvFilter` directive says.
    filter: EnvFilter,
    spans_recorded: bool,
}

impl<S, W> Layer<S> for LogLines<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    // The log says yes to every span when spans are recorded (the span
    // layer decides which), and no to all of them otherwise, so that
    // without a collector no span is ever created. With spans recorded, an
    // error passes whatever the log's filter says: it marks its span failed
    // (`on_event` then writes it only if the filter wants it).
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        match metadata.is_span() {
            true if self.spans_recorded => Interest::always(),
            true => Interest::never(),
            false if self.error_for_spans(metadata) => Interest::always(),
            false => Filter::<S>::callsite_enabled(&self.filter, metadata),
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>, ctx: Context<'_, S>) -> bool {
        match metadata.is_span() {
            true => self.spans_recorded,
            false => self.error_for_spans(metadata) || Filter::<S>::enabled(&self.filter, metadata, &ctx),
        }
    }

    // A level hint caps every callsite, spans included: given only when no
    // span is wanted.
    fn max_level_hint(&self) -> Option<LevelFilter> {
        if self.spans_recorded { None } else { Filter::<S>::max_level_hint(&self.filter) }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if self.error_for_spans(event.metadata()) && !Filter::<S>::enabled(&self.filter, event.metadata(), &ctx) {
            return;
        }
        let mut text = match self.shape {
            Shape::Text { coloured } => text_line(event, coloured),
            Shape::Json => json_line(event, ctx.lookup_current().and_then(|span| trace_of(&span))),
        };
        text.push('\n');
        // One write a line, so lines from several threads do not interleave.
        let _ = self.writer.make_writer().write_all(text.as_bytes());
    }
}

impl<W> LogLines<W> {
    /// An error while spans are recorded: let through for the span layer.
    fn error_for_spans(&self, metadata: &Metadata<'_>) -> bool {
        self.spans_recorded && *metadata.level() == Level::ERROR
    }
}

/// The trace and span ids of `span`, when it is traced (with no OTLP
/// endpoint no span is recorded, and this is `None`). A span's remote parent
/// is set before anything inside it logs, as our spans do.
fn trace_of<S>(span: &SpanRef<'_, S>) -> Option<(String, String)>
where
    S: for<'a> LookupSpan<'a>,
{
    let extensions = span.extensions();
    let record = extensions.get::<SpanRecord>()?;
    Some((format!("{:032x}", record.context.trace_id), format!("{:016x}", record.context.span_id)))
}

/// Now, as both shapes write it (RFC 3339, microseconds, UTC).
fn timestamp() -> String {
    let mut timestamp = String::new();
    let _ = SystemTime.format_time(&mut Writer::new(&mut timestamp));
    timestamp
}

/// `timestamp  LEVEL target: message key=value`, as `tracing`'s own text
/// format writes it.
fn text_line(event: &Event<'_>, coloured: bool) -> String {
    let paint = |line: &mut String, code: &str, text: &dyn fmt::Display| {
        let _ = if coloured { write!(line, "\x1b[{code}m{text}\x1b[0m") } else { write!(line, "{text}") };
    };
    let mut line = String::with_capacity(128);
    paint(&mut line, "2", &timestamp());
    line.push(' ');
    let metadata = event.metadata();
    let level = *metadata.level();
    let code = match level {
        Level::TRACE => "35",
        Level::DEBUG => "34",
        Level::INFO => "32",
        Level::WARN => "33",
        Level::ERROR => "31",
    };
    paint(&mut line, code, &format_args!("{:>5}", level.as_str()));
    line.push(' ');
    paint(&mut line, "2", &format_args!("{}:", metadata.target()));
    event.record(&mut TextFields { line: &mut line, coloured });
    line
}

/// Appends an event's fields: the message as it is, the others `key=value`.
struct TextFields<'a> {
    line: &'a mut String,
    coloured: bool,
}

impl TextFields<'_> {
    fn write(&mut self, field: &Field, value: &dyn fmt::Display) {
        let _ = match (field.name(), self.coloured) {
            ("message", _) => write!(self.line, " "),
            (name, true) => write!(self.line, " \x1b[3m{name}\x1b[0m\x1b[2m=\x1b[0m"),
            (name, false) => write!(self.line, " {name}="),
        };
        let start = self.line.len();
        let _ = write!(self.line, "{value}");
        escape_controls(self.line, start);
    }
}

/// Escapes the control characters of `line` from `from` on (`\u{1b}`): a
/// value can come from a client or an upstream (an error's text), and must
/// neither drive the terminal the log is read on nor start a line of its own.
fn escape_controls(line: &mut String, from: usize) {
    if !line[from..].chars().any(char::is_control) {
        return;
    }
    let written = line.split_off(from);
    for c in written.chars() {
        if c.is_control() {
            let _ = write!(line, "\\u{{{:x}}}", u32::from(c));
        } else {
            line.push(c);
        }
    }
}

impl Visit for TextFields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.write(field, &value),
            _ => self.write(field, &format_args!("{value:?}")),
        }
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.write(field, &value);
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.write(field, &format_args!("{value:?}"));
    }
}

/// One JSON object: see [`LogFormat::Json`].
fn json_line(event: &Event<'_>, trace: Option<(String, String)>) -> String {
    let mut line = Map::new();
    line.insert("timestamp".into(), timestamp().into());
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
    if let Some((trace_id, span_id)) = trace {
        line.insert("trace_id".into(), trace_id.into());
        line.insert("span_id".into(), span_id.into());
    }
    Value::Object(line).to_string()
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

    fn lines(format: LogFormat, filter: &str, spans: bool) -> (LogLines<impl for<'w> MakeWriter<'w>>, Captured) {
        let captured = Captured::default();
        let writer = captured.clone();
        let shape = match format {
            LogFormat::Text => Shape::Text { coloured: false },
            LogFormat::Json => Shape::Json,
        };
        (
            LogLines { writer: move || writer.clone(), shape, filter: EnvFilter::new(filter), spans_recorded: spans },
            captured,
        )
    }

    impl Captured {
        fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    /// A subscriber with `log` and a span layer that records every span.
    fn with_spans(log: LogLines<impl for<'w> MakeWriter<'w> + Send + Sync + 'static>) -> impl Subscriber {
        let spans = crate::spans::Exporter::unstarted();
        tracing_subscriber::registry().with(log).with(crate::spans::SpanLayer::new(
            crate::spans::Sampler::ratio(1.0),
            false,
            spans,
        ))
    }

    #[test]
    fn json_lines_carry_fields_and_the_trace_of_a_traced_span() {
        let (log, captured) = lines(LogFormat::Json, "info", true);
        let subscriber = with_spans(log);
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(missed = 3_u64, cause = "trimmed", "events were lost");
            tracing::info_span!("request").in_scope(|| tracing::info!("inside"));
            tracing::debug!("below the filter");
        });
        let text = captured.text();
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

    #[test]
    fn text_lines_read_as_tracing_writes_them() {
        let (log, captured) = lines(LogFormat::Text, "info", false);
        let subscriber = tracing_subscriber::registry().with(log);
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(missed = 3_u64, cause = "trimmed", "events were lost");
            tracing::info_span!("request").in_scope(|| tracing::info!(target: "switchyard::x", "inside"));
            tracing::debug!("below the filter");
        });
        let text = captured.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        let (timestamp, rest) = lines[0].split_once(' ').unwrap();
        assert!(timestamp.ends_with('Z'), "{text}");
        assert!(
            rest.ends_with(" WARN switchyard_telemetry::logs::tests: events were lost missed=3 cause=\"trimmed\""),
            "{text}"
        );
        assert!(lines[1].ends_with("  INFO switchyard::x: inside"), "a span is not part of a line: {text}");
        let (log, captured) = super::tests::lines(LogFormat::Text, "info", false);
        tracing::subscriber::with_default(tracing_subscriber::registry().with(log), || {
            let hostile = "\x1b[2Jgone\nFAKE  ERROR line\u{9b}";
            tracing::warn!(error = hostile, "upstream said {hostile}");
        });
        let text = captured.text();
        assert_eq!(text.lines().count(), 1, "{text:?}");
        assert!(!text.contains(['\u{1b}', '\u{9b}']), "{text:?}");
        assert!(text.contains("upstream said \\u{1b}[2Jgone\\u{a}FAKE  ERROR line\\u{9b} error="), "{text:?}");
        assert!(!text.contains('\u{1b}'), "no escape codes unless coloured");
    }

    /// Without a span exporter no span is created at all; with one, the log
    /// still takes events only.
    #[test]
    fn the_log_creates_no_span_of_its_own() {
        let (log, _) = lines(LogFormat::Text, "trace", false);
        tracing::subscriber::with_default(tracing_subscriber::registry().with(log), || {
            assert!(tracing::info_span!("request").is_disabled());
        });
        let (log, _) = lines(LogFormat::Text, "trace", true);
        tracing::subscriber::with_default(tracing_subscriber::registry().with(log), || {
            assert!(!tracing::info_span!("request").is_disabled(), "the span layer decides");
        });
    }

    /// A log filter that leaves errors out still lets them mark their span
    /// failed, and does not write them.
    #[test]
    fn an_error_the_log_filters_out_still_fails_its_span() {
        let (log, captured) = lines(LogFormat::Json, "off", true);
        let spans = crate::spans::Exporter::unstarted();
        let layer = crate::spans::SpanLayer::new(crate::spans::Sampler::ratio(1.0), false, Arc::clone(&spans));
        let subscriber = tracing_subscriber::registry().with(log).with(layer);
        tracing::subscriber::with_default(subscriber, || {
            tracing::info_span!(target: "switchyard", "failing").in_scope(|| tracing::error!("the plugin failed"));
        });
        assert_eq!(captured.text(), "", "the log is off");
        let (request, _) = crate::spans::tests::exported(&spans);
        let span = &request.resource_spans[0].scope_spans[0].spans[0];
        assert_eq!(span.status.as_ref().map(|s| s.code), Some(2), "{span:#?}");
    }

    /// The span layer filters spans only, and the log's filter events only:
    /// a log at `debug` gets its debug events when spans are exported, and
    /// a log at `warn` does not turn spans off.
    #[test]
    fn exporting_spans_keeps_debug_logs() {
        let (log, captured) = lines(LogFormat::Json, "debug", true);
        let subscriber = with_spans(log);
        assert!(
            tracing::Subscriber::max_level_hint(&subscriber)
                .is_none_or(|max| max >= tracing::level_filters::LevelFilter::DEBUG),
            "the subscriber caps levels below debug"
        );
        tracing::subscriber::with_default(subscriber, || tracing::debug!("a detail"));
        assert!(captured.text().contains("a detail"), "{:?}", captured.text());

        let (log, _) = lines(LogFormat::Json, "warn", true);
        let subscriber = with_spans(log);
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(target: "switchyard", "request");
            assert!(!span.is_disabled(), "a log at warn turned an info span off");
        });
    }
}
