//! Where an upstream plugin's secrets may come from: only what the operator
//! granted in the server's configuration ([`SecretPolicy`]), never
//! Switchyard's own settings.
//!
//! Whoever may register a plugin chooses the upstream URL, so a secret the
//! spec may name is a secret that caller can send to a server of their
//! choosing. The policy is therefore checked when the spec is parsed, before
//! any secret is read and before any connection is made.

use std::path::{Path, PathBuf};

use switchyard_core::plugin_spec::{confined, confined_now};

/// The prefix of Switchyard's own environment settings (state keys, the
/// database URL, the admin token): never readable as a plugin secret.
const OWN_ENV_PREFIX: &str = "SWITCHYARD_";

/// What an upstream spec's `*_from_env` and `*_from_file` may name. Nothing
/// by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecretPolicy {
    /// Environment variables: exact names, or prefixes written `PREFIX*`.
    /// `SWITCHYARD_*` never matches.
    pub env: Vec<String>,
    /// Directories whose files may be read (mounted Secrets).
    pub dirs: Vec<PathBuf>,
}

impl SecretPolicy {
    /// Checks the policy itself, for the configuration loader.
    ///
    /// # Errors
    /// A pattern that would grant every variable, or a relative directory.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(bad) = self.env.iter().find(|p| p.is_empty() || p.trim_end_matches('*').is_empty()) {
            return Err(format!(
                "upstream.secret_env: {bad:?} would grant every variable; name variables or a prefix like TOOLS_*"
            ));
        }
        if let Some(bad) = self.dirs.iter().find(|d| !d.is_absolute()) {
            return Err(format!("upstream.secret_dirs: {} is not an absolute path", bad.display()));
        }
        Ok(())
    }

    /// A secret from the variable `name`, if the policy grants it.
    ///
    /// # Errors
    /// Why not, for the spec field's message.
    pub fn env(&self, name: &str) -> Result<SecretRef, String> {
        if name.is_empty() {
            return Err("must name an environment variable".into());
        }
        if name.get(..OWN_ENV_PREFIX.len()).is_some_and(|p| p.eq_ignore_ascii_case(OWN_ENV_PREFIX)) {
            return Err(format!("{name} is one of Switchyard's own settings and is never readable by a plugin"));
        }
        let granted = self.env.iter().any(|pattern| match pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => pattern == name,
        });
        if granted {
            Ok(SecretRef::Env(name.to_owned()))
        } else if self.env.is_empty() {
            Err(format!("{name} is not allowed: this server grants no variable (upstream.secret_env)"))
        } else {
            Err(format!("{name} is not allowed by upstream.secret_env ({})", self.env.join(", ")))
        }
    }

    /// A secret from the file at `path`, if it lies in a granted directory.
    ///
    /// # Errors
    /// Why not, for the spec field's message.
    pub fn file(&self, path: &str) -> Result<SecretRef, String> {
        let root = confined(path, &self.dirs).map_err(|e| format!("{path} {e} (upstream.secret_dirs)"))?;
        Ok(SecretRef::File { path: PathBuf::from(path), root: root.to_path_buf() })
    }
}

/// Where a secret is read from when the plugin is built. Secrets are never
/// stored in the registry (which every admin can read) nor logged. Made by
/// [`SecretPolicy`], so it names only what the operator granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretRef {
    /// An environment variable of the Switchyard process (a Kubernetes Secret).
    Env(String),
    /// A file (a mounted Secret) inside a granted directory; surrounding
    /// whitespace is trimmed.
    File {
        /// The file.
        path: PathBuf,
        /// The granted directory it lies in, checked again on every read.
        root: PathBuf,
    },
}

impl SecretRef {
    /// Reads the secret.
    ///
    /// # Errors
    /// When the variable or file is missing or empty, or a link leads the
    /// file out of its directory; the message names it, not its value.
    pub fn resolve(&self) -> Result<String, String> {
        let value = match self {
            Self::Env(name) => std::env::var(name).map_err(|_| format!("environment variable {name} is not set"))?,
            Self::File { path, root } => read_confined(path, root)?,
        };
        let value = value.trim().to_owned();
        if value.is_empty() {
            return Err("the secret is empty".into());
        }
        Ok(value)
    }
}

fn read_confined(path: &Path, root: &Path) -> Result<String, String> {
    confined_now(path, root).map_err(|e| format!("{} {e}", path.display()))?;
    std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_granted_variables_and_never_our_own() {
        let policy = SecretPolicy { env: vec!["TOOLS_*".into(), "EXACT".into()], dirs: Vec::new() };
        assert_eq!(policy.env("TOOLS_KEY").unwrap(), SecretRef::Env("TOOLS_KEY".into()));
        assert_eq!(policy.env("EXACT").unwrap(), SecretRef::Env("EXACT".into()));
        assert!(policy.env("EXACTLY").is_err());
        assert!(policy.env("HOME").unwrap_err().contains("upstream.secret_env"));
        let everything = SecretPolicy { env: vec!["S*".into()], dirs: Vec::new() };
        for own in ["SWITCHYARD_STATE__KEYS", "SWITCHYARD_DATABASE_URL", "switchyard_admin__token"] {
            assert!(everything.env(own).unwrap_err().contains("own settings"), "{own}");
        }
        assert!(SecretPolicy::default().env("TOOLS_KEY").unwrap_err().contains("grants no variable"));
        assert!(SecretPolicy { env: vec!["*".into()], dirs: Vec::new() }.validate().is_err());
        assert!(SecretPolicy { env: Vec::new(), dirs: vec!["rel".into()] }.validate().is_err());
    }

    #[test]
    fn files_only_from_granted_directories() {
        let granted = tempfile::tempdir().unwrap();
        let policy = SecretPolicy { env: Vec::new(), dirs: vec![granted.path().to_path_buf()] };
        let path = granted.path().join("key");
        std::fs::write(&path, "s3cret\n").unwrap();
        assert_eq!(policy.file(path.to_str().unwrap()).unwrap().resolve().unwrap(), "s3cret");
        assert!(policy.file("/var/run/secrets/kubernetes.io/serviceaccount/token").is_err());
        assert!(SecretPolicy::default().file(path.to_str().unwrap()).is_err());
        // A link planted after registration is refused when the secret is read.
        let planted = policy.file(granted.path().join("later").to_str().unwrap()).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", granted.path().join("later")).unwrap();
        assert!(planted.resolve().unwrap_err().contains("symbolic link"));
    }
}
