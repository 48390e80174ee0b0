//! Who may see and use what: the scopes each tool, resource and prompt needs,
//! checked against the scopes a [`Caller`] holds.
//!
//! An item needs the union of two declarations: its plugin's
//! ([`Plugin::required_scopes`](crate::Plugin::required_scopes), which the
//! registry keeps per plugin) and the server configuration's, by tool name,
//! prompt name or resource URI (how built-ins get theirs). A caller sees an
//! item in `*/list` only when it holds all of them, and a call, read or get
//! of an item it may not use is refused with [`InsufficientScope`] naming the
//! item's whole scope set, which the transport turns into a 403 step-up
//! challenge (DIGEST §9.1).
//!
//! Scopes are hierarchical at `:`: holding `files` implies `files:read` and
//! `files:read:all`, so a broad grant covers the narrower ones.
//!
//! A caller without scopes (`Caller::scopes == None`) is one the transport did
//! not authenticate because authorization is off (stdio, a loopback server);
//! it may use everything.

use std::collections::{BTreeSet, HashMap};

use serde_json::json;
use switchyard_protocol::ErrorObject;
use switchyard_protocol::error::INSUFFICIENT_SCOPE;

use std::sync::Arc;

use crate::catalog::Item;
use crate::error::Error;

/// Scopes configured per item, on top of what plugins declare.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// By published tool name.
    pub tools: HashMap<String, Vec<String>>,
    /// By published prompt name.
    pub prompts: HashMap<String, Vec<String>>,
    /// By resource URI or URI template.
    pub resources: HashMap<String, Vec<String>>,
    /// Every request must come with a verified caller (authorization is on).
    /// A request with the anonymous caller is then refused, so a route
    /// that lost its auth layer fails closed rather than open.
    pub authenticated_only: bool,
}

/// The kind of item a scope rule applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    /// A tool.
    Tool,
    /// A prompt.
    Prompt,
    /// A resource or resource template.
    Resource,
}

impl Policy {
    /// The scopes an item needs: its plugin's and the configured ones, sorted
    /// and without repeats.
    pub fn needed(&self, kind: ItemKind, key: &str, plugin_scopes: &[String]) -> Vec<String> {
        let configured = match kind {
            ItemKind::Tool => self.tools.get(key),
            ItemKind::Prompt => self.prompts.get(key),
            ItemKind::Resource => self.resources.get(key),
        };
        if configured.is_none() && plugin_scopes.is_empty() {
            return Vec::new();
        }
        let all: BTreeSet<&String> = plugin_scopes.iter().chain(configured.into_iter().flatten()).collect();
        all.into_iter().cloned().collect()
    }

    /// The scopes `item` needs; see [`Policy::needed`].
    pub fn needed_by(&self, item: &impl Item) -> Vec<String> {
        self.needed(item.kind(), item.key(), item.plugin().required_scopes())
    }

    /// Every scope the configuration names, for `scopes_supported`.
    pub fn configured_scopes(&self) -> BTreeSet<String> {
        [&self.tools, &self.prompts, &self.resources].into_iter().flat_map(|m| m.values().flatten().cloned()).collect()
    }

    /// Refuses a caller that may not use `item`. `Ok(true)` when the item
    /// is gated by scopes at all, so the answer depends on who asked.
    pub(crate) fn authorize(&self, caller: &Caller, item: &impl Item) -> Result<bool, Error> {
        let scopes = self.needed_by(item);
        if !caller.may_use(&scopes) {
            let target = item.key().to_owned();
            return Err(Error::InsufficientScope { target, refusal: InsufficientScope { scopes } });
        }
        Ok(caller.is_scoped() && !scopes.is_empty())
    }
}

