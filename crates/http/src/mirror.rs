//! The headers that mirror body fields (SEP-2243): `MCP-Protocol-Version`,
//! `Mcp-Method`, `Mcp-Name` and `Mcp-Param-{Name}`. Intermediaries route on
//! them, so a header that disagrees with the body is refused with `-32020`.
//!
//! Two steps, placed as DIGEST §8.6 orders them: [`cross_check`] compares the
//! values present in both places before anything else looks at the version
//! (so a mismatch wins over an unsupported version); [`require`] checks
//! presence and the name and parameter headers after the version gate.

use axum::http::header::AsHeaderName;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};
use switchyard_core::Prepared;
use switchyard_protocol::headers::{self, decode_value, matches_body};
use switchyard_protocol::version::{Era, LEGACY};
use switchyard_protocol::{ErrorObject, Method, RequestMeta};

/// A header's value as text, trimmed; `-32020` when it has bytes that are not
/// visible ASCII.
fn read<K: AsHeaderName + Copy + std::fmt::Display>(headers: &HeaderMap, name: K) -> Result<Option<&str>, ErrorObject> {
    text(headers.get(name), name)
}

/// [`read`] of a value already looked up.
fn text(value: Option<&HeaderValue>, name: impl std::fmt::Display) -> Result<Option<&str>, ErrorObject> {
    match value {
        None => Ok(None),
        Some(value) => value
            .to_str()
            .map(|v| Some(v.trim_matches(|c| c == ' ' || c == '\t')))
            .map_err(|_| ErrorObject::header_mismatch(format!("{name} has invalid characters"))),
    }
}

// Parsed once: looking a header up by a `&str` name parses the name on every call.
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static(headers::PROTOCOL_VERSION);
const METHOD: HeaderName = HeaderName::from_static(headers::METHOD);
const NAME: HeaderName = HeaderName::from_static(headers::NAME);

/// The three standard mirrored headers of a request, looked up once: each
/// lookup hashes the name, and the endpoint's steps read them six times a
/// request between them (eight with a rate limiter). Each is checked as text
/// only where its step reads it, so an invalid value fails at the step it
/// always did.
pub(crate) struct Mirrored<'a> {
    version: Option<&'a HeaderValue>,
    method: Option<&'a HeaderValue>,
    name: Option<&'a HeaderValue>,
}

impl<'a> Mirrored<'a> {
    pub(crate) fn of(headers: &'a HeaderMap) -> Self {
        Self { version: headers.get(&PROTOCOL_VERSION), method: headers.get(&METHOD), name: headers.get(&NAME) }
    }

    fn version(&self) -> Result<Option<&'a str>, ErrorObject> {
        text(self.version, &PROTOCOL_VERSION)
    }

    fn method(&self) -> Result<Option<&'a str>, ErrorObject> {
        text(self.method, &METHOD)
    }

    fn name(&self) -> Result<Option<&'a str>, ErrorObject> {
        text(self.name, &NAME)
    }

    /// `Mcp-Method` and `Mcp-Name` as the rate limit reads them: as sent,
    /// `None` when absent or not text (a `Mcp-Method` that is not text is
    /// refused at step 6).
    pub(crate) fn routing(&self) -> (Option<&'a str>, Option<&'a str>) {
        let loose = |value: Option<&'a HeaderValue>| value.and_then(|v| v.to_str().ok());
        (loose(self.method), loose(self.name))
    }

    /// Whether the headers say the client speaks the modern protocol: a
    /// `MCP-Protocol-Version` that is not a legacy revision.
    pub(crate) fn modern_hint(&self) -> bool {
        matches!(self.version(), Ok(Some(v)) if !LEGACY.contains(&v))
    }
}

/// Step 6: where a value is both in a header and in the body, they must
/// agree. `Mcp-Method` is compared in every era: the rate limit was decided
/// from it before the body was read, so a legacy request must not carry one
/// that its body contradicts either.
pub(crate) fn cross_check(
    mirrored: &Mirrored<'_>,
    method: &str,
    params: &Map<String, Value>,
) -> Result<(), ErrorObject> {
    if let Some(body_version) = RequestMeta::claimed_version(params)
        && let Some(header) = mirrored.version()?
        && header != body_version
    {
        return Err(ErrorObject::header_mismatch(format!("MCP-Protocol-Version '{header}' vs body '{body_version}'")));
    }
    if let Some(header) = mirrored.method()?
        && header != method
    {
        return Err(ErrorObject::header_mismatch(format!("Mcp-Method '{header}' vs body '{method}'")));
    }
    Ok(())
}

/// Step 9: the standard headers are present, and `Mcp-Name` and every
/// `Mcp-Param-*` agree with the body once decoded.
pub(crate) fn require(headers: &HeaderMap, mirrored: &Mirrored<'_>, request: &Prepared) -> Result<(), ErrorObject> {
    if request.era == Era::Legacy {
        // Legacy clients predate these headers and need send none; one that
        // sends `Mcp-Name` anyway must not name what its body does not (the
        // rate limit may have been decided from it).
        if let (Some(_), Some(header)) = (request.method.name_param(), mirrored.name()?) {
            name_agrees(&decode(header, "Mcp-Name")?, request)?;
        }
        return Ok(());
    }
    if mirrored.version()?.is_none() {
        return Err(ErrorObject::header_mismatch("MCP-Protocol-Version header is required"));
    }
    if mirrored.method()?.is_none() {
        return Err(ErrorObject::header_mismatch("Mcp-Method header is required"));
    }
    if request.method.name_param().is_some() {
        let header = mirrored.name()?.ok_or_else(|| {
            ErrorObject::header_mismatch(format!("Mcp-Name header is required for {}", request.method))
        })?;
        name_agrees(&decode(header, "Mcp-Name")?, request)?;
    }
    if request.method == Method::CallTool {
        check_params(headers, request)?;
    }
    Ok(())
}

/// `Mcp-Name` (decoded) against the name the body gives. A missing or
/// non-string body member is the method's own -32602, later.
fn name_agrees(header: &str, request: &Prepared) -> Result<(), ErrorObject> {
    match request.name() {
        Some(body) if header != body => {
            Err(ErrorObject::header_mismatch(format!("Mcp-Name '{header}' vs body '{body}'")))
        }
        _ => Ok(()),
    }
}

fn check_params(headers: &HeaderMap, request: &Prepared) -> Result<(), ErrorObject> {
    let arguments = request.tool_arguments();
    for param in request.header_params() {
        let body = arguments.and_then(|a| a.get(&param.argument)).filter(|v| !v.is_null());
        let header = read(headers, param.header.as_str())?;
        match (body, header) {
            (Some(_), None) => {
                return Err(ErrorObject::header_mismatch(format!(
                    "{} header is required: argument {} is set",
                    param.header, param.argument
                )));
            }
            (Some(body), Some(header)) => {
                let decoded = decode(header, &param.header)?;
                if !matches_body(&decoded, body) {
                    return Err(ErrorObject::header_mismatch(format!(
                        "{} '{decoded}' vs argument {} {body}",
                        param.header, param.argument
                    )));
                }
            }
            (None, Some(header)) => {
                // Nothing to compare with, but a malformed value is still malformed.
                decode(header, &param.header)?;
            }
            (None, None) => {}
        }
    }
    Ok(())
}

fn decode(raw: &str, name: &str) -> Result<String, ErrorObject> {
    decode_value(raw).map_err(|e| ErrorObject::header_mismatch(format!("{name} is not validly encoded ({e:?})")))
}
