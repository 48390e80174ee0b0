//! Spans recorded and exported by Switchyard itself: a `tracing` layer that
//! keeps, for each span it wants, a compact record in the span's extensions,
//! and a batch exporter that writes finished spans as OTLP/HTTP protobuf.
//!
//! Why not `tracing-opentelemetry` and the OpenTelemetry SDK's tracer: with
//! them, tracing every request cost more than half of a replica's throughput
//! (#18). Each span built an SDK span builder, then an SDK span, then
//! `SpanData` moved through a channel, then the exporter's own copy of every
//! attribute as protobuf structs before encoding. Here a span's attributes
//! are encoded as OTLP protobuf as they are recorded, into one buffer per
//! span; when the span closes, the thread that closed it encodes the rest
//! and appends the span to the batch under a lock held for the copy. Nothing
//! allocated for a span outlives it or crosses threads, and the exporter
//! thread only wraps the batch in its envelope and POSTs it.
//!
//! - **Sampling** is parent-based: a span inherits its parent's decision; a
//!   root span is sampled when its trace id falls under `sample_ratio`, the
//!   same rule as OpenTelemetry's `TraceIdRatioBased`. A span that is not
//!   sampled keeps its ids (they still go upstream in `traceparent`, flagged
//!   not sampled) and records nothing else, and no span is made inside it,
//!   unless clients are trusted to name traces (`follow_client_traces`),
//!   where a remote parent may still turn sampling on after the span is
//!   created.
//! - **Remote parents and links** ([`crate::context`]) change a span's
//!   record through [`with_record`] before anything inside it starts.
//! - **Span events** (a `tracing` event inside a span) are logs, not span
//!   events: they go to stderr with the span's ids (`log_format = "json"`).
//!   An error logged inside a span sets the span's status to error.
//! - **Special fields**, as `tracing-opentelemetry` reads them: `otel.name`
//!   (the span's name; else the `tracing` name), `otel.kind` (`server`,
//!   `client`, `producer`, `consumer`, `internal`), `otel.status_code`
//!   (`ERROR`, `OK`) and `otel.status_description`. Every other field is an
//!   attribute under its own name.

mod export;
mod otlp;

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::Registry;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

pub(crate) use export::{Exporter, ExporterConfig};

/// A trace's id and one span in it, as W3C trace context names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SpanContext {
    /// Never zero.
    pub(crate) trace_id: u128,
    /// Never zero.
    pub(crate) span_id: u64,
    pub(crate) sampled: bool,
    /// Vendor trace state, as received (already checked).
    pub(crate) trace_state: Option<Arc<str>>,
}

/// What a finished span is exported as; lives in the span's extensions
/// while the span is open.
#[derive(Debug)]
pub(crate) struct SpanRecord {
    pub(crate) context: SpanContext,
    /// Zero for a root span.
    pub(crate) parent_span_id: u64,
    /// Whether attributes are being recorded (sampled, or possibly so).
    recording: bool,
    start_unix_nanos: u64,
    /// The `tracing` name, the span's name unless `otel.name` gave one.
    default_name: &'static str,
    /// Whether `otel.name` was written into `encoded`.
    named: bool,
    /// The fields (by index in the span's field set, the first 64) that
    /// have a value in `encoded`: a field recorded for the first time after
    /// the start (declared `Empty`) need not be looked for.
    valued: u64,
    kind: Kind,
    status: Status,
    status_message: Option<String>,
    /// Fields of the OTLP `Span` as they were recorded, already encoded:
    /// the attributes, as `KeyValue`s, and the name from `otel.name`.
    /// (Protobuf takes the last of a repeated singular field, so a name
    /// recorded again later is simply appended.)
    encoded: Vec<u8>,
    links: Vec<SpanContext>,
}

impl SpanRecord {
    /// Makes `parent` (a remote span) this span's parent, taking its trace
    /// and its sampling decision.
    pub(crate) fn adopt(&mut self, parent: SpanContext) {
        self.parent_span_id = parent.span_id;
        self.context = SpanContext { span_id: self.context.span_id, ..parent };
    }

