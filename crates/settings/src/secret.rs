//! [`Secret`]: a value that must never reach a log, a trace or an error
//! message: admin tokens, client secrets, the keys that seal `requestState`
//! and sign bus messages, an upstream's credentials once read.
//!
//! A configuration or a key printed with `{:?}` shows `Secret(***)`, so a
//! struct holding one can derive `Debug` and be logged whole.

use std::fmt;

/// A value kept out of every `Debug` output. Read it with
/// [`Secret::expose`], at the one place that sends or uses it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret<T = String>(T);

impl<T> Secret<T> {
    /// Wraps `value`.
    pub const fn new(value: T) -> Self {
        Self(value)
    }

    /// The value itself, for the code that uses it (never for a log).
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> From<T> for Secret<T> {
    fn from(value: T) -> Self {
        Self(value)
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Secret<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(Self)
    }
}

#[cfg(test)]
mod tests {
    use super::Secret;

    #[derive(Debug, serde::Deserialize)]
    struct Settings {
        #[allow(dead_code)] // read through Debug only
        name: String,
        token: Secret,
        keys: Vec<Secret<Vec<u8>>>,
    }

    #[test]
    fn debug_shows_neither_the_value_nor_its_length() {
        let settings: Settings =
            serde_json::from_str(r#"{"name": "n", "token": "hunter2-long-token", "keys": [[1, 2, 3]]}"#).unwrap();
        let printed = format!("{settings:?} {settings:#?}");
        assert!(!printed.contains("hunter2") && !printed.contains("18") && !printed.contains("1, 2"), "{printed}");
        assert!(printed.contains("Secret(***)"));
        assert_eq!(settings.token.expose(), "hunter2-long-token");
        assert_eq!(settings.keys[0].expose(), &[1, 2, 3]);
    }
}
