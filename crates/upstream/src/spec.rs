//! The spec of an upstream plugin, and where its secrets come from.

use std::time::Duration;

use serde_json::{Map, Value};

pub use switchyard_core::plugin_spec::SpecError;
use switchyard_core::plugin_spec::{invalid, only_known};

use crate::secrets::{SecretPolicy, SecretRef};

/// Header names about a connection, which a credential cannot be sent as
/// (RFC 9110, 7.6.1; HTTP/2 refuses every one of them, RFC 9113, 8.2.2).
const HOP_BY_HOP: [&str; 7] =
    ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "host"];

/// How Switchyard authenticates itself to the upstream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Credentials {
    /// No credentials.
    #[default]
    None,
    /// A static header, e.g. `Authorization: Bearer …` or `X-Api-Key: …`.
    Header {
        /// The header name.
        name: String,
        /// Its value.
        value: SecretRef,
    },
    /// OAuth 2.1 client credentials: the platform's own token, fetched from
    /// the token endpoint and refreshed before it expires.
    ClientCredentials(TokenGrant),
    /// OAuth token exchange (RFC 8693): a request made for a caller carries
    /// a token the authorization server issued for this upstream in
    /// exchange for the caller's own, which never leaves. The platform's own
    /// requests (discovery, lists, the listen stream) carry a
    /// client-credentials token of the same client.
    TokenExchange {
        /// The client, its endpoint, and what its tokens are for.
        grant: TokenGrant,
        /// The upstream as the authorization server names it (`audience`).
        audience: Option<String>,
        /// The issuer whose callers' tokens are exchanged (`subject_issuer`);
        /// when not given, the issuer at the token endpoint's origin. A
        /// caller's token from any other issuer is never sent there.
        subject_issuer: Option<String>,
    },
}

/// An OAuth client of the platform's at an authorization server, and what
/// the tokens it asks for are for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenGrant {
    /// The authorization server's token endpoint.
    pub token_url: String,
    /// The client id.
    pub client_id: String,
    /// The client secret (sent as `client_secret_post`).
    pub client_secret: SecretRef,
    /// Scopes to ask for.
    pub scope: Option<String>,
    /// The resource indicator (RFC 8707), usually the upstream's URL.
    pub resource: Option<String>,
}

impl Credentials {
    /// The OAuth client this upstream's tokens come from, if any.
    pub fn grant(&self) -> Option<&TokenGrant> {
        match self {
            Self::ClientCredentials(grant) | Self::TokenExchange { grant, .. } => Some(grant),
            Self::None | Self::Header { .. } => None,
        }
    }

    /// The spec field the OAuth client was given under.
    pub(crate) fn grant_field(&self) -> &'static str {
        match self {
            Self::TokenExchange { .. } => "spec.auth.token_exchange",
            _ => "spec.auth.client_credentials",
        }
    }
}

/// An upstream plugin's spec:
///
/// ```json
/// {"url": "https://tools.example.com/mcp", "timeout_ms": 30000, "list_ttl_ms": 60000,
///  "auth": {"header": {"name": "X-Api-Key", "value_from_env": "TOOLS_API_KEY"}}}
/// ```
///
/// An `https` upstream is spoken to in HTTP/2 when it offers it (ALPN); an
/// `http` one in HTTP/1.1, or in cleartext HTTP/2 with `"h2c": true`.
///
/// or `"auth": {"client_credentials": {"token_url": "…", "client_id": "…",
/// "client_secret_from_file": "/var/run/secrets/tools/secret", "scope": "…",
/// "resource": "…"}}`, or `"auth": {"token_exchange": {…the same…,
/// "audience": "…"}}` to act on each caller's behalf. Unknown fields are
/// refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamSpec {
    /// The upstream's MCP endpoint.
    pub url: reqwest::Url,
    /// How we authenticate.
    pub credentials: Credentials,
    /// Deadline of one upstream request. Default 30 s; a call's own deadline may be sooner.
    pub timeout: Duration,
    /// How long lists are cached when the upstream gives no `ttlMs`. Default 60 s.
    pub list_ttl: Duration,
    /// Speak cleartext HTTP/2 to an `http` URL without asking first (prior
    /// knowledge): one connection carries every call in flight, so their
    /// writes share system calls. Only for upstreams known to speak it.
    pub h2c: bool,
}

