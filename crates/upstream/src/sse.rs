//! Reading `text/event-stream` bodies: events in, JSON-RPC messages out,
//! in linear time and bounded memory whatever the upstream sends.
//!
//! The buffer only ever holds the event still arriving, so its size is
//! bounded by the largest event we accept; the search for the end of that
//! event resumes where the last chunk's search stopped, so an event that
//! arrives a byte at a time costs its length, not its length squared.

use serde_json::Value;

use crate::counted::{self, Unparsed};

/// Why an event stream was given up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SseError {
    /// One event grew past the bound without ending.
    #[error("an SSE event exceeds {0} bytes")]
    EventTooLarge(usize),
    /// One event's JSON holds more values than the bound.
    #[error("an SSE event holds more than {0} JSON values")]
    EventTooDense(usize),
}

/// A JSON-RPC message an event carried, with the JSON values it holds (as
/// `counted::parse` gives them).
#[derive(Debug, PartialEq)]
pub(crate) struct Message {
    pub(crate) value: Value,
    pub(crate) values: usize,
}

/// Bytes received so far; complete events are taken out as they arrive.
pub(crate) struct SseBuffer {
    pending: Vec<u8>,
    /// Where the search for the end of the pending event resumes: the bytes
    /// before it hold no separator.
    searched: usize,
    max_event_bytes: usize,
    max_event_values: usize,
    /// Events completed so far: messages, comments, and data that is not JSON.
    events: usize,
}

impl SseBuffer {
    /// A buffer refusing any event longer than `max_event_bytes` or holding
    /// more than `max_event_values` JSON values.
    pub(crate) fn new(max_event_bytes: usize, max_event_values: usize) -> Self {
        Self { pending: Vec::new(), searched: 0, max_event_bytes, max_event_values, events: 0 }
    }

    /// Events completed so far, whatever they carried.
    pub(crate) fn events(&self) -> usize {
        self.events
    }

    /// Adds `chunk` and returns the JSON messages of every event it completed.
    /// Comments (keep-alives), `id:`/`event:` lines and non-JSON data are skipped.
    ///
    /// # Errors
    /// When an event breaks a bound; the stream should be dropped.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Result<Vec<Message>, SseError> {
        self.pending.extend_from_slice(chunk);
        let mut messages = Vec::new();
        let mut start = 0;
        while let Some((end, separator)) = find_event_end(&self.pending[start..], self.searched.saturating_sub(start)) {
            // An event may complete within one chunk: held to the bound all the same.
            let parsed = if end > self.max_event_bytes {
                Err(SseError::EventTooLarge(self.max_event_bytes))
            } else {
                parse_event(&self.pending[start..start + end], self.max_event_values)
            };
            match parsed {
                Ok(message) => messages.extend(message),
                Err(error) => return Err(self.give_up(error)),
            }
            self.events += 1;
            start += end + separator;
            self.searched = start;
        }
        // One drain per chunk, however many events it completed.
        self.pending.drain(..start);
        // A separator may straddle chunks: keep its first three bytes unsearched.
        self.searched = self.pending.len().saturating_sub(3);
        if self.pending.len() > self.max_event_bytes {
            return Err(self.give_up(SseError::EventTooLarge(self.max_event_bytes)));
        }
        Ok(messages)
    }

    /// Drops what is buffered (the stream is given up) and returns `error`.
    fn give_up(&mut self, error: SseError) -> SseError {
        (self.pending, self.searched) = (Vec::new(), 0);
        error
    }
}

/// The JSON message an event's `data:` lines carry, if any; its values are
/// counted as it is parsed, which stops at the bound.
fn parse_event(event: &[u8], max_values: usize) -> Result<Option<Message>, SseError> {
    let text = String::from_utf8_lossy(event);
    let mut data = String::new();
    for line in text.lines() {
        let Some(value) = line.strip_prefix("data:") else { continue };
        if !data.is_empty() {
            data.push('\n');
        }
        data.push_str(value.strip_prefix(' ').unwrap_or(value));
    }
    if data.is_empty() {
        return Ok(None);
    }
    match counted::parse_text(&data, max_values) {
        Ok((value, values)) => Ok(Some(Message { value, values })),
        Err(Unparsed::Dense) => Err(SseError::EventTooDense(max_values)),
        Err(Unparsed::NotJson(_)) => Ok(None),
    }
}

