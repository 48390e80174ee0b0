//! Opaque pagination cursors.
//!
//! A cursor names the last item of the previous page ("after this name"), not an
//! offset, so a page boundary stays correct when the list changes between pages
//! and any replica can continue any client's listing. It is Base64url so
//! clients treat it as opaque; a value that does not decode is `-32602`.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

const PREFIX: &str = "after:";

/// Encodes "continue after `key`".
pub(crate) fn encode(key: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{PREFIX}{key}"))
}

/// Decodes a cursor; `Ok(None)` for the empty cursor, which starts at the top.
pub(crate) fn decode(cursor: &str) -> Result<Option<String>, ()> {
    if cursor.is_empty() {
        return Ok(None);
    }
    let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| ())?;
    let text = String::from_utf8(bytes).map_err(|_| ())?;
    text.strip_prefix(PREFIX).map(|k| Some(k.to_owned())).ok_or(())
}

/// Returns the page of `items` (sorted by `key`) that follows `after`, at most
/// `size` long, and the cursor of the next page if there is one.
pub(crate) fn page<'a, T>(
    items: &'a [T],
    key: impl Fn(&T) -> &str,
    after: Option<&str>,
    size: usize,
) -> (&'a [T], Option<String>) {
    let start = match after {
        None => 0,
        Some(after) => items.partition_point(|item| key(item) <= after),
    };
    let end = (start + size.max(1)).min(items.len());
    let page = &items[start..end];
    let next = (end < items.len()).then(|| page.last().map(|last| encode(key(last)))).flatten();
    (page, next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_through_a_sorted_list() {
        let items = ["a", "b", "c", "d", "e"];
        let (first, next) = page(&items, |s| s, None, 2);
        assert_eq!(first, ["a", "b"]);
        let after = decode(&next.unwrap()).unwrap();
        let (second, next) = page(&items, |s| s, after.as_deref(), 2);
        assert_eq!(second, ["c", "d"]);
        let after = decode(&next.unwrap()).unwrap();
        let (third, next) = page(&items, |s| s, after.as_deref(), 2);
        assert_eq!(third, ["e"]);
        assert!(next.is_none());
    }

    #[test]
    fn refuses_foreign_cursors_and_accepts_the_empty_one() {
        assert_eq!(decode(""), Ok(None));
        assert!(decode("!!!").is_err());
        assert!(decode(&URL_SAFE_NO_PAD.encode("offset:3")).is_err());
    }

    mod properties {
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn a_cursor_decodes_to_its_key_and_made_up_ones_never_panic(key in any::<String>(), raw in any::<String>()) {
                prop_assert_eq!(super::super::decode(&super::super::encode(&key)), Ok(Some(key)));
                let _ = super::super::decode(&raw);
            }
        }
    }
}
