//! The MCP wire format as Switchyard speaks it: the JSON-RPC envelope, method
//! names, error codes, `_meta` keys, HTTP header names and their value encoding.
//!
//! This crate knows no IO, no tokio, no HTTP framework: it turns bytes into
//! validated values and values into bytes. Every method name, header name and
//! `_meta` key is spelled here once; the other crates use these constants.
//!
//! # Layout
//! - [`jsonrpc`]: requests, notifications, responses, [`RequestId`], [`ErrorObject`].
//! - [`method`]: the [`Method`] enum, parsed from the method string in one `match`.
//! - [`params`]: each method's parameters as one typed [`Params`], read once.
//! - [`plugin_kind`]: the kinds of plugin a registration names, shared with the registry.
//! - [`error`]: the numeric error codes and constructors for the MCP-specific errors.
//! - [`meta`]: `_meta` keys and the per-request [`RequestMeta`].
//! - [`version`]: protocol revisions we serve and the era of each.
//! - [`headers`]: Streamable HTTP header names and the `=?base64?…?=` encoding.
//! - [`capabilities`]: questions asked of a `ClientCapabilities` object.
//! - [`logging`]: the `LoggingLevel` scale.
//! - [`canonical`]: a canonical JSON serialisation for digests.
//! - [`finished`]: a result on its way out, and [`result_text`]: a tool's result kept as its text.
//! - [`unbuilt`]: JSON read with a `Value`'s checks and not built; [`RAW_VALUE_TOKEN`], which such readers look for.

pub mod call;
pub mod canonical;
pub mod capabilities;
pub mod error;
pub mod finished;
pub mod headers;
pub mod jsonrpc;
pub mod logging;
pub mod meta;
pub mod method;
pub mod params;
pub mod plugin_kind;
pub mod result_text;
pub mod unbuilt;
pub mod version;

/// The key by which serde_json's `Value` (with its `raw_value` feature on,
/// as the workspace has it) takes an object, when it is the object's first,
/// for raw JSON text: the string member's text is parsed again as JSON. A
/// reader that keeps JSON which may later be built as a `Value`, or that
/// must agree with one that builds, refuses an object with this key, or
/// what it accepts could mean something else once built
/// (`switchyard-upstream`'s counted parse; [`unbuilt::NoRawValue`] for a
/// call's `clientInfo`). What nothing builds, and no reader compares, need
/// not be looked at (the members the counted parse counts and drops).
pub const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

pub use call::ModernCall;
pub use error::ErrorObject;
pub use finished::{Finished, Produced, ServerStamp};
pub use jsonrpc::{Incoming, RequestId};
pub use meta::RequestMeta;
pub use method::Method;
pub use params::{Malformed, Params, ParamsError};
pub use plugin_kind::PluginKind;
pub use result_text::ToolResultText;
pub use version::ProtocolVersion;
