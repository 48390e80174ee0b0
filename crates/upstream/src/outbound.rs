//! Where Switchyard may connect on a plugin's behalf.
//!
//! Three classes of address, from the most to the least dangerous:
//! - never: unspecified, broadcast, multicast;
//! - cloud metadata and link-local (169.254.0.0/16, fe80::/10, AWS's
//!   `fd00:ec2::254` and `fd00:ec2::23`, Google's `fd20:ce::254`, Azure's
//!   168.63.129.16, Alibaba's 100.100.100.200) and NAT64 (`64:ff9b::/96`,
//!   `64:ff9b:1::/48`, which can carry any IPv4 address): only with
//!   `allow_link_local` (no range opens them);
//! - internal (loopback, RFC 1918, CGNAT, unique local, IPv4 "this network",
//!   and 6to4 and Teredo, which tunnel IPv4 we cannot see):
//!   only for a host the operator allow-listed by name (`*` alone does not
//!   count, `*.svc.cluster.local` does), or a range given by CIDR.
//!
//! Everything is checked on the literal URL and again on every address DNS
//! returns, so a public name cannot be pointed at an internal address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

pub use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// The outbound policy of upstream plugins (and their token endpoints).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundPolicy {
    /// Host names (or IP literals) upstream URLs may name; `*` allows any
    /// public host, `*.example.com` any subdomain. Default `["*"]`. A host
    /// matched by an entry other than `*` may resolve to internal addresses.
    pub allowed_hosts: Vec<String>,
    /// Address ranges any allowed host may resolve to even when internal
    /// (metadata, link-local and NAT64 addresses stay refused). Default none.
    pub allowed_ranges: Vec<IpNet>,
    /// Allow link-local, NAT64 and cloud metadata addresses. Default false.
    pub allow_link_local: bool,
}

impl Default for OutboundPolicy {
    fn default() -> Self {
        Self { allowed_hosts: vec!["*".into()], allowed_ranges: Vec::new(), allow_link_local: false }
    }
}

/// Names that resolve to a cloud metadata service.
const METADATA_NAMES: [&str; 3] = ["metadata.google.internal", "metadata.goog", "instance-data"];

/// What a host name was allowed by: only a name the operator wrote may reach
/// internal addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Allowed {
    /// By the bare `*`.
    Wildcard,
    /// By its own name, or a `*.domain` the operator wrote.
    ByName,
}

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
        let allowed = self.host_allowed(bare).ok_or_else(|| format!("host {host} is not in upstream.allowed_hosts"))?;
        if !self.allow_link_local && METADATA_NAMES.iter().any(|m| bare.eq_ignore_ascii_case(m)) {
            return Err(format!("{host} is a cloud metadata service"));
        }
        if let Ok(ip) = bare.parse::<IpAddr>() {
            self.check_ip(ip, allowed)?;
        }
        Ok(())
    }

    /// How `host` is allowed, if it is.
    pub fn host_allowed(&self, host: &str) -> Option<Allowed> {
        let by_name = self.allowed_hosts.iter().any(|allowed| {
            allowed.eq_ignore_ascii_case(host)
                || allowed.strip_prefix("*.").is_some_and(|suffix| {
                    host.len() > suffix.len() + 1
                        && host[host.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
                        && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
                })
        });
        if by_name {
            Some(Allowed::ByName)
        } else {
            self.allowed_hosts.iter().any(|a| a == "*").then_some(Allowed::Wildcard)
        }
    }

    /// Checks one address an upstream would be reached at, for a host
    /// allowed as `allowed`.
    ///
    /// # Errors
    /// Why the address is refused.
    pub fn check_ip(&self, ip: IpAddr, allowed: Allowed) -> Result<(), String> {
        let ip = embedded_v4(ip);
        if is_never(ip) {
            return Err(format!("{ip} is not a unicast address"));
        }
        // Before the ranges: an operator's `fd00::/8` must not open AWS's
        // `fd00:ec2::254`; only `allow_link_local` opens these.
        if is_metadata_or_link_local(ip) && !self.allow_link_local {
            return Err(format!(
                "{ip} is link-local, NAT64 or a cloud metadata address (upstream.allow_link_local is off)"
            ));
        }
        if self.allowed_ranges.iter().any(|range| range.contains(&ip)) {
            return Ok(());
        }
        if is_internal(ip) && allowed == Allowed::Wildcard {
            return Err(format!(
                "{ip} is an internal address: allow its host by name in upstream.allowed_hosts, or its range in upstream.allowed_ranges"
            ));
        }
        Ok(())
    }

    /// A DNS resolver that drops refused addresses, so a name cannot point
    /// an upstream at the metadata service after the URL check passed.
    pub(crate) fn resolver(&self) -> Arc<GuardedResolver> {
        Arc::new(GuardedResolver(self.clone()))
    }

    /// The addresses `host` resolves to that this policy lets us connect to
    /// (the URL check let the name through; how it was allowed decides
    /// whether it may resolve to internal addresses), with `port`.
    ///
    /// # Errors
    /// The lookup failed, or every address it gave is refused (the reason
    /// for the first).
    pub(crate) async fn addresses(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
        let how = self.host_allowed(host).unwrap_or(Allowed::Wildcard);
        let found: Vec<SocketAddr> =
            tokio::net::lookup_host((host, port)).await.map_err(|e| format!("{host}: {e}"))?.collect();
        let allowed: Vec<SocketAddr> = found.iter().copied().filter(|a| self.check_ip(a.ip(), how).is_ok()).collect();
        if allowed.is_empty() {
            let why = found
                .first()
                .map_or_else(|| "no addresses".to_owned(), |a| self.check_ip(a.ip(), how).err().unwrap_or_default());
            return Err(format!("{host} resolves only to refused addresses: {why}"));
        }
        Ok(allowed)
    }
}

