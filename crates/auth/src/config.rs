//! What the resource server trusts and announces.

use std::time::Duration;

use jsonwebtoken::Algorithm;
use jsonwebtoken::AlgorithmFamily;

/// Auth settings; composed into the binary's `Config`.
#[derive(Debug, Clone)]
pub struct Config {
    /// The canonical URI of the MCP endpoint (RFC 8707), e.g.
    /// `https://mcp.example.com/mcp`: the audience tokens must carry, the
    /// `resource` of the metadata, and where the metadata URL is derived from.
    pub resource: String,
    /// Issuers whose JWT access tokens are accepted.
    pub issuers: Vec<IssuerConfig>,
    /// Token introspection for opaque tokens.
    pub introspection: Option<IntrospectionConfig>,
    /// Scopes every MCP request needs (a missing one is a 403 at the door).
    pub required_scopes: Vec<String>,
    /// Scopes announced in the metadata's `scopes_supported`, besides the
    /// required ones (the binary adds every scope the policy names).
    pub scopes_supported: Vec<String>,
    /// Clock skew allowed on `exp` and `nbf`. Default 30 s.
    pub leeway: Duration,
    /// Verified tokens kept in the cache. Default 100,000.
    pub cache_capacity: u64,
    /// How often every issuer's keys are refetched. Default 10 minutes.
    pub jwks_refresh: Duration,
    /// The least time between two fetches of an issuer's keys caused by an
    /// unknown `kid`. Default 30 s.
    pub jwks_min_refetch: Duration,
    /// How long an active introspection answer is trusted, with or without
    /// `exp`: the token is asked about again after it, so a revocation is
    /// seen within it. Default 60 s.
    pub introspection_max_age: Duration,
    /// How long a token the introspection endpoint refused (inactive, another
    /// audience, expired) is remembered as refused. Default 10 s.
    pub introspection_negative_ttl: Duration,
    /// Introspection calls in flight at once. Beyond it a token waits its
    /// turn up to `http_timeout`, then gets 503: a flood of made-up opaque
    /// tokens costs the authorization server this many calls at a time, not
    /// one per request. Default 16.
    pub introspection_max_concurrent: usize,
    /// A human-readable name for the metadata's `resource_name`.
    pub resource_name: Option<String>,
    /// Timeout of every request to an authorization server. Default 5 s.
    pub http_timeout: Duration,
}

impl Config {
    /// A configuration trusting `issuers` for `resource`, with the defaults.
    pub fn new(resource: impl Into<String>, issuers: Vec<IssuerConfig>) -> Self {
        Self {
            resource: resource.into(),
            issuers,
            introspection: None,
            required_scopes: Vec::new(),
            scopes_supported: Vec::new(),
            leeway: Duration::from_secs(30),
            cache_capacity: 100_000,
            jwks_refresh: Duration::from_secs(600),
            jwks_min_refetch: Duration::from_secs(30),
            introspection_max_age: Duration::from_secs(60),
            introspection_negative_ttl: Duration::from_secs(10),
            introspection_max_concurrent: 16,
            resource_name: None,
            http_timeout: Duration::from_secs(5),
        }
    }