/// Whether `granted` covers `needed`, honouring the `:` hierarchy.
pub fn covers(granted: &BTreeSet<String>, needed: &str) -> bool {
    if granted.contains(needed) {
        return true;
    }
    // `a:b:c` is covered by `a:b` and by `a`.
    let mut prefix = needed;
    while let Some(cut) = prefix.rfind(':') {
        prefix = &prefix[..cut];
        if granted.contains(prefix) {
            return true;
        }
    }
    false
}

/// Who is calling, as the transport established it. The principal is what
/// `requestState` and task handles are bound to; the scopes decide what the
/// caller may see and use ([`crate::policy`]). The default, an anonymous
/// caller without scopes, is what a transport without authorization (stdio,
/// a loopback server with auth off) hands in: everything is allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// A stable identifier of the authenticated principal (issuer and
    /// subject), or `None` for an anonymous caller.
    pub principal: Option<String>,
    /// The OAuth client the caller's token was issued to, when known.
    pub client_id: Option<String>,
    /// The scopes the caller's token grants, or `None` when authorization is off.
    pub scopes: Option<Arc<BTreeSet<String>>>,
    /// The address the request came from (behind a proxy, the proxy's), when
    /// the transport has one: what an anonymous caller is counted by.
    pub peer: Option<std::net::IpAddr>,
    /// The access token the caller presented, once verified: kept only so
    /// that an upstream acting on the caller's behalf can exchange it
    /// (RFC 8693) for a token of its own. `None` without authorization.
    pub subject_token: Option<SubjectToken>,
}

/// A caller's own access token, with the issuer that issued it. It may be
/// sent to that issuer's authorization server, to be exchanged for a token
/// meant for one upstream, and nowhere else: no upstream, log or span ever
/// sees it. `Debug` does not print it.
#[derive(Clone, PartialEq, Eq)]
pub struct SubjectToken {
    token: Arc<str>,
    issuer: Arc<str>,
}

impl SubjectToken {
    /// The verified `token`, as it came in the `Authorization` header, that
    /// `issuer` issued.
    pub fn new(token: &str, issuer: &str) -> Self {
        Self { token: Arc::from(token), issuer: Arc::from(issuer) }
    }

    /// The token itself, for the token exchange request and nothing else.
    pub fn expose_for_exchange(&self) -> &str {
        &self.token
    }

    /// The issuer that issued it (`iss`).
    pub fn issuer(&self) -> &str {
        &self.issuer
    }
}

impl std::fmt::Debug for SubjectToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SubjectToken(***)")
    }
}

impl Caller {
    /// The caller of an unauthenticated configuration: no principal, every
    /// item allowed. A server whose policy is `authenticated_only` refuses it.
    pub fn anonymous() -> Self {
        Self::default()
    }

    /// What this caller's share of a bounded resource (a rate, listen
    /// streams, tasks) is counted against: `p:` and the principal, or `ip:`
    /// and an anonymous caller's address (for IPv6 its /64, which one host
    /// usually holds whole), or `-` when the transport has neither (stdio).
    pub fn accounting_key(&self) -> String {
        match (&self.principal, self.peer) {
            (Some(principal), _) => format!("p:{principal}"),
            (None, Some(std::net::IpAddr::V4(peer))) => format!("ip:{peer}"),
            (None, Some(std::net::IpAddr::V6(peer))) => match peer.to_ipv4_mapped() {
                Some(v4) => format!("ip:{v4}"),
                None => {
                    let network = u128::from(peer) & !((1u128 << 64) - 1);
                    format!("ip:{}/64", std::net::Ipv6Addr::from(network))
                }
            },
            (None, None) => "-".to_owned(),
        }
    }

    /// Whether this caller may use an item needing `needed`.
    pub fn may_use(&self, needed: &[String]) -> bool {
        match &self.scopes {
            None => true,
            Some(granted) => needed.iter().all(|scope| covers(granted, scope)),
        }
    }

    /// Whether answers to this caller can depend on who it is: true when it
    /// was authenticated, so scope checks apply.
    pub fn is_scoped(&self) -> bool {
        self.scopes.is_some()
    }
}

