//! What every plugin kind's spec parser shares: an error that names the
//! field at fault, and the refusal of unknown fields (a typo must not
//! silently drop a limit).

use serde_json::{Map, Value};

/// A field of a plugin spec is wrong. `field` is a path inside the spec.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct SpecError {
    /// Where, e.g. `limits.memory_mib`.
    pub field: String,
    /// Why.
    pub reason: String,
}

/// A [`SpecError`] at `field`.
pub fn invalid(field: &str, reason: impl Into<String>) -> SpecError {
    SpecError { field: field.to_owned(), reason: reason.into() }
}

/// Refuses any key of `object` not in `known`; `prefix` is the object's path (`limits.`).
///
/// # Errors
/// The first unknown key, with the known ones listed.
pub fn only_known(object: &Map<String, Value>, prefix: &str, known: &[&str]) -> Result<(), SpecError> {
    match object.keys().find(|k| !known.contains(&k.as_str())) {
        Some(unknown) => {
            Err(invalid(&format!("{prefix}{unknown}"), format!("is not a known field (known: {})", known.join(", "))))
        }
        None => Ok(()),
    }
}
