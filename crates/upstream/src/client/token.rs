//! OAuth tokens for an upstream: the platform's own (client credentials),
//! and, for an upstream that acts on each caller's behalf, one exchanged
//! for the caller's (RFC 8693). Each is fetched when due, under a deadline
//! and a size bound, and kept until shortly before it expires.

use std::sync::Arc;
use std::time::{Duration, Instant};

use moka::Expiry;
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use switchyard_core::Caller;

use super::answer::read_capped;
use super::wire::Response;
use super::{CallError, McpClient};
use crate::spec::{Credentials, TokenGrant};

/// Largest token endpoint answer we read: a token and a few fields.
const MAX_TOKEN_ANSWER_BYTES: usize = 64 * 1024;
/// What the exchanged tokens of one upstream may hold in all, tokens and
/// keys: tokens of a few thousand callers.
const MAX_EXCHANGED_BYTES: u64 = 8 * 1024 * 1024;
/// How long a refused exchange is remembered: a caller whose token the
/// authorization server will not exchange cannot make us ask it again on
/// every call, and a change of policy there is seen soon.
const REFUSAL_MEMORY: Duration = Duration::from_secs(10);

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// An access token from the client-credentials grant, with its expiry.
pub(super) struct Token {
    value: String,
    refresh_at: Instant,
}

/// What exchanging one caller's token gave: a token for the upstream, kept
/// until shortly before it expires, or the authorization server's refusal,
/// remembered for [`REFUSAL_MEMORY`].
#[derive(Clone)]
pub(super) enum Exchanged {
    Token { value: Arc<str>, kept_for: Duration },
    Refused(Arc<str>),
}

/// Exchanged tokens by the SHA-256 of the caller's token: the caller's token
/// itself is not kept once its request is over.
pub(super) type ExchangedTokens = moka::future::Cache<[u8; 32], Exchanged>;

/// A cache for the tokens exchanged for callers' tokens.
pub(super) fn exchanged_tokens() -> ExchangedTokens {
    moka::future::Cache::builder()
        .max_capacity(MAX_EXCHANGED_BYTES)
        .weigher(|_, exchanged: &Exchanged| match exchanged {
            Exchanged::Token { value, .. } | Exchanged::Refused(value) => {
                u32::try_from(value.len() + 64).unwrap_or(u32::MAX)
            }
        })
        .expire_after(KeptFor)
        .build()
}

struct KeptFor;

impl Expiry<[u8; 32], Exchanged> for KeptFor {
    fn expire_after_create(&self, _: &[u8; 32], exchanged: &Exchanged, _: std::time::Instant) -> Option<Duration> {
        Some(match exchanged {
            Exchanged::Token { kept_for, .. } => *kept_for,
            Exchanged::Refused(_) => REFUSAL_MEMORY,
        })
    }
}

/// What a token exchange for one upstream needs.
#[derive(Clone, Copy)]
pub(super) struct Exchange<'a> {
    grant: &'a TokenGrant,
    audience: Option<&'a str>,
    subject_issuer: Option<&'a str>,
}

/// Whether the token endpoint `token_url` may be sent a token `issuer`
/// issued: the issuer the spec names (`subject_issuer`), or, when it names
/// none, the issuer at the endpoint's own origin (scheme, host and port).
fn serves(token_url: &str, subject_issuer: Option<&str>, issuer: &str) -> bool {
    let trimmed = |s: &str| s.trim_end_matches('/').to_owned();
    if let Some(named) = subject_issuer {
        return trimmed(named) == trimmed(issuer);
    }
    match (reqwest::Url::parse(token_url), reqwest::Url::parse(issuer)) {
        (Ok(endpoint), Ok(issuer)) => endpoint.origin() == issuer.origin(),
        _ => false,
    }
}

/// The longest a token is used, whatever its `expires_in` says.
const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// Why the token endpoint gave no token.
enum NoToken {
    /// It answered, and refused: the OAuth error code.
    Refused(String),
    /// It could not be asked, or failed: worth asking again.
    Failed(String),
}

/// A token the endpoint granted, and how long it may be used.
struct Granted {
    value: String,
    /// Its lifetime, less a margin, so it never expires in flight.
    usable_for: Duration,
}

impl McpClient {
    /// The bearer token of a request: none without OAuth; for a request made
    /// on behalf of `caller` to an upstream that exchanges tokens, one
    /// exchanged for the caller's; else the platform's own.
    ///
    /// Getting one (the token endpoint's request, the exchanged tokens'
    /// cache) is a future of kilobytes: boxed, and only for an upstream with
    /// an OAuth client, so that it does not make every request's future,
    /// which each layer of a call moves, as large (#18).
    pub(super) async fn access_token(&self, caller: Option<&Caller>) -> Result<Option<String>, CallError> {
        let Some(grant) = self.spec.credentials.grant() else { return Ok(None) };
        Box::pin(self.granted_token(grant, caller)).await.map(Some)
    }

