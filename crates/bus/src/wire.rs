//! The Redis bus's wire format: what a replica publishes, and why another
//! believes it.
//!
//! `s2.{key id}.{MAC}.{envelope}`: the envelope is JSON, `{"v": 2, "origin":
//! "<replica>", "event": {…}, "sent_ms": …}`, and the MAC is HMAC-SHA256,
//! under the named [`BusKey`], of the channel's name, a newline and exactly
//! those bytes (base64url, unpadded). The channel (the log's key name) in
//! the MAC keeps a message from being replayed into another deployment's
//! log; `sent_ms` in it keeps a recorded message from being appended again
//! later than [`FRESH_FOR`] after it was signed.
//! Every replica holds the same keys; the first signs and all verify, so a
//! key is rotated like `state.keys` (add the new one second, then move it
//! first, then drop the old). Whoever can write to the log but holds
//! no key cannot inject an event: a message that does not verify is dropped
//! and counted (`switchyard.bus.rejected`).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac as _};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use switchyard_settings::Secret;

use crate::Event;

/// The wire format's version: 2 authenticates every message.
const WIRE_VERSION: u32 = 2;
/// What opens every message of this version.
const TAG: &str = "s2";
/// How far a message's `sent_ms` may be from when Redis appended it to the
/// log (either way: two hosts' clocks differ): a message appended again
/// later is a replay. (Measured against the append, not the read, so a
/// replica that catches up after a long outage still reads old entries.)
const FRESH_FOR: u64 = 5 * 60 * 1000;

/// A key the replicas share for the bus's MACs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusKey {
    /// Names the key in each message, `[A-Za-z0-9_-]+`.
    pub id: String,
    /// At least 32 bytes.
    pub secret: Secret<Vec<u8>>,
}

impl BusKey {
    /// The bus key derived from a secret the replicas share for another
    /// purpose (a `state.keys` entry), so that one secret never serves two:
    /// HMAC-SHA256(secret, "switchyard bus MAC v2").
    pub fn derived(id: &str, shared_secret: &[u8]) -> Self {
        #[allow(clippy::expect_used)] // HMAC takes a key of any length
        let mut derivation = Hmac::<Sha256>::new_from_slice(shared_secret).expect("HMAC accepts any key length");
        derivation.update(b"switchyard bus MAC v2");
        let secret = derivation.finalize().into_bytes().to_vec();
        Self { id: id.to_owned(), secret: secret.into() }
    }

    fn mac(&self, channel: &str, envelope: &[u8]) -> Hmac<Sha256> {
        #[allow(clippy::expect_used)] // HMAC takes a key of any length
        let mut mac = Hmac::<Sha256>::new_from_slice(self.secret.expose()).expect("HMAC accepts any key length");
        mac.update(channel.as_bytes());
        mac.update(b"\n");
        mac.update(envelope);
        mac
    }
}

#[derive(Serialize, Deserialize)]
struct Envelope {
    v: u32,
    origin: String,
    event: serde_json::Value,
    /// When it was published (Unix milliseconds, the sender's clock): for
    /// the lag metric, and to refuse replays.
    sent_ms: u64,
    /// Numbers the sender's publishes: one publish appended twice (a retried
    /// command) is read once.
    #[serde(default)]
    nonce: u64,
}

/// A message read off the channel.
#[derive(Debug, PartialEq)]
pub(crate) struct Received {
    pub(crate) origin: String,
    pub(crate) nonce: u64,
    pub(crate) event: Event,
    pub(crate) sent_ms: u64,
}

/// The message for `event` on `channel`, the `nonce`th publish of replica
/// `origin`, signed with the first of `keys`.
pub(crate) fn encode(
    keys: &[BusKey],
    channel: &str,
    (origin, nonce): (&str, u64),
    event: &Event,
    sent_ms: u64,
) -> Result<String, String> {
    let key = keys.first().ok_or("no bus key")?;
    let event = serde_json::to_value(event).map_err(|e| e.to_string())?;
    let envelope = Envelope { v: WIRE_VERSION, origin: origin.to_owned(), event, sent_ms, nonce };
    let envelope = serde_json::to_string(&envelope).map_err(|e| e.to_string())?;
    let mac = URL_SAFE_NO_PAD.encode(key.mac(channel, envelope.as_bytes()).finalize().into_bytes());
    Ok(format!("{TAG}.{}.{mac}.{envelope}", key.id))
}

