//! The spec of a WASM plugin, as stored in the registry, and its validation.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

pub use switchyard_core::plugin_spec::SpecError;
use switchyard_core::plugin_spec::{confined, invalid, only_known};

/// The host directories the operator lets WASM specs preopen
/// (`wasm.grantable_dirs`, and `wasm.writable_dirs` for writable grants).
/// Nothing by default: a spec may then grant no directory at all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostDirs {
    /// Directories (and their subdirectories) a spec may grant read-only.
    pub readable: Vec<PathBuf>,
    /// Directories (and their subdirectories) a spec may grant writable;
    /// they may be granted read-only too.
    pub writable: Vec<PathBuf>,
}

impl HostDirs {
    /// Checks `host`, a `grants.dirs[i].host`: the granted directory it
    /// lies in, or why not, for the spec field's message.
    fn check(&self, host: &str, writable: bool) -> Result<PathBuf, String> {
        let root = if writable {
            confined(host, &self.writable).map_err(|e| format!("{e} (wasm.writable_dirs)"))?
        } else {
            confined(host, &self.readable)
                .or_else(|_| confined(host, &self.writable))
                .map_err(|e| format!("{e} (wasm.grantable_dirs)"))?
        };
        Ok(root.to_path_buf())
    }
}

/// A WASM plugin's spec:
///
/// ```json
/// {
///   "artifact": "<sha256 of the module, hex>",
///   "limits": {"fuel": 1000000000, "memory_mib": 64, "timeout_ms": 5000},
///   "grants": {"dirs": [{"host": "/srv/data", "guest": "/data", "writable": false}],
///              "env": {"UNITS": "metric"}}
/// }
/// ```
///
/// `limits` and `grants` are optional; unknown fields are refused so a typo
/// cannot silently drop a limit.
#[derive(Debug, Clone, PartialEq)]
pub struct WasmSpec {
    /// SHA-256 of the module, lower-case hex.
    pub artifact: String,
    /// Per-call limits.
    pub limits: Limits,
    /// What the module may reach.
    pub grants: Grants,
}

/// Per-call limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Fuel (roughly, wasm instructions) per call. Default 1e9.
    pub fuel: u64,
    /// Largest linear memory, in bytes. Default 64 MiB; at most the runtime's cap.
    pub memory_bytes: usize,
    /// Wall-clock time per call. Default 5 s; the request's own deadline may be sooner.
    pub timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self { fuel: 1_000_000_000, memory_bytes: 64 << 20, timeout: Duration::from_secs(5) }
    }
}

/// What a module may reach beyond its own memory. Nothing by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// Host directories preopened for the module.
    pub dirs: Vec<Preopen>,
    /// Environment variables the module sees.
    pub env: Vec<(String, String)>,
}

impl Grants {
    /// Whether nothing is granted: no directory and no variable.
    pub fn is_empty(&self) -> bool {
        let Self { dirs, env } = self;
        dirs.is_empty() && env.is_empty()
    }
}

/// A host directory the module may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preopen {
    /// The directory on the host.
    pub host: String,
    /// Where the module sees it.
    pub guest: String,
    /// Whether the module may change it.
    pub writable: bool,
    /// The operator's grantable directory `host` lies in: checked again
    /// (symbolic links resolved) every time the directory is opened.
    pub root: PathBuf,
}