/// The IPv4 address an IPv6 one carries as `::ffff:a.b.c.d` (mapped) or
/// `::a.b.c.d` (the deprecated compatible form), so each is judged as IPv4.
fn embedded_v4(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) if !v6.is_loopback() && !v6.is_unspecified() => v6.to_ipv4().map_or(ip, IpAddr::V4),
        other => other,
    }
}

fn is_never(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_unspecified() || v4.is_broadcast() || v4.is_multicast(),
        IpAddr::V6(v6) => v6.is_unspecified() || v6.is_multicast(),
    }
}

/// Azure's wire server (metadata, DHCP, health) and Alibaba's metadata service.
const METADATA_V4: [Ipv4Addr; 2] = [Ipv4Addr::new(168, 63, 129, 16), Ipv4Addr::new(100, 100, 100, 200)];
/// AWS's IPv6 metadata service and its DNS resolver, and Google Cloud's.
const METADATA_V6: [Ipv6Addr; 3] = [
    Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254),
    Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x23),
    Ipv6Addr::new(0xfd20, 0xce, 0, 0, 0, 0, 0, 0x254),
];

fn is_metadata_or_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local() || METADATA_V4.contains(&v4),
        IpAddr::V6(v6) => {
            let s = v6.segments();
            let nat64 =
                (s[0] == 0x64 && s[1] == 0xff9b && (s[2..6] == [0; 4] || s[2] == 1)) || METADATA_V6.contains(&v6);
            (s[0] & 0xffc0) == 0xfe80 || nat64
        }
    }
}

fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback() || v4.is_private() || a == 0 || (a == 100 && (64..128).contains(&b))
        }
        // ::1, fc00::/7 (unique local), fec0::/10 (the old site-local), and
        // the tunnels that carry an IPv4 address we cannot see through:
        // 6to4 (2002::/16) and Teredo (2001::/32).
        IpAddr::V6(v6) => {
            let s = v6.segments();
            v6.is_loopback()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfec0
                || s[0] == 0x2002
                || (s[0] == 0x2001 && s[1] == 0)
        }
    }
}

