//! The OAuth 2.1 resource server of Switchyard (DIGEST §9).
//!
//! Every MCP request carries `Authorization: Bearer …`; [`RequireBearerLayer`]
//! checks it before the request reaches the endpoint and hands the endpoint a
//! [`core::Caller`](switchyard_core::Caller) holding the principal and its
//! scopes. What the caller may see and use is decided in `core::policy`; this
//! crate only turns its refusals into the 403 step-up challenge.
//!
//! Tokens are checked by a [`Verifier`]:
//! - JWT access tokens (RFC 9068 and the common non-RFC shapes) against the
//!   JWKS of a configured issuer, found through RFC 8414 or OpenID discovery
//!   unless configured; keys are refreshed in the background and on an
//!   unknown `kid`, at most once per `jwks_min_refetch`, so a stream of bad
//!   tokens cannot hammer the issuer. Only asymmetric algorithms are accepted,
//!   each only with a key of its own family; issuer, audience (the server's
//!   canonical resource URI, RFC 8707), expiry and not-before are checked with
//!   a small leeway.
//! - Opaque tokens through token introspection (RFC 7662), when configured.
//! - Either way, the verified principal is cached by a hash of the token until
//!   the token expires (bounded in size), so a client that reuses its token
//!   pays the signature check or the introspection call once.
//!
//! A missing or bad token gets 401 with `WWW-Authenticate: Bearer
//! resource_metadata="…"`; missing scopes get 403 `insufficient_scope` naming
//! every scope the operation needs. [`metadata`] serves the Protected
//! Resource Metadata (RFC 9728) that the challenge points to. Tokens are never
//! logged, and never forwarded anywhere.
//!
//! # Layout
//! - [`Config`]: the resource, trusted issuers, introspection, scopes.
//! - [`Verifier`] (`verifier`, `keys`, `introspection`): token to [`Principal`].
//! - [`RequireBearerLayer`] (`layer`): the tower layer and its 401/403 answers.
//! - [`metadata`]: the RFC 9728 document and its well-known routes.

mod config;
mod error;
mod introspection;
mod keys;
mod layer;
pub mod metadata;
mod principal;
mod settings;
mod verifier;

pub use config::{Config, ConfigError, IntrospectionConfig, IssuerConfig};
pub use error::Rejection;
pub use layer::{Gate, RequireBearer, RequireBearerLayer};
pub use principal::Principal;
pub use settings::{RawAuth, RawIntrospection, RawIssuer, Settings};
pub use verifier::Verifier;
