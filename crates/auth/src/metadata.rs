//! Protected Resource Metadata (RFC 9728): where clients learn which
//! authorization servers issue tokens for this server and which scopes exist.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use crate::config::Config;

const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The path of the metadata for `resource`: the well-known prefix inserted
/// before the resource's path (`https://h/mcp` → `/.well-known/oauth-protected-resource/mcp`).
pub fn path(resource: &str) -> String {
    let path = resource_path(resource);
    if path.is_empty() || path == "/" { WELL_KNOWN.to_owned() } else { format!("{WELL_KNOWN}{path}") }
}

/// The absolute metadata URL for `resource`, as the 401 challenge names it.
pub fn url(resource: &str) -> String {
    let path_start =
        resource.find("://").map(|i| i + 3).and_then(|start| resource[start..].find('/').map(|p| start + p));
    let origin = path_start.map_or(resource, |p| &resource[..p]);
    format!("{origin}{}", path(resource))
}

fn resource_path(resource: &str) -> &str {
    let after_scheme = resource.find("://").map_or(0, |i| i + 3);
    let path = resource[after_scheme..].find('/').map_or("", |p| &resource[after_scheme + p..]);
    path.split(['?', '#']).next().unwrap_or("").trim_end_matches('/')
}

/// Scopes to announce besides the configured ones, asked on every request
/// for the document (the binary answers with what the policy and the
/// registered plugins name, which changes at run time).
pub type ExtraScopes = Arc<dyn Fn() -> BTreeSet<String> + Send + Sync>;

/// The metadata document. `scopes_supported` is the required scopes, the
/// configured ones and `extra`, never `offline_access`; when that is none,
/// it is left out (RFC 9728 makes it optional), because an empty list makes
/// today's clients ask for no scope but `offline_access`, which
/// authorization servers refuse for a resource.
pub fn document(config: &Config, extra: &BTreeSet<String>) -> Value {
    let scopes: BTreeSet<&String> = config
        .required_scopes
        .iter()
        .chain(&config.scopes_supported)
        .chain(extra)
        .filter(|s| s.as_str() != "offline_access")
        .collect();
    let mut authorization_servers: Vec<&str> = config.issuers.iter().map(|i| i.issuer.as_str()).collect();
    if let Some(introspection) = &config.introspection
        && !authorization_servers.contains(&introspection.issuer.as_str())
    {
        authorization_servers.push(&introspection.issuer);
    }
    let mut document = json!({
        "resource": config.resource,
        "authorization_servers": authorization_servers,
        "bearer_methods_supported": ["header"],
    });
    if !scopes.is_empty() {
        document["scopes_supported"] = json!(scopes);
    }
    if let Some(name) = &config.resource_name {
        document["resource_name"] = json!(name);
    }
    document
}

/// Serves the document at the path-inserted URI of the resource and at the
/// root well-known URI (clients try the first, then the second). Public and
/// readable cross-origin: browser-based clients fetch it before they have a token.
pub fn router(config: &Config, extra: ExtraScopes) -> Router {
    let config = Arc::new(config.clone());
    let inserted = path(&config.resource);
    let serve = move || {
        let body = serde_json::to_vec(&document(&config, &extra())).unwrap_or_default();
        async move {
            let mut response: Response = body.into_response();
            let headers = response.headers_mut();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
            headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("max-age=300, public"));
            response
        }
    };
    let mut router = Router::new().route(WELL_KNOWN, get(serve.clone()));
    if inserted != WELL_KNOWN {
        router = router.route(&inserted, get(serve));
    }
    router
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IssuerConfig;

    #[test]
    fn the_metadata_url_inserts_the_well_known_path() {
        assert_eq!(
            url("https://mcp.example.com/public/mcp"),
            "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp"
        );
        assert_eq!(url("https://mcp.example.com"), "https://mcp.example.com/.well-known/oauth-protected-resource");
        assert_eq!(url("http://127.0.0.1:8080/mcp/"), "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp");
    }

    #[test]
    fn the_document_names_issuers_and_scopes() {
        let mut config = Config::new("https://h/mcp", vec![IssuerConfig::new("https://as")]);
        config.required_scopes = vec!["mcp".into()];
        config.scopes_supported = vec!["files:read".into(), "offline_access".into(), "mcp".into()];
        let document = document(&config, &BTreeSet::from(["tools:call".to_owned()]));
        assert_eq!(document["resource"], "https://h/mcp");
        assert_eq!(document["authorization_servers"], json!(["https://as"]));
        assert_eq!(document["scopes_supported"], json!(["files:read", "mcp", "tools:call"]));

        config.required_scopes.clear();
        config.scopes_supported = vec!["offline_access".into()];
        let without = super::document(&config, &BTreeSet::new());
        assert!(without.get("scopes_supported").is_none(), "no empty list: {without}");
    }
}
