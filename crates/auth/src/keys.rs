//! One trusted issuer's signing keys: discovered, fetched, cached, and
//! refetched in the background or when a token names a key we do not have.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{JwkSet, PublicKeyUse};
use jsonwebtoken::{AlgorithmFamily, DecodingKey};
use serde_json::Value;

use crate::config::IssuerConfig;
use crate::error::Rejection;

/// A verification key and the algorithm family it may be used with.
pub(crate) struct Key {
    pub(crate) key: DecodingKey,
    pub(crate) family: AlgorithmFamily,
}

#[derive(Default)]
struct KeySet {
    by_kid: HashMap<String, Arc<Key>>,
    /// Keys published without a `kid`: usable only by tokens without one.
    anonymous: Vec<Arc<Key>>,
}

/// The keys of one issuer.
pub(crate) struct IssuerKeys {
    pub(crate) config: IssuerConfig,
    keys: RwLock<Arc<KeySet>>,
    /// The JWKS URL, once configured or discovered.
    jwks_uri: RwLock<Option<String>>,
    /// One fetch at a time; holds when the last one started.
    fetching: tokio::sync::Mutex<Option<Instant>>,
    min_refetch: Duration,
}

impl IssuerKeys {
    pub(crate) fn new(config: IssuerConfig, min_refetch: Duration) -> Self {
        let jwks_uri = RwLock::new(config.jwks_uri.clone());
        Self { config, keys: RwLock::default(), jwks_uri, fetching: tokio::sync::Mutex::new(None), min_refetch }
    }

    fn lookup(&self, kid: Option<&str>) -> Option<Arc<Key>> {
        let keys = Arc::clone(&self.keys.read().unwrap_or_else(|p| p.into_inner()));
        match kid {
            Some(kid) => keys.by_kid.get(kid).cloned(),
            // Without a `kid` the only safe choice is the only key there is.
            None if keys.anonymous.len() + keys.by_kid.len() == 1 => {
                keys.anonymous.first().or_else(|| keys.by_kid.values().next()).cloned()
            }
            None => None,
        }
    }

    /// The key a token names; refetches the set once (rate-limited) when it
    /// is not known yet, which is how a key rotation at the issuer is seen.
    pub(crate) async fn key(&self, http: &reqwest::Client, kid: Option<&str>) -> Result<Arc<Key>, Rejection> {
        if let Some(key) = self.lookup(kid) {
            return Ok(key);
        }
        self.refresh(http, false).await?;
        self.lookup(kid).ok_or(Rejection::UnknownKey)
    }

    /// Fetches the key set. Unless `scheduled`, a fetch within `min_refetch`
    /// of the previous one is skipped, so unknown `kid`s cannot make us
    /// hammer the issuer; concurrent callers wait for one fetch.
    pub(crate) async fn refresh(&self, http: &reqwest::Client, scheduled: bool) -> Result<(), Rejection> {
        let mut last = self.fetching.lock().await;
        if !scheduled && last.is_some_and(|at| at.elapsed() < self.min_refetch) {
            return Ok(());
        }
        *last = Some(Instant::now());
        let set = match self.fetch(http).await {
            Ok(set) => set,
            Err(why) => {
                tracing::warn!(issuer = %self.config.issuer, %why, "could not fetch the issuer's keys");
                return Err(Rejection::Unavailable);
            }
        };
        *self.keys.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(set);
        Ok(())
    }

