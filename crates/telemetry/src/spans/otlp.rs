//! Finished spans as an OTLP `ExportTraceServiceRequest`, protobuf, written
//! straight from our records: one resource, one scope, the spans.
//!
//! Field numbers are those of `opentelemetry/proto/trace/v1/trace.proto`
//! and `common/v1/common.proto`; the tests decode what this writes with the
//! official generated messages.

use super::{AttributeValue, FinishedSpan, SpanContext};

const LEN: u8 = 2;
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const FIXED32: u8 = 5;

/// W3C trace flags: sampled.
const SAMPLED: u32 = 1;
/// `SpanFlags`: the two bits that say whether the parent or link is remote are known.
const CONTEXT_HAS_IS_REMOTE: u32 = 0x100;

/// The parts of a request that are the same in every export: the resource
/// and the instrumentation scope, encoded once.
#[derive(Debug)]
pub(crate) struct Envelope {
    /// `Resource`, encoded.
    resource: Vec<u8>,
    /// `InstrumentationScope`, encoded.
    scope: Vec<u8>,
}

impl Envelope {
    pub(crate) fn new(service_name: &str) -> Self {
        let mut resource = Vec::new();
        for (key, value) in [
            ("service.name", service_name),
            ("telemetry.sdk.language", "rust"),
            ("telemetry.sdk.name", "switchyard"),
            ("telemetry.sdk.version", env!("CARGO_PKG_VERSION")),
        ] {
            key_value(&mut resource, 1, key, &AttributeValue::Str(value.to_owned()));
        }
        let mut scope = Vec::new();
        string(&mut scope, 1, "switchyard");
        string(&mut scope, 2, env!("CARGO_PKG_VERSION"));
        Self { resource, scope }
    }

    /// The request body for `spans`. `scratch` is reused between calls.
    pub(crate) fn encode(&self, spans: &[FinishedSpan], scratch: &mut Vec<u8>) -> Vec<u8> {
        // ScopeSpans { scope = 1, spans = 2 }
        let mut scope_spans = Vec::with_capacity(spans.len() * 256);
        message(&mut scope_spans, 1, &self.scope);
        for span in spans {
            scratch.clear();
            encode_span(span, scratch);
            message(&mut scope_spans, 2, scratch);
        }
        // ResourceSpans { resource = 1, scope_spans = 2 }
        let mut resource_spans = Vec::with_capacity(scope_spans.len() + self.resource.len() + 16);
        message(&mut resource_spans, 1, &self.resource);
        message(&mut resource_spans, 2, &scope_spans);
        // ExportTraceServiceRequest { resource_spans = 1 }
        let mut request = Vec::with_capacity(resource_spans.len() + 8);
        message(&mut request, 1, &resource_spans);
        request
    }
}

fn encode_span(span: &FinishedSpan, out: &mut Vec<u8>) {
    let record = &span.record;
    let context = &record.context;
    bytes(out, 1, &context.trace_id.to_be_bytes());
    bytes(out, 2, &context.span_id.to_be_bytes());
    if let Some(state) = &context.trace_state {
        string(out, 3, state);
    }
    if record.parent_span_id != 0 {
        bytes(out, 4, &record.parent_span_id.to_be_bytes());
    }
    string(out, 5, &record.name);
    tag(out, 6, VARINT);
    varint(out, record.kind as u64);
    tag(out, 7, FIXED64);
    out.extend_from_slice(&record.start_unix_nanos.to_le_bytes());
    tag(out, 8, FIXED64);
    out.extend_from_slice(&span.end_unix_nanos.max(record.start_unix_nanos).to_le_bytes());
    for (key, value) in &record.attributes {
        key_value(out, 9, key, value);
    }
    for link in &record.links {
        encode_link(out, link);
    }
    if record.status as u8 != 0 || record.status_message.is_some() {
        // Status { message = 2, code = 3 }
        let message_text = record.status_message.as_deref().unwrap_or_default();
        let length =
            if message_text.is_empty() { 0 } else { 1 + varint_len(message_text.len() as u64) + message_text.len() }
                + 1
                + varint_len(record.status as u64);
        tag(out, 15, LEN);
        varint(out, length as u64);
        if !message_text.is_empty() {
            string(out, 2, message_text);
        }
        tag(out, 3, VARINT);
        varint(out, record.status as u64);
    }
    tag(out, 16, FIXED32);
    out.extend_from_slice(&(u32::from(context.sampled) * SAMPLED | CONTEXT_HAS_IS_REMOTE).to_le_bytes());
}

/// Link { trace_id = 1, span_id = 2, trace_state = 3, flags = 6 }
fn encode_link(out: &mut Vec<u8>, link: &SpanContext) {
    let state = link.trace_state.as_deref().unwrap_or_default();
    let state_len = if state.is_empty() { 0 } else { 1 + varint_len(state.len() as u64) + state.len() };
    let length = (2 + 16) + (2 + 8) + state_len + (1 + 4);
    tag(out, 13, LEN);
    varint(out, length as u64);
    bytes(out, 1, &link.trace_id.to_be_bytes());
    bytes(out, 2, &link.span_id.to_be_bytes());
    if !state.is_empty() {
        string(out, 3, state);
    }
    tag(out, 6, FIXED32);
    out.extend_from_slice(&(u32::from(link.sampled) * SAMPLED | CONTEXT_HAS_IS_REMOTE).to_le_bytes());
}

/// KeyValue { key = 1, value = 2: AnyValue { string = 1, bool = 2, int = 3, double = 4 } }
fn key_value(out: &mut Vec<u8>, field: u32, key: &str, value: &AttributeValue) {
    let value_len = match value {
        AttributeValue::Str(text) => 1 + varint_len(text.len() as u64) + text.len(),
        AttributeValue::Bool(_) => 2,
        AttributeValue::Int(number) => 1 + varint_len(*number as u64),
        AttributeValue::Double(_) => 9,
    };
    let length = 1 + varint_len(key.len() as u64) + key.len() + 1 + varint_len(value_len as u64) + value_len;
    tag(out, field, LEN);
    varint(out, length as u64);
    string(out, 1, key);
    tag(out, 2, LEN);
    varint(out, value_len as u64);
    match value {
        AttributeValue::Str(text) => string(out, 1, text),
        AttributeValue::Bool(flag) => {
            tag(out, 2, VARINT);
            varint(out, u64::from(*flag));
        }
        AttributeValue::Int(number) => {
            tag(out, 3, VARINT);
            // int64 is written as its two's complement, ten bytes when negative.
            varint(out, *number as u64);
        }
        AttributeValue::Double(number) => {
            tag(out, 4, FIXED64);
            out.extend_from_slice(&number.to_le_bytes());
        }
    }
}

fn message(out: &mut Vec<u8>, field: u32, encoded: &[u8]) {
    bytes(out, field, encoded);
}

fn string(out: &mut Vec<u8>, field: u32, text: &str) {
    bytes(out, field, text.as_bytes());
}

fn bytes(out: &mut Vec<u8>, field: u32, data: &[u8]) {
    tag(out, field, LEN);
    varint(out, data.len() as u64);
    out.extend_from_slice(data);
}

fn tag(out: &mut Vec<u8>, field: u32, wire_type: u8) {
    varint(out, u64::from(field << 3 | u32::from(wire_type)));
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn varint_len(value: u64) -> usize {
    // 7 bits a byte; zero still takes one.
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}