    /// [`McpClient::access_token`] for an upstream whose OAuth client is `grant`.
    async fn granted_token(&self, grant: &TokenGrant, caller: Option<&Caller>) -> Result<String, CallError> {
        match (&self.spec.credentials, caller) {
            (Credentials::TokenExchange { audience, subject_issuer, .. }, Some(caller)) => {
                let exchange =
                    Exchange { grant, audience: audience.as_deref(), subject_issuer: subject_issuer.as_deref() };
                self.exchanged_token(&exchange, caller).await
            }
            _ => self.platform_token(grant).await,
        }
    }

    /// The upstream refused a token: the next request gets a fresh one.
    pub(super) async fn forget_token(&self, caller: Option<&Caller>) {
        match (&self.spec.credentials, caller.and_then(|c| c.subject_token.as_ref())) {
            (Credentials::TokenExchange { .. }, Some(subject)) => {
                // Boxed, as in `access_token`: the cache's future is large.
                Box::pin(self.exchanged.invalidate(&digest(subject.expose_for_exchange()))).await;
            }
            _ => *self.token.lock().await = None,
        }
    }

    /// The client-credentials token, fetched or refreshed when due.
    async fn platform_token(&self, grant: &TokenGrant) -> Result<String, CallError> {
        let mut token = self.token.lock().await;
        if let Some(current) = token.as_ref().filter(|t| Instant::now() < t.refresh_at) {
            return Ok(current.value.clone());
        }
        let mut form = vec![("grant_type", "client_credentials")];
        form.extend(grant.scope.as_deref().map(|scope| ("scope", scope)));
        form.extend(grant.resource.as_deref().map(|resource| ("resource", resource)));
        // The token's lock is held meanwhile, so one request asks; the
        // endpoint's deadline bounds how long the others wait.
        let granted = self.ask_token_endpoint(grant, form).await.map_err(|no| match no {
            NoToken::Refused(code) => CallError::Credentials(format!("the token endpoint refused: {code}")),
            NoToken::Failed(why) => CallError::Credentials(why),
        })?;
        *token = Some(Token { value: granted.value.clone(), refresh_at: Instant::now() + granted.usable_for });
        Ok(granted.value)
    }

    /// A token for this upstream exchanged for `caller`'s, from the cache or
    /// the authorization server. Identical exchanges in flight are one.
    async fn exchanged_token(&self, exchange: &Exchange<'_>, caller: &Caller) -> Result<String, CallError> {
        let Exchange { grant, audience, subject_issuer } = *exchange;
        let Some(subject) = caller.subject_token.as_ref() else {
            // No platform credential instead: the upstream expects the caller.
            return Err(CallError::Credentials(format!(
                "{} acts on each caller's behalf, and this request carries no token of the caller's to exchange",
                self.named()
            )));
        };
        // The caller's token goes only to its own issuer's authorization server.
        if !serves(&grant.token_url, subject_issuer, subject.issuer()) {
            return Err(CallError::Credentials(format!(
                "{} exchanges tokens of another issuer than the caller's; the caller's token is not sent there",
                self.named()
            )));
        }
        let exchanging = async {
            let mut form = vec![
                ("grant_type", TOKEN_EXCHANGE),
                ("subject_token", subject.expose_for_exchange()),
                ("subject_token_type", ACCESS_TOKEN_TYPE),
                ("requested_token_type", ACCESS_TOKEN_TYPE),
            ];
            form.extend(audience.map(|audience| ("audience", audience)));
            form.extend(grant.resource.as_deref().map(|resource| ("resource", resource)));
            form.extend(grant.scope.as_deref().map(|scope| ("scope", scope)));
            match self.ask_token_endpoint(grant, form).await {
                Ok(granted) => Ok(Exchanged::Token { value: granted.value.into(), kept_for: granted.usable_for }),
                Err(NoToken::Refused(code)) => Ok(Exchanged::Refused(
                    format!(
                        "the authorization server refused to exchange the caller's token for one for {}: {code}",
                        self.named()
                    )
                    .into(),
                )),
                Err(NoToken::Failed(why)) => {
                    Err(CallError::Credentials(format!("token exchange for {}: {why}", self.named())))
                }
            }
        };
        let exchanged = self
            .exchanged
            .try_get_with(digest(subject.expose_for_exchange()), exchanging)
            .await
            .map_err(|failed| (*failed).clone())?;
        match exchanged {
            Exchanged::Token { value, .. } => Ok(value.to_string()),
            Exchanged::Refused(message) => Err(CallError::Credentials(message.to_string())),
        }
    }

