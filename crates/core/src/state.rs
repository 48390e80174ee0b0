//! Sealing MRTR `requestState` so that a client can carry it but neither read
//! nor change it (SEP-2322: treat it as attacker-controlled).
//!
//! Format: `v2.{key id}.{base64url(salt ‖ ciphertext ‖ tag)}`: AES-256-GCM
//! (aws-lc-rs, already our TLS and JWT crypto) under a key of its own for
//! every message, HMAC-SHA256(secret, label ‖ salt) with a 128-bit random
//! salt, so random nonces can never repeat under one key; `v2.{key id}` is
//! the associated data. The payload binds the method, a digest of the
//! request's parameters (without `_meta`, `inputResponses` and
//! `requestState`), the principal, an expiry and a random id, by which
//! `core` refuses a second use (see `bus::marks`). Keys come from
//! configuration with ids, so every replica opens what any replica sealed:
//! the first key seals, every listed key opens, which is how keys rotate.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use switchyard_protocol::{Params, canonical};
use switchyard_settings::Secret;

type HmacSha256 = Hmac<Sha256>;

const VERSION: &str = "v2";
/// Separates the per-message key derivation from every other use of a secret.
const KEY_LABEL: &[u8] = b"switchyard-requestState-v2\0";
const SALT_LEN: usize = 16;

/// A signing key with its id.
#[derive(Debug, Clone)]
pub struct StateKey {
    /// The key id, written into every sealed state; `[A-Za-z0-9_-]+`.
    pub id: String,
    /// The secret, at least 32 bytes.
    pub secret: Secret<Vec<u8>>,
}

/// Why a sealed state was refused. The client only learns that it was invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// Not of our format, or a key id we do not know.
    #[error("requestState is malformed")]
    Malformed,
    /// The MAC does not verify: it was changed.
    #[error("requestState failed its integrity check")]
    Tampered,
    /// It is older than its expiry.
    #[error("requestState has expired")]
    Expired,
    /// It was issued for another method, other parameters or another caller.
    #[error("requestState does not belong to this request")]
    WrongRequest,
    /// It was used already (each carries its answers once).
    #[error("requestState was already used")]
    Replayed,
}

/// An opened `requestState`.
#[derive(Debug, Clone, PartialEq)]
pub struct Opened {
    /// The plugin's state.
    pub state: Option<Value>,
    /// Its random id, for the single-use mark.
    pub id: String,
    /// When it expires, Unix seconds (and so may the mark).
    pub expires_at: u64,
}

/// What a sealed state is bound to.
#[derive(Debug, Clone, Copy)]
pub struct Binding<'a> {
    /// The method name.
    pub method: &'a str,
    /// The request's parameters, typed: what identifies it across rounds
    /// ([`Params::bound`]).
    pub params: &'a Params,
    /// The members of the parameters no method reads (`_meta` is ignored).
    pub rest: &'a Map<String, Value>,
    /// The principal, if authenticated.
    pub principal: Option<&'a str>,
}

#[derive(Serialize, Deserialize)]
struct Payload {
    /// Method.
    m: String,
    /// Hex SHA-256 of the canonical parameters.
    d: String,
    /// Principal.
    p: Option<String>,
    /// Expiry, Unix seconds.
    e: u64,
    /// Random id (128 bits, hex): two rounds never seal alike, and a use is marked by it.
    n: String,
    /// The plugin's state.
    s: Option<Value>,
}

/// Seals and opens `requestState` with a configured key ring.
#[derive(Debug, Clone)]
pub struct StateSealer {
    keys: Vec<StateKey>,
    lifetime: Duration,
}

impl StateSealer {
    /// A sealer; `keys[0]` signs, all verify. `keys` must not be empty.
    pub fn new(keys: Vec<StateKey>, lifetime: Duration) -> Self {
        assert!(!keys.is_empty(), "a state sealer needs at least one key");
        Self { keys, lifetime }
    }

    /// Seals `state` for the request described by `binding`.
    pub fn seal(&self, binding: Binding<'_>, state: Option<Value>) -> String {
        self.seal_payload(&Payload {
            m: binding.method.to_owned(),
            d: params_digest(&binding),
            p: binding.principal.map(str::to_owned),
            e: now_secs().saturating_add(self.lifetime.as_secs()),
            n: format!("{:032x}", rand::random::<u128>()),
            s: state,
        })
    }

