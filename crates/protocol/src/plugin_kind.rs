//! [`PluginKind`]: the kinds of plugin a registration names. The admin API
//! accepts it (`kind`), the registry stores it, the plugin factory builds by
//! it. It lives here, the lowest crate and one without IO, so the registry can
//! share the one enum without depending on `core`, and a kind never travels
//! between crates as a string.

use serde::{Deserialize, Serialize};

/// The kinds of plugin the platform knows how to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PluginKind {
    /// Compiled into the binary.
    Builtin,
    /// A sandboxed WebAssembly module.
    Wasm,
    /// A remote MCP server whose tools are republished.
    Upstream,
}

impl PluginKind {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Builtin => "builtin",
            Self::Wasm => "wasm",
            Self::Upstream => "upstream",
        }
    }

    /// Parses a stored or submitted name.
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "builtin" => Self::Builtin,
            "wasm" => Self::Wasm,
            "upstream" => Self::Upstream,
            _ => return None,
        })
    }
}

impl std::fmt::Display for PluginKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
