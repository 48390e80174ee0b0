//! JSON read with every check serde_json's parse into a `Value` makes, and
//! not built: [`Unbuilt`].
//!
//! A value the server never reads still has to be JSON as a `Value` would
//! have it, or two readings of one message could disagree. Built as a
//! `Value` and dropped, it costs a map, its keys and its strings, and their
//! frees (#18). Skipped as [`serde::de::IgnoredAny`] skips, numbers out of
//! range and lone surrogates would pass. Read value by value through
//! `deserialize_any` instead, serde_json parses each number and string as it
//! does for a `Value` (and counts the nesting against the same limit), and
//! the visitor keeps nothing.
//!
//! What else a reader must do as it goes (count the values against a bound,
//! refuse an object keyed by [`RAW_VALUE_TOKEN`](crate::RAW_VALUE_TOKEN)) is
//! its [`Watch`]. Two readers use it:
//! - a modern `tools/call`'s `clientInfo`, read by [`ModernCall`](crate::ModernCall)
//!   with [`NoRawValue`], so the general path reads a call that has the
//!   token and decides;
//! - an upstream answer's members that are counted but not built
//!   (`switchyard-upstream`'s `counted`), whose watch counts every value
//!   and key against the operator's bound.

use std::fmt;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, Error, MapAccess, SeqAccess, Visitor};

use crate::RAW_VALUE_TOKEN;

/// What a reader of an [`Unbuilt`] value does at each value and each key.
pub trait Watch: Copy {
    /// Called once for every value, container or not, before it is read.
    ///
    /// # Errors
    /// An error stops the read.
    fn value<E: Error>(self) -> Result<(), E>;

    /// Called once for every object member's key, as it was read (without
    /// its escapes), before the member's value.
    ///
    /// # Errors
    /// An error stops the read.
    fn key<E: Error>(self, key: &str) -> Result<(), E>;
}

/// One JSON value read through `deserialize_any`, with every check of a
/// `Value`'s parse, and not built; `W` is told of each value and key.
///
/// As a seed it reads with the watch it holds; as a [`Deserialize`] type (a
/// member of a derived struct), with `W`'s default.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unbuilt<W>(pub W);

/// A [`Watch`] that refuses an object member named by serde_json's raw-value
/// token, wherever it stands ([`RAW_VALUE_TOKEN`](crate::RAW_VALUE_TOKEN)):
/// stricter than a `Value`, which reads it as any key after an object's
/// first, so a reader that refuses it leaves the decision to one that builds.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRawValue;

impl Watch for NoRawValue {
    fn value<E: Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn key<E: Error>(self, key: &str) -> Result<(), E> {
        if key == RAW_VALUE_TOKEN {
            return Err(E::custom("an object member named by serde_json's private raw-value token"));
        }
        Ok(())
    }
}

impl<'de, W: Watch + Default> Deserialize<'de> for Unbuilt<W> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Self(W::default()).deserialize(deserializer).map(|()| Self(W::default()))
    }
}

impl<'de, W: Watch> DeserializeSeed<'de> for Unbuilt<W> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        self.0.value()?;
        deserializer.deserialize_any(self)
    }
}

impl<'de, W: Watch> Visitor<'de> for Unbuilt<W> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
        while items.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<(), A::Error> {
        while members.next_key_seed(Key(self.0))?.is_some() {
            members.next_value_seed(self)?;
        }
        Ok(())
    }
}

/// A member's key, read as a string and shown to the watch.
struct Key<W>(W);

impl<'de, W: Watch> DeserializeSeed<'de> for Key<W> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<W: Watch> Visitor<'_> for Key<W> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member's key")
    }

    fn visit_str<E: Error>(self, key: &str) -> Result<(), E> {
        self.0.key(key)
    }
}

#[cfg(test)]
mod tests {
    use serde::de::DeserializeSeed;
    use std::cell::Cell;

    use super::{NoRawValue, Unbuilt, Watch};

    /// Counts what it is shown.
    #[derive(Clone, Copy)]
    struct Tally<'a>(&'a Cell<usize>, &'a Cell<usize>);

    impl Watch for Tally<'_> {
        fn value<E: serde::de::Error>(self) -> Result<(), E> {
            self.0.set(self.0.get() + 1);
            Ok(())
        }
        fn key<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
            self.1.set(self.1.get() + 1);
            Ok(())
        }
    }

    fn read(text: &str) -> Result<(), serde_json::Error> {
        serde_json::from_str::<Unbuilt<NoRawValue>>(text).map(|_| ())
    }

    #[test]
    fn reads_what_a_value_reads_and_refuses_what_it_refuses() {
        for text in [r#"{"a":[1,-2,3.5,"\ud83d\ude00",null,true,{}],"b":{"c":"d"}}"#, "18446744073709551615", "[]"] {
            assert!(read(text).is_ok(), "{text}");
            assert!(serde_json::from_str::<serde_json::Value>(text).is_ok());
        }
        for text in [
            r#"{"a":1e400}"#,
            r#"["\ud800"]"#,
            r#"{"\udc00":1}"#,
            "[1,]",
            &format!("{}{}", "[".repeat(200), "]".repeat(200)),
        ] {
            assert!(read(text).is_err(), "{text}");
            assert!(serde_json::from_str::<serde_json::Value>(text).is_err(), "{text}");
        }
    }

    #[test]
    fn no_raw_value_refuses_the_token_as_any_key() {
        assert!(read(r#"{"$serde_json::private::RawValue":"1"}"#).is_err());
        assert!(read(r#"{"a":1,"$serde_json::private::RawValue":"1"}"#).is_err());
        assert!(read(r#"[{"b":{"$serde_json::private::RawValue":"1"}}]"#).is_err());
        assert!(read(r#"{"a":"$serde_json::private::RawValue"}"#).is_ok(), "a string value is not a key");
    }

    #[test]
    fn the_watch_sees_every_value_and_key() {
        let (values, keys) = (Cell::new(0), Cell::new(0));
        let mut reader = serde_json::Deserializer::from_str(r#"{"a":[1,{"b":null}],"c":"d"}"#);
        Unbuilt(Tally(&values, &keys)).deserialize(&mut reader).unwrap();
        // The object, the array, 1, the inner object, null, "d"; keys a, b, c.
        assert_eq!((values.get(), keys.get()), (6, 3));
    }
}
