//! DNS-rebinding protection: `Host` and `Origin` must name an allowed host
//! (MCP Streamable HTTP, "Security"). A browser tricked into calling a local
//! server sends the attacker's name in both, so both are checked.

use axum::http::{HeaderMap, StatusCode, Version, header};
use axum::response::Response;

use crate::reply;
use crate::router::Config;

/// The refusal of a request whose `Host` or `Origin` is not allowed. It is the first
/// thing the endpoint does: a rebinding attack must not reach any MCP
/// processing. (A plain call rather than a middleware layer: it is on every
/// request's path, and a layer costs a boxed future per request.)
pub fn refusal(config: &Config, version: Version, headers: &HeaderMap) -> Option<Response> {
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    match host {
        Some(host) if allowed(&config.allowed_hosts, host_name(host)) => {}
        Some(_) => return Some(reply::forbidden("Host not allowed")),
        None if version >= Version::HTTP_11 => {
            return Some(reply::plain(StatusCode::BAD_REQUEST, "Host header required"));
        }
        None => {}
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let name = origin.to_str().ok().and_then(origin_host);
        if !name.is_some_and(|n| allowed(&config.allowed_origins, n)) {
            return Some(reply::forbidden("Origin not allowed"));
        }
    }
    None
}

fn allowed(list: &[String], name: &str) -> bool {
    list.iter().any(|a| a == "*" || a.eq_ignore_ascii_case(name))
}

/// `example.com:8080` → `example.com`; `[::1]:80` → `[::1]`.
fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        host.find(']').map_or(host, |end| &host[..=end])
    } else {
        host.rsplit_once(':').map_or(host, |(name, _)| name)
    }
}

/// `https://example.com:8080` → `example.com`. `null` and malformed origins → `None`.
fn origin_host(origin: &str) -> Option<&str> {
    let (_, rest) = origin.split_once("://")?;
    let authority = rest.split('/').next()?;
    let name = host_name(authority);
    (!name.is_empty()).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_host_names() {
        assert_eq!(host_name("localhost:3000"), "localhost");
        assert_eq!(host_name("127.0.0.1"), "127.0.0.1");
        assert_eq!(host_name("[::1]:8080"), "[::1]");
        assert_eq!(origin_host("http://localhost:5173"), Some("localhost"));
        assert_eq!(origin_host("https://evil.example"), Some("evil.example"));
        assert_eq!(origin_host("null"), None);
    }

    #[test]
    fn wildcard_and_case() {
        let list = vec!["LocalHost".to_owned()];
        assert!(allowed(&list, "localhost"));
        assert!(!allowed(&list, "evil.example"));
        assert!(allowed(&["*".to_owned()], "anything"));
    }
}