impl WasmSpec {
    /// Parses and checks a spec; `max_memory_bytes` is the runtime's cap and
    /// `host_dirs` what directories a grant may name.
    ///
    /// # Errors
    /// The first field that is wrong, by its path.
    pub fn parse(spec: &Value, max_memory_bytes: usize, host_dirs: &HostDirs) -> Result<Self, SpecError> {
        let object = spec.as_object().ok_or_else(|| invalid("spec", "must be a JSON object"))?;
        only_known(object, "", &["artifact", "limits", "grants"])?;
        let artifact = object
            .get("artifact")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("artifact", "is required: the SHA-256 of an uploaded module"))?;
        if artifact.len() != 64 || !artifact.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(invalid("artifact", "must be a SHA-256 digest: 64 lower-case hex digits"));
        }
        let mut limits = Limits::default();
        if let Some(given) = object.get("limits") {
            let given = given.as_object().ok_or_else(|| invalid("limits", "must be an object"))?;
            only_known(given, "limits.", &["fuel", "memory_mib", "timeout_ms"])?;
            if let Some(fuel) = given.get("fuel") {
                limits.fuel = fuel
                    .as_u64()
                    .filter(|f| *f > 0)
                    .ok_or_else(|| invalid("limits.fuel", "must be a positive integer"))?;
            }
            if let Some(mib) = given.get("memory_mib") {
                let mib = mib
                    .as_u64()
                    .filter(|m| *m > 0)
                    .ok_or_else(|| invalid("limits.memory_mib", "must be a positive integer"))?;
                let bytes = usize::try_from(mib).ok().and_then(|m| m.checked_mul(1 << 20)).unwrap_or(usize::MAX);
                if bytes > max_memory_bytes {
                    return Err(invalid(
                        "limits.memory_mib",
                        format!("{mib} is above this server's cap of {} MiB", max_memory_bytes >> 20),
                    ));
                }
                limits.memory_bytes = bytes;
            }
            if let Some(ms) = given.get("timeout_ms") {
                let ms = ms
                    .as_u64()
                    .filter(|ms| (1..=600_000).contains(ms))
                    .ok_or_else(|| invalid("limits.timeout_ms", "must be an integer from 1 to 600000"))?;
                limits.timeout = Duration::from_millis(ms);
            }
        }
        limits.memory_bytes = limits.memory_bytes.min(max_memory_bytes);
        let mut grants = Grants::default();
        if let Some(given) = object.get("grants") {
            let given = given.as_object().ok_or_else(|| invalid("grants", "must be an object"))?;
            if given.contains_key("network") {
                return Err(invalid(
                    "grants.network",
                    "WASI preview 1 modules cannot open sockets; use an upstream plugin",
                ));
            }
            only_known(given, "grants.", &["dirs", "env"])?;
            if let Some(dirs) = given.get("dirs") {
                let dirs = dirs.as_array().ok_or_else(|| invalid("grants.dirs", "must be an array"))?;
                for (i, dir) in dirs.iter().enumerate() {
                    let field = format!("grants.dirs[{i}]");
                    let text = |key: &str| {
                        dir.get(key)
                            .and_then(Value::as_str)
                            .filter(|s| s.starts_with('/'))
                            .map(str::to_owned)
                            .ok_or_else(|| invalid(format!("{field}.{key}"), "must be an absolute path"))
                    };
                    let writable = match dir.get("writable") {
                        None => false,
                        Some(w) => {
                            w.as_bool().ok_or_else(|| invalid(format!("{field}.writable"), "must be a boolean"))?
                        }
                    };
                    let host = text("host")?;
                    let root = host_dirs.check(&host, writable).map_err(|e| invalid(format!("{field}.host"), e))?;
                    grants.dirs.push(Preopen { host, guest: text("guest")?, writable, root });
                }
            }
            if let Some(env) = given.get("env") {
                let env = env.as_object().ok_or_else(|| invalid("grants.env", "must be an object of strings"))?;
                for (key, value) in env {
                    let value =
                        value.as_str().ok_or_else(|| invalid(format!("grants.env.{key}"), "must be a string"))?;
                    grants.env.push((key.clone(), value.to_owned()));
                }
            }
        }
        Ok(Self { artifact: artifact.to_owned(), limits, grants })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DIGEST: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn defaults_grant_nothing() {
        let spec = WasmSpec::parse(&json!({"artifact": DIGEST}), 256 << 20, &HostDirs::default()).unwrap();
        assert_eq!(spec.limits, Limits::default());
        assert_eq!(spec.grants, Grants::default());
    }

    #[test]
    fn errors_name_the_field() {
        let cap = 128 << 20;
        let field = |spec: Value| WasmSpec::parse(&spec, cap, &HostDirs::default()).unwrap_err().field;
        assert_eq!(field(json!({})), "artifact");
        assert_eq!(field(json!({"artifact": "abc"})), "artifact");
        assert_eq!(field(json!({"artifact": DIGEST, "limits": {"memory_mib": 1024}})), "limits.memory_mib");
        assert_eq!(field(json!({"artifact": DIGEST, "limits": {"fuel": -1}})), "limits.fuel");
        assert_eq!(field(json!({"artifact": DIGEST, "limits": {"timeout": 5}})), "limits.timeout");
        assert_eq!(field(json!({"artifact": DIGEST, "grants": {"network": true}})), "grants.network");
        assert_eq!(
            field(json!({"artifact": DIGEST, "grants": {"dirs": [{"host": "rel", "guest": "/d"}]}})),
            "grants.dirs[0].host"
        );
        assert_eq!(field(json!({"artifact": DIGEST, "extra": 1})), "extra");
    }

    #[test]
    fn directories_only_from_what_the_operator_granted() {
        let (data, scratch) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let dirs = HostDirs { readable: vec![data.path().into()], writable: vec![scratch.path().into()] };
        let grant = |host: &std::path::Path, writable: bool| {
            let spec =
                json!({"artifact": DIGEST, "grants": {"dirs": [{"host": host, "guest": "/d", "writable": writable}]}});
            WasmSpec::parse(&spec, 64 << 20, &dirs).map(drop).map_err(|e| (e.field, e.reason))
        };
        assert!(grant(data.path(), false).is_ok());
        assert!(grant(scratch.path(), false).is_ok(), "a writable directory may be granted read-only");
        assert!(grant(scratch.path(), true).is_ok());
        let (field, reason) = grant(data.path(), true).unwrap_err();
        assert_eq!(field, "grants.dirs[0].host");
        assert!(reason.contains("wasm.writable_dirs"), "{reason}");
        for host in ["/proc", "/var/run/secrets", "/", "/etc"] {
            assert_eq!(grant(std::path::Path::new(host), false).unwrap_err().0, "grants.dirs[0].host", "{host}");
        }
        assert!(grant(&data.path().join("../x"), false).is_err());
    }

    #[test]
    fn limits_and_grants_parse() {
        let dirs = HostDirs { readable: Vec::new(), writable: vec!["/srv".into()] };
        let spec = WasmSpec::parse(
            &json!({"artifact": DIGEST, "limits": {"fuel": 10, "memory_mib": 2, "timeout_ms": 250},
                    "grants": {"dirs": [{"host": "/srv", "guest": "/data", "writable": true}], "env": {"A": "b"}}}),
            256 << 20,
            &dirs,
        )
        .unwrap();
        assert_eq!(spec.limits, Limits { fuel: 10, memory_bytes: 2 << 20, timeout: Duration::from_millis(250) });
        assert_eq!(
            spec.grants.dirs[0],
            Preopen { host: "/srv".into(), guest: "/data".into(), writable: true, root: "/srv".into() }
        );
        assert_eq!(spec.grants.env, [("A".to_owned(), "b".to_owned())]);
    }
}
