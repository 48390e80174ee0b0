//! The stdio transport: newline-delimited JSON-RPC on stdin/stdout, the same
//! data layer as HTTP. Requests run concurrently; `notifications/cancelled`
//! cancels one (a listen stream included). At the end of input, requests in
//! flight finish and listen streams send their final result before the
//! process exits. Logs go to stderr.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use switchyard_core::{Caller, Execution, ListenFrame, Server};
use switchyard_protocol::jsonrpc::{self, Incoming};
use switchyard_protocol::method::notification;
use switchyard_protocol::{ErrorObject, RequestId};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Longest line accepted, in bytes; longer input is refused as a parse error.
const MAX_LINE: usize = 4 * 1024 * 1024;

/// Serves `server` over `input`/`output` until `input` ends or `shutdown` fires.
///
/// # Errors
/// When reading or writing fails.
pub async fn serve(
    server: Arc<Server>,
    input: impl AsyncRead + Unpin,
    mut output: impl AsyncWrite + Unpin + Send + 'static,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let (out_tx, mut out_rx) = mpsc::channel::<Vec<u8>>(256);
    let writer = tokio::spawn(async move {
        while let Some(mut line) = out_rx.recv().await {
            line.push(b'\n');
            output.write_all(&line).await?;
            output.flush().await?;
        }
        Ok::<_, std::io::Error>(())
    });
    let running: Arc<Mutex<HashMap<RequestId, CancellationToken>>> = Arc::default();
    let mut lines = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = tokio::select! {
            read = lines.read_until(b'\n', &mut line) => read?,
            () = shutdown.cancelled() => break,
        };
        if read == 0 {
            break;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if line.len() > MAX_LINE {
            let _ = out_tx.send(jsonrpc::failure(None, &ErrorObject::parse_error("message too large"))).await;
            continue;
        }
        match Incoming::parse(&line) {
            Err(envelope) => {
                let _ = out_tx.send(jsonrpc::failure(envelope.id.as_ref(), &envelope.error)).await;
            }
            Ok(Incoming::Response { id, outcome }) => {
                if server.deliver_response(&id, outcome, None).await == switchyard_core::server::Delivered::Unknown {
                    tracing::debug!(%id, "a response nobody awaits was dropped");
                }
            }
            Ok(Incoming::Notification { method, params }) => {
                if method == notification::CANCELLED {
                    let id = params.get("requestId").cloned().and_then(|v| serde_json::from_value::<RequestId>(v).ok());
                    if let Some(token) = id.and_then(|id| running.lock().unwrap_or_else(|p| p.into_inner()).remove(&id))
                    {
                        token.cancel();
                    }
                }
            }
            Ok(Incoming::Request { id, method, params }) => {
                let prepared = match server.prepare(id.clone(), &method, params, false, Caller::default()) {
                    Ok(prepared) => prepared,
                    Err(e) => {
                        let _ = out_tx.send(jsonrpc::failure(Some(&id), &e)).await;
                        continue;
                    }
                };
                // Not a child of `shutdown`: at the end of input, requests in
                // flight still finish (bounded by the call timeout); only
                // listen streams end, with their final result.
                let token = CancellationToken::new();
                running.lock().unwrap_or_else(|p| p.into_inner()).insert(id.clone(), token.clone());
                let (server, out_tx, running) = (Arc::clone(&server), out_tx.clone(), Arc::clone(&running));
                tokio::spawn(async move {
                    tokio::select! {
                        () = run(&server, id.clone(), prepared, &out_tx) => {}
                        () = token.cancelled() => {}
                    }
                    running.lock().unwrap_or_else(|p| p.into_inner()).remove(&id);
                });
            }
        }
    }
    drop(out_tx);
    // Listen streams end with their final result; requests in flight finish;
    // the writer ends when the last of them has written.
    shutdown.cancel();
    writer.await.unwrap_or(Ok(()))
}

async fn run(server: &Server, id: RequestId, prepared: switchyard_core::Prepared, out: &mpsc::Sender<Vec<u8>>) {
    let (notify_tx, mut notify_rx) = mpsc::channel::<Value>(32);
    let execution = server.execute(prepared, Some(notify_tx));
    tokio::pin!(execution);
    let execution = loop {
        tokio::select! {
            biased;
            Some(message) = notify_rx.recv() => { let _ = out.send(serde_json::to_vec(&message).unwrap_or_default()).await; }
            execution = &mut execution => break execution,
        }
    };
    while let Ok(message) = notify_rx.try_recv() {
        let _ = out.send(serde_json::to_vec(&message).unwrap_or_default()).await;
    }
    match execution {
        Execution::Result { result, .. } => {
            let _ = out.send(jsonrpc::finished(&id, &result)).await;
        }
        Execution::Error { error, .. } => {
            let _ = out.send(jsonrpc::failure(Some(&id), &error)).await;
        }
        Execution::Listen(mut stream) => {
            while let Some(frame) = stream.next().await {
                let message = match frame {
                    ListenFrame::Notification(message) => message.to_vec(),
                    ListenFrame::Final(result) => jsonrpc::success(&id, &result),
                };
                if out.send(message).await.is_err() {
                    break;
                }
            }
        }
    }
}
