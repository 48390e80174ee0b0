//! `[auth]` as the operator writes it, its defaults (those of [`Config`])
//! and its checks. Its `scopes` table is the data layer's scope policy
//! (`switchyard_core::settings::RawScopes`): which item needs which scope is
//! not this crate's business, only where the operator writes it.

use std::net::SocketAddr;

use serde::Deserialize;
use switchyard_core::settings::RawScopes;
use switchyard_settings::{Secret, Section, StringList};

use crate::{Config, IntrospectionConfig, IssuerConfig};

/// `[auth]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAuth {
    /// The canonical URI of the MCP endpoint as clients reach it, e.g.
    /// `https://mcp.example.com/mcp`: the audience tokens must name.
    /// Default: `http://{bind}{http.endpoint}`.
    pub resource: Option<String>,
    /// Trusted issuers of JWT access tokens.
    #[serde(default)]
    pub issuers: Vec<RawIssuer>,
    /// Token introspection (RFC 7662) for opaque tokens.
    pub introspection: Option<RawIntrospection>,
    /// Scopes every MCP request needs. Default none.
    pub required_scopes: Option<StringList>,
    /// More scopes to announce in the protected resource metadata.
    pub scopes_supported: Option<StringList>,
    /// The scope an OAuth token needs for the admin API. Default `switchyard:admin`.
    pub admin_scope: Option<String>,
    /// Clock skew allowed on `exp`/`nbf`. Default `"30s"`.
    pub leeway: Option<String>,
    /// Verified tokens kept in memory. Default 100000.
    pub cache_capacity: Option<u64>,
    /// How often issuer keys are refetched. Default `"10m"`.
    pub jwks_refresh: Option<String>,
    /// Least time between key refetches caused by an unknown `kid`. Default `"30s"`.
    pub jwks_min_refetch: Option<String>,
    /// `resource_name` in the metadata.
    pub resource_name: Option<String>,
    /// Serve without authentication on a non-loopback address. Default false:
    /// such a bind without `[auth]` issuers or introspection is refused.
    pub allow_unauthenticated: Option<bool>,
    /// Scopes needed per item, on top of the plugins' own.
    #[serde(default)]
    pub scopes: RawScopes,
}

/// `[[auth.issuers]]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawIssuer {
    /// The `iss` value, exactly.
    pub issuer: String,
    /// Its JWKS URL. Default: discovered from the issuer's metadata.
    pub jwks_uri: Option<String>,
    /// Accepted algorithms. Default `["RS256", "PS256", "ES256", "EdDSA"]`.
    pub algorithms: Option<StringList>,
    /// Accepted audiences, when not the resource URI.
    pub audiences: Option<StringList>,
}

/// `[auth.introspection]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawIntrospection {
    /// The introspection endpoint.
    pub endpoint: String,
    /// Switchyard's client id there.
    pub client_id: String,
    /// Its secret; prefer `client_secret_file` or `SWITCHYARD_AUTH__INTROSPECTION__CLIENT_SECRET`.
    pub client_secret: Option<Secret>,
    /// A file holding the secret (a mounted Kubernetes Secret).
    pub client_secret_file: Option<String>,
    /// The issuer the answers speak for.
    pub issuer: String,
    /// How long an active answer is trusted before the token is asked about
    /// again, however late its `exp`: a revocation is seen within it. Default `"60s"`.
    pub max_age: Option<String>,
    /// How long a refused token (inactive, not for us, expired) is remembered,
    /// so repeating it costs no call to the authorization server. Default `"10s"`.
    pub negative_ttl: Option<String>,
    /// Introspection calls in flight at once; beyond it a token waits its
    /// turn, then gets 503. Default 16.
    pub max_concurrent: Option<usize>,
}

/// What `[auth]` makes when authorization is on.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The resource server's settings.
    pub verifier: Config,
    /// The scope the admin API requires of OAuth callers.
    pub admin_scope: String,
}

