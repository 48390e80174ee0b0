//! Questions asked of a `ClientCapabilities` object, and the objects used in
//! `-32021` errors to say what was missing.

use serde_json::{Map, Value, json};

/// The Tasks extension identifier.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// A client capability an input request (or a method) may need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientCapability {
    /// `elicitation` in form mode (`elicitation: {}` alone means form).
    ElicitationForm,
    /// `elicitation.url`.
    ElicitationUrl,
    /// `sampling`.
    Sampling,
    /// `sampling.tools`, for tool-enabled sampling.
    SamplingTools,
    /// `roots`.
    Roots,
    /// The Tasks extension.
    Tasks,
}

impl ClientCapability {
    const ALL: [Self; 6] =
        [Self::ElicitationForm, Self::ElicitationUrl, Self::Sampling, Self::SamplingTools, Self::Roots, Self::Tasks];

    /// The capability a `-32021` error's `data.requiredCapabilities` names,
    /// when it names exactly one we know (as [`Self::as_required`] writes it).
    pub fn from_required(required: &Value) -> Option<Self> {
        Self::ALL.into_iter().find(|capability| capability.as_required() == *required)
    }

    /// Whether `capabilities` declares this capability.
    pub fn is_declared_in(self, capabilities: &Map<String, Value>) -> bool {
        let object = |key: &str| capabilities.get(key).filter(|v| v.is_object());
        match self {
            Self::ElicitationForm => object("elicitation").is_some_and(|e| {
                let e = e.as_object().map_or(0, Map::len);
                // `{}` means form only; otherwise `form` must be listed.
                e == 0 || capabilities["elicitation"].get("form").is_some()
            }),
            Self::ElicitationUrl => object("elicitation").is_some_and(|e| e.get("url").is_some()),
            Self::Sampling => object("sampling").is_some(),
            Self::SamplingTools => object("sampling").is_some_and(|s| s.get("tools").is_some()),
            Self::Roots => object("roots").is_some(),
            Self::Tasks => object("extensions").is_some_and(|e| e.get(TASKS_EXTENSION).is_some()),
        }
    }

    /// The `ClientCapabilities` object naming just this capability, for
    /// `error.data.requiredCapabilities`.
    pub fn as_required(self) -> Value {
        match self {
            Self::ElicitationForm => json!({ "elicitation": { "form": {} } }),
            Self::ElicitationUrl => json!({ "elicitation": { "url": {} } }),
            Self::Sampling => json!({ "sampling": {} }),
            Self::SamplingTools => json!({ "sampling": { "tools": {} } }),
            Self::Roots => json!({ "roots": {} }),
            Self::Tasks => json!({ "extensions": { TASKS_EXTENSION: {} } }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn empty_elicitation_means_form_only() {
        let c = caps(json!({"elicitation": {}}));
        assert!(ClientCapability::ElicitationForm.is_declared_in(&c));
        assert!(!ClientCapability::ElicitationUrl.is_declared_in(&c));
        let c = caps(json!({"elicitation": {"url": {}}}));
        assert!(!ClientCapability::ElicitationForm.is_declared_in(&c));
        assert!(ClientCapability::ElicitationUrl.is_declared_in(&c));
    }

    #[test]
    fn a_required_capability_reads_back() {
        for capability in ClientCapability::ALL {
            assert_eq!(ClientCapability::from_required(&capability.as_required()), Some(capability));
        }
        assert_eq!(ClientCapability::from_required(&json!({ "sampling": {}, "roots": {} })), None);
        assert_eq!(ClientCapability::from_required(&json!("sampling")), None);
    }

    #[test]
    fn extensions_and_sampling() {
        let c = caps(json!({"sampling": {}, "extensions": {TASKS_EXTENSION: {}}}));
        assert!(ClientCapability::Sampling.is_declared_in(&c));
        assert!(!ClientCapability::SamplingTools.is_declared_in(&c));
        assert!(ClientCapability::Tasks.is_declared_in(&c));
        assert!(!ClientCapability::Roots.is_declared_in(&c));
    }
}
