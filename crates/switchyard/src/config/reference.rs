//! The configuration reference (`docs/configuration.md`) against the types
//! that accept the configuration: a key the binary accepts without a row
//! there, or a row naming a key it does not accept, fails the test.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde::de::{self, Visitor};

use super::*;

const REFERENCE: &str = include_str!("../../../../docs/configuration.md");

/// The field names of a struct that derives `Deserialize`, read from what
/// the derive hands `deserialize_struct`, without deserializing anything.
fn fields_of<'de, T: Deserialize<'de>>() -> Vec<&'static str> {
    struct Fields(Option<&'static [&'static str]>);
    #[derive(Debug)]
    struct Stop;
    impl std::fmt::Display for Stop {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("stop")
        }
    }
    impl std::error::Error for Stop {}
    impl de::Error for Stop {
        fn custom<M: std::fmt::Display>(_: M) -> Self {
            Stop
        }
    }
    impl<'de> de::Deserializer<'de> for &mut Fields {
        type Error = Stop;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            self.0 = Some(fields);
            Err(Stop)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
            unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    let mut fields = Fields(None);
    let _ = T::deserialize(&mut fields);
    fields.0.expect("a struct deriving Deserialize").to_vec()
}

/// The rows of the reference's tables: the keys named in each row's first
/// cell (`a.b` / `.c` names `a.b` and `a.c`), with the row's whole text.
fn rows() -> Vec<(Vec<String>, &'static str)> {
    REFERENCE
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let first = line.split('|').nth(1).unwrap_or_default();
            let mut keys: Vec<String> = Vec::new();
            for name in first.split('`').skip(1).step_by(2) {
                let key = match (name.strip_prefix('.'), keys.last()) {
                    (Some(last), Some(previous)) => {
                        format!("{}.{last}", previous.rsplit_once('.').map_or("", |(parent, _)| parent))
                    }
                    _ => name.to_owned(),
                };
                keys.push(key);
            }
            (keys, line)
        })
        .collect()
}

#[test]
fn the_reference_names_every_key() {
    let sections = [
        ("server", fields_of::<RawServer>()),
        ("cache", fields_of::<RawCache>()),
        ("http", fields_of::<RawHttp>()),
        ("state", fields_of::<RawState>()),
        ("shutdown", fields_of::<RawShutdown>()),
        ("admin", fields_of::<RawAdmin>()),
        ("registry", fields_of::<RawRegistry>()),
        ("wasm", fields_of::<RawWasm>()),
        ("upstream", fields_of::<RawUpstream>()),
        ("rate_limit", fields_of::<RawRateLimit>()),
        ("auth", fields_of::<RawAuth>()),
        ("tasks", fields_of::<RawTasks>()),
        ("listen", fields_of::<RawListen>()),
        ("telemetry", fields_of::<RawTelemetry>()),
    ];
    let mut accepted = BTreeSet::new();
    for key in fields_of::<RawConfig>() {
        match sections.iter().find(|(section, _)| *section == key) {
            Some((section, fields)) => accepted.extend(fields.iter().map(|field| format!("{section}.{field}"))),
            None => {
                accepted.insert(key.to_owned());
            }
        }
    }
    let rows = rows();
    let documented: BTreeSet<String> = rows.iter().flat_map(|(keys, _)| keys.clone()).collect();

    // A table of names (`auth.scopes`) is documented by rows of its members.
    let named = |key: &str| documented.iter().any(|d| d == key || d.starts_with(&format!("{key}.")));
    let missing: Vec<_> = accepted.iter().filter(|key| !named(key)).collect();
    assert!(missing.is_empty(), "keys the binary accepts without a row in docs/configuration.md: {missing:?}");
    // A row may name a key inside a table (`auth.scopes.tools`): its first two parts must be accepted.
    let unknown: Vec<_> = documented
        .iter()
        .filter(|key| !accepted.contains(key.split('.').take(2).collect::<Vec<_>>().join(".").as_str()))
        .collect();
    assert!(unknown.is_empty(), "rows of docs/configuration.md the binary does not accept: {unknown:?}");

    // Tables of settings that one row describes name each of their keys.
    for (key, fields) in [
        ("auth.issuers", fields_of::<switchyard_auth::RawIssuer>()),
        ("auth.introspection", fields_of::<switchyard_auth::RawIntrospection>()),
    ] {
        let (_, row) = rows.iter().find(|(keys, _)| keys.iter().any(|k| k == key)).expect("a row");
        for field in fields {
            assert!(row.contains(field), "the row of `{key}` does not name its `{field}`");
        }
    }
}

#[test]
fn the_reference_reads_keys_as_written() {
    let rows = rows();
    let keys =
        |wanted: &str| rows.iter().find(|(keys, _)| keys.iter().any(|k| k == wanted)).map(|(keys, _)| keys.clone());
    assert_eq!(
        keys("auth.scopes.prompts").unwrap(),
        ["auth.scopes.tools", "auth.scopes.prompts", "auth.scopes.resources"],
        "`.prompts` after `auth.scopes.tools` is `auth.scopes.prompts`"
    );
    assert_eq!(fields_of::<RawShutdown>(), ["grace"]);
}