    /// POSTs `form` to the grant's token endpoint, authenticated as its
    /// client, and reads the token it grants.
    async fn ask_token_endpoint(&self, grant: &TokenGrant, mut form: Vec<(&str, &str)>) -> Result<Granted, NoToken> {
        let secret = grant.client_secret.resolve().map_err(NoToken::Failed)?;
        form.extend([("client_id", grant.client_id.as_str()), ("client_secret", secret.expose().as_str())]);
        let url = reqwest::Url::parse(&grant.token_url).map_err(|e| NoToken::Failed(e.to_string()))?;
        self.policy.check_url(&url).map_err(NoToken::Failed)?;
        let asking = async {
            let response = self
                .token_http
                .post(url)
                .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
                .header(ACCEPT, "application/json")
                .body(form_urlencode(&form))
                .send()
                .await
                .map_err(|e| {
                    NoToken::Failed(format!("token endpoint unreachable: {}", switchyard_core::error::chain(&e)))
                })?;
            let status = response.status();
            let answer: Value = read_capped(Response::Pooled(response), MAX_TOKEN_ANSWER_BYTES)
                .await
                .ok()
                .flatten()
                .and_then(|bytes| serde_json::from_slice(&bytes).ok())
                .unwrap_or(Value::Null);
            Ok((status, answer))
        };
        let (status, answer) = tokio::time::timeout(self.spec.timeout, asking)
            .await
            .map_err(|_| NoToken::Failed(format!("token endpoint silent for {:?}", self.spec.timeout)))??;
        let value = answer.get("access_token").and_then(Value::as_str).filter(|_| status.is_success());
        let Some(value) = value else {
            // The error code only: the body may echo what we sent.
            let code = answer.get("error").and_then(Value::as_str).unwrap_or("no access_token");
            // An OAuth error code is a short token; anything longer is cut.
            let code: String = code.chars().take(64).collect();
            // Too many requests, or too slow: worth asking again, not a refusal.
            let busy = matches!(status.as_u16(), 408 | 429);
            return Err(if status.is_client_error() && !busy {
                NoToken::Refused(format!("{status}: {code}"))
            } else {
                NoToken::Failed(format!("token endpoint answered {status}: {code}"))
            });
        };
        // RFC 8693 allows other kinds of token; we can send only a bearer one.
        if let Some(kind) = answer.get("token_type").and_then(Value::as_str)
            && !kind.eq_ignore_ascii_case("bearer")
            && kind != "N_A"
        {
            return Err(NoToken::Refused(format!("it issued a {kind:?} token, not a bearer token")));
        }
        let lifetime = Duration::from_secs(answer.get("expires_in").and_then(Value::as_u64).unwrap_or(300))
            .min(MAX_TOKEN_LIFETIME);
        // Used until a little before it expires, so it never expires in flight.
        let usable_for = lifetime.saturating_sub(lifetime.min(Duration::from_secs(30)).max(lifetime / 10));
        Ok(Granted { value: value.to_owned(), usable_for })
    }

    /// How a message names this upstream: its host, as the operator wrote it.
    fn named(&self) -> String {
        format!("upstream {}", self.spec.url.host_str().unwrap_or("?"))
    }
}

/// What an exchanged token is kept under.
fn digest(subject: &str) -> [u8; 32] {
    Sha256::digest(subject.as_bytes()).into()
}

fn form_urlencode(pairs: &[(&str, &str)]) -> String {
    let encode = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
                b' ' => "+".into(),
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    pairs.iter().map(|(k, v)| format!("{}={}", encode(k), encode(v))).collect::<Vec<_>>().join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_encoding() {
        assert_eq!(form_urlencode(&[("a", "b c"), ("s", "x&y=z/")]), "a=b+c&s=x%26y%3Dz%2F");
    }

    #[test]
    fn a_callers_token_goes_only_to_its_own_issuers_endpoint() {
        let endpoint = "https://login.example/oauth/token";
        assert!(serves(endpoint, None, "https://login.example"));
        assert!(serves(endpoint, None, "https://login.example/realms/a/"));
        assert!(!serves(endpoint, None, "https://other.example"), "another issuer's token is not sent");
        assert!(!serves(endpoint, None, "http://login.example"), "nor over another scheme");
        assert!(!serves(endpoint, None, "https://login.example:8443"), "nor to another port");
        assert!(!serves(endpoint, None, "not a url"));
        assert!(serves(endpoint, Some("https://idp.example/"), "https://idp.example"), "the issuer the spec names");
        assert!(!serves(endpoint, Some("https://idp.example"), "https://login.example"));
    }
}
