//! Reading `text/event-stream` bodies: events in, JSON-RPC messages out.

use serde_json::Value;

/// Bytes received so far; complete events are taken out as they arrive.
#[derive(Default)]
pub(crate) struct SseBuffer {
    pending: Vec<u8>,
}

impl SseBuffer {
    /// Adds `chunk` and returns the JSON messages of every event it completed.
    /// Comments (keep-alives), `id:`/`event:` lines and non-JSON data are skipped.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<Value> {
        self.pending.extend_from_slice(chunk);
        let mut messages = Vec::new();
        while let Some((end, separator)) = find_event_end(&self.pending) {
            let event: Vec<u8> = self.pending.drain(..end + separator).collect();
            let text = String::from_utf8_lossy(&event[..end]);
            let data: Vec<&str> = text
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if !data.is_empty()
                && let Ok(message) = serde_json::from_str(&data.join("\n"))
            {
                messages.push(message);
            }
        }
        messages
    }
}

/// Where the first event ends, and the length of its blank-line separator.
fn find_event_end(bytes: &[u8]) -> Option<(usize, usize)> {
    let lf = bytes.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = bytes.windows(4).position(|w| w == b"\r\n\r\n").map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks() {
        let mut buffer = SseBuffer::default();
        assert!(buffer.push(b": keep-alive\n\nid: 1\ndata: {\"a\"").is_empty());
        let messages = buffer.push(b":1}\n\ndata: {\"b\":2}\r\n\r\ndata: partial");
        assert_eq!(messages, vec![serde_json::json!({"a": 1}), serde_json::json!({"b": 2})]);
    }
}
