//! `[admin]` as the operator writes it, its defaults and its checks.

use std::net::SocketAddr;

use serde::Deserialize;
use switchyard_settings::{Secret, Section};

use crate::{Access, Config};

/// `[admin]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    /// Serve the admin API. Default true.
    pub enabled: Option<bool>,
    /// Its path prefix. Default `/admin/v1`.
    pub prefix: Option<String>,
    /// Serve it on this address instead of the main one. Default: the main port.
    pub bind: Option<String>,
    /// A bearer token that grants access from anywhere. Default none.
    pub token: Option<Secret>,
    /// Accept requests from loopback peers without a token. Default true
    /// when the admin API is served on a loopback address, false otherwise.
    pub allow_loopback: Option<bool>,
    /// Largest artifact upload in bytes. Default 32 MiB.
    pub max_artifact_bytes: Option<usize>,
}

/// The admin API as the binary serves it.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Prefix, access and limits.
    pub api: Config,
    /// A separate address, if configured.
    pub bind: Option<SocketAddr>,
    /// The admin token, when one is configured (the CLI sends it).
    pub token: Option<Secret>,
}

impl RawAdmin {
    /// The admin API's settings, unless it is disabled. `main_bind` is where
    /// MCP is served: the admin API is served there too unless it has a bind
    /// of its own.
    pub fn check(self, main_bind: SocketAddr, mut section: Section<'_>) -> Option<Settings> {
        if self.enabled == Some(false) {
            return None;
        }
        let defaults = Config::default();
        let prefix = self.prefix.unwrap_or(defaults.prefix);
        if !prefix.starts_with('/') || prefix.len() < 2 || prefix.ends_with('/') {
            section.push("prefix", format_args!("{prefix:?} must start with / and not end with /"));
        }
        let bind = self.bind.and_then(|text| {
            text.parse()
                .map_err(|_| section.push("bind", format_args!("{text:?} is not an address like 127.0.0.1:8081")))
                .ok()
        });
        if self.token.as_ref().is_some_and(|t| t.expose().len() < 16) {
            section.push("token", "use at least 16 characters");
        }
        // Loopback peers are trusted by default only when nobody else can reach
        // the admin API at all. Behind a non-loopback bind, a service-mesh
        // sidecar or a same-host proxy delivers every outside request from
        // 127.0.0.1 (Istio: 127.0.0.6), so trusting loopback would trust everyone.
        let served_on = bind.unwrap_or(main_bind);
        let allow_loopback = self.allow_loopback.unwrap_or_else(|| served_on.ip().is_loopback());
        let access = Access::new(allow_loopback, self.token.as_ref().map(|t| t.expose().as_str()));
        let api = Config {
            prefix,
            access,
            max_artifact_bytes: self.max_artifact_bytes.unwrap_or(defaults.max_artifact_bytes),
        };
        Some(Settings { api, bind, token: self.token })
    }
}