    /// Seals `handle`, a value the server mints for `principal` and must
    /// recognise, unchanged, when a client hands it back within `lifetime`
    /// (the id of a task an upstream keeps). `purpose` stands where a
    /// `requestState` has its method, so that no sealed value of one kind
    /// opens as another.
    pub fn seal_handle(&self, purpose: &str, principal: Option<&str>, handle: Value, lifetime: Duration) -> String {
        self.seal_payload(&Payload {
            m: purpose.to_owned(),
            d: String::new(),
            p: principal.map(str::to_owned),
            e: now_secs().saturating_add(lifetime.as_secs()),
            n: format!("{:032x}", rand::random::<u128>()),
            s: Some(handle),
        })
    }

    /// Opens what [`StateSealer::seal_handle`] sealed for `purpose` and `principal`.
    ///
    /// # Errors
    /// When it is malformed, tampered with, expired, or sealed for another
    /// purpose or principal.
    pub fn open_handle(&self, purpose: &str, principal: Option<&str>, sealed: &str) -> Result<Value, OpenError> {
        let (payload, _) = self.open_payload(sealed)?;
        if payload.m != purpose || !payload.d.is_empty() || payload.p.as_deref() != principal {
            return Err(OpenError::WrongRequest);
        }
        payload.s.ok_or(OpenError::Malformed)
    }

    fn seal_payload(&self, payload: &Payload) -> String {
        let key = &self.keys[0];
        let head = format!("{VERSION}.{}", key.id);
        let salt: [u8; SALT_LEN] = rand::random();
        let mut sealed = serde_json::to_vec(payload).unwrap_or_default();
        message_key(key.secret.expose(), &salt)
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key([0; NONCE_LEN]),
                Aad::from(head.as_bytes()),
                &mut sealed,
            )
            .unwrap_or_else(|_| unreachable!("AES-GCM seals any message under 64 GiB"));
        let mut body = salt.to_vec();
        body.extend_from_slice(&sealed);
        format!("{head}.{}", URL_SAFE_NO_PAD.encode(body))
    }

    /// Opens a sealed state for the request described by `binding`.
    ///
    /// # Errors
    /// When the state is malformed, tampered with, expired, or was sealed for
    /// another request.
    pub fn open(&self, sealed: &str, binding: Binding<'_>) -> Result<Opened, OpenError> {
        let (payload, kid) = self.open_payload(sealed)?;
        if payload.m != binding.method
            || payload.d != params_digest(&binding)
            || payload.p.as_deref() != binding.principal
        {
            return Err(OpenError::WrongRequest);
        }
        Ok(Opened { state: payload.s, id: format!("{kid}:{}", payload.n), expires_at: payload.e })
    }

    /// The payload of a sealed value, and the id of the key that sealed it,
    /// if it verifies and has not expired.
    fn open_payload<'s>(&self, sealed: &'s str) -> Result<(Payload, &'s str), OpenError> {
        let (head, body) = sealed.rsplit_once('.').ok_or(OpenError::Malformed)?;
        let (VERSION, kid) = head.split_once('.').ok_or(OpenError::Malformed)? else {
            return Err(OpenError::Malformed);
        };
        let key = self.keys.iter().find(|k| k.id == kid).ok_or(OpenError::Malformed)?;
        let body = URL_SAFE_NO_PAD.decode(body).map_err(|_| OpenError::Malformed)?;
        if body.len() < SALT_LEN + AES_256_GCM.tag_len() {
            return Err(OpenError::Malformed);
        }
        let (salt, ciphertext) = body.split_at(SALT_LEN);
        let mut plaintext = ciphertext.to_vec();
        let opened = message_key(key.secret.expose(), salt)
            .open_in_place(Nonce::assume_unique_for_key([0; NONCE_LEN]), Aad::from(head.as_bytes()), &mut plaintext)
            .map_err(|_| OpenError::Tampered)?;
        let payload: Payload = serde_json::from_slice(opened).map_err(|_| OpenError::Malformed)?;
        if payload.e < now_secs() {
            return Err(OpenError::Expired);
        }
        Ok((payload, kid))
    }
}

