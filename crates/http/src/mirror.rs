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
use switchyard_core::Prepared;
use switchyard_protocol::headers::{self, decode_value, matches_body};
use switchyard_protocol::version::{Era, LEGACY};
use switchyard_protocol::{ErrorObject, Method};

/// A header's value as text, trimmed; `-32020` when it has bytes that are not
/// visible ASCII.
fn read<K: AsHeaderName + Copy + std::fmt::Display>(headers: &HeaderMap, name: K) -> Result<Option<&str>, ErrorObject> {
    checked(headers.get(name).map(trimmed), name)
}

/// A header value as text without the spaces and tabs around it; `Err`
/// when it has bytes that are not visible ASCII.
fn trimmed(value: &HeaderValue) -> Result<&str, ()> {
    value.to_str().map(|v| v.trim_matches(|c| c == ' ' || c == '\t')).map_err(drop)
}

/// A header [`trimmed`], with the `-32020` of a value that is not text.
fn checked<'a>(header: Header<'a>, name: impl std::fmt::Display) -> Result<Option<&'a str>, ErrorObject> {
    header.transpose().map_err(|()| ErrorObject::header_mismatch(format!("{name} has invalid characters")))
}

// Parsed once: looking a header up by a `&str` name parses the name on every call.
const PROTOCOL_VERSION: HeaderName = HeaderName::from_static(headers::PROTOCOL_VERSION);
const METHOD: HeaderName = HeaderName::from_static(headers::METHOD);
const NAME: HeaderName = HeaderName::from_static(headers::NAME);

/// The three standard mirrored headers of a request, looked up and read as
/// text once: each lookup hashes the name and each reading checks every
/// byte, and the endpoint's steps read them six times a request between them
/// (eight with a rate limiter). A value that is not text is refused at the
/// step that reads it, as before.
pub(crate) struct Mirrored<'a> {
    version: Header<'a>,
    method: Header<'a>,
    name: Header<'a>,
}

/// One mirrored header: absent, its trimmed text, or (`Err`) a value with
/// bytes that are not visible ASCII.
type Header<'a> = Option<Result<&'a str, ()>>;

impl<'a> Mirrored<'a> {
    pub(crate) fn of(headers: &'a HeaderMap) -> Self {
        let read = |name: &HeaderName| headers.get(name).map(trimmed);
        Self { version: read(&PROTOCOL_VERSION), method: read(&METHOD), name: read(&NAME) }
    }

    fn version(&self) -> Result<Option<&'a str>, ErrorObject> {
        checked(self.version, &PROTOCOL_VERSION)
    }

    fn method(&self) -> Result<Option<&'a str>, ErrorObject> {
        checked(self.method, &METHOD)
    }

    fn name(&self) -> Result<Option<&'a str>, ErrorObject> {
        checked(self.name, &NAME)
    }

    /// `Mcp-Method` and `Mcp-Name` as the rate limit reads them: trimmed,
    /// `None` when absent or not text (a `Mcp-Method` that is not text is
    /// refused at step 6).
    pub(crate) fn routing(&self) -> (Option<&'a str>, Option<&'a str>) {
        (self.method.and_then(Result::ok), self.name.and_then(Result::ok))
    }

    /// Whether the headers say the client speaks the modern protocol: a
    /// `MCP-Protocol-Version` that is not a legacy revision.
    pub(crate) fn modern_hint(&self) -> bool {
        matches!(self.version(), Ok(Some(v)) if !LEGACY.contains(&v))
    }
}

/// Step 6: where a value is both in a header and in the body, they must
/// agree: the body's method, and the version its `_meta` claims, if any.
/// `Mcp-Method` is compared in every era: the rate limit was decided from it
/// before the body was read, so a legacy request must not carry one that its
/// body contradicts either.
pub(crate) fn cross_check(
    mirrored: &Mirrored<'_>,
    method: &str,
    claimed_version: Option<&str>,
) -> Result<(), ErrorObject> {
    if let Some(body_version) = claimed_version
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
