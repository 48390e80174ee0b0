//! Where an upstream plugin's secrets may come from: only what the operator
//! granted in the server's configuration ([`SecretPolicy`]), never
//! Switchyard's own settings.
//!
//! Whoever may register a plugin chooses the upstream URL, so a secret the
//! spec may name is a secret that caller can send to a server of their
//! choosing. The policy is therefore checked when the spec is parsed, before
//! any secret is read and before any connection is made.
//!
//! This crate never reads the process's environment: the binary hands the
//! policy the values of the variables it grants ([`SecretPolicy::grants`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use switchyard_core::plugin_spec::{confined, confined_now};
use switchyard_settings::Secret;

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
    /// The values of the variables `env` grants, as the binary read them
    /// from its environment when it started.
    pub env_values: BTreeMap<String, Secret>,
}

impl SecretPolicy {
    /// Whether `env` grants the variable `name` (never one of Switchyard's own).
    pub fn grants(&self, name: &str) -> bool {
        !is_own(name)
            && self.env.iter().any(|pattern| match pattern.strip_suffix('*') {
                Some(prefix) => name.starts_with(prefix),
                None => pattern == name,
            })
    }

    /// A secret from the variable `name`, if the policy grants it.
    ///
    /// # Errors
    /// Why not, for the spec field's message.
    pub fn env(&self, name: &str) -> Result<SecretRef, String> {
        if name.is_empty() {
            return Err("must name an environment variable".into());
        }
        if is_own(name) {
            return Err(format!("{name} is one of Switchyard's own settings and is never readable by a plugin"));
        }
        if self.grants(name) {
            Ok(SecretRef::Env { name: name.to_owned(), value: self.env_values.get(name).cloned() })
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

fn is_own(name: &str) -> bool {
    name.get(..OWN_ENV_PREFIX.len()).is_some_and(|p| p.eq_ignore_ascii_case(OWN_ENV_PREFIX))
}

/// Where a secret is read from when the plugin is built. Secrets are never
/// stored in the registry (which every admin can read) nor logged. Made by
/// [`SecretPolicy`], so it names only what the operator granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretRef {
    /// An environment variable of the Switchyard process (a Kubernetes
    /// Secret), with its value when the process has it.
    Env {
        /// The variable.
        name: String,
        /// Its value, `None` when it is not set.
        value: Option<Secret>,
    },
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
    pub fn resolve(&self) -> Result<Secret, String> {
        let value = match self {
            Self::Env { name, value } => {
                value.as_ref().ok_or_else(|| format!("environment variable {name} is not set"))?.expose().clone()
            }
            Self::File { path, root } => read_confined(path, root)?,
        };
        let value = value.trim().to_owned();
        if value.is_empty() {
            return Err("the secret is empty".into());
        }
        Ok(Secret::new(value))
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
        let values = BTreeMap::from([("TOOLS_KEY".to_owned(), Secret::new(" k3y\n".to_owned()))]);
        let policy =
            SecretPolicy { env: vec!["TOOLS_*".into(), "EXACT".into()], env_values: values, ..Default::default() };
        let key = policy.env("TOOLS_KEY").unwrap();
        assert_eq!(key.resolve().unwrap().expose(), "k3y", "handed in by the binary, trimmed");
        let unset = policy.env("EXACT").unwrap();
        assert_eq!(unset, SecretRef::Env { name: "EXACT".into(), value: None });
        assert!(unset.resolve().unwrap_err().contains("EXACT is not set"));
        assert!(policy.grants("TOOLS_OTHER") && !policy.grants("EXACTLY") && !policy.grants("HOME"));
        assert!(policy.env("EXACTLY").is_err());
        assert!(policy.env("HOME").unwrap_err().contains("upstream.secret_env"));
        let everything = SecretPolicy { env: vec!["S*".into()], ..Default::default() };
        for own in ["SWITCHYARD_STATE__KEYS", "SWITCHYARD_DATABASE_URL", "switchyard_admin__token"] {
            assert!(everything.env(own).unwrap_err().contains("own settings"), "{own}");
            assert!(!everything.grants(own), "{own}");
        }
        assert!(SecretPolicy::default().env("TOOLS_KEY").unwrap_err().contains("grants no variable"));
    }

    #[test]
    fn files_only_from_granted_directories() {
        let granted = tempfile::tempdir().unwrap();
        let policy = SecretPolicy { dirs: vec![granted.path().to_path_buf()], ..Default::default() };
        let path = granted.path().join("key");
        std::fs::write(&path, "s3cret\n").unwrap();
        assert_eq!(policy.file(path.to_str().unwrap()).unwrap().resolve().unwrap().expose(), "s3cret");
        assert!(policy.file("/var/run/secrets/kubernetes.io/serviceaccount/token").is_err());
        assert!(SecretPolicy::default().file(path.to_str().unwrap()).is_err());
        // A link planted after registration is refused when the secret is read.
        let planted = policy.file(granted.path().join("later").to_str().unwrap()).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", granted.path().join("later")).unwrap();
        assert!(planted.resolve().unwrap_err().contains("symbolic link"));
    }
}
