//! Why a token was refused. The variants are the `reason` of log lines and
//! metrics; the client sees a short description, never the token.

/// A refused token (401), or an issuer that could not be asked (503).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// No `Authorization: Bearer` header.
    #[error("no bearer token")]
    Missing,
    /// The header or the token is not well formed, or uses `alg: none`.
    #[error("malformed token")]
    Malformed,
    /// A JWT whose `iss` is not a trusted issuer.
    #[error("token from an untrusted issuer")]
    UnknownIssuer,
    /// The header's `alg` is not allowed for the issuer (or does not match the key).
    #[error("token algorithm not allowed")]
    Algorithm,
    /// No key of the issuer has the token's `kid`, even after a refetch.
    #[error("token signed by an unknown key")]
    UnknownKey,
    /// The signature does not verify.
    #[error("invalid token signature")]
    Signature,
    /// `aud` does not name this server.
    #[error("token not issued for this resource")]
    Audience,
    /// `exp` has passed.
    #[error("token expired")]
    Expired,
    /// `nbf` is in the future.
    #[error("token not yet valid")]
    NotYetValid,
    /// A claim is missing or of the wrong type.
    #[error("token claims invalid")]
    Claims,
    /// Introspection says the token is not active.
    #[error("token inactive")]
    Inactive,
    /// The issuer's keys or the introspection endpoint could not be reached;
    /// the token may be fine, so this is 503, not 401.
    #[error("authorization server unavailable")]
    Unavailable,
}

impl Rejection {
    /// A stable, low-cardinality name for logs and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Missing => "missing",
            Self::Malformed => "malformed",
            Self::UnknownIssuer => "unknown_issuer",
            Self::Algorithm => "algorithm",
            Self::UnknownKey => "unknown_key",
            Self::Signature => "signature",
            Self::Audience => "audience",
            Self::Expired => "expired",
            Self::NotYetValid => "not_yet_valid",
            Self::Claims => "claims",
            Self::Inactive => "inactive",
            Self::Unavailable => "unavailable",
        }
    }
}
