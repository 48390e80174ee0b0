//! What every plugin kind's spec parser shares: the kinds themselves
//! ([`PluginKind`], from `protocol`, where the registry finds it too), an
//! error that names the field at fault, and the refusal of unknown fields (a
//! typo must not silently drop a limit).

use serde_json::{Map, Value};

pub use switchyard_protocol::PluginKind;

/// A field of a plugin's registration is wrong: what a kind's spec parser
/// and the plugin factory refuse, and what the admin API answers 422 with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct SpecError {
    /// Where: a path inside the spec from a kind's parser (`limits.memory_mib`),
    /// from the top of the registration once the factory reports it
    /// (`spec.limits.memory_mib`, `kind`).
    pub field: String,
    /// Why.
    pub reason: String,
}

/// A [`SpecError`] at `field`.
pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> SpecError {
    SpecError { field: field.into(), reason: reason.into() }
}

/// Refuses any key of `object` not in `known`; `prefix` is the object's path (`limits.`).
///
/// # Errors
/// The first unknown key, with the known ones listed.
pub fn only_known(object: &Map<String, Value>, prefix: &str, known: &[&str]) -> Result<(), SpecError> {
    match object.keys().find(|k| !known.contains(&k.as_str())) {
        Some(unknown) => {
            Err(invalid(format!("{prefix}{unknown}"), format!("is not a known field (known: {})", known.join(", "))))
        }
        None => Ok(()),
    }
}

/// Checks that `path`, an absolute path a plugin spec names, lies inside one
/// of the directories the operator granted (`roots`), and returns the root it
/// lies in.
///
/// The check is lexical first (absolute, no `.` or `..` component, inside a
/// root component by component, so `/srv/data2` is not inside `/srv/data`),
/// which needs no file system and so can be decided before anything is read
/// or connected. When the path exists, its canonical form (symlinks resolved)
/// must lie inside the root's canonical form too, so a link planted inside a
/// granted directory cannot lead out of it. Call [`confined_now`] again right
/// before reading, since links can change after registration.
///
/// # Errors
/// Why the path is refused, without reading it.
pub fn confined<'r>(path: &str, roots: &'r [std::path::PathBuf]) -> Result<&'r std::path::Path, String> {
    use std::path::{Component, Path};
    let candidate = Path::new(path);
    if !candidate.is_absolute() {
        return Err("must be an absolute path".into());
    }
    if candidate.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir)) {
        return Err("must not contain . or .. components".into());
    }
    let root = roots.iter().find(|root| candidate.starts_with(root)).ok_or_else(|| {
        if roots.is_empty() {
            "is not allowed: this server grants no directory for it".to_owned()
        } else {
            let granted: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
            format!("is not inside a directory this server grants ({})", granted.join(", "))
        }
    })?;
    confined_now(candidate, root)?;
    Ok(root)
}

/// The canonical half of [`confined`]: when `path` exists, its canonical form
/// must lie inside `root`'s. A missing path passes (reading it will fail).
///
/// # Errors
/// When a symlink leads outside `root`.
pub fn confined_now(path: &std::path::Path, root: &std::path::Path) -> Result<(), String> {
    let Ok(real) = std::fs::canonicalize(path) else { return Ok(()) };
    let real_root = std::fs::canonicalize(root).map_err(|_| "its granted directory does not exist".to_owned())?;
    if real.starts_with(&real_root) {
        Ok(())
    } else {
        Err("leads outside its granted directory through a symbolic link".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn paths_stay_inside_granted_directories() {
        let granted = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), granted.path().join("link")).unwrap();
        std::fs::write(granted.path().join("ok"), "x").unwrap();
        let roots = vec![granted.path().to_path_buf()];
        let inside = |name: &str| format!("{}/{name}", granted.path().display());
        assert_eq!(confined(&inside("ok"), &roots).unwrap(), granted.path());
        assert_eq!(confined(&inside("missing"), &roots).unwrap(), granted.path(), "checked again when read");
        for (path, why) in [
            (inside("link"), "symbolic link"),
            (inside("../x"), ".."),
            (format!("{}2/ok", granted.path().display()), "not inside"),
            ("relative/ok".to_owned(), "absolute"),
            ("/proc/self/environ".to_owned(), "not inside"),
        ] {
            let error = confined(&path, &roots).unwrap_err();
            assert!(error.contains(why), "{path}: {error}");
        }
        let none: Vec<PathBuf> = Vec::new();
        assert!(confined(&inside("ok"), &none).unwrap_err().contains("grants no directory"));
    }
}