impl UpstreamSpec {
    /// Parses and checks a spec, and that its secrets are ones `secrets`
    /// grants (not yet the outbound policy; no secret is read).
    ///
    /// # Errors
    /// The first wrong field, by path.
    pub fn parse(spec: &Value, secrets: &SecretPolicy) -> Result<Self, SpecError> {
        let object = spec.as_object().ok_or_else(|| invalid("spec", "must be a JSON object"))?;
        only_known(object, "", &["url", "auth", "timeout_ms", "list_ttl_ms", "h2c"])?;
        let url = object.get("url").and_then(Value::as_str).ok_or_else(|| invalid("url", "is required"))?;
        let url = reqwest::Url::parse(url).map_err(|e| invalid("url", format!("is not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(invalid("url", "must be an http or https URL with a host"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(invalid("url", "must not carry credentials; use auth"));
        }
        let millis = |key: &str, default: u64, max: u64| -> Result<Duration, SpecError> {
            match object.get(key) {
                None => Ok(Duration::from_millis(default)),
                Some(v) => v
                    .as_u64()
                    .filter(|ms| (1..=max).contains(ms))
                    .map(Duration::from_millis)
                    .ok_or_else(|| invalid(key, format!("must be an integer from 1 to {max}"))),
            }
        };
        let timeout = millis("timeout_ms", 30_000, 600_000)?;
        let list_ttl = millis("list_ttl_ms", 60_000, 86_400_000)?;
        let h2c = match object.get("h2c") {
            None => false,
            Some(Value::Bool(h2c)) if *h2c && url.scheme() != "http" => {
                return Err(invalid("h2c", "is for http URLs; an https upstream offers HTTP/2 itself"));
            }
            Some(Value::Bool(h2c)) => *h2c,
            Some(_) => return Err(invalid("h2c", "must be true or false")),
        };
        let credentials = match object.get("auth") {
            None => Credentials::None,
            Some(auth) => parse_auth(auth, secrets)?,
        };
        Ok(Self { url, credentials, timeout, list_ttl, h2c })
    }
}

fn parse_auth(auth: &Value, secrets: &SecretPolicy) -> Result<Credentials, SpecError> {
    let auth = auth.as_object().ok_or_else(|| invalid("auth", "must be an object"))?;
    only_known(auth, "auth.", &["header", "client_credentials", "token_exchange"])?;
    if auth.len() != 1 {
        return Err(invalid("auth", "give exactly one of header, client_credentials, token_exchange"));
    }
    if let Some(header) = auth.get("header") {
        let header = header.as_object().ok_or_else(|| invalid("auth.header", "must be an object"))?;
        only_known(header, "auth.header.", &["name", "value_from_env", "value_from_file"])?;
        let name = header
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| reqwest::header::HeaderName::from_bytes(n.as_bytes()).is_ok())
            .ok_or_else(|| invalid("auth.header.name", "must be an HTTP header name"))?;
        // Headers about the connection itself, not the request: HTTP/2 forbids them.
        if HOP_BY_HOP.iter().any(|hop| name.eq_ignore_ascii_case(hop)) {
            return Err(invalid("auth.header.name", "names a header about the connection, not a credential"));
        }
        let value = secret(header, "auth.header.", "value", secrets)?;
        return Ok(Credentials::Header { name: name.to_owned(), value });
    }
    if let Some(exchange) = auth.get("token_exchange") {
        let prefix = "auth.token_exchange.";
        let exchange = exchange.as_object().ok_or_else(|| invalid("auth.token_exchange", "must be an object"))?;
        let grant = token_grant(exchange, prefix, &["audience", "subject_issuer"], secrets)?;
        let audience = optional_text(exchange, prefix, "audience")?;
        let subject_issuer = optional_text(exchange, prefix, "subject_issuer")?;
        if audience.is_none() && grant.resource.is_none() {
            return Err(invalid(
                "auth.token_exchange.audience",
                "give audience, resource or both: the exchanged token must be meant for this upstream",
            ));
        }
        return Ok(Credentials::TokenExchange { grant, audience, subject_issuer });
    }
    let cc = auth
        .get("client_credentials")
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("auth.client_credentials", "must be an object"))?;
    Ok(Credentials::ClientCredentials(token_grant(cc, "auth.client_credentials.", &[], secrets)?))
}

