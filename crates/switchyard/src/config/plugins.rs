//! `[upstream]` and `[wasm]`: the plugin runtimes, and what the operator
//! lets a plugin spec reach (outbound addresses, secrets, host directories).
//! Whoever may register a plugin gets exactly this and nothing more.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use switchyard_plugins::{Grants, HostDirs, OutboundPolicy, SecretPolicy, UpstreamLimits, WasmConfig};
use switchyard_settings::Secret;

use super::{StringList, parse_duration};

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
    /// The values of the variables `secret_env` grants, taken from the
    /// environment the configuration was loaded with (the `upstream` crate
    /// never reads the environment itself).
    #[serde(skip)]
    pub granted_env: BTreeMap<String, Secret>,
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
}

/// `[wasm]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWasm {
    /// Most WASM instances running at once. Default 64.
    pub max_instances: Option<u32>,
    /// The cap on any module's memory, MiB. Default 256, or with
    /// `memory_budget_mib`, the budget shared by `max_instances`.
    pub max_memory_mib: Option<usize>,
    /// The memory all WASM instances together may take, MiB (the chart
    /// derives it from the pod's memory limit). `max_instances` times
    /// `max_memory_mib` must fit in it. Default none.
    pub memory_budget_mib: Option<usize>,
    /// Preallocate instance slots for fast instantiation. Default true.
    pub pooling: Option<bool>,
    /// Host directories a spec may grant read-only (and their
    /// subdirectories). Default none.
    pub grantable_dirs: Option<StringList>,
    /// Host directories a spec may grant writable. Default none.
    pub writable_dirs: Option<StringList>,
}

fn absolute_dirs(list: Option<StringList>, key: &str, problems: &mut Vec<String>) -> Vec<PathBuf> {
    let dirs: Vec<PathBuf> =
        list.map(StringList::into_vec).unwrap_or_default().into_iter().map(PathBuf::from).collect();
    for dir in &dirs {
        let lexical =
            dir.components().all(|c| matches!(c, std::path::Component::RootDir | std::path::Component::Normal(_)));
        if !dir.is_absolute() || !lexical || dir == std::path::Path::new("/") {
            problems
                .push(format!("{key}: {} must be an absolute directory other than /, without . or ..", dir.display()));
        }
    }
    dirs
}

/// The cap on one module's memory, MiB: as configured, else the default, or
/// with a budget, the budget's share per instance. Every instance at its cap
/// must fit the budget (a plugin asking for more is refused at registration,
/// by the cap), so a pod's WASM load cannot outgrow the memory it was given.
fn memory_cap(wasm: &RawWasm, max_instances: u32, default_mib: usize, problems: &mut Vec<String>) -> usize {
    let Some(budget) = wasm.memory_budget_mib else {
        return wasm.max_memory_mib.unwrap_or(default_mib);
    };
    let instances = usize::try_from(max_instances.max(1)).unwrap_or(usize::MAX);
    let cap = wasm.max_memory_mib.unwrap_or_else(|| (budget / instances).min(default_mib));
    if cap == 0 || cap.saturating_mul(instances) > budget {
        problems.push(format!(
            "wasm: max_instances ({instances}) times max_memory_mib ({cap}) must fit in wasm.memory_budget_mib ({budget}); lower one of them, or raise the budget"
        ));
    }
    cap
}

/// What upstream plugins may make a replica read and wait for.
fn upstream_limits(upstream: &RawUpstream, problems: &mut Vec<String>) -> UpstreamLimits {
    let defaults = UpstreamLimits::default();
    let mut duration = |key: &str, value: Option<&String>, default| match value {
        None => default,
        Some(text) => parse_duration(text).unwrap_or_else(|| {
            problems.push(format!("upstream.{key}: {text:?} is not a duration (try \"2s\", \"5m\")"));
            default
        }),
    };
    let limits = UpstreamLimits {
        list_deadline: duration("list_deadline", upstream.list_deadline.as_ref(), defaults.list_deadline),
        refresh_interval: duration("refresh_interval", upstream.refresh_interval.as_ref(), defaults.refresh_interval),
        listen_idle_timeout: duration(
            "listen_idle_timeout",
            upstream.listen_idle_timeout.as_ref(),
            defaults.listen_idle_timeout,
        ),
        max_backoff: duration("max_backoff", upstream.max_backoff.as_ref(), defaults.max_backoff),
        first_lists_wait: duration("first_lists_wait", upstream.first_lists_wait.as_ref(), defaults.first_lists_wait),
        max_message_bytes: upstream.max_message_bytes.unwrap_or(defaults.max_message_bytes),
        max_message_values: upstream.max_message_values.unwrap_or(defaults.max_message_values),
        max_in_flight: upstream.max_in_flight.unwrap_or(defaults.max_in_flight),
        max_stream_bytes: upstream.max_stream_bytes.unwrap_or(defaults.max_stream_bytes),
        max_list_items: upstream.max_list_items.unwrap_or(defaults.max_list_items),
        max_list_pages: upstream.max_list_pages.unwrap_or(defaults.max_list_pages),
        max_list_bytes: upstream.max_list_bytes.unwrap_or(defaults.max_list_bytes),
        max_list_values: upstream.max_list_values.unwrap_or(defaults.max_list_values),
    };
    problems.extend(limits.problems());
    limits
}

