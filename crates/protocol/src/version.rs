//! The protocol revisions Switchyard serves, and which era each belongs to.

/// The current, stateless revision: every request carries its version and
/// capabilities in `params._meta`.
pub const LATEST: &str = "2026-07-28";

/// Revisions that use the `initialize` handshake. We serve them statelessly:
/// no session is kept, so any replica answers any request.
pub const LEGACY: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// Every revision named in `server/discover`'s `supportedVersions` and in the
/// `-32022` error's `data.supported`. Legacy revisions are not listed there:
/// a modern envelope naming one is refused (DIGEST §11), and listing them
/// would invite modern clients to downgrade.
pub const MODERN: [&str; 1] = [LATEST];

/// The era a request belongs to, which decides how it is validated and shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2026-07-28 and later: per-request `_meta`, no handshake.
    Modern,
    /// 2025-11-25 and earlier: `initialize`, no `_meta`.
    Legacy,
}

/// A protocol revision that this server serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtocolVersion(&'static str);

impl ProtocolVersion {
    /// The latest revision.
    pub const LATEST: Self = Self(LATEST);

    /// Parses a modern revision string; `None` when we do not serve it as modern.
    pub fn parse_modern(s: &str) -> Option<Self> {
        MODERN.iter().find(|v| **v == s).map(|v| Self(v))
    }

    /// Picks the legacy revision to answer an `initialize` with: the one asked
    /// for if we serve it, else our newest legacy revision (the 2025 spec lets
    /// the server propose another version, and the client decides).
    pub fn negotiate_legacy(requested: Option<&str>) -> Self {
        let chosen = requested.and_then(|r| LEGACY.iter().find(|v| **v == r));
        Self(chosen.copied().unwrap_or(LEGACY[0]))
    }

    /// The revision string.
    pub fn as_str(&self) -> &'static str {
        self.0
    }

    /// The era of this revision.
    pub fn era(&self) -> Era {
        if MODERN.contains(&self.0) { Era::Modern } else { Era::Legacy }
    }
}

impl std::fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_negotiation_keeps_a_served_version_and_replaces_others() {
        assert_eq!(ProtocolVersion::negotiate_legacy(Some("2025-06-18")).as_str(), "2025-06-18");
        assert_eq!(ProtocolVersion::negotiate_legacy(Some("1999-01-01")).as_str(), "2025-11-25");
        assert_eq!(ProtocolVersion::negotiate_legacy(None).as_str(), "2025-11-25");
    }

    #[test]
    fn only_modern_revisions_parse_as_modern() {
        assert_eq!(ProtocolVersion::parse_modern("2026-07-28"), Some(ProtocolVersion::LATEST));
        assert_eq!(ProtocolVersion::parse_modern("2025-11-25"), None);
        assert_eq!(ProtocolVersion::parse_modern("v999.0.0"), None);
    }
}
