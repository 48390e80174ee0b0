//! Plugin records and their validation.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use switchyard_protocol::PluginKind;

use crate::{Error, Result};

/// A plugin to register.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewPlugin {
    /// Prefix of the plugin's tools (`{namespace}_{tool}`), unique.
    pub namespace: String,
    /// The kind.
    pub kind: PluginKind,
    /// The kind's spec, a JSON object.
    pub spec: Value,
    /// Whether replicas serve it.
    pub enabled: bool,
    /// Scopes a caller needs for every tool, resource and prompt of it.
    #[serde(default)]
    pub scopes: Vec<String>,
}

impl NewPlugin {
    pub(crate) fn validate(&self) -> Result<()> {
        parse_namespace(&self.namespace)?;
        validate_scopes(&self.scopes)?;
        validate_spec(&self.spec)
    }
}

/// Checks scope names: RFC 6749 scope tokens (printable ASCII without space,
/// `"` or `\`), at most 64 of them.
///
/// # Errors
/// `Invalid { field: "scopes" }` naming the bad one.
pub fn validate_scopes(scopes: &[String]) -> Result<()> {
    let token = |s: &str| {
        !s.is_empty() && s.len() <= 128 && s.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b'"' && b != b'\\')
    };
    if scopes.len() > 64 {
        return Err(Error::Invalid { field: "scopes", reason: "at most 64 scopes".into() });
    }
    match scopes.iter().find(|s| !token(s)) {
        Some(bad) => Err(Error::Invalid { field: "scopes", reason: format!("{bad:?} is not a scope token") }),
        None => Ok(()),
    }
}

/// A stored plugin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginRecord {
    /// Opaque, high-entropy id.
    pub id: String,
    /// Prefix of the plugin's tools.
    pub namespace: String,
    /// The kind.
    pub kind: PluginKind,
    /// The kind's spec.
    pub spec: Value,
    /// Whether replicas serve it.
    pub enabled: bool,
    /// Grows on every change; a change must name the version it was based on.
    pub version: i64,
    /// Creation time, Unix milliseconds.
    pub created_at_ms: i64,
    /// Last change, Unix milliseconds.
    pub updated_at_ms: i64,
    /// Who made the last change.
    pub updated_by: String,
    /// Scopes a caller needs for every tool, resource and prompt of it.
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// Checks a namespace: 1–32 of `[a-z0-9]` and `_`, starting with a letter, so
/// that `{namespace}_{tool}` stays a valid tool name.
///
/// # Errors
/// `Invalid { field: "namespace" }` naming the rule.
pub fn parse_namespace(namespace: &str) -> Result<&str> {
    let valid = (1..=32).contains(&namespace.len())
        && namespace.starts_with(|c: char| c.is_ascii_lowercase())
        && namespace.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if valid {
        Ok(namespace)
    } else {
        Err(Error::Invalid {
            field: "namespace",
            reason: format!("{namespace:?} must be 1-32 characters of a-z, 0-9 and _, starting with a letter"),
        })
    }
}

pub(crate) fn validate_spec(spec: &Value) -> Result<()> {
    if spec.is_object() {
        Ok(())
    } else {
        Err(Error::Invalid { field: "spec", reason: "must be a JSON object".into() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces() {
        assert!(parse_namespace("units").is_ok());
        assert!(parse_namespace("a1_b").is_ok());
        for bad in ["", "1abc", "Upper", "has-dash", &"x".repeat(33)] {
            assert!(parse_namespace(bad).is_err(), "{bad}");
        }
    }
}