    /// Links this span to `other`, a span of another trace or elsewhere in this one.
    pub(crate) fn link(&mut self, other: SpanContext) {
        // A link carries no attributes here, so a repeated one adds nothing.
        if !self.links.contains(&other) {
            self.links.push(other);
        }
    }
}

/// OTLP `Span.SpanKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Kind {
    Internal = 1,
    Server = 2,
    Client = 3,
    Producer = 4,
    Consumer = 5,
}

/// OTLP `Status.StatusCode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Status {
    Unset = 0,
    Ok = 1,
    Error = 2,
}

/// An attribute's value, as OTLP's `AnyValue` carries it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum AttributeValue<'a> {
    Str(&'a str),
    Int(i64),
    Bool(bool),
    Double(f64),
}

/// Decides whether a new trace is recorded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sampler {
    /// A trace is sampled when bits 1 to 63 of its id's low 64 bits are
    /// below this (OpenTelemetry's `TraceIdRatioBased` rule).
    threshold: u64,
    always: bool,
}

impl Sampler {
    /// Samples the fraction `ratio` (0 to 1) of new traces.
    pub(crate) fn ratio(ratio: f64) -> Self {
        let ratio = ratio.clamp(0.0, 1.0);
        // `as` saturates: 1.0 gives 2^63, above every 63-bit value.
        Self { threshold: (ratio * (1u64 << 63) as f64) as u64, always: ratio >= 1.0 }
    }

    fn samples(self, trace_id: u128) -> bool {
        self.always || ((trace_id as u64) >> 1) < self.threshold
    }
}

/// The layer that records spans; see the module's documentation.
pub(crate) struct SpanLayer {
    sampler: Sampler,
    /// Record the attributes of spans not (yet) sampled: true when a remote
    /// parent may turn sampling on later (clients are followed).
    record_unsampled: bool,
    exporter: Arc<Exporter>,
}

impl SpanLayer {
    pub(crate) fn new(sampler: Sampler, record_unsampled: bool, exporter: Arc<Exporter>) -> Self {
        Self { sampler, record_unsampled, exporter }
    }
}

fn now_unix_nanos() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// A new span id: random, never zero.
pub(crate) fn new_span_id() -> u64 {
    loop {
        let id = rand::random::<u64>();
        if id != 0 {
            return id;
        }
    }
}

fn new_trace_id() -> u128 {
    loop {
        let id = rand::random::<u128>();
        if id != 0 {
            return id;
        }
    }
}

/// Whether a span is one we export: ours, at info and above. Others (a
/// dependency's) are never created at all.
fn exported(metadata: &Metadata<'_>) -> bool {
    let target = metadata.target();
    *metadata.level() <= Level::INFO
        && (target == "switchyard" || target.starts_with("switchyard::") || target.starts_with("switchyard_"))
}