/// The client and endpoint under `prefix`, with `more` fields allowed besides.
fn token_grant(
    object: &Map<String, Value>,
    prefix: &str,
    more: &[&str],
    secrets: &SecretPolicy,
) -> Result<TokenGrant, SpecError> {
    let mut known =
        vec!["token_url", "client_id", "client_secret_from_env", "client_secret_from_file", "scope", "resource"];
    known.extend_from_slice(more);
    only_known(object, prefix, &known)?;
    let token_url = optional_text(object, prefix, "token_url")?
        .filter(|u| reqwest::Url::parse(u).is_ok_and(|u| matches!(u.scheme(), "http" | "https")))
        .ok_or_else(|| invalid(format!("{prefix}token_url"), "must be an http or https URL"))?;
    let client_id = optional_text(object, prefix, "client_id")?
        .filter(|c| !c.is_empty())
        .ok_or_else(|| invalid(format!("{prefix}client_id"), "is required"))?;
    let client_secret = secret(object, prefix, "client_secret", secrets)?;
    let scope = optional_text(object, prefix, "scope")?;
    let resource = optional_text(object, prefix, "resource")?;
    Ok(TokenGrant { token_url, client_id, client_secret, scope, resource })
}

/// `object[key]`, a string if given.
fn optional_text(object: &Map<String, Value>, prefix: &str, key: &str) -> Result<Option<String>, SpecError> {
    match object.get(key) {
        None => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(invalid(format!("{prefix}{key}"), "must be a string")),
    }
}