/// Reads a message read from `channel` (the log's key) that Redis appended
/// at `now_ms`, if one of `keys` authenticates it for that channel and it
/// was fresh then.
pub(crate) fn decode(keys: &[BusKey], channel: &str, payload: &[u8], now_ms: u64) -> Result<Received, String> {
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
    key.mac(channel, envelope).verify_slice(&mac).map_err(|_| "a MAC that does not verify")?;
    let envelope: Envelope = serde_json::from_slice(envelope).map_err(|e| format!("not an envelope: {e}"))?;
    if envelope.v != WIRE_VERSION {
        return Err(format!("wire version {} (this replica speaks {WIRE_VERSION})", envelope.v));
    }
    if envelope.sent_ms.abs_diff(now_ms) > FRESH_FOR {
        return Err("a message sent too long ago (a replay) or from a clock far off".into());
    }
    let event = serde_json::from_value(envelope.event).map_err(|e| format!("unknown event: {e}"))?;
    Ok(Received { origin: envelope.origin, nonce: envelope.nonce, event, sent_ms: envelope.sent_ms })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHANNEL: &str = "switchyard:events";
    const NOW: u64 = 1_800_000_000_000;

    fn key(id: &str, byte: u8) -> BusKey {
        BusKey { id: id.into(), secret: vec![byte; 32].into() }
    }

    #[test]
    fn a_message_round_trips_under_any_held_key() {
        let event = Event::ResourceUpdated { uri: "file:///a".into() };
        let payload = encode(&[key("new", 1), key("old", 2)], CHANNEL, ("r1", 7), &event, NOW).unwrap();
        assert!(payload.starts_with("s2.new."), "{payload}");
        let envelope = format!(
            r#"{{"v":2,"origin":"r1","event":{{"kind":"resource_updated","uri":"file:///a"}},"sent_ms":{NOW},"nonce":7}}"#
        );
        assert!(payload.ends_with(&envelope), "{payload}");
        let received = Received { origin: "r1".into(), nonce: 7, event: event.clone(), sent_ms: NOW };
        // A replica that still signs with the old key, or already only holds the new one.
        assert_eq!(decode(&[key("old", 2), key("new", 1)], CHANNEL, payload.as_bytes(), NOW + 10).unwrap(), received);
        assert_eq!(decode(&[key("new", 1)], CHANNEL, payload.as_bytes(), NOW - 10).unwrap(), received);
    }

    #[test]
    fn forged_altered_replayed_and_unsigned_messages_are_refused() {
        let keys = [key("k", 1)];
        let event = Event::ResourceUpdated { uri: "file:///a".into() };
        let payload = encode(&keys, CHANNEL, ("r1", 1), &event, NOW).unwrap();
        let refused =
            |payload: &str, channel: &str, now: u64| decode(&keys, channel, payload.as_bytes(), now).unwrap_err();
        assert!(refused(&payload.replace("file:///a", "file:///b"), CHANNEL, NOW).contains("does not verify"));
        let forged = encode(&[key("k", 9)], CHANNEL, ("evil", 1), &event, NOW).unwrap();
        assert!(refused(&forged, CHANNEL, NOW).contains("does not verify"));
        let unknown = encode(&[key("other", 1)], CHANNEL, ("evil", 1), &event, NOW).unwrap();
        assert!(refused(&unknown, CHANNEL, NOW).contains("does not hold"));
        assert!(refused(&payload, "other-deployment:events", NOW).contains("does not verify"), "replayed elsewhere");
        assert!(refused(&payload, CHANNEL, NOW + FRESH_FOR + 1).contains("too long ago"), "replayed later");
        let v1 = r#"{"v":1,"origin":"r0","event":{"kind":"resource_updated","uri":"file:///a"}}"#;
        assert!(decode(&keys, CHANNEL, v1.as_bytes(), NOW).is_err(), "an unsigned (version 1) message");
        assert!(decode(&keys, CHANNEL, b"s2.k.!!.{}", NOW).is_err());
    }
}