    async fn fetch(&self, http: &reqwest::Client) -> Result<KeySet, String> {
        let configured = self.jwks_uri.read().unwrap_or_else(|p| p.into_inner()).clone();
        let jwks_uri = match configured {
            Some(uri) => uri,
            None => {
                let uri = discover_jwks_uri(http, &self.config.issuer).await?;
                *self.jwks_uri.write().unwrap_or_else(|p| p.into_inner()) = Some(uri.clone());
                uri
            }
        };
        let set: JwkSet =
            get_json(http, &jwks_uri).await.and_then(|v| serde_json::from_value(v).map_err(|e| e.to_string()))?;
        let mut keys = KeySet::default();
        for jwk in &set.keys {
            if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
                continue;
            }
            let family = match &jwk.algorithm {
                jsonwebtoken::jwk::AlgorithmParameters::RSA(_) => AlgorithmFamily::Rsa,
                jsonwebtoken::jwk::AlgorithmParameters::EllipticCurve(_) => AlgorithmFamily::Ec,
                jsonwebtoken::jwk::AlgorithmParameters::OctetKeyPair(_) => AlgorithmFamily::Ed,
                // Symmetric keys have no business in a public key set.
                jsonwebtoken::jwk::AlgorithmParameters::OctetKey(_) => continue,
                _ => continue,
            };
            let key = match DecodingKey::from_jwk(jwk) {
                Ok(key) => Arc::new(Key { key, family }),
                Err(error) => {
                    tracing::warn!(issuer = %self.config.issuer, kid = ?jwk.common.key_id, %error, "unusable key skipped");
                    continue;
                }
            };
            match &jwk.common.key_id {
                Some(kid) => {
                    keys.by_kid.insert(kid.clone(), key);
                }
                None => keys.anonymous.push(key),
            }
        }
        tracing::debug!(issuer = %self.config.issuer, keys = keys.by_kid.len() + keys.anonymous.len(), "issuer keys fetched");
        Ok(keys)
    }
}

/// The issuer's `jwks_uri` from its metadata: RFC 8414 first (path-inserted),
/// then OpenID discovery (appended). The document's `issuer` must be exactly
/// the one asked about.
async fn discover_jwks_uri(http: &reqwest::Client, issuer: &str) -> Result<String, String> {
    let mut last_error = String::from("no metadata");
    for url in metadata_urls(issuer) {
        match get_json(http, &url).await {
            Ok(document) if document.get("issuer").and_then(Value::as_str) == Some(issuer) => {
                return document
                    .get("jwks_uri")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| format!("{url} has no jwks_uri"));
            }
            Ok(_) => last_error = format!("{url} names another issuer"),
            Err(why) => last_error = why,
        }
    }
    Err(last_error)
}

/// Where an issuer's metadata may be: RFC 8414 inserts the well-known path
/// before the issuer's path; OpenID Connect appends it.
pub(crate) fn metadata_urls(issuer: &str) -> Vec<String> {
    let trimmed = issuer.trim_end_matches('/');
    let (origin, path) = match trimmed.find("://").map(|i| i + 3) {
        Some(start) => match trimmed[start..].find('/') {
            Some(slash) => trimmed.split_at(start + slash),
            None => (trimmed, ""),
        },
        None => (trimmed, ""),
    };
    vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{trimmed}/.well-known/openid-configuration"),
    ]
}

pub(crate) async fn get_json(http: &reqwest::Client, url: &str) -> Result<Value, String> {
    let response = http.get(url).send().await.map_err(|e| format!("{url}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("{url}: HTTP {}", response.status()));
    }
    response.json().await.map_err(|e| format!("{url}: {e}"))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A real JWKS endpoint on loopback that counts its requests.
    async fn counting_jwks() -> (String, Arc<AtomicUsize>) {
        let hits = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&hits);
        let app = axum::Router::new().route(
            "/jwks",
            axum::routing::get(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                async { axum::Json(serde_json::json!({ "keys": [] })) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/jwks", listener.local_addr().expect("address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, hits)
    }

    #[tokio::test]
    async fn unknown_kids_cannot_make_us_hammer_the_issuer() {
        let (url, hits) = counting_jwks().await;
        let mut config = IssuerConfig::new("https://issuer.example");
        config.jwks_uri = Some(url);
        let keys = IssuerKeys::new(config, Duration::from_secs(60));
        let http = reqwest::Client::new();
        for n in 0..20 {
            let refused = keys.key(&http, Some(&format!("made-up-{n}"))).await.err();
            assert_eq!(refused, Some(Rejection::UnknownKey));
        }
        assert_eq!(hits.load(Ordering::SeqCst), 1, "one fetch for twenty unknown kids");
        // The scheduled refresh is not held back.
        keys.refresh(&http, true).await.expect("refresh");
        assert_eq!(hits.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn metadata_urls_insert_and_append() {
        assert_eq!(
            metadata_urls("https://as.example.com"),
            [
                "https://as.example.com/.well-known/oauth-authorization-server",
                "https://as.example.com/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            metadata_urls("https://as.example.com/tenant1/"),
            [
                "https://as.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://as.example.com/tenant1/.well-known/openid-configuration"
            ]
        );
    }
}
