//! `[listen]`: the bounds of `subscriptions/listen`, so that one caller
//! cannot hold a replica's streams or memory.

use serde::Deserialize;
use switchyard_core::ListenLimits;

/// `[listen]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawListen {
    /// Open listen streams per replica. Default 10000.
    pub max_streams: Option<usize>,
    /// Open listen streams per caller (principal, or peer address when
    /// unauthenticated). Default 64.
    pub max_streams_per_caller: Option<usize>,
    /// `resourceSubscriptions` entries per stream. Default 256.
    pub max_resource_subscriptions: Option<usize>,
    /// Their total length, bytes. Default 32768.
    pub max_subscription_bytes: Option<usize>,
    /// Notifications one stream may have waiting before it is closed as too
    /// slow. Default 64.
    pub queue: Option<usize>,
}

/// The hub's bounds; a zero bound is a problem (it would refuse every stream).
pub(super) fn listen_limits(raw: RawListen, problems: &mut Vec<String>) -> ListenLimits {
    let defaults = ListenLimits::default();
    let mut bound = |value: Option<usize>, default: usize, key: &str| {
        let value = value.unwrap_or(default);
        if value == 0 {
            problems.push(format!("listen.{key}: must be at least 1"));
        }
        value
    };
    ListenLimits {
        max_streams: bound(raw.max_streams, defaults.max_streams, "max_streams"),
        max_streams_per_caller: bound(
            raw.max_streams_per_caller,
            defaults.max_streams_per_caller,
            "max_streams_per_caller",
        ),
        max_resource_subscriptions: bound(
            raw.max_resource_subscriptions,
            defaults.max_resource_subscriptions,
            "max_resource_subscriptions",
        ),
        max_subscription_bytes: bound(
            raw.max_subscription_bytes,
            defaults.max_subscription_bytes,
            "max_subscription_bytes",
        ),
        queue: bound(raw.queue, defaults.queue, "queue"),
    }
}
