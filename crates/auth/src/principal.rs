//! The verified caller.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::Value;
use switchyard_core::Caller;

/// Who a verified token speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The issuer (`iss`).
    pub issuer: String,
    /// The subject (`sub`); for a client-credentials token, the client.
    pub subject: String,
    /// The OAuth client the token was issued to (`client_id` or `azp`), if known.
    pub client_id: Option<String>,
    /// The granted scopes.
    pub scopes: Arc<BTreeSet<String>>,
    /// When the token expires.
    pub expires_at: SystemTime,
}

impl Principal {
    /// The caller `core` sees: a principal id unique across issuers, the
    /// client, and the scopes.
    pub fn caller(&self) -> Caller {
        Caller {
            principal: Some(format!("{} {}", self.issuer, self.subject)),
            client_id: self.client_id.clone(),
            scopes: Some(Arc::clone(&self.scopes)),
            // The transport adds the address; the token does not know it.
            peer: None,
            // The layer adds the token itself; a principal may be cached.
            subject_token: None,
        }
    }
}

/// The scopes of a token: `scope` (RFC 9068, RFC 7662: space-separated), or
/// `scp` (Entra, Okta: an array or a string).
pub(crate) fn scopes_of(claims: &serde_json::Map<String, Value>) -> BTreeSet<String> {
    let words = |text: &str| text.split_ascii_whitespace().map(str::to_owned).collect::<Vec<_>>();
    let mut scopes = BTreeSet::new();
    for key in ["scope", "scp"] {
        match claims.get(key) {
            Some(Value::String(text)) => scopes.extend(words(text)),
            Some(Value::Array(items)) => scopes.extend(items.iter().filter_map(Value::as_str).map(str::to_owned)),
            _ => {}
        }
    }
    scopes
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn scopes_come_from_scope_or_scp() {
        let claims = json!({"scope": "a b  c", "scp": ["d"]});
        let scopes = scopes_of(claims.as_object().expect("object"));
        assert_eq!(scopes.into_iter().collect::<Vec<_>>(), ["a", "b", "c", "d"]);
    }
}