/// `{key}_from_env` or `{key}_from_file`, exactly one, granted by `policy`.
fn secret(object: &Map<String, Value>, prefix: &str, key: &str, policy: &SecretPolicy) -> Result<SecretRef, SpecError> {
    let (env_key, file_key) = (format!("{key}_from_env"), format!("{key}_from_file"));
    let env = object.get(&env_key).and_then(Value::as_str);
    let file = object.get(&file_key).and_then(Value::as_str);
    match (env, file) {
        (Some(name), None) => policy.env(name).map_err(|e| invalid(format!("{prefix}{env_key}"), e)),
        (None, Some(path)) => policy.file(path).map_err(|e| invalid(format!("{prefix}{file_key}"), e)),
        _ => Err(invalid(
            format!("{prefix}{env_key}"),
            format!(
                "give exactly one of {key}_from_env (a variable name) or {key}_from_file (an absolute path); secrets are not stored in the registry"
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn granting(dir: &std::path::Path) -> SecretPolicy {
        SecretPolicy { env: vec!["TOOLS_*".into()], dirs: vec![dir.to_path_buf()], ..Default::default() }
    }

    #[test]
    fn parses_and_names_wrong_fields() {
        let policy = SecretPolicy { env: vec!["S".into()], ..Default::default() };
        let spec = UpstreamSpec::parse(&json!({"url": "http://127.0.0.1:9/mcp"}), &policy).unwrap();
        assert_eq!(
            (spec.timeout, spec.list_ttl, &spec.credentials),
            (Duration::from_secs(30), Duration::from_secs(60), &Credentials::None)
        );
        let field = |spec: Value| UpstreamSpec::parse(&spec, &policy).unwrap_err().field;
        assert_eq!(field(json!({})), "url");
        assert_eq!(field(json!({"url": "ftp://x/"})), "url");
        assert_eq!(field(json!({"url": "http://u:p@x/"})), "url");
        assert_eq!(field(json!({"url": "http://x/", "timeout_ms": 0})), "timeout_ms");
        assert_eq!(field(json!({"url": "https://x/", "h2c": true})), "h2c");
        let connection = json!({"url": "http://x/", "auth": {"header": {"name": "Connection", "value_from_env": "K"}}});
        assert_eq!(field(connection), "auth.header.name");
        assert_eq!(field(json!({"url": "http://x/", "h2c": "yes"})), "h2c");
        assert!(UpstreamSpec::parse(&json!({"url": "http://x/", "h2c": true}), &policy).unwrap().h2c);
        assert_eq!(
            field(json!({"url": "http://x/", "auth": {"header": {"name": "X-Key", "value": "inline"}}})),
            "auth.header.value"
        );
        assert_eq!(
            field(json!({"url": "http://x/", "auth": {"header": {"name": "X-Key"}}})),
            "auth.header.value_from_env"
        );
        assert_eq!(
            field(
                json!({"url": "http://x/", "auth": {"client_credentials": {"token_url": "x", "client_id": "c", "client_secret_from_env": "S"}}})
            ),
            "auth.client_credentials.token_url"
        );
    }

    #[test]
    fn token_exchange_names_its_client_and_the_upstream() {
        let policy = SecretPolicy { env: vec!["S".into()], ..Default::default() };
        let exchange = |fields: Value| {
            let mut auth = json!({"token_url": "https://as/token", "client_id": "c", "client_secret_from_env": "S"});
            auth.as_object_mut().unwrap().extend(fields.as_object().unwrap().clone());
            UpstreamSpec::parse(&json!({"url": "https://x/mcp", "auth": {"token_exchange": auth}}), &policy)
        };
        let spec = exchange(json!({"audience": "tools", "scope": "read"})).unwrap();
        let Credentials::TokenExchange { grant, audience, .. } = &spec.credentials else { panic!("{spec:?}") };
        assert_eq!(
            (audience.as_deref(), grant.scope.as_deref(), grant.resource.as_deref()),
            (Some("tools"), Some("read"), None)
        );
        assert_eq!(spec.credentials.grant_field(), "spec.auth.token_exchange");
        assert!(exchange(json!({"resource": "https://x/mcp"})).is_ok());
        assert_eq!(exchange(json!({})).unwrap_err().field, "auth.token_exchange.audience", "meant for whom?");
        assert_eq!(exchange(json!({"audience": 7})).unwrap_err().field, "auth.token_exchange.audience");
        assert_eq!(
            exchange(json!({"audience": "a", "subject": "x"})).unwrap_err().field,
            "auth.token_exchange.subject"
        );
    }

    #[test]
    fn secrets_come_only_from_what_the_operator_granted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        let policy = granting(dir.path());
        let header = |auth: Value| json!({"url": "https://x/mcp", "auth": {"header": auth}});
        let spec = UpstreamSpec::parse(&header(json!({"name": "X-Key", "value_from_file": path})), &policy).unwrap();
        assert_eq!(
            spec.credentials,
            Credentials::Header {
                name: "X-Key".into(),
                value: SecretRef::File { path: path.clone(), root: dir.path().to_path_buf() }
            }
        );
        let refused = |auth: Value| UpstreamSpec::parse(&header(auth), &policy).unwrap_err();
        for (auth, field) in [
            (json!({"name": "X-Key", "value_from_env": "SWITCHYARD_STATE__KEYS"}), "auth.header.value_from_env"),
            (json!({"name": "X-Key", "value_from_env": "HOME"}), "auth.header.value_from_env"),
            (json!({"name": "X-Key", "value_from_file": "/proc/self/environ"}), "auth.header.value_from_file"),
            (
                json!({"name": "X-Key", "value_from_file": "/var/run/secrets/kubernetes.io/serviceaccount/token"}),
                "auth.header.value_from_file",
            ),
        ] {
            assert_eq!(refused(auth.clone()).field, field, "{auth}");
        }
        let cc = json!({"url": "https://x/mcp", "auth": {"client_credentials": {
            "token_url": "https://as/token", "client_id": "c", "client_secret_from_env": "SWITCHYARD_DATABASE_URL"}}});
        assert_eq!(
            UpstreamSpec::parse(&cc, &policy).unwrap_err().field,
            "auth.client_credentials.client_secret_from_env"
        );
        assert!(
            SecretRef::Env { name: "TOOLS_SURELY_UNSET".into(), value: None }
                .resolve()
                .unwrap_err()
                .contains("TOOLS_SURELY_UNSET")
        );
    }
}
