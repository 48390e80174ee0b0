//! [`Problems`]: every problem a configuration has, found in one pass, so an
//! operator fixes them all at once instead of one per restart.
//!
//! Each crate checks its own section through a [`Section`], which prefixes
//! the keys it names with the section's place in the binary's file
//! (`http.keep_alive: …`): the crate knows its keys, the binary decides
//! where the section sits.

use std::fmt::Display;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use crate::{StringList, parse_duration};

/// Every problem found so far, each a line an operator can act on.
#[derive(Debug, Default)]
pub struct Problems(Vec<String>);

impl Problems {
    /// No problems yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A problem written out whole (one that names several sections, or none).
    pub fn push(&mut self, problem: impl Into<String>) {
        self.0.push(problem.into());
    }

    /// The checks of section `name` (`http`, `auth.introspection`).
    pub fn section(&mut self, name: &str) -> Section<'_> {
        Section { problems: self, name: name.to_owned() }
    }

    /// Whether nothing was found.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The problems, in the order found.
    pub fn into_vec(self) -> Vec<String> {
        self.0
    }
}

impl Extend<String> for Problems {
    fn extend<I: IntoIterator<Item = String>>(&mut self, problems: I) {
        self.0.extend(problems);
    }
}

/// The checks of one section: problems name their keys under its name.
pub struct Section<'a> {
    problems: &'a mut Problems,
    name: String,
}

impl Section<'_> {
    /// `section.key`, the key as the operator writes it.
    pub fn key(&self, key: &str) -> String {
        format!("{}.{key}", self.name)
    }

    /// A problem with `key`.
    pub fn push(&mut self, key: &str, what: impl Display) {
        let problem = format!("{}: {what}", self.key(key));
        self.problems.push(problem);
    }

    /// A problem of the section as a whole (one that names several keys).
    pub fn push_whole(&mut self, what: impl Display) {
        let problem = format!("{}: {what}", self.name);
        self.problems.push(problem);
    }

    /// A problem whose text names its keys itself (an error of the crate's
    /// own validation, written for the operator).
    pub fn push_as_is(&mut self, problem: impl Display) {
        self.problems.push(problem.to_string());
    }

    /// The checks of a section inside this one (`auth` → `auth.introspection`).
    pub fn nested(&mut self, name: &str) -> Section<'_> {
        let name = self.key(name);
        Section { problems: self.problems, name }
    }

    /// `value` read as a duration, `default` when unset; a problem (and the
    /// default) when it does not read.
    pub fn duration(&mut self, key: &str, value: Option<&str>, default: Duration) -> Duration {
        match value {
            None => default,
            Some(text) => parse_duration(text).unwrap_or_else(|| {
                self.push(key, format_args!("{text:?} is not a duration (try \"250ms\", \"30s\", \"5m\", \"1h\")"));
                default
            }),
        }
    }

    /// A duration that must be more than zero.
    pub fn positive_duration(&mut self, key: &str, value: Option<&str>, default: Duration) -> Duration {
        let duration = self.duration(key, value, default);
        if duration.is_zero() {
            self.push(key, "must be more than zero");
        }
        duration
    }

    /// A bound that must be at least 1 (a zero bound would refuse everything).
    pub fn at_least_one(&mut self, key: &str, value: Option<usize>, default: usize) -> usize {
        let value = value.unwrap_or(default);
        if value == 0 {
            self.push(key, "must be at least 1");
        }
        value
    }

    /// Host directories: each absolute, not `/`, and without `.` or `..`, so
    /// a grant names exactly the directory the operator means.
    pub fn absolute_dirs(&mut self, key: &str, list: Option<StringList>) -> Vec<PathBuf> {
        let dirs: Vec<PathBuf> =
            list.map(StringList::into_vec).unwrap_or_default().into_iter().map(PathBuf::from).collect();
        for dir in &dirs {
            let lexical = dir.components().all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
            if !dir.is_absolute() || !lexical || dir == Path::new("/") {
                self.push(
                    key,
                    format_args!("{} must be an absolute directory other than /, without . or ..", dir.display()),
                );
            }
        }
        dirs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_name_their_keys_and_every_problem_is_kept() {
        let mut problems = Problems::new();
        let mut http = problems.section("http");
        assert_eq!(http.duration("keep_alive", Some("soon"), Duration::from_secs(15)), Duration::from_secs(15));
        assert_eq!(http.positive_duration("body_read_timeout", Some("0s"), Duration::from_secs(1)), Duration::ZERO);
        let mut auth = problems.section("auth");
        assert_eq!(auth.nested("introspection").at_least_one("max_concurrent", Some(0), 16), 0);
        assert_eq!(
            problems
                .section("wasm")
                .absolute_dirs("grantable_dirs", Some(StringList::Joined("/srv,tmp,/".into())))
                .len(),
            3
        );
        assert_eq!(
            problems.into_vec(),
            [
                "http.keep_alive: \"soon\" is not a duration (try \"250ms\", \"30s\", \"5m\", \"1h\")",
                "http.body_read_timeout: must be more than zero",
                "auth.introspection.max_concurrent: must be at least 1",
                "wasm.grantable_dirs: tmp must be an absolute directory other than /, without . or ..",
                "wasm.grantable_dirs: / must be an absolute directory other than /, without . or ..",
            ]
        );
    }
}
