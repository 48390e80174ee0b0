//! Finished spans as an OTLP `ExportTraceServiceRequest`, protobuf, written
//! straight from our records: one resource, one scope, the spans.
//!
//! Field numbers are those of `opentelemetry/proto/trace/v1/trace.proto`
//! and `common/v1/common.proto`; the tests decode what this writes with the
//! official generated messages.

use super::{AttributeValue, SpanContext, SpanRecord};

const LEN: u8 = 2;
const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const FIXED32: u8 = 5;

/// `Span.name`.
const NAME: u32 = 5;
/// `Span.attributes`.
const SPAN_ATTRIBUTE: u32 = 9;
/// `ScopeSpans.spans`.
const SCOPE_SPAN: u32 = 2;

/// `SpanFlags`: the W3C trace flags in the low byte, of which we set only
/// `sampled`. (Whether a parent or link is remote is left unsaid: bits 8
/// and 9 unset mean unknown.)
fn flags(sampled: bool) -> u32 {
    u32::from(sampled)
}

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
            key_value(&mut resource, 1, key, AttributeValue::Str(value));
        }
        let mut scope = Vec::new();
        string(&mut scope, 1, "switchyard");
        string(&mut scope, 2, env!("CARGO_PKG_VERSION"));
        Self { resource, scope }
    }

    /// The request body for `spans`: spans as [`span`] appended them.
    pub(crate) fn wrap(&self, spans: &[u8]) -> Vec<u8> {
        // ExportTraceServiceRequest { resource_spans = 1: ResourceSpans {
        //   resource = 1, scope_spans = 2: ScopeSpans { scope = 1, spans = 2 } } }
        let scope_spans = field_len(self.scope.len()) + spans.len();
        let resource_spans = field_len(self.resource.len()) + field_len(scope_spans);
        let mut request = Vec::with_capacity(field_len(resource_spans));
        tag(&mut request, 1, LEN);
        varint(&mut request, resource_spans as u64);
        bytes(&mut request, 1, &self.resource);
        tag(&mut request, 2, LEN);
        varint(&mut request, scope_spans as u64);
        bytes(&mut request, 1, &self.scope);
        request.extend_from_slice(spans);
        request
    }
}

/// What a length-delimited field of `len` bytes takes, with a one-byte tag.
#[inline]
fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

/// Appends the span `record`, ended at `end_unix_nanos`, to `out` as one
/// `ScopeSpans.spans` entry; `scratch` holds the span while its length is
/// not yet known.
pub(crate) fn span(record: &SpanRecord, end_unix_nanos: u64, scratch: &mut Vec<u8>, out: &mut Vec<u8>) {
    scratch.clear();
    encode_span(record, end_unix_nanos, scratch);
    bytes(out, SCOPE_SPAN, scratch);
}