/// Where the first event in `bytes` ends, and the length of its blank-line
/// separator, looking from `from` on (the bytes before it were searched).
fn find_event_end(bytes: &[u8], from: usize) -> Option<(usize, usize)> {
    let mut i = from;
    while let Some(offset) = bytes.get(i..)?.iter().position(|&b| b == b'\n') {
        let at = i + offset;
        if bytes.get(at + 1) == Some(&b'\n') {
            return Some((at, 2));
        }
        if at >= 1 && bytes[at - 1] == b'\r' && bytes.get(at + 1..at + 3) == Some(b"\r\n") {
            return Some((at - 1, 4));
        }
        i = at + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What `push` yields, as the JSON values alone.
    fn values(messages: Vec<Message>) -> Vec<Value> {
        messages.into_iter().map(|m| m.value).collect()
    }

    #[test]
    fn events_split_across_chunks() {
        let mut buffer = SseBuffer::new(1024, 1000);
        assert!(buffer.push(b": keep-alive\n\nid: 1\ndata: {\"a\"").unwrap().is_empty());
        let messages = values(buffer.push(b":1}\n\ndata: {\"b\":2}\r\n\r\ndata: partial").unwrap());
        assert_eq!(messages, vec![json!({"a": 1}), json!({"b": 2})]);
        assert!(buffer.push(b"\n\n").unwrap().is_empty(), "not JSON: skipped");
        assert_eq!(buffer.events(), 4, "a comment, two messages, and data that is not JSON");
    }

    #[test]
    fn a_separator_split_between_chunks_is_found() {
        for split in 1..12 {
            let whole = b"data: {\"x\":1}\r\n\r\ndata: {\"y\":2}\n\n";
            let mut buffer = SseBuffer::new(1024, 1000);
            let mut messages = values(buffer.push(&whole[..split.min(whole.len())]).unwrap());
            for byte in &whole[split.min(whole.len())..] {
                messages.extend(values(buffer.push(&[*byte]).unwrap()));
            }
            assert_eq!(messages, vec![json!({"x": 1}), json!({"y": 2})], "split at {split}");
        }
    }

    #[test]
    fn multi_line_data_is_joined() {
        let mut buffer = SseBuffer::new(1024, 1000);
        assert_eq!(values(buffer.push(b"event: message\ndata: {\"a\":\ndata: 1}\n\n").unwrap()), vec![json!({"a": 1})]);
    }

    #[test]
    fn an_endless_event_is_refused_at_the_bound() {
        let mut buffer = SseBuffer::new(4096, 1000);
        buffer.push(b"data: ").unwrap();
        let mut fed = 6;
        let error = loop {
            match buffer.push(&[b'a'; 100]) {
                Ok(messages) => assert!(messages.is_empty()),
                Err(error) => break error,
            }
            fed += 100;
            assert!(fed < 10_000, "never refused");
        };
        assert_eq!(error, SseError::EventTooLarge(4096));
        assert!(fed > 4096 - 100, "refused at the bound, not before: {fed}");
        assert!(buffer.pending.capacity() < 4096, "the buffer is given back");
    }

    #[test]
    fn many_small_events_keep_the_buffer_small() {
        let mut buffer = SseBuffer::new(64, 1000);
        for n in 0..10_000 {
            let event = format!("data: {{\"n\":{n}}}\n\n");
            assert_eq!(values(buffer.push(event.as_bytes()).unwrap()), vec![json!({"n": n})]);
        }
        assert!(buffer.pending.is_empty());
    }

    /// An event arriving a byte at a time costs its length, not its length
    /// squared: searching every chunk from the event's start would take
    /// about 5·10^11 comparisons here, and this test would not end.
    #[test]
    fn a_byte_at_a_time_is_read_in_linear_time() {
        let mut buffer = SseBuffer::new(2 << 20, 1000);
        buffer.push(b"data: \"").unwrap();
        for _ in 0..(1 << 20) {
            assert!(buffer.push(b"a").unwrap().is_empty());
        }
        assert_eq!(buffer.push(b"\"\n\n").unwrap()[0].value.as_str().map(str::len), Some(1 << 20));
    }

    #[test]
    fn events_are_held_to_the_bounds_however_they_arrive() {
        // Whole, in one chunk, past the byte bound.
        let mut buffer = SseBuffer::new(64, 1000);
        let long = format!("data: \"{}\"\n\n", "a".repeat(100));
        assert_eq!(buffer.push(long.as_bytes()), Err(SseError::EventTooLarge(64)));
        // Small on the wire, dense in values: refused at the value over the bound.
        let mut buffer = SseBuffer::new(1 << 20, 1000);
        let dense = format!("data: [{}0]\n\n", "0,".repeat(2000));
        assert_eq!(buffer.push(dense.as_bytes()), Err(SseError::EventTooDense(1000)));
        let counted = buffer.push(b"data: [1,2]\n\n").unwrap();
        assert_eq!((counted[0].value.clone(), counted[0].values), (json!([1, 2]), 3));
    }
}