/// The plugin runtimes' settings and the plugin grants.
pub(super) struct PluginConfig {
    pub wasm: WasmConfig,
    pub upstream: UpstreamLimits,
    pub grants: Grants,
}

/// The WASM runtime's settings, the upstream limits and the plugin grants.
pub(super) fn plugin_config(wasm: RawWasm, upstream: RawUpstream, problems: &mut Vec<String>) -> PluginConfig {
    let upstream_limits = upstream_limits(&upstream, problems);
    let defaults = WasmConfig::default();
    let max_instances = wasm.max_instances.unwrap_or(defaults.max_instances);
    let max_memory_mib = memory_cap(&wasm, max_instances, defaults.max_memory_bytes >> 20, problems);
    let runtime = WasmConfig {
        max_instances,
        max_memory_bytes: max_memory_mib.saturating_mul(1 << 20),
        pooling: wasm.pooling.unwrap_or(defaults.pooling),
    };
    if runtime.max_instances == 0 || runtime.max_memory_bytes == 0 {
        problems.push("wasm.max_instances and wasm.max_memory_mib must be at least 1".into());
    }
    let host_dirs = HostDirs {
        readable: absolute_dirs(wasm.grantable_dirs, "wasm.grantable_dirs", problems),
        writable: absolute_dirs(wasm.writable_dirs, "wasm.writable_dirs", problems),
    };
    let secrets = SecretPolicy {
        env: upstream.secret_env.map(StringList::into_vec).unwrap_or_default(),
        dirs: absolute_dirs(upstream.secret_dirs, "upstream.secret_dirs", problems),
        env_values: upstream.granted_env,
    };
    if let Err(problem) = secrets.validate() {
        problems.push(problem);
    }
    let outbound_defaults = OutboundPolicy::default();
    let allowed_ranges = upstream
        .allowed_ranges
        .map(StringList::into_vec)
        .unwrap_or_default()
        .iter()
        .filter_map(|range| {
            range
                .parse()
                .map_err(|_| {
                    problems.push(format!("upstream.allowed_ranges: {range:?} is not a CIDR range like 10.0.0.0/8"))
                })
                .ok()
        })
        .collect();
    let outbound = OutboundPolicy {
        allowed_hosts: upstream.allowed_hosts.map_or(outbound_defaults.allowed_hosts, StringList::into_vec),
        allowed_ranges,
        allow_link_local: upstream.allow_link_local.unwrap_or(outbound_defaults.allow_link_local),
    };
    PluginConfig { wasm: runtime, upstream: upstream_limits, grants: Grants { outbound, secrets, host_dirs } }
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, RawConfig};

    fn load(pairs: &[(&str, &str)]) -> Result<Config, Vec<String>> {
        let env = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        RawConfig::load(None, env).map_err(|e| e.0).and_then(|raw| Config::try_from(raw).map_err(|e| e.0))
    }

    #[test]
    fn plugins_are_granted_nothing_by_default() {
        let grants = load(&[]).unwrap().grants;
        assert!(grants.secrets.env.is_empty() && grants.secrets.dirs.is_empty());
        assert!(grants.host_dirs.readable.is_empty() && grants.host_dirs.writable.is_empty());
        assert!(grants.outbound.allowed_ranges.is_empty() && !grants.outbound.allow_link_local);
    }

    #[test]
    fn grants_are_read_and_checked() {
        let grants = load(&[
            ("SWITCHYARD_UPSTREAM__SECRET_ENV", "TOOLS_*,OTHER_KEY"),
            ("SWITCHYARD_UPSTREAM__SECRET_DIRS", "/var/run/secrets/upstream"),
            ("SWITCHYARD_UPSTREAM__ALLOWED_RANGES", "10.0.0.0/8, fd00::/8"),
            ("SWITCHYARD_WASM__GRANTABLE_DIRS", "/srv/data"),
        ])
        .unwrap()
        .grants;
        assert_eq!(grants.secrets.env, ["TOOLS_*", "OTHER_KEY"]);
        assert!(grants.secrets.env_values.is_empty());
        assert_eq!(grants.outbound.allowed_ranges.len(), 2);
        assert_eq!(grants.host_dirs.readable, [std::path::PathBuf::from("/srv/data")]);
        for (key, value, says) in [
            ("SWITCHYARD_UPSTREAM__SECRET_ENV", "*", "every variable"),
            ("SWITCHYARD_UPSTREAM__SECRET_DIRS", "relative", "absolute"),
            ("SWITCHYARD_WASM__GRANTABLE_DIRS", "/", "other than /"),
            ("SWITCHYARD_WASM__WRITABLE_DIRS", "/srv/../etc", "without . or .."),
            ("SWITCHYARD_UPSTREAM__ALLOWED_RANGES", "10.0.0.0", "CIDR"),
        ] {
            let problems = load(&[(key, value)]).unwrap_err();
            assert!(problems.iter().any(|p| p.contains(says)), "{key}={value}: {problems:?}");
        }
    }

    #[test]
    fn only_granted_variables_reach_the_upstream_plugins() {
        let grants = load(&[
            ("SWITCHYARD_UPSTREAM__SECRET_ENV", "TOOLS_*"),
            ("TOOLS_API_KEY", "k3y"),
            ("HOME", "/root"),
            ("SWITCHYARD_ADMIN__TOKEN", "an-admin-token-of-16+"),
        ])
        .unwrap()
        .grants;
        let handed: Vec<_> = grants.secrets.env_values.keys().collect();
        assert_eq!(handed, ["TOOLS_API_KEY"]);
        assert_eq!(grants.secrets.env("TOOLS_API_KEY").unwrap().resolve().unwrap().expose(), "k3y");
        assert!(!format!("{grants:?}").contains("k3y"), "a granted value never shows in Debug");
    }

    #[test]
    fn upstream_limits_are_read_and_checked() {
        let limits = load(&[
            ("SWITCHYARD_UPSTREAM__MAX_MESSAGE_BYTES", "1024"),
            ("SWITCHYARD_UPSTREAM__REFRESH_INTERVAL", "10s"),
        ])
        .unwrap()
        .upstream;
        assert_eq!((limits.max_message_bytes, limits.refresh_interval.as_secs()), (1024, 10));
        assert_eq!(limits.max_list_items, 5000, "the rest keep their defaults");
        for (key, value, says) in [
            ("SWITCHYARD_UPSTREAM__MAX_LIST_ITEMS", "0", "upstream.max_list_items must be at least 1"),
            ("SWITCHYARD_UPSTREAM__LIST_DEADLINE", "soon", "upstream.list_deadline"),
            ("SWITCHYARD_UPSTREAM__MAX_STREAM_BYTES", "10", "at least upstream.max_message_bytes"),
        ] {
            let problems = load(&[(key, value)]).unwrap_err();
            assert!(problems.iter().any(|p| p.contains(says)), "{key}={value}: {problems:?}");
        }
    }

    #[test]
    fn a_memory_budget_bounds_every_instance_at_its_cap() {
        let budgeted =
            |pairs: &[(&str, &str)]| load(pairs).map(|c| (c.wasm.max_instances, c.wasm.max_memory_bytes >> 20));
        assert_eq!(budgeted(&[]).unwrap(), (64, 256), "no budget: the defaults");
        let budget = ("SWITCHYARD_WASM__MEMORY_BUDGET_MIB", "512");
        assert_eq!(budgeted(&[budget]).unwrap(), (64, 8), "the budget shared by the default instances");
        assert_eq!(budgeted(&[budget, ("SWITCHYARD_WASM__MAX_INSTANCES", "16")]).unwrap(), (16, 32));
        let over = budgeted(&[budget, ("SWITCHYARD_WASM__MAX_MEMORY_MIB", "64")]).unwrap_err();
        assert!(over.iter().any(|p| p.contains("must fit in wasm.memory_budget_mib (512)")), "{over:?}");
        let tiny = budgeted(&[("SWITCHYARD_WASM__MEMORY_BUDGET_MIB", "10")]).unwrap_err();
        assert!(tiny.iter().any(|p| p.contains("memory_budget_mib")), "{tiny:?}");
    }
}
