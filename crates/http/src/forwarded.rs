//! The address a request came from, for what is counted per address (rate
//! limits and listen streams of anonymous callers).
//!
//! Behind a load balancer every request arrives from the balancer, so every
//! anonymous caller would share one budget. When the operator names the
//! proxies it trusts (`http.trusted_proxies`), the address is read from
//! `X-Forwarded-For` instead: from the right, past every trusted proxy, to
//! the first address no trusted proxy stands for. Entries left of it were
//! written by the client and are never believed; without trusted proxies
//! the header is ignored altogether.

use std::net::IpAddr;

use axum::http::HeaderMap;
use ipnet::IpNet;

/// `X-Forwarded-For`.
const FORWARDED_FOR: &str = "x-forwarded-for";

/// The client's address: `peer`, or when `peer` is a trusted proxy, the
/// nearest untrusted address the proxies recorded.
pub(crate) fn client_address(peer: IpAddr, headers: &HeaderMap, trusted: &[IpNet]) -> IpAddr {
    let peer = canonical(peer);
    if !is_trusted(peer, trusted) {
        return peer;
    }
    // Several headers are one list, in order (RFC 9110 §5.3).
    let hops: Vec<&str> = headers
        .get_all(FORWARDED_FOR)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .collect();
    let mut address = peer;
    for hop in hops.iter().rev() {
        let Some(hop) = parse_hop(hop) else {
            // Garbage from here on: the last address a trusted proxy vouched for.
            return address;
        };
        address = hop;
        if !is_trusted(hop, trusted) {
            return hop;
        }
    }
    address
}

/// Whether a trusted range holds `address` (canonical), also when the range
/// was written IPv4-mapped (`::ffff:10.0.0.0/104`).
fn is_trusted(address: IpAddr, trusted: &[IpNet]) -> bool {
    let mapped = match address {
        IpAddr::V4(v4) => Some(IpAddr::V6(v4.to_ipv6_mapped())),
        IpAddr::V6(_) => None,
    };
    trusted.iter().any(|net| net.contains(&address) || mapped.is_some_and(|mapped| net.contains(&mapped)))
}

/// IPv4-mapped IPv6 addresses (a dual-stack socket's view of IPv4) as IPv4.
fn canonical(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        IpAddr::V4(_) => address,
    }
}

/// One entry: `1.2.3.4`, `2001:db8::1`, or with a port, `1.2.3.4:5678` and
/// `[2001:db8::1]:5678`, as some proxies write them.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim();
    if let Ok(address) = hop.parse() {
        return Some(canonical(address));
    }
    if let Ok(socket) = hop.parse::<std::net::SocketAddr>() {
        return Some(canonical(socket.ip()));
    }
    hop.strip_prefix('[').and_then(|rest| rest.strip_suffix(']')).and_then(|v6| v6.parse().ok()).map(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for value in values {
            map.append(FORWARDED_FOR, value.parse().unwrap());
        }
        map
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn without_trusted_proxies_the_header_is_ignored() {
        let forged = headers(&["203.0.113.9"]);
        assert_eq!(client_address(ip("198.51.100.1"), &forged, &[]), ip("198.51.100.1"));
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_says() {
        let trusted = ["10.0.0.0/8".parse().unwrap()];
        assert_eq!(client_address(ip("198.51.100.1"), &headers(&["203.0.113.9"]), &trusted), ip("198.51.100.1"));
    }

    #[test]
    fn the_nearest_untrusted_hop_is_the_client() {
        let trusted = ["10.0.0.0/8".parse().unwrap(), "fd00::/8".parse().unwrap()];
        // The client wrote 1.1.1.1 itself; the edge proxy appended its real
        // address, the inner proxy the edge's.
        let chain = headers(&["1.1.1.1, 203.0.113.9", "10.1.1.1"]);
        assert_eq!(client_address(ip("10.2.2.2"), &chain, &trusted), ip("203.0.113.9"));
        assert_eq!(client_address(ip("::ffff:10.2.2.2"), &chain, &trusted), ip("203.0.113.9"), "mapped peer");
        let ports = headers(&["[2001:db8::7]:443, 10.1.1.1:80"]);
        assert_eq!(client_address(ip("fd00::1"), &ports, &trusted), ip("2001:db8::7"));
        let written_mapped = ["::ffff:10.0.0.0/104".parse().unwrap()];
        assert_eq!(client_address(ip("10.2.2.2"), &chain, &written_mapped), ip("203.0.113.9"));
    }

    #[test]
    fn no_header_or_garbage_stops_at_the_last_trusted_address() {
        let trusted = ["10.0.0.0/8".parse().unwrap()];
        assert_eq!(client_address(ip("10.2.2.2"), &HeaderMap::new(), &trusted), ip("10.2.2.2"));
        let garbage = headers(&["203.0.113.9, unknown, 10.1.1.1"]);
        assert_eq!(client_address(ip("10.2.2.2"), &garbage, &trusted), ip("10.1.1.1"));
        let all_trusted = headers(&["10.3.3.3, 10.1.1.1"]);
        assert_eq!(client_address(ip("10.2.2.2"), &all_trusted, &trusted), ip("10.3.3.3"));
    }
}