/// See [`OutboundPolicy::resolver`].
pub(crate) struct GuardedResolver(OutboundPolicy);

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.0.clone();
        Box::pin(async move {
            let allowed = policy.addresses(name.as_str(), 0).await?;
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
    fn metadata_nat64_and_link_local_are_refused_by_default() {
        let policy = OutboundPolicy::default();
        assert!(policy.check_url(&url("https://tools.example.com/mcp")).is_ok());
        assert!(policy.check_url(&url("https://203.0.113.7/mcp")).is_ok());
        for bad in [
            "http://169.254.169.254/latest/meta-data",
            "http://168.63.129.16/metadata/instance",
            "http://[fe80::1]/",
            "http://[fd00:ec2::254]/",
            "http://[fd00:ec2::23]/",
            "http://[fd20:ce::254]/",
            "http://[::a9fe:a9fe]/",
            "http://[64:ff9b::a9fe:a9fe]/",
            "http://[64:ff9b:1::7f00:1]/",
            "http://[::ffff:169.254.169.254]/",
            "http://metadata.google.internal/computeMetadata/v1",
            "http://100.100.100.200/",
            "http://0.0.0.0:80/",
        ] {
            assert!(policy.check_url(&url(bad)).is_err(), "{bad}");
        }
        let open = OutboundPolicy { allow_link_local: true, ..OutboundPolicy::default() };
        assert!(open.check_url(&url("http://169.254.169.254/")).is_ok());
        assert!(open.check_url(&url("http://[64:ff9b::a9fe:a9fe]/")).is_ok());
    }

    #[test]
    fn internal_addresses_need_a_name_or_a_range() {
        let policy = OutboundPolicy::default();
        for internal in [
            "http://127.0.0.1:8080/mcp",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://10.0.0.5/",
            "http://172.16.1.1/",
            "http://192.168.1.1/",
            "http://100.64.0.1/",
            "http://[fd12:3456::1]/",
            "http://[::7f00:1]/",
            "http://[2002:7f00:1::]/",
            "http://[2001:0:4136:e378::1]/",
            "http://0.1.2.3/",
        ] {
            let error = policy.check_url(&url(internal)).unwrap_err();
            assert!(error.contains("internal"), "{internal}: {error}");
        }
        let named = OutboundPolicy { allowed_hosts: vec!["*".into(), "127.0.0.1".into()], ..OutboundPolicy::default() };
        assert!(named.check_url(&url("http://127.0.0.1:8080/mcp")).is_ok());
        assert!(named.check_url(&url("http://10.0.0.5/")).is_err());
        let ranged =
            OutboundPolicy { allowed_ranges: vec!["10.0.0.0/8".parse().unwrap()], ..OutboundPolicy::default() };
        assert!(ranged.check_url(&url("http://10.0.0.5/")).is_ok());
        assert!(ranged.check_url(&url("http://192.168.1.1/")).is_err());
        let unique_local =
            OutboundPolicy { allowed_ranges: vec!["fd00::/8".parse().unwrap()], ..OutboundPolicy::default() };
        assert!(unique_local.check_url(&url("http://[fd00:1::1]/")).is_ok());
        assert!(unique_local.check_url(&url("http://[fd00:ec2::254]/")).is_err(), "a range does not open metadata");
        // A name allowed by the operator may resolve to internal addresses; `*` may not.
        let cluster = OutboundPolicy { allowed_hosts: vec!["*.svc.cluster.local".into()], ..OutboundPolicy::default() };
        let internal: IpAddr = "10.1.2.3".parse().unwrap();
        assert_eq!(cluster.host_allowed("tools.mcp.svc.cluster.local"), Some(Allowed::ByName));
        assert!(cluster.check_ip(internal, Allowed::ByName).is_ok());
        assert!(policy.check_ip(internal, Allowed::Wildcard).is_err());
        assert!(
            cluster.check_ip("169.254.169.254".parse().unwrap(), Allowed::ByName).is_err(),
            "metadata stays refused"
        );
    }

    #[test]
    fn the_allow_list_is_exact_or_a_subdomain_wildcard() {
        let policy = OutboundPolicy {
            allowed_hosts: vec!["api.example.com".into(), "*.tools.example".into()],
            ..OutboundPolicy::default()
        };
        assert!(policy.check_url(&url("https://api.example.com/mcp")).is_ok());
        assert!(policy.check_url(&url("https://a.tools.example/mcp")).is_ok());
        assert!(policy.check_url(&url("https://tools.example/mcp")).is_err());
        assert!(policy.check_url(&url("https://eviltools.example/mcp")).is_err());
        assert!(policy.check_url(&url("https://evil.example.com/mcp")).is_err());
    }

    #[tokio::test]
    async fn the_resolver_drops_refused_addresses() {
        let resolve = |policy: OutboundPolicy| async move {
            let resolver = policy.resolver();
            resolver.resolve("localhost".parse().unwrap()).await.map(Iterator::collect::<Vec<SocketAddr>>)
        };
        assert!(resolve(OutboundPolicy::default()).await.is_err(), "a wildcard name may not resolve to loopback");
        let named = OutboundPolicy { allowed_hosts: vec!["localhost".into()], ..OutboundPolicy::default() };
        let addrs = resolve(named).await.unwrap();
        assert!(!addrs.is_empty() && addrs.iter().all(|a| a.ip().is_loopback()), "{addrs:?}");
    }
}
