use http::header::HeaderMap;

use super::*;

/// The body `decoder` reads from `bytes` fed `step` bytes at a time, and
/// what is left after it.
fn decoded(mut decoder: Decoder, bytes: &[u8], step: usize) -> Result<(Vec<u8>, Vec<u8>), String> {
    let mut read = BytesMut::new();
    let mut fed = 0;
    let mut body = Vec::new();
    loop {
        match decoder.decode(&mut read)? {
            Decoded::Data(data) => body.extend_from_slice(&data),
            Decoded::End => return Ok((body, read.to_vec())),
            Decoded::More if fed == bytes.len() => return Err("more was wanted".into()),
            Decoded::More => {
                let next = (fed + step).min(bytes.len());
                read.extend_from_slice(&bytes[fed..next]);
                fed = next;
            }
        }
    }
}

#[test]
fn a_chunked_body_is_read_whole_however_it_is_split_and_what_follows_is_left() {
    let bytes = b"4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nExpires: never\r\n\r\nHTTP/1.1";
    for step in 1..=bytes.len() {
        let (body, rest) = decoded(Decoder::new(Framing::Chunked), bytes, step).unwrap();
        assert_eq!(body, b"Wikipedia in\r\n\r\nchunks.", "split every {step} bytes");
        assert!(b"HTTP/1.1".starts_with(&rest), "split every {step} bytes");
    }
}

#[test]
fn a_body_with_a_length_ends_there() {
    for step in 1..=9 {
        let (body, rest) = decoded(Decoder::new(Framing::Length(5)), b"helloHTTP", step).unwrap();
        assert_eq!((body.as_slice(), rest.is_empty() || b"HTTP".starts_with(&rest)), (&b"hello"[..], true));
    }
    assert_eq!(decoded(Decoder::new(Framing::Length(0)), b"", 1).unwrap(), (Vec::new(), Vec::new()));
}

#[test]
fn a_chunk_size_may_have_leading_zeros_and_extensions_within_their_bound() {
    let bytes = b"00000000000000000000005;a=b\r\nhello\r\n0\r\n\r\n";
    assert_eq!(decoded(Decoder::new(Framing::Chunked), bytes, 1).unwrap().0, b"hello");
    // Each size line within its own bound, but their extensions over the body's.
    let extension = format!("1;{}\r\nx\r\n", "e".repeat(MAX_SIZE_LINE - 16));
    let many = extension.repeat(MAX_EXTRAS / (MAX_SIZE_LINE - 16) + 1);
    let refused = decoded(Decoder::new(Framing::Chunked), many.as_bytes(), many.len()).unwrap_err();
    assert!(refused.contains("extensions and trailers exceed"), "{refused}");
}

#[test]
fn a_broken_chunked_coding_is_refused() {
    let refused = |bytes: &[u8]| decoded(Decoder::new(Framing::Chunked), bytes, bytes.len()).unwrap_err();
    assert!(refused(b"zz\r\n").contains("size"));
    assert!(refused(b"\r\n").contains("size"));
    // Sixteen digits could overflow: refused, not wrapped.
    assert!(refused(b"ffffffffffffffff\r\n").contains("size"));
    assert!(refused(b"3\r\nabcX\r\n").contains("does not end"));
    assert!(refused(b"3\nabc").contains("CRLF"));
    assert!(refused(&[b'1'; MAX_SIZE_LINE + 1]).contains("exceed"));
    let mut endless_trailers = b"0\r\n".to_vec();
    while endless_trailers.len() <= MAX_HEAD + 64 {
        endless_trailers.extend_from_slice(b"x-trailer: 1\r\n");
    }
    assert!(refused(&endless_trailers).contains("exceed"));
}

fn parsed(text: &str) -> Result<Option<Head>, String> {
    HeadReader::default().parse(&mut BytesMut::from(text))
}

#[test]
fn a_head_is_read_with_its_headers_and_framing() {
    let mut read = BytesMut::from(
        "HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\
         Mcp-Session-Id: s1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\n",
    );
    let head = HeadReader::default().parse(&mut read).unwrap().unwrap();
    assert_eq!(head.status, StatusCode::OK);
    assert!(head.event_stream);
    assert_eq!(head.session.as_deref(), Some("s1"));
    assert_eq!((head.framing, head.reusable), (Framing::Chunked, true));
    assert_eq!(&read[..], b"5\r\n", "the body's bytes are left");
    // The first of each is read, as `HeaderMap::get` gives it; a value that is not text is none.
    let head = parsed(
        "HTTP/1.1 200 OK\r\nMCP-SESSION-ID: sé\r\nmcp-session-id: s2\r\ncontent-type: application/json\r\n\
         content-type: text/event-stream\r\ncontent-length: 2\r\n\r\n",
    );
    let head = head.unwrap().unwrap();
    assert_eq!((head.session, head.event_stream), (None, false));
    // Not all of it yet.
    assert!(parsed("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n").unwrap().is_none());
}