impl<S> tracing_subscriber::Layer<S> for SpanLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    // The layer filters spans itself rather than through a per-layer
    // filter: a per-layer filter looks the span up in the registry at every
    // enter, exit, record and close (every poll of an instrumented future),
    // to ask whether it is enabled for that layer. Events pass here: the
    // log's layer decides which events exist for both (`LogLines`), and lets
    // errors through for this one while spans are recorded.
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        match (metadata.is_span(), exported(metadata)) {
            (false, _) => Interest::always(),
            (true, false) => Interest::never(),
            // Whether one of our spans is made depends on its parent: asked
            // in `enabled` each time, unless every span records.
            (true, true) if self.record_unsampled => Interest::always(),
            (true, true) => Interest::sometimes(),
        }
    }

    /// A span inside a trace that is not sampled is not made at all: it
    /// would never be exported, and the trace's ids (which still go
    /// upstream, flagged not sampled) are carried by the span around it.
    /// Only the root of such a trace is made, so a request sampled out costs
    /// one span instead of one for each of its layers. (When clients are
    /// trusted to name traces, a remote parent may turn sampling on for a
    /// child after its parent was made, so every span is made.)
    fn enabled(&self, metadata: &Metadata<'_>, ctx: Context<'_, S>) -> bool {
        if !metadata.is_span() {
            return true;
        }
        exported(metadata)
            && (self.record_unsampled
                || ctx
                    .lookup_current()
                    .is_none_or(|parent| parent.extensions().get::<SpanRecord>().is_none_or(|record| record.recording)))
    }

    // No `max_level_hint`: a hint caps every callsite in the process, logs
    // included, and the log filter may ask for debug events.

    /// An error logged inside a span marks the span as failed, as
    /// `tracing-opentelemetry` did; the event itself goes to the log only.
    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if *event.metadata().level() != Level::ERROR {
            return;
        }
        let Some(span) = ctx.event_span(event) else { return };
        if let Some(record) = span.extensions_mut().get_mut::<SpanRecord>()
            && record.status == Status::Unset
        {
            record.status = Status::Error;
        }
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let parent = match attrs.parent() {
            Some(parent) => ctx.span(parent),
            None if attrs.is_contextual() => ctx.lookup_current(),
            None => None,
        };
        let parent = parent.and_then(|p| p.extensions().get::<SpanRecord>().map(|r| r.context.clone()));
        let (context, parent_span_id) = match parent {
            Some(parent) => (SpanContext { span_id: new_span_id(), ..parent.clone() }, parent.span_id),
            None => {
                let trace_id = new_trace_id();
                let sampled = self.sampler.samples(trace_id);
                (SpanContext { trace_id, span_id: new_span_id(), sampled, trace_state: None }, 0)
            }
        };
        let recording = context.sampled || self.record_unsampled;
        let mut record = SpanRecord {
            context,
            parent_span_id,
            recording,
            // A span that records nothing is never exported: no clock read.
            start_unix_nanos: if recording { now_unix_nanos() } else { 0 },
            default_name: attrs.metadata().name(),
            named: false,
            valued: 0,
            kind: Kind::Internal,
            status: Status::Unset,
            status_message: None,
            encoded: Vec::new(),
            links: Vec::new(),
        };
        if recording {
            // About what our spans' attributes take, encoded.
            record.encoded.reserve(attrs.fields().len() * 32);
            attrs.record(&mut Recorder { record: &mut record, replacing: false });
        }
        span.extensions_mut().insert(record);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(record) = extensions.get_mut::<SpanRecord>()
            && record.recording
        {
            values.record(&mut Recorder { record, replacing: true });
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(record) = span.extensions_mut().remove::<SpanRecord>() else { return };
        if record.context.sampled {
            self.exporter.push(&record, now_unix_nanos());
        }
    }
}

/// Writes a span's fields into its record.
struct Recorder<'a> {
    record: &'a mut SpanRecord,
    /// A field recorded after the span's start may have been recorded
    /// before; its new value replaces the old. (At the start each field of
    /// the span comes once.)
    replacing: bool,
}

/// The most a thread keeps of a buffer it reuses between spans.
pub(crate) const KEPT_BUFFER: usize = 64 << 10;

thread_local! {
    /// Where a `Debug` value is formatted before it is encoded.
    static FORMATTED: RefCell<String> = const { RefCell::new(String::new()) };
}

impl Recorder<'_> {
    fn set(&mut self, field: &Field, value: AttributeValue<'_>) {
        let record = &mut *self.record;
        let bit = 1u64.checked_shl(field.index() as u32).unwrap_or(0);
        if self.replacing && (bit == 0 || record.valued & bit != 0) {
            otlp::remove_attribute(&mut record.encoded, field.name());
        }
        record.valued |= bit;
        otlp::attribute(&mut record.encoded, field.name(), value);
    }

    /// Handles the `otel.*` fields; false for any other field.
    fn special(&mut self, field: &Field, value: &str) -> bool {
        let name = field.name();
        if !name.starts_with("otel.") {
            return false;
        }
        let record = &mut *self.record;
        match name {
            "otel.name" => {
                otlp::name_of_parts(&mut record.encoded, &[value]);
                record.named = true;
            }
            "otel.kind" => {
                record.kind = match value {
                    "server" => Kind::Server,
                    "client" => Kind::Client,
                    "producer" => Kind::Producer,
                    "consumer" => Kind::Consumer,
                    _ => Kind::Internal,
                }
            }
            "otel.status_code" => {
                record.status = match value {
                    "ERROR" | "Error" | "error" => Status::Error,
                    "OK" | "Ok" | "ok" => Status::Ok,
                    _ => Status::Unset,
                }
            }
            "otel.status_description" | "otel.status_message" => record.status_message = Some(value.to_owned()),
            _ => return false,
        }
        true
    }

    fn text(&mut self, field: &Field, value: &str) {
        if !self.special(field, value) {
            self.set(field, AttributeValue::Str(value));
        }
    }
}

