//! From a bearer token to a [`Principal`]: the cache, then JWT verification or
//! introspection.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Validation, decode, decode_header};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::error::Rejection;
use crate::introspection::introspect;
use crate::keys::IssuerKeys;
use crate::principal::{Principal, scopes_of};

/// Checks bearer tokens. Cheap to share: one per process, behind an `Arc`.
pub struct Verifier {
    config: Config,
    issuers: Vec<IssuerKeys>,
    http: reqwest::Client,
    /// Verdicts by SHA-256 of the token: verified principals until their
    /// token expires (introspected ones at most `introspection_max_age`),
    /// introspection refusals for `introspection_negative_ttl`.
    cache: moka::sync::Cache<[u8; 32], Verdict>,
    /// The audiences an introspected token may name.
    introspection_audiences: Vec<String>,
    /// Places for introspection calls in flight (`introspection_max_concurrent`).
    introspection_slots: tokio::sync::Semaphore,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier").field("resource", &self.config.resource).finish_non_exhaustive()
    }
}

/// What the cache remembers of a token, and until when.
#[derive(Clone)]
struct Verdict {
    outcome: Result<Arc<Principal>, Rejection>,
    until: SystemTime,
}

/// Entries live until their verdict's time.
struct UntilExpiry;

impl moka::Expiry<[u8; 32], Verdict> for UntilExpiry {
    fn expire_after_create(&self, _key: &[u8; 32], value: &Verdict, _created_at: Instant) -> Option<Duration> {
        Some(value.until.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO))
    }
}