/// The AES-256-GCM key of one message: the secret's HMAC over the salt.
fn message_key(secret: &[u8], salt: &[u8]) -> LessSafeKey {
    let mut derive = mac(secret, KEY_LABEL);
    derive.update(salt);
    let bytes = derive.finalize().into_bytes();
    LessSafeKey::new(
        UnboundKey::new(&AES_256_GCM, &bytes)
            .unwrap_or_else(|_| unreachable!("HMAC-SHA256 gives the 32 bytes AES-256 takes")),
    )
}

impl StateSealer {
    /// A tag over `parts` for a value the server mints and must recognise
    /// when a client hands it back (the ids of requests sent to legacy
    /// clients): 128 bits of HMAC-SHA256 under the first key, hex. `purpose`
    /// separates the uses, so a tag made for one never verifies for another.
    pub fn tag(&self, purpose: &str, parts: &[&str]) -> String {
        let bytes = tag_mac(self.keys[0].secret.expose(), purpose, parts).finalize().into_bytes();
        bytes[..16].iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Whether `tag` is what some key of the ring makes of `parts` (so
    /// tags survive a key rotation), compared in constant time.
    pub fn verify_tag(&self, purpose: &str, parts: &[&str], tag: &str) -> bool {
        let Some(tag) = decode_hex(tag).filter(|t| t.len() == 16) else { return false };
        self.keys.iter().any(|key| tag_mac(key.secret.expose(), purpose, parts).verify_truncated_left(&tag).is_ok())
    }
}

fn tag_mac(secret: &[u8], purpose: &str, parts: &[&str]) -> HmacSha256 {
    // Length-prefixed, so no two lists of parts encode alike.
    let mut mac = mac(secret, b"switchyard-tag\0");
    for part in std::iter::once(&purpose).chain(parts) {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part.as_bytes());
    }
    mac
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok()).collect()
}

fn mac(secret: &[u8], data: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length.
    let mut mac =
        <HmacSha256 as Mac>::new_from_slice(secret).unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
    mac.update(data);
    mac
}

