//! The pool's behaviour against real servers on loopback: hyper's own, and
//! raw ones that answer with exactly the bytes a test gives.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt as _;
use futures::stream::BoxStream;
use http::header::{HOST, HeaderMap};
use http_body_util::{Either, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::*;
use crate::client::wire::Response;

/// An HTTP/1.1 server on loopback answering every POST with `answer`,
/// counting the connections it accepted; `close` has it close each
/// connection after its first answer (as an upstream whose idle
/// timeout is shorter than ours does).
async fn upstream(answer: &'static str, close: bool) -> (Http1, Arc<AtomicUsize>) {
    serving(close, move || http::Response::new(Either::Left(Full::new(Bytes::from(answer))))).await
}

/// The same, answering with what `answer` makes, in whatever coding its body takes.
async fn serving(
    close: bool,
    answer: impl Fn() -> http::Response<Either<Full<Bytes>, StreamBody<Chunks>>> + Clone + Send + Sync + 'static,
) -> (Http1, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&accepted);
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            // As servers answering calls set it: an answer's last bytes
            // leave without waiting for the first ones' acknowledgement.
            tcp.set_nodelay(true).unwrap();
            counted.fetch_add(1, Ordering::SeqCst);
            let answer = answer.clone();
            tokio::spawn(async move {
                let answering = service_fn(move |_| {
                    let answer = answer();
                    async move { Ok::<_, Infallible>(answer) }
                });
                let mut builder = hyper::server::conn::http1::Builder::new();
                builder.keep_alive(!close);
                let _ = builder.serve_connection(TokioIo::new(tcp), answering).await;
            });
        }
    });
    (on_loopback(&format!("http://{address}/mcp")), accepted)
}

/// The connections to `url`, on loopback, which the outbound policy allows here.
fn on_loopback(url: &str) -> Http1 {
    let policy = OutboundPolicy { allowed_ranges: vec!["127.0.0.0/8".parse().unwrap()], ..OutboundPolicy::default() };
    Http1::new(&reqwest::Url::parse(url).unwrap(), &policy).unwrap()
}

type Chunks = BoxStream<'static, Result<Frame<Bytes>, Infallible>>;

/// An answer in the chunked coding (no length announced), in `parts`.
fn chunked(parts: &'static [&'static str]) -> http::Response<Either<Full<Bytes>, StreamBody<Chunks>>> {
    let frames = futures::stream::iter(parts.iter().map(|part| Ok(Frame::data(Bytes::from_static(part.as_bytes())))));
    http::Response::new(Either::Right(StreamBody::new(frames.boxed())))
}

/// One POST, its answer read to its end (or not), as `wire` reads it.
async fn call(http1: &Http1, read: bool) -> Vec<u8> {
    let response = http1.post(&HeaderMap::new(), Bytes::from_static(b"{}")).await.expect("answered");
    assert_eq!(response.status, StatusCode::OK);
    if !read {
        return Vec::new();
    }
    let mut chunks = std::pin::pin!(Response::Http1(response).chunks());
    let mut body = Vec::new();
    while let Some(chunk) = chunks.next().await {
        body.extend_from_slice(&chunk.unwrap());
    }
    body
}