/// A refusal for lack of scopes: the transport answers 403 with a challenge
/// naming `scopes`, the whole set the operation needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsufficientScope {
    /// Every scope the refused operation needs (not only the missing ones).
    pub scopes: Vec<String>,
}

impl InsufficientScope {
    /// The JSON-RPC error carrying it; `data.requiredScopes` lists the scopes.
    pub fn to_error(&self, what: &str) -> ErrorObject {
        ErrorObject::new(INSUFFICIENT_SCOPE, format!("Insufficient scope for {what}"))
            .with_data(json!({ "requiredScopes": self.scopes }))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn set(scopes: &[&str]) -> BTreeSet<String> {
        scopes.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn callers_are_counted_by_principal_or_by_address() {
        let of = |principal: Option<&str>, peer: Option<&str>| {
            Caller {
                principal: principal.map(str::to_owned),
                peer: peer.map(|p| p.parse().unwrap()),
                ..Caller::default()
            }
            .accounting_key()
        };
        assert_eq!(of(Some("iss sub"), Some("10.0.0.1")), "p:iss sub");
        assert_eq!(of(None, Some("10.0.0.1")), "ip:10.0.0.1");
        assert_eq!(of(None, Some("::ffff:10.0.0.1")), "ip:10.0.0.1");
        // One host's /64 is one caller, however many addresses it picks.
        assert_eq!(of(None, Some("2001:db8:1:2:aaaa::1")), of(None, Some("2001:db8:1:2:bbbb::9")));
        assert_eq!(of(None, Some("2001:db8:1:2::1")), "ip:2001:db8:1:2::/64");
        assert_ne!(
            of(Some("10.0.0.1"), None),
            of(None, Some("10.0.0.1")),
            "a principal never collides with an address"
        );
        assert_eq!(of(None, None), "-");
    }

    #[test]
    fn broad_scopes_cover_narrow_ones() {
        let granted = set(&["files", "mail:read"]);
        assert!(covers(&granted, "files"));
        assert!(covers(&granted, "files:write"));
        assert!(covers(&granted, "files:write:all"));
        assert!(covers(&granted, "mail:read"));
        assert!(!covers(&granted, "mail"));
        assert!(!covers(&granted, "mail:send"));
        // Not a prefix at a `:` boundary.
        assert!(!covers(&granted, "filesystem"));
    }

    #[test]
    fn callers_without_scopes_may_use_everything() {
        let open = Caller::default();
        assert!(open.may_use(&["admin".into()]));
        let scoped =
            Caller { principal: Some("a".into()), scopes: Some(Arc::new(set(&["tools"]))), ..Caller::default() };
        assert!(scoped.may_use(&[]));
        assert!(scoped.may_use(&["tools:call".into()]));
        assert!(!scoped.may_use(&["tools:call".into(), "admin".into()]));
    }

    #[test]
    fn needed_scopes_join_plugin_and_configuration() {
        let mut policy = Policy::default();
        policy.tools.insert("calc_add".into(), vec!["math".into(), "calc".into()]);
        assert_eq!(policy.needed(ItemKind::Tool, "calc_add", &["calc".into()]), ["calc", "math"]);
        assert_eq!(policy.needed(ItemKind::Prompt, "calc_add", &[]), Vec::<String>::new());
        assert_eq!(policy.configured_scopes(), set(&["calc", "math"]));
    }

    #[test]
    fn the_error_names_every_scope_needed() {
        let refusal = InsufficientScope { scopes: vec!["a".into(), "b:c".into()] };
        let error = refusal.to_error("tool x");
        assert_eq!(error.code, INSUFFICIENT_SCOPE);
        assert_eq!(error.message, "Insufficient scope for tool x");
        assert_eq!(error.data, Some(json!({ "requiredScopes": ["a", "b:c"] })));
    }
}