impl Verifier {
    /// A verifier for `config`. Keys are fetched on first use, or by
    /// [`Verifier::spawn_refresh`].
    ///
    /// # Errors
    /// When the configuration does not validate.
    pub fn new(config: Config) -> Result<Self, crate::ConfigError> {
        config.validate()?;
        let http = reqwest::Client::builder()
            .timeout(config.http_timeout)
            // Metadata and key URLs must not bounce the verifier elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        let issuers = config.issuers.iter().map(|i| IssuerKeys::new(i.clone(), config.jwks_min_refetch)).collect();
        let cache = moka::sync::Cache::builder().max_capacity(config.cache_capacity).expire_after(UntilExpiry).build();
        let introspection_audiences = config
            .introspection
            .as_ref()
            .map(|i| config.audiences(&crate::IssuerConfig::new(&i.issuer)))
            .unwrap_or_default();
        let introspection_slots = tokio::sync::Semaphore::new(config.introspection_max_concurrent);
        Ok(Self { config, issuers, http, cache, introspection_audiences, introspection_slots })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Fetches every issuer's keys now and then every `jwks_refresh`, until
    /// `shutdown`. A failed fetch is logged and retried on the next tick or
    /// on demand; the keys already held stay in use.
    pub fn spawn_refresh(self: &Arc<Self>, shutdown: CancellationToken) {
        let verifier = Arc::clone(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(verifier.config.jwks_refresh);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = ticker.tick() => {}
                }
                for issuer in &verifier.issuers {
                    let _ = issuer.refresh(&verifier.http, true).await;
                }
            }
        });
    }

    /// Verifies `token`, from the cache when it was verified before.
    ///
    /// # Errors
    /// Why the token is refused; [`Rejection::Unavailable`] when the
    /// authorization server could not be asked.
    pub async fn verify(&self, token: &str) -> Result<Arc<Principal>, Rejection> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(verdict) = self.cache.get(&digest) {
            // The cache evicts lazily; an entry can outlive its verdict briefly.
            if verdict.until > SystemTime::now() {
                return verdict.outcome;
            }
        }
        let principal = if token.split('.').count() == 3 {
            Arc::new(self.verify_jwt(token).await?)
        } else if let Some(introspection) = &self.config.introspection {
            let max_age = self.config.introspection_max_age;
            // Made-up opaque tokens are new every time, so the cache cannot
            // absorb them: the calls they cost are capped instead. The queue
            // is first come, first served, and waits no longer than a call.
            let Ok(Ok(_slot)) =
                tokio::time::timeout(self.config.http_timeout, self.introspection_slots.acquire()).await
            else {
                tracing::warn!("introspection calls at their cap; refusing a token for now");
                return Err(Rejection::Unavailable);
            };
            match introspect(&self.http, introspection, &self.introspection_audiences, max_age, token).await {
                Ok(principal) => {
                    // Asked again after `max_age`, however late `exp` is.
                    let until = principal.expires_at.min(SystemTime::now() + max_age);
                    let principal = Arc::new(principal);
                    self.cache.insert(digest, Verdict { outcome: Ok(Arc::clone(&principal)), until });
                    return Ok(principal);
                }
                // The server could not be asked, or the token becomes valid
                // later: ask again next time.
                Err(error @ (Rejection::Unavailable | Rejection::NotYetValid)) => return Err(error),
                // A definite no: repeating the token costs no call for a while.
                Err(refused) => {
                    let until = SystemTime::now() + self.config.introspection_negative_ttl;
                    self.cache.insert(digest, Verdict { outcome: Err(refused.clone()), until });
                    return Err(refused);
                }
            }
        } else {
            return Err(Rejection::Malformed);
        };
        self.cache.insert(digest, Verdict { outcome: Ok(Arc::clone(&principal)), until: principal.expires_at });
        Ok(principal)
    }

    async fn verify_jwt(&self, token: &str) -> Result<Principal, Rejection> {
        // `alg: none` and unknown algorithms fail here: jsonwebtoken has no such variant.
        let header = decode_header(token).map_err(|_| Rejection::Malformed)?;
        // The issuer picks the keys; which issuer is read before the signature
        // is checked, and then checked again as part of the validation.
        let unverified: Map<String, Value> =
            jsonwebtoken::dangerous::insecure_decode_claims::<Map<String, Value>>(token)
                .map_err(|_| Rejection::Malformed)?;
        let iss = unverified.get("iss").and_then(Value::as_str).ok_or(Rejection::Claims)?;
        let issuer = self.issuers.iter().find(|i| i.config.issuer == iss).ok_or(Rejection::UnknownIssuer)?;
        if !issuer.config.algorithms.contains(&header.alg) {
            return Err(Rejection::Algorithm);
        }
        let key = issuer.key(&self.http, header.kid.as_deref()).await?;
        if key.family != header.alg.family() {
            return Err(Rejection::Algorithm);
        }
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&issuer.config.issuer]);
        validation.set_audience(&self.config.audiences(&issuer.config));
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        validation.validate_nbf = true;
        validation.leeway = self.config.leeway.as_secs();
        let claims = decode::<Map<String, Value>>(token, &key.key, &validation)
            .map_err(|e| match e.kind() {
                ErrorKind::InvalidSignature => Rejection::Signature,
                ErrorKind::ExpiredSignature => Rejection::Expired,
                ErrorKind::ImmatureSignature => Rejection::NotYetValid,
                ErrorKind::InvalidAudience => Rejection::Audience,
                ErrorKind::InvalidIssuer => Rejection::UnknownIssuer,
                ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => Rejection::Algorithm,
                ErrorKind::MissingRequiredClaim(_) => Rejection::Claims,
                _ => Rejection::Malformed,
            })?
            .claims;
        let text = |key: &str| claims.get(key).and_then(Value::as_str).map(str::to_owned);
        let client_id = text("client_id").or_else(|| text("azp"));
        let subject = text("sub").or_else(|| client_id.clone()).ok_or(Rejection::Claims)?;
        let exp = claims.get("exp").and_then(Value::as_u64).ok_or(Rejection::Claims)?;
        Ok(Principal {
            issuer: issuer.config.issuer.clone(),
            subject,
            client_id,
            scopes: Arc::new(scopes_of(&claims)),
            // The leeway that let it in also bounds how long it stays cached.
            expires_at: UNIX_EPOCH + Duration::from_secs(exp) + self.config.leeway,
        })
    }
}
