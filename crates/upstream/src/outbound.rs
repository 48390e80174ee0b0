//! Where Switchyard may connect on a plugin's behalf.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// The outbound policy of upstream plugins (and their token endpoints).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundPolicy {
    /// Host names (or IP literals) upstream URLs may name; `*` allows any,
    /// `*.example.com` any subdomain. Default `["*"]`.
    pub allowed_hosts: Vec<String>,
    /// Allow link-local addresses (169.254.0.0/16, fe80::/10), where cloud
    /// metadata services live. Default false.
    pub allow_link_local: bool,
}

impl Default for OutboundPolicy {
    fn default() -> Self {
        Self { allowed_hosts: vec!["*".into()], allow_link_local: false }
    }
}

/// Names that resolve to a cloud metadata service.
const METADATA_NAMES: [&str; 3] = ["metadata.google.internal", "metadata.goog", "instance-data"];

impl OutboundPolicy {
    /// Checks a URL before any connection: scheme, host allow-list, literal addresses.
    ///
    /// # Errors
    /// Why the URL is refused.
    pub fn check_url(&self, url: &reqwest::Url) -> Result<(), String> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("scheme {} is not allowed", url.scheme()));
        }
        let host = url.host_str().ok_or("the URL has no host")?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if !self.host_allowed(bare) {
            return Err(format!("host {host} is not in upstream.allowed_hosts"));
        }
        if !self.allow_link_local && METADATA_NAMES.iter().any(|m| bare.eq_ignore_ascii_case(m)) {
            return Err(format!("{host} is a cloud metadata service"));
        }
        if let Ok(ip) = bare.parse::<IpAddr>() {
            self.check_ip(ip)?;
        }
        Ok(())
    }

    fn host_allowed(&self, host: &str) -> bool {
        self.allowed_hosts.iter().any(|allowed| {
            allowed == "*"
                || allowed.eq_ignore_ascii_case(host)
                || allowed.strip_prefix("*.").is_some_and(|suffix| {
                    host.len() > suffix.len() + 1
                        && host[host.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
                        && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
                })
        })
    }

    /// Checks one address an upstream would be reached at.
    ///
    /// # Errors
    /// Why the address is refused.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), String> {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let refused = match ip {
            IpAddr::V4(v4) => v4.is_unspecified() || v4.is_broadcast() || v4.is_multicast(),
            IpAddr::V6(v6) => v6.is_unspecified() || v6.is_multicast(),
        };
        if refused {
            return Err(format!("{ip} is not a unicast address"));
        }
        let link_local = match ip {
            IpAddr::V4(v4) => v4.is_link_local() || v4.octets() == [100, 100, 100, 200],
            // fe80::/10, and fd00:ec2::254 (AWS's IPv6 metadata address).
            IpAddr::V6(v6) => {
                (v6.segments()[0] & 0xffc0) == 0xfe80 || v6.segments() == [0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254]
            }
        };
        if link_local && !self.allow_link_local {
            return Err(format!("{ip} is link-local or a cloud metadata address (upstream.allow_link_local is off)"));
        }
        Ok(())
    }

    /// A DNS resolver that drops refused addresses, so a name cannot point
    /// an upstream at the metadata service after the URL check passed.
    pub(crate) fn resolver(&self) -> Arc<GuardedResolver> {
        Arc::new(GuardedResolver(self.clone()))
    }
}

/// See [`OutboundPolicy::resolver`].
pub(crate) struct GuardedResolver(OutboundPolicy);

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.0.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = found.iter().copied().filter(|a| policy.check_ip(a.ip()).is_ok()).collect();
            if allowed.is_empty() {
                let why = found
                    .first()
                    .map_or_else(|| "no addresses".to_owned(), |a| policy.check_ip(a.ip()).err().unwrap_or_default());
                return Err(format!("{host} resolves only to refused addresses: {why}").into());
            }
            let addrs: Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> reqwest::Url {
        reqwest::Url::parse(s).unwrap()
    }

    #[test]
    fn metadata_and_link_local_are_refused_by_default() {
        let policy = OutboundPolicy::default();
        assert!(policy.check_url(&url("http://127.0.0.1:8080/mcp")).is_ok());
        assert!(policy.check_url(&url("https://tools.example.com/mcp")).is_ok());
        for bad in [
            "http://169.254.169.254/latest/meta-data",
            "http://[fe80::1]/",
            "http://[fd00:ec2::254]/",
            "http://[::ffff:169.254.169.254]/",
            "http://metadata.google.internal/computeMetadata/v1",
            "http://100.100.100.200/",
            "http://0.0.0.0:80/",
        ] {
            assert!(policy.check_url(&url(bad)).is_err(), "{bad}");
        }
        let open = OutboundPolicy { allow_link_local: true, ..OutboundPolicy::default() };
        assert!(open.check_url(&url("http://169.254.169.254/")).is_ok());
    }

    #[test]
    fn the_allow_list_is_exact_or_a_subdomain_wildcard() {
        let policy = OutboundPolicy {
            allowed_hosts: vec!["api.example.com".into(), "*.tools.example".into()],
            allow_link_local: false,
        };
        assert!(policy.check_url(&url("https://api.example.com/mcp")).is_ok());
        assert!(policy.check_url(&url("https://a.tools.example/mcp")).is_ok());
        assert!(policy.check_url(&url("https://tools.example/mcp")).is_err());
        assert!(policy.check_url(&url("https://eviltools.example/mcp")).is_err());
        assert!(policy.check_url(&url("https://evil.example.com/mcp")).is_err());
    }

    #[tokio::test]
    async fn the_resolver_drops_refused_addresses() {
        let policy = OutboundPolicy::default();
        let resolver = policy.resolver();
        let addrs: Vec<SocketAddr> = resolver.resolve("localhost".parse().unwrap()).await.unwrap().collect();
        assert!(addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
    }
}
