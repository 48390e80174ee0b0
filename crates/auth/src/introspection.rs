//! Token introspection (RFC 7662): asking the authorization server about an
//! opaque token.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::config::IntrospectionConfig;
use crate::error::Rejection;
use crate::principal::{Principal, scopes_of};

/// Asks the introspection endpoint and checks the answer: active, for this
/// resource, not expired.
pub(crate) async fn introspect(
    http: &reqwest::Client,
    config: &IntrospectionConfig,
    audiences: &[String],
    max_age: Duration,
    token: &str,
) -> Result<Principal, Rejection> {
    let response = http
        .post(&config.endpoint)
        .basic_auth(&config.client_id, Some(config.client_secret.expose()))
        .form(&[("token", token), ("token_type_hint", "access_token")])
        .send()
        .await
        .map_err(|error| {
            tracing::warn!(endpoint = %config.endpoint, %error, "introspection failed");
            Rejection::Unavailable
        })?;
    if !response.status().is_success() {
        tracing::warn!(endpoint = %config.endpoint, status = %response.status(), "introspection refused");
        return Err(Rejection::Unavailable);
    }
    let answer: Value = response.json().await.map_err(|_| Rejection::Unavailable)?;
    let claims = answer.as_object().ok_or(Rejection::Unavailable)?;
    if claims.get("active").and_then(Value::as_bool) != Some(true) {
        return Err(Rejection::Inactive);
    }
    // RFC 8707: the token must have been issued for this server. An answer
    // without `aud` cannot show that, so it is refused too.
    let names_us = match claims.get("aud") {
        Some(Value::String(aud)) => audiences.iter().any(|a| a == aud),
        Some(Value::Array(auds)) => auds.iter().filter_map(Value::as_str).any(|aud| audiences.iter().any(|a| a == aud)),
        _ => false,
    };
    if !names_us {
        return Err(Rejection::Audience);
    }
    let now = SystemTime::now();
    let expires_at = match claims.get("exp").and_then(Value::as_u64) {
        Some(exp) => UNIX_EPOCH + Duration::from_secs(exp),
        None => now + max_age,
    };
    if expires_at <= now {
        return Err(Rejection::Expired);
    }
    if claims.get("nbf").and_then(Value::as_u64).is_some_and(|nbf| UNIX_EPOCH + Duration::from_secs(nbf) > now) {
        return Err(Rejection::NotYetValid);
    }
    let text = |key: &str| claims.get(key).and_then(Value::as_str).map(str::to_owned);
    let client_id = text("client_id");
    let subject = text("sub").or_else(|| client_id.clone()).ok_or(Rejection::Claims)?;
    Ok(Principal {
        issuer: text("iss").unwrap_or_else(|| config.issuer.clone()),
        subject,
        client_id,
        scopes: Arc::new(scopes_of(claims)),
        expires_at,
    })
}