fn encode_span(record: &SpanRecord, end_unix_nanos: u64, out: &mut Vec<u8>) {
    let context = &record.context;
    bytes(out, 1, &context.trace_id.to_be_bytes());
    bytes(out, 2, &context.span_id.to_be_bytes());
    if let Some(state) = &context.trace_state {
        string(out, 3, state);
    }
    if record.parent_span_id != 0 {
        bytes(out, 4, &record.parent_span_id.to_be_bytes());
    }
    if !record.named {
        string(out, NAME, record.default_name);
    }
    tag(out, 6, VARINT);
    varint(out, record.kind as u64);
    tag(out, 7, FIXED64);
    out.extend_from_slice(&record.start_unix_nanos.to_le_bytes());
    tag(out, 8, FIXED64);
    out.extend_from_slice(&end_unix_nanos.max(record.start_unix_nanos).to_le_bytes());
    out.extend_from_slice(&record.encoded);
    for link in &record.links {
        encode_link(out, link);
    }
    if record.status as u8 != 0 || record.status_message.is_some() {
        // Status { message = 2, code = 3 }
        let message_text = record.status_message.as_deref().unwrap_or_default();
        let length = if message_text.is_empty() { 0 } else { field_len(message_text.len()) }
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
    out.extend_from_slice(&flags(context.sampled).to_le_bytes());
}

/// Appends the attribute `key` = `value` to a span's encoded attributes.
pub(crate) fn attribute(attributes: &mut Vec<u8>, key: &str, value: AttributeValue<'_>) {
    key_value(attributes, SPAN_ATTRIBUTE, key, value);
}

/// Appends the span's name, `parts` joined, to its encoded fields.
pub(crate) fn name_of_parts(encoded: &mut Vec<u8>, parts: &[&str]) {
    let len: usize = parts.iter().map(|part| part.len()).sum();
    tag(encoded, NAME, LEN);
    varint(encoded, len as u64);
    for part in parts {
        encoded.extend_from_slice(part.as_bytes());
    }
}

/// Takes the attribute `key` out of a span's encoded fields, if there.
pub(crate) fn remove_attribute(attributes: &mut Vec<u8>, key: &str) {
    let mut at = 0;
    while at < attributes.len() {
        // Each entry: a one-byte tag (field 5 or 9, length-delimited), the
        // length, then for an attribute KeyValue { key = 1, .. }; written by
        // `attribute` and `name`, so well formed.
        let Some((length, length_bytes)) = read_varint(&attributes[at + 1..]) else { return };
        let body = at + 1 + length_bytes;
        let end = body + length as usize;
        if attributes[at] != (SPAN_ATTRIBUTE << 3) as u8 | LEN {
            // The name, not an attribute.
            at = end;
            continue;
        }
        let Some((key_len, key_len_bytes)) = attributes.get(body + 1..).and_then(read_varint) else { return };
        let key_start = body + 1 + key_len_bytes;
        if attributes.get(key_start..key_start + key_len as usize) == Some(key.as_bytes()) {
            attributes.drain(at..end);
            return;
        }
        at = end;
    }
}

fn read_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, byte) in bytes.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
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
    out.extend_from_slice(&flags(link.sampled).to_le_bytes());
}

/// KeyValue { key = 1, value = 2: AnyValue { string = 1, bool = 2, int = 3, double = 4 } }
fn key_value(out: &mut Vec<u8>, field: u32, key: &str, value: AttributeValue<'_>) {
    let value_len = match value {
        AttributeValue::Str(text) => 1 + varint_len(text.len() as u64) + text.len(),
        AttributeValue::Bool(_) => 2,
        AttributeValue::Int(number) => 1 + varint_len(number as u64),
        AttributeValue::Double(_) => 9,
    };
    let length = 1 + varint_len(key.len() as u64) + key.len() + 1 + varint_len(value_len as u64) + value_len;
    // One reservation for the entry: the writes below then never grow it.
    out.reserve(2 + varint_len(length as u64) + length);
    tag(out, field, LEN);
    varint(out, length as u64);
    string(out, 1, key);
    tag(out, 2, LEN);
    varint(out, value_len as u64);
    match value {
        AttributeValue::Str(text) => string(out, 1, text),
        AttributeValue::Bool(flag) => {
            tag(out, 2, VARINT);
            varint(out, u64::from(flag));
        }
        AttributeValue::Int(number) => {
            tag(out, 3, VARINT);
            // int64 is written as its two's complement, ten bytes when negative.
            varint(out, number as u64);
        }
        AttributeValue::Double(number) => {
            tag(out, 4, FIXED64);
            out.extend_from_slice(&number.to_le_bytes());
        }
    }
}

#[inline]
fn string(out: &mut Vec<u8>, field: u32, text: &str) {
    bytes(out, field, text.as_bytes());
}

#[inline]
fn bytes(out: &mut Vec<u8>, field: u32, data: &[u8]) {
    tag(out, field, LEN);
    varint(out, data.len() as u64);
    out.extend_from_slice(data);
}

#[inline]
fn tag(out: &mut Vec<u8>, field: u32, wire_type: u8) {
    varint(out, u64::from(field << 3 | u32::from(wire_type)));
}

#[inline]
fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[inline]
fn varint_len(value: u64) -> usize {
    // 7 bits a byte; zero still takes one.
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}