#[tokio::test]
async fn a_chunked_answer_is_read_whole_and_its_connection_kept() {
    let (http1, accepted) = serving(false, || chunked(&["{\"a\":", "1}"])).await;
    for _ in 0..3 {
        assert_eq!(call(&http1, true).await, b"{\"a\":1}");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

/// A notification's answer (202, no body) is not read at all.
#[tokio::test]
async fn an_empty_answer_left_unread_keeps_its_connection() {
    let (http1, accepted) = serving(false, || {
        let mut answer = http::Response::new(Either::Left(Full::new(Bytes::new())));
        *answer.status_mut() = http::StatusCode::ACCEPTED;
        answer
    })
    .await;
    for _ in 0..3 {
        let answered = http1.post(&HeaderMap::new(), Bytes::new()).await.unwrap();
        assert_eq!(answered.status, StatusCode::ACCEPTED);
        drop(answered);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn calls_one_after_another_share_one_connection() {
    let (http1, accepted) = upstream("answer", false).await;
    for _ in 0..5 {
        assert_eq!(call(&http1, true).await, b"answer");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn calls_at_the_same_time_each_take_a_connection_then_reuse_them() {
    let (http1, accepted) = upstream("answer", false).await;
    let none = HeaderMap::new();
    let leases: Vec<_> = futures::future::join_all((0..3).map(|_| http1.post(&none, Bytes::new()))).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
    for response in leases.into_iter().map(Result::unwrap) {
        let _ = Response::Http1(response).chunks().collect::<Vec<_>>().await;
    }
    for _ in 0..3 {
        call(&http1, true).await;
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

/// What is left of an unread answer would come before the next one: a
/// connection whose answer does not end within [`DRAIN_WITHIN`] is closed,
/// not used again.
#[tokio::test]
async fn an_answer_left_unfinished_closes_its_connection() {
    let (http1, accepted) = serving(false, || {
        let endless = futures::stream::iter([Ok(Frame::data(Bytes::from_static(b"data: {}\n\n")))])
            .chain(futures::stream::pending());
        http::Response::new(Either::Right(StreamBody::new(endless.boxed())))
    })
    .await;
    call(&http1, false).await;
    tokio::time::sleep(DRAIN_WITHIN + Duration::from_millis(200)).await;
    assert!(http1.idle.lock().unwrap().is_empty(), "kept");
    let _still_open = http1.post(&HeaderMap::new(), Bytes::new()).await.unwrap();
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

/// An answer left unread that keeps coming is read no further than
/// [`DRAIN_MOST`] bytes of its connection, chunked coding and all: the
/// connection is closed long before [`DRAIN_WITHIN`].
#[tokio::test]
async fn an_endless_answer_left_unread_is_read_no_further_than_its_bound() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let upstream = tokio::spawn(async move {
        let (mut tcp, _) = listener.accept().await.unwrap();
        read_request(&mut tcp).await;
        tcp.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n").await.unwrap();
        let chunks = "1\r\nx\r\n".repeat(1000);
        while tcp.write_all(chunks.as_bytes()).await.is_ok() {}
    });
    let http1 = on_loopback(&format!("http://{address}/mcp"));
    let response = http1.post(&HeaderMap::new(), Bytes::new()).await.unwrap();
    drop(response);
    // The upstream's writes fail once the connection is closed.
    tokio::time::timeout(DRAIN_WITHIN * 3 / 4, upstream).await.expect("still read").unwrap();
    assert!(http1.idle.lock().unwrap().is_empty());
}

/// Bytes after an answer's end were never asked for: its connection is not
/// used again. (An interim answer before it is skipped.)
#[tokio::test]
async fn an_answer_with_bytes_after_its_end_closes_its_connection() {
    let answer = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}XX";
    let (http1, accepted) = raw(vec![answer.into()], false).await;
    for _ in 0..2 {
        assert_eq!(call(&http1, true).await, b"{}");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_connection_the_upstream_closed_is_not_used_again() {
    let (http1, accepted) = upstream("answer", true).await;
    for _ in 0..3 {
        assert_eq!(call(&http1, true).await, b"answer");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_connection_idle_too_long_is_closed_not_used() {
    let (http1, accepted) = upstream("answer", false).await;
    call(&http1, true).await;
    {
        let mut idle = http1.idle.lock().unwrap();
        let (_, since) = idle.last_mut().expect("given back");
        *since = Instant::now().checked_sub(IDLE_TIMEOUT + Duration::from_secs(1)).unwrap();
    }
    call(&http1, true).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    assert_eq!(http1.idle.lock().unwrap().len(), 1, "the stale one is gone");
}

#[tokio::test]
async fn the_request_names_the_path_and_the_host() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let seen = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let tx = Mutex::new(Some(tx));
        let answering = service_fn(move |request: http::Request<Incoming>| {
            let head = (request.uri().to_string(), request.headers().get(HOST).cloned());
            if let Some(tx) = tx.lock().unwrap().take() {
                let _ = tx.send(head);
            }
            async { Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::new()))) }
        });
        let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tcp), answering).await;
        rx.await.unwrap()
    });
    let http1 = on_loopback(&format!("http://{address}/mcp?tenant=a"));
    call(&http1, true).await;
    drop(http1);
    let (target, host) = seen.await.unwrap();
    assert_eq!(target, "/mcp?tenant=a");
    assert_eq!(host.unwrap(), address.to_string().as_str());
}

/// The policy decides before any connection is made.
#[tokio::test]
async fn an_address_the_policy_refuses_is_not_connected_to() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = reqwest::Url::parse(&format!("http://{}/mcp", listener.local_addr().unwrap())).unwrap();
    let http1 = Http1::new(&url, &OutboundPolicy::default()).unwrap();
    let Err(CallError::Transport(why)) = http1.post(&HeaderMap::new(), Bytes::new()).await else {
        panic!("sent to an address the policy refuses")
    };
    assert!(!why.is_empty());
    let accepted = tokio::time::timeout(Duration::from_millis(100), listener.accept()).await;
    assert!(accepted.is_err(), "connected");
}

/// An upstream on loopback that reads each request whole and answers it
/// with `pieces`, written 100 ms apart, counting the connections it
/// accepted; `close` has it close each connection after its first answer
/// without a word (no `connection: close`), as one whose idle timeout ran out.
async fn raw(pieces: Vec<String>, close: bool) -> (Http1, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&accepted);
    let pieces = Arc::new(pieces);
    tokio::spawn(async move {
        loop {
            let (mut tcp, _) = listener.accept().await.unwrap();
            counted.fetch_add(1, Ordering::SeqCst);
            let pieces = Arc::clone(&pieces);
            tokio::spawn(async move {
                while read_request(&mut tcp).await {
                    for (i, piece) in pieces.iter().enumerate() {
                        if i > 0 {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        if tcp.write_all(piece.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                    if close {
                        return;
                    }
                }
            });
        }
    });
    (on_loopback(&format!("http://{address}/mcp")), accepted)
}

/// Reads one request's head and body (by its length) from `tcp`; `false` once it closed.
async fn read_request(tcp: &mut TcpStream) -> bool {
    let mut read = Vec::new();
    loop {
        if let Some(end) = read.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&read[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length: "))
                .map_or(0, |length| length.trim().parse().unwrap());
            if read.len() >= end + 4 + length {
                return true;
            }
        }
        let mut buffer = [0; 4096];
        match tcp.read(&mut buffer).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => read.extend_from_slice(&buffer[..n]),
        }
    }
}

/// The upstream closed the idle connection without saying it would: the
/// next request sees that and goes on a new one, rather than failing on
/// the closed one.
#[tokio::test]
async fn a_connection_the_upstream_closed_unannounced_is_not_used() {
    let (http1, accepted) = raw(vec!["HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nanswer".into()], true).await;
    for _ in 0..3 {
        assert_eq!(call(&http1, true).await, b"answer");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

/// An SSE answer left once the event it waited for came: the rest (the
/// chunked coding's last chunk) comes later, is read, and the connection
/// is kept.
#[tokio::test]
async fn the_rest_of_an_answer_left_unread_is_read_and_its_connection_kept() {
    let pieces = vec![
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n\
         a\r\ndata: {}\n\n\r\n"
            .into(),
        "0\r\n\r\n".into(),
    ];
    let (http1, accepted) = raw(pieces, false).await;
    for _ in 0..3 {
        let mut response = http1.post(&HeaderMap::new(), Bytes::from_static(b"{}")).await.unwrap();
        assert_eq!(&response.body.next().await.unwrap().unwrap()[..], b"data: {}\n\n");
        drop(response);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

/// A hostile upstream's answers: a head that never ends, a length given
/// twice, a body cut short. Each fails the request, and no connection
/// that carried one is used again.
#[tokio::test]
async fn an_answer_that_cannot_be_read_one_way_fails_and_closes_its_connection() {
    let endless_head = format!("HTTP/1.1 200 OK\r\nx-big: {}", "a".repeat(message::MAX_HEAD + 1));
    let two_lengths = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}".to_owned();
    for (answer, why) in [(endless_head, "exceeds"), (two_lengths, "two lengths")] {
        let (http1, accepted) = raw(vec![answer], false).await;
        for _ in 0..2 {
            let Err(CallError::Transport(error)) = http1.post(&HeaderMap::new(), Bytes::new()).await else {
                panic!("an answer read that should not be")
            };
            assert!(error.contains(why), "{error}");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }
    let cut_short = "HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n{}".to_owned();
    let (http1, _) = raw(vec![cut_short], true).await;
    let mut response = http1.post(&HeaderMap::new(), Bytes::new()).await.unwrap();
    assert_eq!(&response.body.next().await.unwrap().unwrap()[..], b"{}");
    let Some(Err(CallError::Transport(error))) = response.body.next().await else { panic!("a body cut short ended") };
    assert!(error.contains("before the answer's end"), "{error}");
}

/// An answer whose end is its connection's is read to that end, and the
/// connection is not kept.
#[tokio::test]
async fn an_answer_without_a_length_ends_with_its_connection() {
    let (http1, accepted) = raw(vec!["HTTP/1.1 200 OK\r\n\r\n{\"a\":".into(), "1}".into()], true).await;
    for _ in 0..2 {
        assert_eq!(call(&http1, true).await, b"{\"a\":1}");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    assert!(http1.idle.lock().unwrap().is_empty());
}
