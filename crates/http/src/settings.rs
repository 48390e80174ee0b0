//! `[http]` as the operator writes it, its defaults (those of [`Config`])
//! and its checks.

use serde::Deserialize;
use switchyard_settings::{Section, StringList};

use crate::Config;

/// `[http]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHttp {
    /// MCP endpoint path. Default `/mcp`.
    pub endpoint: Option<String>,
    /// Accepted `Host` names; `*` for any. Default the loopback names.
    pub allowed_hosts: Option<StringList>,
    /// Accepted `Origin` host names; `*` for any. Default the loopback names.
    pub allowed_origins: Option<StringList>,
    /// Largest request body in bytes. Default 4 MiB.
    pub max_body_bytes: Option<usize>,
    /// Largest legacy client's answer in bytes (it may cross the bus). Default 256 KiB.
    pub max_answer_bytes: Option<usize>,
    /// SSE keep-alive interval on listen streams. Default `"15s"`.
    pub keep_alive: Option<String>,
    /// Connections queued by the kernel before they are accepted. Default 4096.
    pub listen_backlog: Option<u32>,
    /// Streams one HTTP/2 connection may have open at once. Default 1000.
    pub h2_max_concurrent_streams: Option<u32>,
    /// How long a client may take to send a request head; also how long an
    /// HTTP/1.1 or HTTP/2 connection may sit idle. Default `"30s"`.
    pub header_read_timeout: Option<String>,
    /// How long a client may take to send a request body. Default `"30s"`.
    pub body_read_timeout: Option<String>,
    /// How often HTTP/2 peers are pinged. Default `"30s"`.
    pub h2_keep_alive_interval: Option<String>,
    /// How long an HTTP/2 peer may take to answer a ping. Default `"20s"`.
    pub h2_keep_alive_timeout: Option<String>,
    /// Proxies whose `X-Forwarded-For` is believed, as CIDR ranges or
    /// addresses (`10.0.0.0/8`). Default none.
    pub trusted_proxies: Option<StringList>,
}

impl RawHttp {
    /// The transport's settings.
    pub fn check(self, mut section: Section<'_>) -> Config {
        let defaults = Config::default();
        let endpoint = self.endpoint.unwrap_or_else(|| defaults.endpoint.clone());
        if !endpoint.starts_with('/') {
            section.push("endpoint", format_args!("{endpoint:?} must start with /"));
        }
        let mut trusted_proxies = Vec::new();
        for proxy in self.trusted_proxies.map(StringList::into_vec).unwrap_or_default() {
            let range = proxy.parse::<ipnet::IpNet>().or_else(|_| proxy.parse::<std::net::IpAddr>().map(Into::into));
            match range {
                Ok(range) => trusted_proxies.push(range),
                Err(_) => section.push(
                    "trusted_proxies",
                    format_args!("{proxy:?} is not an address or a CIDR range like 10.0.0.0/8"),
                ),
            }
        }
        Config {
            keep_alive: section.duration("keep_alive", self.keep_alive.as_deref(), defaults.keep_alive),
            header_read_timeout: section.positive_duration(
                "header_read_timeout",
                self.header_read_timeout.as_deref(),
                defaults.header_read_timeout,
            ),
            body_read_timeout: section.positive_duration(
                "body_read_timeout",
                self.body_read_timeout.as_deref(),
                defaults.body_read_timeout,
            ),
            h2_keep_alive_interval: section.positive_duration(
                "h2_keep_alive_interval",
                self.h2_keep_alive_interval.as_deref(),
                defaults.h2_keep_alive_interval,
            ),
            h2_keep_alive_timeout: section.positive_duration(
                "h2_keep_alive_timeout",
                self.h2_keep_alive_timeout.as_deref(),
                defaults.h2_keep_alive_timeout,
            ),
            allowed_hosts: self.allowed_hosts.map_or(defaults.allowed_hosts, StringList::into_vec),
            allowed_origins: self.allowed_origins.map_or(defaults.allowed_origins, StringList::into_vec),
            max_body_bytes: self.max_body_bytes.unwrap_or(defaults.max_body_bytes),
            max_answer_bytes: self.max_answer_bytes.unwrap_or(defaults.max_answer_bytes),
            listen_backlog: self.listen_backlog.map_or(defaults.listen_backlog, |backlog| backlog.max(1)),
            h2_max_concurrent_streams: self
                .h2_max_concurrent_streams
                .map_or(defaults.h2_max_concurrent_streams, |streams| streams.max(1)),
            endpoint,
            trusted_proxies,
        }
    }
}