impl Visit for Recorder<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.text(field, value);
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        // Formatted into a buffer the thread keeps; a `Debug` that records a
        // span field of its own while formatting gets a fresh one.
        let reused = FORMATTED.try_with(|buffer| {
            let Ok(mut buffer) = buffer.try_borrow_mut() else { return false };
            buffer.clear();
            let _ = write!(buffer, "{value:?}");
            self.text(field, &buffer);
            // A client can make one value large (a long request id); the
            // thread does not keep that much for good.
            if buffer.capacity() > KEPT_BUFFER {
                *buffer = String::new();
            }
            true
        });
        if reused != Ok(true) {
            self.text(field, &format!("{value:?}"));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.set(field, AttributeValue::Int(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        // OTLP integers are signed; a larger value keeps its digits as text.
        match i64::try_from(value) {
            Ok(value) => self.set(field, AttributeValue::Int(value)),
            Err(_) => self.text(field, &value.to_string()),
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.set(field, AttributeValue::Bool(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.set(field, AttributeValue::Double(value));
    }
}

/// Span attributes whose values are known before the span starts (a
/// route, a protocol version): encoded once, then copied into each span
/// that has them in one piece, rather than recorded field by field through
/// the subscriber at every request.
#[derive(Debug, Clone)]
pub struct FixedAttributes(Arc<[u8]>);

impl FixedAttributes {
    /// The attributes `key` = `value` (string values).
    pub fn new<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut encoded = Vec::new();
        for (key, value) in pairs {
            otlp::attribute(&mut encoded, key, AttributeValue::Str(value));
        }
        Self(encoded.into())
    }

    /// Gives `span` these attributes, and names it `name`'s parts joined
    /// when there are any: the name written straight into the span's
    /// fields, where `otel.name` would be formatted, then copied. Nothing
    /// when tracing is off or the span is not recorded. (Its own fields
    /// must not repeat these keys.)
    pub fn add_named(&self, span: &tracing::Span, name: &[&str]) {
        with_record(span, |record| {
            if record.recording {
                record.encoded.extend_from_slice(&self.0);
                if !name.is_empty() {
                    otlp::name_of_parts(&mut record.encoded, name);
                    record.named = true;
                }
            }
        });
    }
}

/// Writes values known only as a span ends (a response's status) straight
/// into its record: one trip to the record for them all, where each
/// `Span::record` is a trip through the whole subscriber. Nothing when
/// tracing is off or the span records nothing. Each key at most once a
/// span, and never one of the span's own fields.
pub fn annotate(span: &tracing::Span, write: impl FnOnce(&mut Annotations<'_>)) {
    with_record(span, |record| {
        if record.recording {
            write(&mut Annotations(record));
        }
    });
}

/// What [`annotate`] may write.
pub struct Annotations<'a>(&'a mut SpanRecord);

impl Annotations<'_> {
    /// The attribute `key` = `value`.
    pub fn int(&mut self, key: &str, value: i64) {
        otlp::attribute(&mut self.0.encoded, key, AttributeValue::Int(value));
    }

    /// Marks the span failed (status error).
    pub fn failed(&mut self) {
        self.0.status = Status::Error;
    }
}

/// Runs `change` on the record of `span`, if it has one (tracing is on and
/// the span is one we export).
pub(crate) fn with_record<T>(span: &tracing::Span, change: impl FnOnce(&mut SpanRecord) -> T) -> Option<T> {
    span.with_subscriber(|(id, dispatch)| {
        // The registry under every layer holds the extensions.
        let span = dispatch.downcast_ref::<Registry>()?.span(id)?;
        let mut extensions = span.extensions_mut();
        extensions.get_mut::<SpanRecord>().map(change)
    })
    .flatten()
}

#[cfg(test)]
pub(crate) mod tests;
