//! Serving clients of the `initialize` era (2025-11-25, 2025-06-18,
//! 2025-03-26) on the same endpoint, statelessly (DIGEST §11).
//!
//! No session is created: `initialize` is answered and forgotten, so the next
//! request may land on any replica. What a legacy session would have carried
//! (the negotiated version, a log level) is not needed to serve a request.
//!
//! When a tool needs input (sampling, elicitation, roots), a legacy client
//! cannot retry with answers; instead the server sends it JSON-RPC requests on
//! the tool call's SSE response, and the client answers each in a POST of its
//! own, which [`Relay::deliver`] hands to the waiting call. The id we
//! mint names the replica that holds the call, so an answer that a load
//! balancer sends elsewhere is relayed to it over the bus; it carries a MAC
//! binding it to that replica and to the caller, so an answer with an id we
//! did not mint, or from another caller, is refused on arrival and never
//! reaches the bus. The client's
//! capabilities were declared in an `initialize` we did not keep, so a client
//! that lacks one answers with an error, which becomes a tool error.

use serde_json::{Value, json};

mod relay;

pub use relay::Delivered;
pub(crate) use relay::{LegacyAsk, Relay};

use crate::state::StateSealer;
use switchyard_protocol::logging::LoggingLevel;
use switchyard_protocol::version::ProtocolVersion;

/// The log threshold for legacy requests: their `logging/setLevel` cannot be
/// remembered without a session, so we send informational messages and above.
pub(crate) const LOG_THRESHOLD: LoggingLevel = LoggingLevel::Info;

/// The `InitializeResult` for a legacy client.
pub(crate) fn initialize_result(requested: Option<&str>, server_info: &Value, instructions: Option<&str>) -> Value {
    let version = ProtocolVersion::negotiate_legacy(requested);
    // Without a standing stream (GET is 405: there is no session to attach it
    // to) list changes cannot reach a legacy client, so none are promised.
    let mut result = json!({
        "protocolVersion": version.as_str(),
        "capabilities": {
            "tools": { "listChanged": false },
            "resources": { "subscribe": false, "listChanged": false },
            "prompts": { "listChanged": false },
            "completions": {},
            "logging": {},
        },
        "serverInfo": server_info,
    });
    if let Some(instructions) = instructions {
        result["instructions"] = json!(instructions);
    }
    result
}

/// Removes the members a legacy result does not have.
pub(crate) fn shape_result(result: &mut Value) {
    if let Value::Object(map) = result {
        for member in ["resultType", "ttlMs", "cacheScope"] {
            map.remove(member);
        }
    }
}

/// The tool error for a tool that needs input from a legacy client over a
/// transport that cannot stream requests to it.
pub(crate) fn input_unavailable() -> String {
    "This tool needs input from the client (elicitation, sampling or roots), which this transport \
     cannot request from a 2025-era client: connect with protocol revision 2026-07-28."
        .to_owned()
}

const ANSWER_TAG: &str = "legacy-answer";

/// A fresh id for a request sent to a legacy client on behalf of
/// `principal`: `switchyard-{replica}-{nonce}-{tag}`. The nonce has 128
/// random bits, so the id names one waiting request and cannot be guessed;
/// the tag (a MAC under the state keys every replica shares) binds replica,
/// nonce and principal, so any replica can tell, before relaying anything,
/// that the id was minted by a replica of ours for this very caller.
pub(crate) fn request_id(sealer: &StateSealer, replica: &str, principal: Option<&str>) -> String {
    let nonce = format!("{:032x}", rand::random::<u128>());
    let tag = sealer.tag(ANSWER_TAG, &[replica, &nonce, principal_part(principal)]);
    format!("switchyard-{replica}-{nonce}-{tag}")
}

/// The replica that minted `id` for `principal`, if it is one of our ids
/// and `principal` is the caller it was minted for.
pub(crate) fn verified_owner<'a>(sealer: &StateSealer, id: &'a str, principal: Option<&str>) -> Option<&'a str> {
    let rest = id.strip_prefix("switchyard-")?;
    let mut parts = rest.split('-');
    let (Some(replica), Some(nonce), Some(tag), None) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return None;
    };
    let well_formed = replica.len() == 16 && nonce.len() == 32;
    (well_formed && sealer.verify_tag(ANSWER_TAG, &[replica, nonce, principal_part(principal)], tag)).then_some(replica)
}

/// An anonymous caller cannot collide with a principal: principals are
/// never empty, and the parts are length-prefixed.
fn principal_part(principal: Option<&str>) -> &str {
    principal.unwrap_or("")
}

/// The last [`RecentIds::CAPACITY`] ids seen, oldest forgotten first.
#[derive(Debug, Default)]
pub(crate) struct RecentIds(std::sync::Mutex<(std::collections::HashSet<String>, std::collections::VecDeque<String>)>);

impl RecentIds {
    const CAPACITY: usize = 4096;

    /// Records `id`; false when it was recorded already.
    pub(crate) fn first_time(&self, id: &str) -> bool {
        let mut guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let (seen, order) = &mut *guard;
        if !seen.insert(id.to_owned()) {
            return false;
        }
        order.push_back(id.to_owned());
        if order.len() > Self::CAPACITY
            && let Some(oldest) = order.pop_front()
        {
            seen.remove(&oldest);
        }
        true
    }
}

impl RecentIds {
    /// Forgets `id` (its relay failed); its place in the order ages out.
    pub(crate) fn forget(&self, id: &str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).0.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::StateKey;
    use std::time::Duration;

    #[test]
    fn minted_ids_name_their_replica_for_their_caller_only() {
        let sealer =
            StateSealer::new(vec![StateKey { id: "k".into(), secret: vec![7; 32].into() }], Duration::from_secs(60));
        let replica = "0123456789abcdef";
        let id = request_id(&sealer, replica, Some("alice"));
        assert_eq!(verified_owner(&sealer, &id, Some("alice")), Some(replica));
        assert_eq!(verified_owner(&sealer, &id, Some("eve")), None, "another caller cannot answer");
        assert_eq!(verified_owner(&sealer, &id, None), None);
        let anonymous = request_id(&sealer, replica, None);
        assert_eq!(verified_owner(&sealer, &anonymous, None), Some(replica));
        // An id naming a replica we never had, or a changed nonce, is not ours.
        let forged = id.replacen(replica, "fedcba9876543210", 1);
        assert_eq!(verified_owner(&sealer, &forged, Some("alice")), None);
        for junk in ["switchyard-0", "switchyard-a-b-c-d", "other", ""] {
            assert_eq!(verified_owner(&sealer, junk, None), None, "{junk}");
        }
    }

    #[test]
    fn recent_ids_are_seen_once_and_bounded() {
        let recent = RecentIds::default();
        assert!(recent.first_time("a"));
        assert!(!recent.first_time("a"));
        recent.forget("a");
        assert!(recent.first_time("a"), "a failed relay may be retried");
        for i in 0..RecentIds::CAPACITY {
            recent.first_time(&i.to_string());
        }
        assert!(recent.first_time("a"), "the oldest is forgotten");
        assert!(recent.0.lock().unwrap().1.len() <= RecentIds::CAPACITY);
    }
}
