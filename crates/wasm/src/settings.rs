//! `[wasm]` as the operator writes it, its defaults and its checks.

use serde::Deserialize;
use switchyard_settings::{Section, StringList};

use crate::{HostDirs, RuntimeConfig};

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

impl RawWasm {
    /// The runtime's settings, and the host directories specs may be granted.
    pub fn check(self, mut section: Section<'_>) -> (RuntimeConfig, HostDirs) {
        let defaults = RuntimeConfig::default();
        let max_instances = self.max_instances.unwrap_or(defaults.max_instances);
        let max_memory_mib = self.memory_cap(max_instances, defaults.max_memory_bytes >> 20, &mut section);
        let runtime = RuntimeConfig {
            max_instances,
            max_memory_bytes: max_memory_mib.saturating_mul(1 << 20),
            pooling: self.pooling.unwrap_or(defaults.pooling),
        };
        if runtime.max_instances == 0 || runtime.max_memory_bytes == 0 {
            section.push_whole("max_instances and max_memory_mib must be at least 1");
        }
        let host_dirs = HostDirs {
            readable: section.absolute_dirs("grantable_dirs", self.grantable_dirs),
            writable: section.absolute_dirs("writable_dirs", self.writable_dirs),
        };
        (runtime, host_dirs)
    }

    /// The cap on one module's memory, MiB: as configured, else the default, or
    /// with a budget, the budget's share per instance. Every instance at its cap
    /// must fit the budget (a plugin asking for more is refused at registration,
    /// by the cap), so a pod's WASM load cannot outgrow the memory it was given.
    fn memory_cap(&self, max_instances: u32, default_mib: usize, section: &mut Section<'_>) -> usize {
        let Some(budget) = self.memory_budget_mib else {
            return self.max_memory_mib.unwrap_or(default_mib);
        };
        let instances = usize::try_from(max_instances.max(1)).unwrap_or(usize::MAX);
        let cap = self.max_memory_mib.unwrap_or_else(|| (budget / instances).min(default_mib));
        if cap == 0 || cap.saturating_mul(instances) > budget {
            let budget_key = section.key("memory_budget_mib");
            section.push_whole(format_args!(
                "max_instances ({instances}) times max_memory_mib ({cap}) must fit in {budget_key} ({budget}); lower one of them, or raise the budget"
            ));
        }
        cap
    }
}