/// The digest of the parameters that identify a request across rounds.
fn params_digest(binding: &Binding<'_>) -> String {
    let mut identifying = binding.params.bound(binding.rest.clone());
    for member in ["_meta", "inputResponses", "requestState"] {
        identifying.remove(member);
    }
    let mut bytes = Vec::new();
    canonical::write(&Value::Object(identifying), &mut bytes);
    Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(id: &str, byte: u8) -> StateKey {
        StateKey { id: id.into(), secret: vec![byte; 32].into() }
    }

    fn params(method: &str, v: Value) -> (Params, Map<String, Value>) {
        let mut rest = v.as_object().cloned().unwrap();
        (Params::take(&switchyard_protocol::Method::parse(method), &mut rest).unwrap(), rest)
    }

    #[test]
    fn round_trips_and_binds_to_the_request() {
        let sealer = StateSealer::new(vec![key("k1", 1)], Duration::from_secs(60));
        let (p, rest) = params("tools/call", json!({"name": "t", "arguments": {"a": 1}, "_meta": {"x": 1}}));
        let binding = Binding { method: "tools/call", params: &p, rest: &rest, principal: None };
        let sealed = sealer.seal(binding, Some(json!({"round": 1})));
        // A retry with fresh _meta and inputResponses still opens.
        let (retry, retry_rest) =
            params("tools/call", json!({"arguments": {"a": 1}, "name": "t", "_meta": {"y": 2}, "inputResponses": {}}));
        let opened = sealer.open(&sealed, Binding { params: &retry, rest: &retry_rest, ..binding }).unwrap();
        assert_eq!(opened.state, Some(json!({"round": 1})));
        // Other arguments, an extra member, method or principal do not.
        let (other, other_rest) = params("tools/call", json!({"name": "t", "arguments": {"a": 2}}));
        let refused = sealer.open(&sealed, Binding { params: &other, rest: &other_rest, ..binding });
        assert_eq!(refused, Err(OpenError::WrongRequest));
        let (extra, extra_rest) = params("tools/call", json!({"name": "t", "arguments": {"a": 1}, "x": 1}));
        let refused = sealer.open(&sealed, Binding { params: &extra, rest: &extra_rest, ..binding });
        assert_eq!(refused, Err(OpenError::WrongRequest));
        assert_eq!(sealer.open(&sealed, Binding { method: "prompts/get", ..binding }), Err(OpenError::WrongRequest));
        assert_eq!(sealer.open(&sealed, Binding { principal: Some("eve"), ..binding }), Err(OpenError::WrongRequest));
    }

    #[test]
    fn refuses_tampering_and_unknown_keys() {
        let sealer = StateSealer::new(vec![key("k1", 1)], Duration::from_secs(60));
        let (p, rest) = params("tools/call", json!({"name": "t"}));
        let binding = Binding { method: "tools/call", params: &p, rest: &rest, principal: None };
        let sealed = sealer.seal(binding, None);
        assert_eq!(sealer.open(&format!("{sealed}A"), binding), Err(OpenError::Tampered));
        let (head, body) = sealed.rsplit_once('.').unwrap();
        let mut bytes = URL_SAFE_NO_PAD.decode(body).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        let flipped = format!("{head}.{}", URL_SAFE_NO_PAD.encode(&bytes));
        assert_eq!(sealer.open(&flipped, binding), Err(OpenError::Tampered));
        // The old, readable format is not ours any more.
        let forged_body =
            URL_SAFE_NO_PAD.encode(br#"{"m":"tools/call","d":"","p":null,"e":99999999999,"n":"1","s":null}"#);
        assert_eq!(sealer.open(&format!("v1.k1.{forged_body}.AAAA"), binding), Err(OpenError::Malformed));
        let other_ring = StateSealer::new(vec![key("k2", 2)], Duration::from_secs(60));
        assert_eq!(other_ring.open(&sealed, binding), Err(OpenError::Malformed));
        let same_id_other_secret = StateSealer::new(vec![key("k1", 9)], Duration::from_secs(60));
        assert_eq!(same_id_other_secret.open(&sealed, binding), Err(OpenError::Tampered));
        assert_eq!(sealer.open("garbage", binding), Err(OpenError::Malformed));
    }

    #[test]
    fn the_client_cannot_read_the_plugins_state() {
        let sealer = StateSealer::new(vec![key("k1", 1)], Duration::from_secs(60));
        let (p, rest) = params("tools/call", json!({"name": "t"}));
        let binding = Binding { method: "tools/call", params: &p, rest: &rest, principal: Some("alice") };
        let sealed = sealer.seal(binding, Some(json!({"secret-plan": "launch at dawn"})));
        let body = URL_SAFE_NO_PAD.decode(sealed.rsplit_once('.').unwrap().1).unwrap();
        let text = String::from_utf8_lossy(&body);
        for clear in ["secret-plan", "launch", "alice", "tools/call"] {
            assert!(!text.contains(clear), "{clear} readable in {sealed}");
        }
        let opened = sealer.open(&sealed, binding).unwrap();
        assert_eq!(opened.state, Some(json!({"secret-plan": "launch at dawn"})));
        assert!(opened.id.starts_with("k1:") && opened.expires_at > now_secs());
    }

    #[test]
    fn old_keys_verify_after_rotation_and_expiry_is_enforced() {
        let old = StateSealer::new(vec![key("k1", 1)], Duration::from_secs(60));
        let rotated = StateSealer::new(vec![key("k2", 2), key("k1", 1)], Duration::from_secs(60));
        let (p, rest) = params("tools/call", json!({"name": "t"}));
        let binding = Binding { method: "tools/call", params: &p, rest: &rest, principal: None };
        assert!(rotated.open(&old.seal(binding, None), binding).is_ok());
        assert!(rotated.seal(binding, None).starts_with("v2.k2."));
        let expired = StateSealer::new(vec![key("k1", 1)], Duration::ZERO);
        let sealed = expired.seal(binding, None);
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(expired.open(&sealed, binding), Err(OpenError::Expired));
    }

    #[test]
    fn tags_verify_for_their_parts_and_purpose_only() {
        let sealer = StateSealer::new(vec![key("k1", 1)], Duration::from_secs(60));
        let tag = sealer.tag("legacy-answer", &["r", "n", "alice"]);
        assert_eq!(tag.len(), 32);
        assert!(sealer.verify_tag("legacy-answer", &["r", "n", "alice"], &tag));
        assert!(!sealer.verify_tag("legacy-answer", &["r", "n", "eve"], &tag));
        assert!(!sealer.verify_tag("other", &["r", "n", "alice"], &tag));
        assert!(!sealer.verify_tag("legacy-answer", &["rn", "", "alice"], &tag), "parts are length-prefixed");
        assert!(!sealer.verify_tag("legacy-answer", &["r", "n", "alice"], "zz"));
        let rotated = StateSealer::new(vec![key("k2", 2), key("k1", 1)], Duration::from_secs(60));
        assert!(rotated.verify_tag("legacy-answer", &["r", "n", "alice"], &tag));
    }

    #[test]
    fn handles_open_for_their_purpose_and_principal_only() {
        let sealer = StateSealer::new(vec![key("k1", 1)], Duration::from_secs(60));
        let sealed = sealer.seal_handle("task", Some("alice"), json!({"u": "theirs"}), Duration::from_secs(60));
        assert_eq!(sealer.open_handle("task", Some("alice"), &sealed), Ok(json!({"u": "theirs"})));
        assert_eq!(sealer.open_handle("task", Some("eve"), &sealed), Err(OpenError::WrongRequest));
        assert_eq!(sealer.open_handle("task", None, &sealed), Err(OpenError::WrongRequest));
        assert_eq!(sealer.open_handle("other", Some("alice"), &sealed), Err(OpenError::WrongRequest));
        let body = URL_SAFE_NO_PAD.decode(sealed.rsplit_once('.').unwrap().1).unwrap();
        assert!(!String::from_utf8_lossy(&body).contains("theirs"), "the handle is readable: {sealed}");
        // A requestState is no handle, and a handle no requestState.
        let (p, rest) = params("tools/call", json!({"name": "t"}));
        let binding = Binding { method: "tools/call", params: &p, rest: &rest, principal: Some("alice") };
        let state = sealer.seal(binding, Some(json!({"u": "theirs"})));
        assert_eq!(sealer.open_handle("tools/call", Some("alice"), &state), Err(OpenError::WrongRequest));
        let as_method = sealer.seal_handle("tools/call", Some("alice"), json!(1), Duration::from_secs(60));
        assert_eq!(sealer.open(&as_method, binding), Err(OpenError::WrongRequest));
        let expired = sealer.seal_handle("task", None, json!(1), Duration::ZERO);
        std::thread::sleep(Duration::from_millis(1100));
        assert_eq!(sealer.open_handle("task", None, &expired), Err(OpenError::Expired));
    }

    #[test]
    fn two_seals_of_the_same_state_differ() {
        let sealer = StateSealer::new(vec![key("k1", 1)], Duration::from_secs(60));
        let (p, rest) = params("tools/call", json!({"name": "t"}));
        let binding = Binding { method: "tools/call", params: &p, rest: &rest, principal: None };
        assert_ne!(sealer.seal(binding, None), sealer.seal(binding, None));
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        fn sealer() -> StateSealer {
            StateSealer::new(vec![key("k1", 1)], Duration::from_secs(60))
        }

        proptest! {
            /// Nothing a client makes up opens: any string, and any string
            /// shaped like a sealed state under our key id.
            #[test]
            fn made_up_states_never_open(raw in any::<String>(), body in "[A-Za-z0-9_-]{0,200}") {
                let (p, rest) = params("tools/call", json!({"name": "t"}));
                let binding = Binding { method: "tools/call", params: &p, rest: &rest, principal: None };
                let sealer = sealer();
                prop_assert!(sealer.open(&raw, binding).is_err());
                let shaped = format!("{VERSION}.k1.{body}");
                prop_assert!(sealer.open(&shaped, binding).is_err());
            }

            /// A sealed state with any one character changed does not open.
            #[test]
            fn an_altered_state_never_opens(at in any::<prop::sample::Index>(), with in "[A-Za-z0-9_.-]") {
                let (p, rest) = params("tools/call", json!({"name": "t"}));
                let binding = Binding { method: "tools/call", params: &p, rest: &rest, principal: Some("alice") };
                let sealer = sealer();
                let sealed = sealer.seal(binding, Some(json!({"secret": 1})));
                let i = at.index(sealed.len());
                let mut altered = sealed.clone();
                altered.replace_range(i..=i, &with);
                prop_assume!(altered != sealed);
                prop_assert!(sealer.open(&altered, binding).is_err());
            }
        }
    }
}
