//! Connecting to an upstream under the outbound policy, for the connections
//! of our own (`client::h2c`, `client::http1`): every address DNS gives is
//! checked by the policy, and each is given its share of the connect timeout.
//! Addresses are tried one after another (no Happy Eyeballs, which reqwest's
//! connector had: an unreachable first address costs its share).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;

use super::CallError;
use crate::outbound::OutboundPolicy;

/// How long resolving the upstream's name may take, and connecting to its
/// addresses, shared between them (as reqwest's `connect_timeout`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// TCP keep-alive probes after 15 s of silence, then every 15 s (reqwest's
/// defaults): a connection whose peer vanished without a word is closed by
/// the kernel, not used until a call's deadline passes on it.
const KEEP_ALIVE: socket2::TcpKeepalive =
    socket2::TcpKeepalive::new().with_time(Duration::from_secs(15)).with_interval(Duration::from_secs(15));

/// `url` as what [`dial`] takes: an `http` URI that names a host.
pub(super) fn uri(url: &reqwest::Url) -> Result<http::Uri, String> {
    let uri: http::Uri = url.as_str().parse().map_err(|e| format!("{e}"))?;
    match uri.host() {
        Some(_) => Ok(uri),
        None => Err("the URL has no host".into()),
    }
}

/// A TCP connection to the host and port of `uri` (an `http` URL with a
/// host; an IPv6 literal comes in brackets), at an address `policy` allows.
pub(super) async fn dial(uri: &http::Uri, policy: &OutboundPolicy) -> Result<TcpStream, CallError> {
    let host = uri.host().unwrap_or_default().trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(80);
    let addresses = tokio::time::timeout(CONNECT_TIMEOUT, policy.addresses(host, port))
        .await
        .map_err(|_| CallError::Transport(format!("resolving {host} timed out")))?
        .map_err(CallError::Transport)?;
    connect_any(&addresses).await
}

/// A TCP connection to the first of `addresses` that accepts, without
/// Nagle's delay. Each address has an equal share of [`CONNECT_TIMEOUT`], so
/// one that never answers (an IPv6 address without a route, say) leaves time
/// for the next.
async fn connect_any(addresses: &[SocketAddr]) -> Result<TcpStream, CallError> {
    let share = CONNECT_TIMEOUT / u32::try_from(addresses.len().max(1)).unwrap_or(u32::MAX);
    let mut last = None;
    for address in addresses {
        match tokio::time::timeout(share, TcpStream::connect(address)).await {
            Ok(Ok(tcp)) => {
                tcp.set_nodelay(true).map_err(|e| CallError::Transport(e.to_string()))?;
                socket2::SockRef::from(&tcp)
                    .set_tcp_keepalive(&KEEP_ALIVE)
                    .map_err(|e| CallError::Transport(e.to_string()))?;
                return Ok(tcp);
            }
            Ok(Err(e)) => last = Some(format!("{address}: {e}")),
            Err(_) => last = Some(format!("{address}: no answer within {share:?}")),
        }
    }
    Err(CallError::Transport(last.unwrap_or_else(|| "no address to connect to".into())))
}
