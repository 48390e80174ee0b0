//! Reading `text/event-stream` bodies: events in, JSON-RPC messages out,
//! in linear time and bounded memory whatever the upstream sends.
//!
//! The buffer only ever holds the event still arriving, so its size is
//! bounded by the largest event we accept; the search for the end of that
//! event resumes where the last chunk's search stopped, so an event that
//! arrives a byte at a time costs its length, not its length squared.

use serde_json::Value;

/// Why an event stream was given up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SseError {
    /// One event grew past the bound without ending.
    #[error("an SSE event exceeds {0} bytes")]
    EventTooLarge(usize),
}

/// Bytes received so far; complete events are taken out as they arrive.
pub(crate) struct SseBuffer {
    pending: Vec<u8>,
    /// Where the search for the end of the pending event resumes: the bytes
    /// before it hold no separator.
    searched: usize,
    max_event_bytes: usize,
}

impl SseBuffer {
    /// A buffer refusing any event longer than `max_event_bytes`.
    pub(crate) fn new(max_event_bytes: usize) -> Self {
        Self { pending: Vec::new(), searched: 0, max_event_bytes }
    }

    /// Adds `chunk` and returns the JSON messages of every event it completed.
    /// Comments (keep-alives), `id:`/`event:` lines and non-JSON data are skipped.
    ///
    /// # Errors
    /// When an event grows past the bound; the stream should be dropped.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Result<Vec<Value>, SseError> {
        self.pending.extend_from_slice(chunk);
        let mut messages = Vec::new();
        let mut start = 0;
        while let Some((end, separator)) = find_event_end(&self.pending[start..], self.searched.saturating_sub(start)) {
            if let Some(message) = parse_event(&self.pending[start..start + end]) {
                messages.push(message);
            }
            start += end + separator;
            self.searched = start;
        }
        // One drain per chunk, however many events it completed.
        self.pending.drain(..start);
        // A separator may straddle chunks: keep its first three bytes unsearched.
        self.searched = self.pending.len().saturating_sub(3);
        if self.pending.len() > self.max_event_bytes {
            self.pending = Vec::new();
            return Err(SseError::EventTooLarge(self.max_event_bytes));
        }
        Ok(messages)
    }
}

/// The JSON message an event's `data:` lines carry, if any.
fn parse_event(event: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(event).ok()?;
    let mut data = String::new();
    for line in text.lines() {
        let Some(value) = line.strip_prefix("data:") else { continue };
        if !data.is_empty() {
            data.push('\n');
        }
        data.push_str(value.strip_prefix(' ').unwrap_or(value));
    }
    if data.is_empty() { None } else { serde_json::from_str(&data).ok() }
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

    #[test]
    fn events_split_across_chunks() {
        let mut buffer = SseBuffer::new(1024);
        assert!(buffer.push(b": keep-alive\n\nid: 1\ndata: {\"a\"").unwrap().is_empty());
        let messages = buffer.push(b":1}\n\ndata: {\"b\":2}\r\n\r\ndata: partial").unwrap();
        assert_eq!(messages, vec![json!({"a": 1}), json!({"b": 2})]);
        assert_eq!(buffer.push(b"\n\n").unwrap(), Vec::<Value>::new(), "not JSON: skipped");
    }

    #[test]
    fn a_separator_split_between_chunks_is_found() {
        for split in 1..12 {
            let whole = b"data: {\"x\":1}\r\n\r\ndata: {\"y\":2}\n\n";
            let mut buffer = SseBuffer::new(1024);
            let mut messages = buffer.push(&whole[..split.min(whole.len())]).unwrap();
            for byte in &whole[split.min(whole.len())..] {
                messages.extend(buffer.push(&[*byte]).unwrap());
            }
            assert_eq!(messages, vec![json!({"x": 1}), json!({"y": 2})], "split at {split}");
        }
    }

    #[test]
    fn multi_line_data_is_joined() {
        let mut buffer = SseBuffer::new(1024);
        assert_eq!(buffer.push(b"event: message\ndata: {\"a\":\ndata: 1}\n\n").unwrap(), vec![json!({"a": 1})]);
    }

    #[test]
    fn an_endless_event_is_refused_at_the_bound() {
        let mut buffer = SseBuffer::new(4096);
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
        let mut buffer = SseBuffer::new(64);
        for n in 0..10_000 {
            let event = format!("data: {{\"n\":{n}}}\n\n");
            assert_eq!(buffer.push(event.as_bytes()).unwrap(), vec![json!({"n": n})]);
        }
        assert!(buffer.pending.is_empty());
    }

    /// An event arriving a byte at a time costs its length, not its length
    /// squared: searching every chunk from the event's start would take
    /// about 5·10^11 comparisons here, and this test would not end.
    #[test]
    fn a_byte_at_a_time_is_read_in_linear_time() {
        let mut buffer = SseBuffer::new(2 << 20);
        buffer.push(b"data: \"").unwrap();
        for _ in 0..(1 << 20) {
            assert!(buffer.push(b"a").unwrap().is_empty());
        }
        assert_eq!(buffer.push(b"\"\n\n").unwrap()[0].as_str().map(str::len), Some(1 << 20));
    }
}