    /// Checks what cannot be checked by types.
    ///
    /// # Errors
    /// A resource that is not an absolute URI without fragment; no way to
    /// verify tokens at all; a symmetric algorithm.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let resource: http::Uri = self.resource.parse().map_err(|_| ConfigError::Resource(self.resource.clone()))?;
        if resource.scheme().is_none() || resource.host().is_none() || self.resource.contains('#') {
            return Err(ConfigError::Resource(self.resource.clone()));
        }
        if self.issuers.is_empty() && self.introspection.is_none() {
            return Err(ConfigError::NoVerifier);
        }
        if self.introspection.is_some() && self.introspection_max_concurrent == 0 {
            return Err(ConfigError::IntrospectionConcurrency);
        }
        for issuer in &self.issuers {
            if issuer.algorithms.is_empty() {
                return Err(ConfigError::Algorithm { issuer: issuer.issuer.clone(), algorithm: "(none)".into() });
            }
            // A symmetric algorithm would let anyone holding a published
            // public key sign tokens with it as the HMAC secret.
            if let Some(symmetric) = issuer.algorithms.iter().find(|a| a.family() == AlgorithmFamily::Hmac) {
                return Err(ConfigError::Algorithm {
                    issuer: issuer.issuer.clone(),
                    algorithm: format!("{symmetric:?}"),
                });
            }
        }
        Ok(())
    }

    /// The audiences a token may name: this resource, in the spellings a
    /// client may derive (with and without a trailing slash).
    pub(crate) fn audiences(&self, issuer: &IssuerConfig) -> Vec<String> {
        if !issuer.audiences.is_empty() {
            return issuer.audiences.clone();
        }
        let trimmed = self.resource.trim_end_matches('/');
        vec![trimmed.to_owned(), format!("{trimmed}/")]
    }
}

/// A trusted issuer of JWT access tokens.
#[derive(Debug, Clone)]
pub struct IssuerConfig {
    /// The `iss` value, exactly as the authorization server writes it.
    pub issuer: String,
    /// Where its keys are; discovered from the issuer's metadata when `None`.
    pub jwks_uri: Option<String>,
    /// Algorithms accepted from it. Default RS256, PS256, ES256, EdDSA.
    pub algorithms: Vec<Algorithm>,
    /// Accepted audiences when they differ from the resource (some servers
    /// put an API identifier there); empty means the resource URI.
    pub audiences: Vec<String>,
}

impl IssuerConfig {
    /// An issuer with discovered keys and the default algorithms.
    pub fn new(issuer: impl Into<String>) -> Self {
        Self {
            issuer: issuer.into(),
            jwks_uri: None,
            algorithms: vec![Algorithm::RS256, Algorithm::PS256, Algorithm::ES256, Algorithm::EdDSA],
            audiences: Vec::new(),
        }
    }
}

/// Token introspection (RFC 7662) for opaque access tokens.
#[derive(Debug, Clone)]
pub struct IntrospectionConfig {
    /// The introspection endpoint.
    pub endpoint: String,
    /// Switchyard's client id at the authorization server.
    pub client_id: String,
    /// Its secret (sent with HTTP Basic).
    pub client_secret: switchyard_settings::Secret,
    /// The issuer the answers speak for, used when an answer has no `iss`.
    pub issuer: String,
}

/// A configuration that cannot work.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The resource is not an absolute URI without fragment.
    #[error("auth.resource must be an absolute URI without fragment, got {0:?}")]
    Resource(String),
    /// Neither issuers nor introspection.
    #[error("auth needs at least one issuer or an introspection endpoint")]
    NoVerifier,
    /// Introspection that could never run.
    #[error("auth.introspection.max_concurrent must be at least 1")]
    IntrospectionConcurrency,
    /// An algorithm that must not be used.
    #[error("issuer {issuer}: algorithm {algorithm} is not allowed (asymmetric algorithms only)")]
    Algorithm {
        /// The issuer.
        issuer: String,
        /// The algorithm.
        algorithm: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symmetric_algorithms_and_bad_resources_are_refused() {
        let mut config = Config::new("https://mcp.example.com/mcp", vec![IssuerConfig::new("https://as")]);
        assert!(config.validate().is_ok());
        config.issuers[0].algorithms.push(Algorithm::HS256);
        assert!(matches!(config.validate(), Err(ConfigError::Algorithm { .. })));
        let config = Config::new("/mcp", vec![IssuerConfig::new("https://as")]);
        assert!(matches!(config.validate(), Err(ConfigError::Resource(_))));
        let config = Config::new("https://h/mcp", Vec::new());
        assert!(matches!(config.validate(), Err(ConfigError::NoVerifier)));
    }
}
