//! `[rate_limit]` as the operator writes it, and its checks.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use switchyard_settings::Section;

use crate::{Limits, OnError, Rate};

/// `[rate_limit]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRateLimit {
    /// Per caller and target: `"20/s"`, `"600/m"`. Default none (unlimited).
    pub rate: Option<String>,
    /// Requests allowed at once. Default: the rate's count.
    pub burst: Option<u32>,
    /// When Redis cannot be asked: `allow` (default) or `deny`.
    pub on_redis_error: Option<OnError>,
    /// Rates by plugin namespace: `units = "5/s"`.
    #[serde(default)]
    pub plugins: BTreeMap<String, String>,
}

impl RawRateLimit {
    /// The limits and what to do when Redis fails; `None` when no rate is
    /// configured (nothing is limited).
    pub fn check(self, mut section: Section<'_>) -> Option<(Limits, OnError)> {
        let burst = self.burst;
        let mut parse = |key: &str, text: &str| {
            Rate::parse(text, burst).or_else(|| {
                section.push(key, format_args!("{text:?} is not a rate like \"20/s\", \"600/m\" or \"5000/h\""));
                None
            })
        };
        let default = self.rate.as_deref().and_then(|text| parse("rate", text));
        let namespaces: HashMap<_, _> = self
            .plugins
            .iter()
            .filter_map(|(ns, text)| parse(&format!("plugins.{ns}"), text).map(|rate| (ns.clone(), rate)))
            .collect();
        let on_error = self.on_redis_error.unwrap_or_default();
        (default.is_some() || !namespaces.is_empty()).then_some((Limits { default, namespaces }, on_error))
    }
}