/// A head that comes a byte at a time is read once it has all come, and
/// parsed again only then; so are the interim answers before it, up to
/// their bound. One that comes whole is parsed once.
#[test]
fn a_head_is_read_however_it_trickles_in_and_interim_answers_are_bounded() {
    let text = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\ncontent-length: 2\n\n{}";
    let mut reader = HeadReader::default();
    let mut read = BytesMut::new();
    for (i, byte) in text.bytes().enumerate() {
        read.extend_from_slice(&[byte]);
        if let Some(head) = reader.parse(&mut read).unwrap() {
            assert_eq!((head.status, head.framing), (StatusCode::OK, Framing::Length(2)));
            assert_eq!(i, text.len() - 3, "read at the head's end");
            assert!(read.is_empty(), "the head taken whole, nothing after it");
            break;
        }
    }
    // Per head: the first partial parse, and the one at its end.
    assert_eq!(reader.parses, 4, "httparse runs at a head's first byte and at its end");
    let mut whole = HeadReader::default();
    assert!(whole.parse(&mut BytesMut::new()).unwrap().is_none(), "nothing read yet");
    whole.parse(&mut BytesMut::from(text)).unwrap().unwrap();
    assert_eq!(whole.parses, 2, "the interim answer and the answer, each once");
    let interim = "HTTP/1.1 102 Processing\r\n\r\n".repeat(MAX_INTERIM + 1);
    assert!(parsed(&format!("{interim}HTTP/1.1 200 OK\r\n\r\n")).unwrap_err().contains("interim"));
    let interim = "HTTP/1.1 102 Processing\r\n\r\n".repeat(MAX_INTERIM);
    assert!(parsed(&format!("{interim}HTTP/1.1 200 OK\r\n\r\n")).unwrap().is_some());
}

/// Empty lines before a status line, which httparse skips, are not
/// taken for a head's end as they trickle in (each would make a parse
/// run over all of them), and they count against the head's bound.
#[test]
fn empty_lines_before_an_answer_are_skipped_within_the_bound() {
    let mut reader = HeadReader::default();
    let mut read = BytesMut::new();
    let text = format!("{}HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n", "\r\n\n".repeat(2_000));
    let mut head = None;
    for byte in text.bytes() {
        read.extend_from_slice(&[byte]);
        head = reader.parse(&mut read).unwrap();
    }
    assert_eq!(head.expect("read at its end").framing, Framing::Length(2));
    assert_eq!(reader.parses, 2, "httparse runs at the first byte (a lone CR) and at the head's end");
    let endless = "\r\n".repeat(MAX_HEAD / 2 + 1);
    assert!(parsed(&endless).unwrap_err().contains("empty lines exceed"));
}

#[test]
fn whether_a_connection_may_be_used_again() {
    let reusable = |text: &str| parsed(text).unwrap().unwrap().reusable;
    assert!(reusable("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"));
    assert!(reusable("HTTP/1.1 204 No Content\r\n\r\n"));
    assert!(!reusable("HTTP/1.1 200 OK\r\nconnection: keep-alive, Close\r\ncontent-length: 2\r\n\r\n"));
    assert!(!reusable("HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\n"));
    // Its end is its connection's.
    assert!(!reusable("HTTP/1.1 200 OK\r\n\r\n"));
    assert!(!reusable("HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n"));
    assert_eq!(parsed("HTTP/1.1 304 Not Modified\r\n\r\n").unwrap().unwrap().framing, Framing::Length(0));
    assert_eq!(parsed("HTTP/1.1 200 OK\r\ncontent-length: 7, 7\r\n\r\n").unwrap().unwrap().framing, Framing::Length(7));
}

#[test]
fn a_head_that_could_be_read_two_ways_or_is_too_large_is_refused() {
    let refused = |text: &str| parsed(text).unwrap_err();
    assert!(refused("HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n").contains("both"));
    assert!(refused("HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n").contains("two lengths"));
    assert!(refused("HTTP/1.1 200 OK\r\ncontent-length: +2\r\n\r\n").contains("not a number"));
    assert!(refused("HTTP/1.1 200 OK\r\ncontent-length: 99999999999999999999\r\n\r\n").contains("too large"));
    assert!(refused("HTTP/1.1 101 Switching Protocols\r\n\r\n").contains("switched"));
    assert!(refused("HTTP/1.0 200 OK\r\ntransfer-encoding: chunked\r\n\r\n").contains("HTTP/1.0"));
    assert!(refused("SSH-2.0-OpenSSH\r\n\r\n").contains("not HTTP"));
    let many: String = (0..=MAX_HEADERS).map(|i| format!("x-{i}: 1\r\n")).collect();
    assert!(refused(&format!("HTTP/1.1 200 OK\r\n{many}\r\n")).contains("headers"));
    let endless = format!("HTTP/1.1 200 OK\r\nx-big: {}", "a".repeat(MAX_HEAD));
    assert!(refused(&endless).contains("exceeds"));
}

#[test]
fn a_request_is_framed_by_us_alone() {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", HeaderValue::from_static("application/json"));
    headers.insert(TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
    headers.insert(CONTENT_LENGTH, HeaderValue::from_static("1"));
    headers.insert(HOST, HeaderValue::from_static("elsewhere"));
    let mut out = Vec::new();
    write_request(&mut out, "/mcp?a=1", &HeaderValue::from_static("up:8080"), &headers, b"{}");
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "POST /mcp?a=1 HTTP/1.1\r\nhost: up:8080\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"
    );
}
