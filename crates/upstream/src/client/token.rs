//! OAuth client credentials: the platform's own token for an upstream,
//! fetched when due and read under a deadline and a size bound.

use std::time::{Duration, Instant};

use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde_json::Value;

use super::{CallError, McpClient, read_capped};
use crate::spec::Credentials;

/// Largest token endpoint answer we read: a token and a few fields.
const MAX_TOKEN_ANSWER_BYTES: usize = 64 * 1024;

/// An access token from the client-credentials grant, with its expiry.
pub(super) struct Token {
    value: String,
    refresh_at: Instant,
}

impl McpClient {
    /// The client-credentials token, fetched or refreshed when due.
    pub(super) async fn access_token(&self) -> Result<Option<String>, CallError> {
        let Credentials::ClientCredentials { token_url, client_id, client_secret, scope, resource } =
            &self.spec.credentials
        else {
            return Ok(None);
        };
        let mut token = self.token.lock().await;
        if let Some(current) = token.as_ref().filter(|t| Instant::now() < t.refresh_at) {
            return Ok(Some(current.value.clone()));
        }
        let secret = client_secret.resolve().map_err(CallError::Credentials)?;
        let mut form = vec![
            ("grant_type", "client_credentials"),
            ("client_id", client_id.as_str()),
            ("client_secret", secret.expose().as_str()),
        ];
        if let Some(scope) = scope {
            form.push(("scope", scope));
        }
        if let Some(resource) = resource {
            form.push(("resource", resource));
        }
        let url = reqwest::Url::parse(token_url).map_err(|e| CallError::Credentials(e.to_string()))?;
        self.policy.check_url(&url).map_err(CallError::Credentials)?;
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
                    CallError::Credentials(format!("token endpoint unreachable: {}", switchyard_core::error::chain(&e)))
                })?;
            let status = response.status();
            let answer: Value = read_capped(response, MAX_TOKEN_ANSWER_BYTES)
                .await
                .ok()
                .flatten()
                .and_then(|bytes| serde_json::from_slice(&bytes).ok())
                .unwrap_or(Value::Null);
            Ok((status, answer))
        };
        // The token's lock is held meanwhile: a token endpoint that stalls
        // must not stall every request to this upstream for longer than one.
        let (status, answer) = tokio::time::timeout(self.spec.timeout, asking)
            .await
            .map_err(|_| CallError::Credentials(format!("token endpoint silent for {:?}", self.spec.timeout)))??;
        let Some(value) = answer.get("access_token").and_then(Value::as_str).filter(|_| status.is_success()) else {
            // The error code only: the body may echo what we sent.
            let code = answer.get("error").and_then(Value::as_str).unwrap_or("no access_token");
            return Err(CallError::Credentials(format!("token endpoint answered {status}: {code}")));
        };
        let lifetime = Duration::from_secs(answer.get("expires_in").and_then(Value::as_u64).unwrap_or(300));
        // Refresh a little early, so a token never expires in flight.
        let refresh_at =
            Instant::now() + lifetime.saturating_sub(lifetime.min(Duration::from_secs(30)).max(lifetime / 10));
        *token = Some(Token { value: value.to_owned(), refresh_at });
        Ok(Some(value.to_owned()))
    }
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
}