impl RawAuth {
    /// The resource server's settings; `None` when no issuer or
    /// introspection is configured (no authorization), which a bind beyond
    /// loopback must ask for with `allow_unauthenticated`. `bind` and
    /// `endpoint` make the default resource URI. (`scopes` is the data
    /// layer's: take it before.)
    pub fn check(self, bind: SocketAddr, endpoint: &str, mut section: Section<'_>) -> Option<Settings> {
        if self.issuers.is_empty() && self.introspection.is_none() {
            // Off loopback, serving without authentication must be asked for.
            if !bind.ip().is_loopback() && self.allow_unauthenticated != Some(true) {
                let opt_out = section.key("allow_unauthenticated");
                section.push_whole(format_args!(
                    "bind {bind} is not loopback, so [auth] needs issuers or introspection (or {opt_out} = true, which exposes every tool to anyone who can connect)"
                ));
            }
            return None;
        }
        let resource = self.resource.unwrap_or_else(|| format!("http://{bind}{endpoint}"));
        let issuers = self.issuers.into_iter().map(|issuer| issuer.check(&mut section)).collect();
        let mut config = Config::new(resource, issuers);
        if let Some(introspection) = self.introspection {
            introspection.check(&mut config, &mut section.nested("introspection"));
        }
        config.required_scopes = self.required_scopes.map(StringList::into_vec).unwrap_or_default();
        config.scopes_supported = self.scopes_supported.map(StringList::into_vec).unwrap_or_default();
        config.leeway = section.duration("leeway", self.leeway.as_deref(), config.leeway);
        config.jwks_refresh = section.duration("jwks_refresh", self.jwks_refresh.as_deref(), config.jwks_refresh);
        config.jwks_min_refetch =
            section.duration("jwks_min_refetch", self.jwks_min_refetch.as_deref(), config.jwks_min_refetch);
        config.cache_capacity = self.cache_capacity.unwrap_or(config.cache_capacity);
        config.resource_name = self.resource_name;
        if let Err(error) = config.validate() {
            section.push_as_is(error);
        }
        Some(Settings { verifier: config, admin_scope: self.admin_scope.unwrap_or_else(|| "switchyard:admin".into()) })
    }
}

impl RawIssuer {
    fn check(self, section: &mut Section<'_>) -> IssuerConfig {
        let mut config = IssuerConfig::new(self.issuer);
        config.jwks_uri = self.jwks_uri;
        if let Some(algorithms) = self.algorithms {
            config.algorithms = algorithms
                .into_vec()
                .iter()
                .filter_map(|name| {
                    name.parse()
                        .map_err(|_| section.push("issuers", format_args!("algorithm {name:?} is unknown")))
                        .ok()
                })
                .collect();
        }
        config.audiences = self.audiences.map(StringList::into_vec).unwrap_or_default();
        config
    }
}

impl RawIntrospection {
    fn check(self, config: &mut Config, section: &mut Section<'_>) {
        config.introspection_max_concurrent = self.max_concurrent.unwrap_or(config.introspection_max_concurrent);
        config.introspection_max_age =
            section.duration("max_age", self.max_age.as_deref(), config.introspection_max_age);
        config.introspection_negative_ttl =
            section.duration("negative_ttl", self.negative_ttl.as_deref(), config.introspection_negative_ttl);
        let secret = match (self.client_secret, self.client_secret_file) {
            (Some(secret), None) => secret,
            (None, Some(path)) => {
                Secret::new(std::fs::read_to_string(&path).map(|s| s.trim().to_owned()).unwrap_or_else(|e| {
                    section.push("client_secret_file", format_args!("{path}: {e}"));
                    String::new()
                }))
            }
            _ => {
                section.push_whole("set one of client_secret and client_secret_file");
                Secret::default()
            }
        };
        config.introspection = Some(IntrospectionConfig {
            endpoint: self.endpoint,
            client_id: self.client_id,
            client_secret: secret,
            issuer: self.issuer,
        });
    }
}
