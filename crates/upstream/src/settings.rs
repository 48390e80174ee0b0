//! `[upstream]` as the operator writes it, its defaults and its checks: what
//! upstream plugins may make a replica read and wait for, where they may
//! connect, and which secrets their specs may name.

use serde::Deserialize;
use switchyard_settings::{Secret, Section, StringList};

use crate::{OutboundPolicy, SecretPolicy, UpstreamLimits};

/// `[upstream]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUpstream {
    /// Hosts upstream and token URLs may name (`*`, `*.example.com`). Default
    /// `["*"]`: any public host. A host named here (not through `*`) may
    /// resolve to internal addresses.
    pub allowed_hosts: Option<StringList>,
    /// Address ranges (CIDR) upstreams may be reached at even when internal,
    /// e.g. `10.0.0.0/8`. Default none.
    pub allowed_ranges: Option<StringList>,
    /// Allow link-local, NAT64 and cloud metadata addresses. Default false.
    pub allow_link_local: Option<bool>,
    /// Environment variables a spec's `*_from_env` may name: exact names or
    /// `PREFIX*`. Default none; `SWITCHYARD_*` never.
    pub secret_env: Option<StringList>,
    /// Directories a spec's `*_from_file` may read from. Default none.
    pub secret_dirs: Option<StringList>,
    /// One JSON body or SSE event from an upstream, bytes. Default 4 MiB.
    pub max_message_bytes: Option<usize>,
    /// JSON values in one such message. Default 250000.
    pub max_message_values: Option<usize>,
    /// Requests to one upstream in flight at once on a replica. Default 16.
    pub max_in_flight: Option<usize>,
    /// One request's whole SSE answer, bytes. Default 16 MiB.
    pub max_stream_bytes: Option<usize>,
    /// Items in one upstream list, across its pages. Default 5000.
    pub max_list_items: Option<usize>,
    /// Pages of one upstream list. Default 100.
    pub max_list_pages: Option<usize>,
    /// Every page of one list refresh together, bytes. Default 8 MiB.
    pub max_list_bytes: Option<usize>,
    /// JSON values of every page of one list refresh together. Default 1000000.
    pub max_list_values: Option<usize>,
    /// Deadline of one whole list refresh. Default "60s".
    pub list_deadline: Option<String>,
    /// Least time between two refreshes an upstream's `list_changed`
    /// prompts. Default "2s".
    pub refresh_interval: Option<String>,
    /// An upstream's listen stream silent this long is reopened. Default "5m".
    pub listen_idle_timeout: Option<String>,
    /// Longest wait between retries of a failing upstream. Default "5m".
    pub max_backoff: Option<String>,
    /// How long loading the catalog waits for a new upstream's first
    /// lists. Default "5s".
    pub first_lists_wait: Option<String>,
    /// Failures in a row after which an upstream's requests fail at once.
    /// Default 5.
    pub breaker_failures: Option<usize>,
    /// How long they do before a probe. Default "30s".
    pub breaker_open: Option<String>,
    /// Times a failed idempotent request is sent again. Default 2.
    pub max_retries: Option<usize>,
    /// Bytes the answer cache may hold, all upstreams together; 0 keeps
    /// nothing. Default 67108864 (64 MiB).
    pub cache_max_bytes: Option<u64>,
}

/// What `[upstream]` makes.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// What upstream plugins may make a replica read and wait for.
    pub limits: UpstreamLimits,
    /// Which secrets a spec may name, with the values of the granted variables.
    pub secrets: SecretPolicy,
    /// Where upstreams may be reached.
    pub outbound: OutboundPolicy,
}

impl RawUpstream {
    /// Upstream's settings. `environment` is the process's environment as
    /// the binary read it: only the variables `secret_env` grants are kept
    /// (this crate never reads the environment itself).
    pub fn check(self, environment: impl IntoIterator<Item = (String, String)>, mut section: Section<'_>) -> Settings {
        let limits = self.limits(&mut section);
        let env = self.secret_env.map(StringList::into_vec).unwrap_or_default();
        if let Some(bad) = env.iter().find(|p| p.is_empty() || p.trim_end_matches('*').is_empty()) {
            section.push(
                "secret_env",
                format_args!("{bad:?} would grant every variable; name variables or a prefix like TOOLS_*"),
            );
        }
        let mut secrets =
            SecretPolicy { env, dirs: section.absolute_dirs("secret_dirs", self.secret_dirs), ..Default::default() };
        secrets.env_values = environment
            .into_iter()
            .filter(|(name, _)| secrets.grants(name))
            .map(|(name, value)| (name, Secret::new(value)))
            .collect();
        let defaults = OutboundPolicy::default();
        let allowed_ranges = self
            .allowed_ranges
            .map(StringList::into_vec)
            .unwrap_or_default()
            .iter()
            .filter_map(|range| {
                range
                    .parse()
                    .map_err(|_| {
                        section.push("allowed_ranges", format_args!("{range:?} is not a CIDR range like 10.0.0.0/8"))
                    })
                    .ok()
            })
            .collect();
        let outbound = OutboundPolicy {
            allowed_hosts: self.allowed_hosts.map_or(defaults.allowed_hosts, StringList::into_vec),
            allowed_ranges,
            allow_link_local: self.allow_link_local.unwrap_or(defaults.allow_link_local),
        };
        Settings { limits, secrets, outbound }
    }

    fn limits(&self, section: &mut Section<'_>) -> UpstreamLimits {
        let defaults = UpstreamLimits::default();
        let mut duration =
            |key: &str, value: &Option<String>, default| section.duration(key, value.as_deref(), default);
        let limits = UpstreamLimits {
            list_deadline: duration("list_deadline", &self.list_deadline, defaults.list_deadline),
            refresh_interval: duration("refresh_interval", &self.refresh_interval, defaults.refresh_interval),
            listen_idle_timeout: duration(
                "listen_idle_timeout",
                &self.listen_idle_timeout,
                defaults.listen_idle_timeout,
            ),
            max_backoff: duration("max_backoff", &self.max_backoff, defaults.max_backoff),
            first_lists_wait: duration("first_lists_wait", &self.first_lists_wait, defaults.first_lists_wait),
            breaker_open: duration("breaker_open", &self.breaker_open, defaults.breaker_open),
            breaker_failures: self.breaker_failures.unwrap_or(defaults.breaker_failures),
            max_retries: self.max_retries.unwrap_or(defaults.max_retries),
            cache_max_bytes: self.cache_max_bytes.unwrap_or(defaults.cache_max_bytes),
            max_message_bytes: self.max_message_bytes.unwrap_or(defaults.max_message_bytes),
            max_message_values: self.max_message_values.unwrap_or(defaults.max_message_values),
            max_in_flight: self.max_in_flight.unwrap_or(defaults.max_in_flight),
            max_stream_bytes: self.max_stream_bytes.unwrap_or(defaults.max_stream_bytes),
            max_list_items: self.max_list_items.unwrap_or(defaults.max_list_items),
            max_list_pages: self.max_list_pages.unwrap_or(defaults.max_list_pages),
            max_list_bytes: self.max_list_bytes.unwrap_or(defaults.max_list_bytes),
            max_list_values: self.max_list_values.unwrap_or(defaults.max_list_values),
        };
        limits.check(section);
        limits
    }
}
