//! What every crate's configuration shares, so each crate can own its raw
//! (serde) settings, their defaults and their checks, and the binary only
//! composes them:
//!
//! - [`parse_duration`]: durations as operators write them (`250ms`, `30s`,
//!   `5m`, `1h`);
//! - [`StringList`]: a list written as a TOML array or, from an environment
//!   variable, as a comma-separated string;
//! - [`Secret`]: a value that must never reach a log, a trace or an error
//!   message (tokens, client secrets, keys), whose `Debug` shows
//!   `Secret(***)`, so a configuration holding one can be printed whole;
//! - [`Problems`] and [`Section`]: every problem of a configuration found in
//!   one pass, each naming its key where the binary places the section.
//!
//! A leaf: it knows nothing of MCP, HTTP or any other crate of ours.

mod problems;
mod secret;

use std::time::Duration;

pub use problems::{Problems, Section};
pub use secret::Secret;

/// `250ms`, `30s`, `5m` or `1h`; `None` for anything else (or an overflow).
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().ok()?;
    Some(match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.checked_mul(60)?),
        "h" => Duration::from_secs(n.checked_mul(3600)?),
        _ => return None,
    })
}

/// A list written as a TOML array or as a comma-separated string.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(untagged)]
pub enum StringList {
    /// `["a", "b"]`
    List(Vec<String>),
    /// `"a,b"`
    Joined(String),
}

impl StringList {
    /// The items; a joined string is split at commas, trimmed, and empty
    /// items dropped.
    pub fn into_vec(self) -> Vec<String> {
        match self {
            Self::List(items) => items,
            Self::Joined(s) => s.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_operators_write_them() {
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration(" 30s "), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        for bad in ["", "30", "s", "1.5s", "-1s", "1d", "99999999999999999999h"] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn lists_from_arrays_and_joined_strings() {
        let joined: StringList = serde_json::from_str(r#"" a, b,,c ""#).unwrap();
        assert_eq!(joined.into_vec(), ["a", "b", "c"]);
        let array: StringList = serde_json::from_str(r#"["a,b"]"#).unwrap();
        assert_eq!(array.into_vec(), ["a,b"], "an array's items are kept whole");
    }
}
