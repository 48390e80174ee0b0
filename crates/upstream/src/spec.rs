//! The spec of an upstream plugin, and where its secrets come from.

use std::time::Duration;

use serde_json::{Map, Value};

pub use switchyard_core::plugin_spec::SpecError;
use switchyard_core::plugin_spec::{invalid, only_known};

/// Where a secret is read from when the plugin is built. Secrets are never
/// stored in the registry (which every admin can read) nor logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretRef {
    /// An environment variable of the Switchyard process (a Kubernetes Secret).
    Env(String),
    /// A file (a mounted Secret); surrounding whitespace is trimmed.
    File(String),
}

impl SecretRef {
    /// Reads the secret.
    ///
    /// # Errors
    /// When the variable or file is missing or empty; the message names it, not its value.
    pub fn resolve(&self) -> Result<String, String> {
        let value = match self {
            Self::Env(name) => std::env::var(name).map_err(|_| format!("environment variable {name} is not set"))?,
            Self::File(path) => std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?,
        };
        let value = value.trim().to_owned();
        if value.is_empty() {
            return Err("the secret is empty".into());
        }
        Ok(value)
    }
}

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
    /// OAuth 2.1 client credentials: a token fetched from `token_url` and
    /// refreshed before it expires.
    ClientCredentials {
        /// The authorization server's token endpoint.
        token_url: String,
        /// The client id.
        client_id: String,
        /// The client secret.
        client_secret: SecretRef,
        /// Scopes to ask for.
        scope: Option<String>,
        /// The resource indicator (RFC 8707), usually the upstream's URL.
        resource: Option<String>,
    },
}

/// An upstream plugin's spec:
///
/// ```json
/// {"url": "https://tools.example.com/mcp", "timeout_ms": 30000, "list_ttl_ms": 60000,
///  "auth": {"header": {"name": "X-Api-Key", "value_from_env": "TOOLS_API_KEY"}}}
/// ```
///
/// or `"auth": {"client_credentials": {"token_url": "…", "client_id": "…",
/// "client_secret_from_file": "/var/run/secrets/tools/secret", "scope": "…",
/// "resource": "…"}}`. Unknown fields are refused.
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
}

impl UpstreamSpec {
    /// Parses and checks a spec (not yet the outbound policy, nor the secrets).
    ///
    /// # Errors
    /// The first wrong field, by path.
    pub fn parse(spec: &Value) -> Result<Self, SpecError> {
        let object = spec.as_object().ok_or_else(|| invalid("spec", "must be a JSON object"))?;
        only_known(object, "", &["url", "auth", "timeout_ms", "list_ttl_ms"])?;
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
        let credentials = match object.get("auth") {
            None => Credentials::None,
            Some(auth) => parse_auth(auth)?,
        };
        Ok(Self { url, credentials, timeout, list_ttl })
    }
}

fn parse_auth(auth: &Value) -> Result<Credentials, SpecError> {
    let auth = auth.as_object().ok_or_else(|| invalid("auth", "must be an object"))?;
    only_known(auth, "auth.", &["header", "client_credentials"])?;
    if auth.len() != 1 {
        return Err(invalid("auth", "give exactly one of header, client_credentials"));
    }
    if let Some(header) = auth.get("header") {
        let header = header.as_object().ok_or_else(|| invalid("auth.header", "must be an object"))?;
        only_known(header, "auth.header.", &["name", "value_from_env", "value_from_file"])?;
        let name = header
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| reqwest::header::HeaderName::from_bytes(n.as_bytes()).is_ok())
            .ok_or_else(|| invalid("auth.header.name", "must be an HTTP header name"))?;
        let value = secret(header, "auth.header.", "value")?;
        return Ok(Credentials::Header { name: name.to_owned(), value });
    }
    let cc = auth
        .get("client_credentials")
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("auth.client_credentials", "must be an object"))?;
    only_known(
        cc,
        "auth.client_credentials.",
        &["token_url", "client_id", "client_secret_from_env", "client_secret_from_file", "scope", "resource"],
    )?;
    let text = |key: &str| cc.get(key).and_then(Value::as_str).map(str::to_owned);
    let token_url = text("token_url")
        .filter(|u| reqwest::Url::parse(u).is_ok_and(|u| matches!(u.scheme(), "http" | "https")))
        .ok_or_else(|| invalid("auth.client_credentials.token_url", "must be an http or https URL"))?;
    let client_id = text("client_id")
        .filter(|c| !c.is_empty())
        .ok_or_else(|| invalid("auth.client_credentials.client_id", "is required"))?;
    let client_secret = secret(cc, "auth.client_credentials.", "client_secret")?;
    Ok(Credentials::ClientCredentials {
        token_url,
        client_id,
        client_secret,
        scope: text("scope"),
        resource: text("resource"),
    })
}

/// `{key}_from_env` or `{key}_from_file`, exactly one.
fn secret(object: &Map<String, Value>, prefix: &str, key: &str) -> Result<SecretRef, SpecError> {
    let env = object.get(&format!("{key}_from_env")).and_then(Value::as_str);
    let file = object.get(&format!("{key}_from_file")).and_then(Value::as_str);
    match (env, file) {
        (Some(name), None) if !name.is_empty() => Ok(SecretRef::Env(name.to_owned())),
        (None, Some(path)) if path.starts_with('/') => Ok(SecretRef::File(path.to_owned())),
        _ => Err(invalid(
            &format!("{prefix}{key}_from_env"),
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

    #[test]
    fn parses_and_names_wrong_fields() {
        let spec = UpstreamSpec::parse(&json!({"url": "http://127.0.0.1:9/mcp"})).unwrap();
        assert_eq!(
            (spec.timeout, spec.list_ttl, &spec.credentials),
            (Duration::from_secs(30), Duration::from_secs(60), &Credentials::None)
        );
        let field = |spec: Value| UpstreamSpec::parse(&spec).unwrap_err().field;
        assert_eq!(field(json!({})), "url");
        assert_eq!(field(json!({"url": "ftp://x/"})), "url");
        assert_eq!(field(json!({"url": "http://u:p@x/"})), "url");
        assert_eq!(field(json!({"url": "http://x/", "timeout_ms": 0})), "timeout_ms");
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
    fn secrets_come_from_the_environment_or_a_file() {
        let spec = UpstreamSpec::parse(
            &json!({"url": "https://x/mcp", "auth": {"header": {"name": "X-Key", "value_from_file": "/run/k"}}}),
        )
        .unwrap();
        assert_eq!(
            spec.credentials,
            Credentials::Header { name: "X-Key".into(), value: SecretRef::File("/run/k".into()) }
        );
        assert!(
            SecretRef::Env("SWITCHYARD_TEST_SURELY_UNSET".into())
                .resolve()
                .unwrap_err()
                .contains("SWITCHYARD_TEST_SURELY_UNSET")
        );
        let file = std::env::temp_dir().join(format!("switchyard-secret-{}", std::process::id()));
        std::fs::write(&file, "s3cret\n").unwrap();
        assert_eq!(SecretRef::File(file.display().to_string()).resolve().unwrap(), "s3cret");
        std::fs::remove_file(file).unwrap();
    }
}
