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

/// A secret read from configuration: any scalar is taken as its text (an
/// environment variable of digits reads as a number), and an error never
/// quotes the value (serde's would: "invalid type: integer `…`").
impl<'de> serde::Deserialize<'de> for Secret<String> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = String;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a secret, written as a string")
            }
            fn visit_str<E: serde::de::Error>(self, value: &str) -> Result<String, E> {
                Ok(value.to_owned())
            }
            fn visit_string<E: serde::de::Error>(self, value: String) -> Result<String, E> {
                Ok(value)
            }
            fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<String, E> {
                Ok(value.to_string())
            }
            fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<String, E> {
                Ok(value.to_string())
            }
            fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<String, E> {
                Ok(value.to_string())
            }
            fn visit_bool<E: serde::de::Error>(self, value: bool) -> Result<String, E> {
                Ok(value.to_string())
            }
        }
        deserializer.deserialize_any(Text).map(Self)
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
        pin: Secret,
    }

    #[test]
    fn debug_shows_neither_the_value_nor_its_length() {
        let settings: Settings =
            serde_json::from_str(r#"{"name": "n", "token": "hunter2-long-token", "pin": 12345678901234567}"#).unwrap();
        let printed = format!("{settings:?} {settings:#?}");
        assert!(!printed.contains("hunter2") && !printed.contains("18") && !printed.contains("1234"), "{printed}");
        assert!(printed.contains("Secret(***)"));
        assert_eq!(settings.token.expose(), "hunter2-long-token");
        assert_eq!(settings.pin.expose(), "12345678901234567", "digits are a secret's text");
        let refused = serde_json::from_str::<Settings>(r#"{"name": "n", "token": ["hunter2"], "pin": 1}"#).unwrap_err();
        assert!(!refused.to_string().contains("hunter2"), "an error never quotes the value: {refused}");
        assert!(Secret::new(vec![1_u8, 2]).expose() == &[1, 2], "any value can be kept secret");
    }
}
