//! Canonical JSON: object keys sorted, no whitespace. Two values that are equal
//! as JSON serialise to the same bytes, whatever order a client sent the keys
//! in, so digests over parameters are stable across rounds and replicas.

use serde_json::Value;

/// Writes `value` canonically into `out`.
pub fn write(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => write_members(map, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(item, out);
            }
            out.push(b']');
        }
        scalar => write_scalar(scalar, out),
    }
}

/// Writes `members` canonically as one object: keys sorted. The keys must
/// be distinct (members of one map, or of maps with no key in common).
pub fn write_members<'a>(members: impl IntoIterator<Item = (&'a String, &'a Value)>, out: &mut Vec<u8>) {
    let mut members: Vec<(&String, &Value)> = members.into_iter().collect();
    members.sort_unstable_by_key(|(key, _)| *key);
    out.push(b'{');
    for (i, (key, value)) in members.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        // A string always serialises.
        if let Ok(bytes) = serde_json::to_vec(key) {
            out.extend_from_slice(&bytes);
        }
        out.push(b':');
        write(value, out);
    }
    out.push(b'}');
}

fn write_scalar(value: &Value, out: &mut Vec<u8>) {
    // A scalar `Value` always serialises.
    if let Ok(bytes) = serde_json::to_vec(value) {
        out.extend_from_slice(&bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_does_not_matter() {
        let a: Value = serde_json::from_str(r#"{"b":[1,{"y":2,"x":1}],"a":"s"}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":"s","b":[1,{"x":1,"y":2}]}"#).unwrap();
        let (mut out_a, mut out_b) = (Vec::new(), Vec::new());
        write(&a, &mut out_a);
        write(&b, &mut out_b);
        assert_eq!(out_a, out_b);
        assert_eq!(out_a, br#"{"a":"s","b":[1,{"x":1,"y":2}]}"#);
    }
}
