//! The Redis bus's wire format: what a replica publishes, and why another
//! believes it.
//!
//! `s2.{key id}.{MAC}.{envelope}`: the envelope is JSON, `{"v": 2, "origin":
//! "<replica>", "event": {…}, "sent_ms": …}`, and the MAC is HMAC-SHA256 of
//! exactly those bytes under the named [`BusKey`] (base64url, unpadded).
//! Every replica holds the same keys; the first signs and all verify, so a
//! key is rotated like `state.keys` (add the new one second, then move it
//! first, then drop the old). Whoever can `PUBLISH` to the channel but holds
//! no key cannot inject an event: a message that does not verify is dropped
//! and counted (`switchyard.bus.rejected`).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac as _};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::Event;

/// The wire format's version: 2 authenticates every message.
const WIRE_VERSION: u32 = 2;
/// What opens every message of this version.
const TAG: &str = "s2";

/// A key the replicas share for the bus's MACs.
#[derive(Clone, PartialEq, Eq)]
pub struct BusKey {
    /// Names the key in each message, `[A-Za-z0-9_-]+`.
    pub id: String,
    /// At least 32 bytes.
    pub secret: Vec<u8>,
}

impl std::fmt::Debug for BusKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BusKey").field("id", &self.id).finish_non_exhaustive()
    }
}

impl BusKey {
    /// The bus key derived from a secret the replicas share for another
    /// purpose (a `state.keys` entry), so that one secret never serves two:
    /// HMAC-SHA256(secret, "switchyard bus MAC v2").
    pub fn derived(id: &str, shared_secret: &[u8]) -> Self {
        let derivation = Self { id: id.to_owned(), secret: shared_secret.to_vec() };
        let secret = derivation.mac(b"switchyard bus MAC v2").finalize().into_bytes().to_vec();
        Self { id: id.to_owned(), secret }
    }

    fn mac(&self, envelope: &[u8]) -> Hmac<Sha256> {
        #[allow(clippy::expect_used)] // HMAC takes a key of any length
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC accepts any key length");
        mac.update(envelope);
        mac
    }
}

#[derive(Serialize, Deserialize)]
struct Envelope {
    v: u32,
    origin: String,
    event: serde_json::Value,
    /// When it was published (Unix milliseconds, the sender's clock), for the
    /// lag metric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sent_ms: Option<u64>,
}

/// A message read off the channel.
#[derive(Debug, PartialEq)]
pub(crate) struct Received {
    pub(crate) origin: String,
    pub(crate) event: Event,
    pub(crate) sent_ms: Option<u64>,
}

/// The message for `event`, signed with the first of `keys`.
pub(crate) fn encode(keys: &[BusKey], origin: &str, event: &Event, sent_ms: u64) -> Result<String, String> {
    let key = keys.first().ok_or("no bus key")?;
    let event = serde_json::to_value(event).map_err(|e| e.to_string())?;
    let envelope =
        serde_json::to_string(&Envelope { v: WIRE_VERSION, origin: origin.to_owned(), event, sent_ms: Some(sent_ms) })
            .map_err(|e| e.to_string())?;
    let mac = URL_SAFE_NO_PAD.encode(key.mac(envelope.as_bytes()).finalize().into_bytes());
    Ok(format!("{TAG}.{}.{mac}.{envelope}", key.id))
}

/// Reads a message, if one of `keys` authenticates it.
pub(crate) fn decode(keys: &[BusKey], payload: &[u8]) -> Result<Received, String> {
    let mut parts = payload.splitn(4, |b| *b == b'.');
    let (Some(tag), Some(id), Some(mac), Some(envelope)) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("not a signed bus message".into());
    };
    if tag != TAG.as_bytes() {
        return Err("not a signed bus message of this version".into());
    }
    let key = keys.iter().find(|k| k.id.as_bytes() == id).ok_or("signed with a key this replica does not hold")?;
    let mac = URL_SAFE_NO_PAD.decode(mac).map_err(|_| "a MAC that is not base64url")?;
    key.mac(envelope).verify_slice(&mac).map_err(|_| "a MAC that does not verify")?;
    let envelope: Envelope = serde_json::from_slice(envelope).map_err(|e| format!("not an envelope: {e}"))?;
    if envelope.v != WIRE_VERSION {
        return Err(format!("wire version {} (this replica speaks {WIRE_VERSION})", envelope.v));
    }
    let event = serde_json::from_value(envelope.event).map_err(|e| format!("unknown event: {e}"))?;
    Ok(Received { origin: envelope.origin, event, sent_ms: envelope.sent_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: &str, byte: u8) -> BusKey {
        BusKey { id: id.into(), secret: vec![byte; 32] }
    }

    #[test]
    fn a_message_round_trips_under_any_held_key() {
        let event = Event::ResourceUpdated { uri: "file:///a".into() };
        let payload = encode(&[key("new", 1), key("old", 2)], "r1", &event, 7).unwrap();
        assert!(payload.starts_with("s2.new."), "{payload}");
        assert!(
            payload.ends_with(
                r#"{"v":2,"origin":"r1","event":{"kind":"resource_updated","uri":"file:///a"},"sent_ms":7}"#
            )
        );
        let received = Received { origin: "r1".into(), event: event.clone(), sent_ms: Some(7) };
        // A replica that still signs with the old key, or already only holds the new one.
        assert_eq!(decode(&[key("old", 2), key("new", 1)], payload.as_bytes()).unwrap(), received);
        assert_eq!(decode(&[key("new", 1)], payload.as_bytes()).unwrap(), received);
    }

    #[test]
    fn forged_altered_and_unsigned_messages_are_refused() {
        let keys = [key("k", 1)];
        let event = Event::ResourceUpdated { uri: "file:///a".into() };
        let payload = encode(&keys, "r1", &event, 7).unwrap();
        let altered = payload.replace("file:///a", "file:///b");
        assert!(decode(&keys, altered.as_bytes()).unwrap_err().contains("does not verify"));
        let forged = encode(&[key("k", 9)], "evil", &event, 7).unwrap();
        assert!(decode(&keys, forged.as_bytes()).unwrap_err().contains("does not verify"));
        let unknown = encode(&[key("other", 1)], "evil", &event, 7).unwrap();
        assert!(decode(&keys, unknown.as_bytes()).unwrap_err().contains("does not hold"));
        let v1 = br#"{"v":1,"origin":"r0","event":{"kind":"resource_updated","uri":"file:///a"}}"#;
        assert!(decode(&keys, v1).is_err(), "an unsigned (version 1) message");
        assert!(decode(&keys, b"s2.k.!!.{}").is_err());
    }
}
