//! Streamable HTTP header names (SEP-2243) and the encoding of header values
//! that mirror body fields.
//!
//! Header names are case-insensitive; these constants are lower-case, which is
//! how HTTP libraries store them. Values are case-sensitive.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

/// Mirrors `_meta` `protocolVersion`; required on every POST.
pub const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// Mirrors the JSON-RPC `method`; required on every request.
pub const METHOD: &str = "mcp-method";
/// Mirrors `params.name`, `params.uri` or `params.taskId` (see
/// [`crate::Method::name_param`]).
pub const NAME: &str = "mcp-name";
/// Prefix of headers that mirror tool arguments tagged `x-mcp-header`.
pub const PARAM_PREFIX: &str = "mcp-param-";
/// Legacy session header; ignored, never minted or echoed.
pub const SESSION_ID: &str = "mcp-session-id";
/// The schema annotation that asks clients to mirror an argument into a header.
pub const X_MCP_HEADER: &str = "x-mcp-header";

/// Whether a `Content-Type` value names the media type `media`
/// (case-insensitively, parameters such as `charset` ignored): how the MCP
/// endpoint and the admin API both recognise a JSON body.
pub fn names_media_type(content_type: &str, media: &str) -> bool {
    content_type.split(';').next().is_some_and(|named| named.trim().eq_ignore_ascii_case(media))
}

const SENTINEL_START: &str = "=?base64?";
const SENTINEL_END: &str = "?=";

/// Why a header value could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The `=?base64?…?=` payload is not valid Base64.
    InvalidBase64,
    /// The decoded bytes are not UTF-8.
    InvalidUtf8,
}

/// Decodes a header value as sent: surrounding whitespace is trimmed, and a
/// value wrapped in `=?base64?…?=` is Base64-decoded (padding required).
/// Anything else is taken literally.
///
/// # Errors
/// When the wrapped payload is not valid Base64 or not UTF-8.
pub fn decode_value(raw: &str) -> Result<String, DecodeError> {
    let trimmed = raw.trim_matches(|c| c == ' ' || c == '\t');
    match trimmed.strip_prefix(SENTINEL_START).and_then(|rest| rest.strip_suffix(SENTINEL_END)) {
        Some(payload) => {
            let bytes = STANDARD.decode(payload).map_err(|_| DecodeError::InvalidBase64)?;
            String::from_utf8(bytes).map_err(|_| DecodeError::InvalidUtf8)
        }
        None => Ok(trimmed.to_owned()),
    }
}

/// Encodes a value for a header the way clients must: literally when it is
/// plain visible ASCII without surrounding whitespace, else wrapped in Base64.
pub fn encode_value(value: &str) -> String {
    let plain = !value.is_empty()
        && value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !value.starts_with(' ')
        && !value.ends_with(' ')
        && !value.starts_with(SENTINEL_START);
    if plain { value.to_owned() } else { format!("{SENTINEL_START}{}{SENTINEL_END}", STANDARD.encode(value)) }
}

/// Whether a decoded header value stands for the same body value, by the
/// rules of SEP-2243: strings exactly, integers numerically (`42` = `42.0`),
/// booleans as `true`/`false`.
pub fn matches_body(header: &str, body: &Value) -> bool {
    match body {
        Value::String(s) => header == s,
        Value::Bool(b) => header == if *b { "true" } else { "false" },
        Value::Number(n) => match (header.parse::<f64>(), n.as_f64()) {
            (Ok(h), Some(b)) => h == b,
            _ => false,
        },
        _ => false,
    }
}

/// Whether `name` is an HTTP token (RFC 9110 `tchar`), as `x-mcp-header`
/// names must be.
pub fn is_token(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn media_types_are_read_without_case_or_parameters() {
        assert!(names_media_type("application/json", "application/json"));
        assert!(names_media_type("Application/JSON; charset=utf-8", "application/json"));
        assert!(!names_media_type("application/jsonx", "application/json"));
        assert!(!names_media_type("text/plain; x=application/json", "application/json"));
        assert!(!names_media_type("", "application/json"));
    }

    #[test]
    fn decodes_literal_and_wrapped_values() {
        assert_eq!(decode_value("  plain "), Ok("plain".into()));
        assert_eq!(decode_value("=?base64?SGVsbG8gV29ybGQ=?="), Ok("Hello World".into()));
        assert_eq!(decode_value("=?base64?not base64!?="), Err(DecodeError::InvalidBase64));
        assert_eq!(decode_value("=?base64?SGVsbG8?="), Err(DecodeError::InvalidBase64), "padding is required");
        assert_eq!(decode_value("=?base64?//79?="), Err(DecodeError::InvalidUtf8));
        // Without both markers the value is literal.
        assert_eq!(decode_value("=?base64?abc"), Ok("=?base64?abc".into()));
    }

    #[test]
    fn encoding_round_trips() {
        for value in ["simple", " padded ", "日本語", "=?base64?x?=", "line\nbreak"] {
            assert_eq!(decode_value(&encode_value(value)).unwrap(), value);
        }
        assert_eq!(encode_value("simple"), "simple");
    }

    #[test]
    fn compares_numbers_numerically() {
        assert!(matches_body("42", &json!(42)));
        assert!(matches_body("42.0", &json!(42)));
        assert!(!matches_body("43", &json!(42)));
        assert!(matches_body("true", &json!(true)));
        assert!(!matches_body("True", &json!(true)));
        assert!(matches_body("a b", &json!("a b")));
    }
}
