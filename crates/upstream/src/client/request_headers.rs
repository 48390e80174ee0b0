//! [`RequestHeaders`]: the headers of one request to an upstream, kept as the
//! upstream's base (made once: content negotiation, our static credential,
//! the revision of a stateless request) and the request's own (`Mcp-Method`,
//! `Mcp-Name`, a session's revision and id, a bearer token, mirrored
//! arguments).
//!
//! Our own HTTP/1.1 connections write them from the two parts as they are;
//! h2c (for each attempt), reqwest and a cancel notice, which take a
//! `HeaderMap`, still get the base cloned and the request's own inserted
//! into it. Before, every request made that map; without it, an upstream
//! call over HTTP/1.1 cost the front 77,047 instructions against 78,783
//! (0.978; #18, `loadtest/callgrind-tools-call.sh` with `UPSTREAM=http1`).

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

/// One request's headers: the base and the request's own, each of which
/// replaces a base header of its name, as `HeaderMap::insert` would.
#[derive(Clone)]
pub(super) struct RequestHeaders<'a> {
    base: &'a HeaderMap,
    /// No name twice ([`RequestHeaders::insert`] replaces).
    own: Vec<(HeaderName, HeaderValue)>,
}

impl<'a> RequestHeaders<'a> {
    /// The base's headers alone. `base` holds each name once, as the maps
    /// of `HeaderBase`, built by `insert`, do.
    pub(super) fn new(base: &'a HeaderMap) -> Self {
        // Room for what a stateless request adds but mirrored arguments
        // (`Mcp-Param-*`, which few tools have): method, name, token.
        Self { base, own: Vec::with_capacity(3) }
    }

    /// `name: value`, in place of any header of that name before it.
    pub(super) fn insert(&mut self, name: HeaderName, value: HeaderValue) {
        match self.own.iter_mut().find(|(own, _)| *own == name) {
            Some((_, before)) => *before = value,
            None => self.own.push((name, value)),
        }
    }

    /// Each header once: the base's that none of the request's own
    /// replaces, then the request's own.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&HeaderName, &HeaderValue)> {
        let own = &self.own;
        self.base
            .iter()
            .filter(move |(name, _)| !own.iter().any(|(replacing, _)| replacing == *name))
            .chain(own.iter().map(|(name, value)| (name, value)))
    }

    /// The same headers as a map, for a client that takes one.
    pub(super) fn into_map(self) -> HeaderMap {
        let mut map = self.base.clone();
        for (name, value) in self.own {
            map.insert(name, value);
        }
        map
    }

    /// [`RequestHeaders::into_map`], keeping these: for a cancel notice,
    /// made beside the request in a 2025-era session, and for each attempt
    /// of an h2c request. (A name or value is static, or shared: cloning it
    /// counts a reference, once it has been made shared by its first clone.)
    pub(super) fn to_map(&self) -> HeaderMap {
        let mut map = self.base.clone();
        for (name, value) in &self.own {
            map.insert(name.clone(), value.clone());
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};

    use super::*;

    /// The headers as sorted text pairs, whichever form holds them.
    fn pairs<'h>(headers: impl IntoIterator<Item = (&'h HeaderName, &'h HeaderValue)>) -> Vec<(String, String)> {
        let mut pairs: Vec<_> =
            headers.into_iter().map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned())).collect();
        pairs.sort();
        pairs
    }

    fn written(headers: &RequestHeaders<'_>) -> Vec<(String, String)> {
        pairs(headers.iter())
    }

    fn as_map(map: &HeaderMap) -> Vec<(String, String)> {
        pairs(map)
    }

    #[test]
    fn the_request_s_own_headers_replace_the_base_s_as_a_map_s_inserts_would() {
        let mut base = HeaderMap::new();
        base.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        base.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        // An operator's static credential, and a token of the same name set after it.
        base.insert(AUTHORIZATION, HeaderValue::from_static("Basic static"));
        let mut headers = RequestHeaders::new(&base);
        headers.insert(HeaderName::from_static("mcp-method"), HeaderValue::from_static("tools/call"));
        headers.insert(AUTHORIZATION, HeaderValue::from_static("Bearer token"));
        // A later insert of a name set before: the last one wins.
        headers.insert(HeaderName::from_static("mcp-method"), HeaderValue::from_static("mirrored"));
        let expected = [
            ("accept", "application/json, text/event-stream"),
            ("authorization", "Bearer token"),
            ("content-type", "application/json"),
            ("mcp-method", "mirrored"),
        ]
        .map(|(n, v)| (n.to_owned(), v.to_owned()));
        assert_eq!(written(&headers), expected);
        assert_eq!(as_map(&headers.to_map()), expected);
        assert_eq!(as_map(&headers.into_map()), expected);
    }

    #[test]
    fn a_name_made_at_run_time_is_replaced_by_the_same_name_made_when_compiled() {
        const VERSION: HeaderName = HeaderName::from_static(switchyard_protocol::headers::PROTOCOL_VERSION);
        let mut base = HeaderMap::new();
        // As `HeaderBase` inserts it: by its text.
        base.insert(switchyard_protocol::headers::PROTOCOL_VERSION, HeaderValue::from_static("2026-07-28"));
        // Two values under one name, which `HeaderMap::insert` would both replace.
        base.append(ACCEPT, HeaderValue::from_static("application/json"));
        base.append(ACCEPT, HeaderValue::from_static("text/event-stream"));
        let mut headers = RequestHeaders::new(&base);
        headers.insert(VERSION, HeaderValue::from_static("2025-11-25"));
        headers.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        let expected = [("accept", "application/json, text/event-stream"), ("mcp-protocol-version", "2025-11-25")]
            .map(|(n, v)| (n.to_owned(), v.to_owned()));
        assert_eq!(written(&headers), expected);
        assert_eq!(as_map(&headers.to_map()), expected);
    }

    #[test]
    fn a_sensitive_value_stays_sensitive_in_every_form() {
        let base = HeaderMap::new();
        let mut headers = RequestHeaders::new(&base);
        let mut bearer = HeaderValue::from_static("Bearer token");
        bearer.set_sensitive(true);
        headers.insert(AUTHORIZATION, bearer);
        assert!(headers.iter().all(|(_, value)| value.is_sensitive()));
        assert!(headers.to_map()[AUTHORIZATION].is_sensitive());
        assert!(headers.into_map()[AUTHORIZATION].is_sensitive());
    }

    #[test]
    fn without_its_own_a_request_carries_the_base() {
        let mut base = HeaderMap::new();
        base.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let headers = RequestHeaders::new(&base);
        assert_eq!(written(&headers), [("content-type".to_owned(), "application/json".to_owned())]);
    }
}
