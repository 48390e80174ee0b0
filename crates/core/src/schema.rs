//! JSON Schema 2020-12 for tool arguments and structured output: compiled
//! once per catalog build, never fetching a remote `$ref`, bounded in size and
//! depth so a hostile schema cannot make compilation or validation explode.
//!
//! A schema without `$schema` is 2020-12 (the MCP default); one that declares
//! another dialect the validator knows (draft-07, …) is honoured; an unknown
//! dialect or an unresolvable external `$ref` is refused at compile time.

use serde_json::Value;

/// Largest schema we compile, serialised.
pub const MAX_SCHEMA_BYTES: usize = 256 * 1024;
/// Deepest nesting of objects and arrays we accept in a schema.
pub const MAX_SCHEMA_DEPTH: usize = 32;
/// At most this many validation errors are reported back to the model.
const MAX_REPORTED_ERRORS: usize = 8;

/// Why a schema was refused.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The schema is larger than [`MAX_SCHEMA_BYTES`].
    #[error("schema is {0} bytes, over the limit of {MAX_SCHEMA_BYTES}")]
    TooLarge(usize),
    /// The schema nests deeper than [`MAX_SCHEMA_DEPTH`].
    #[error("schema nests deeper than {MAX_SCHEMA_DEPTH} levels")]
    TooDeep,
    /// The schema is not a valid schema (or references something we will not fetch).
    #[error("invalid schema: {0}")]
    Invalid(String),
}

/// A compiled schema, cheap to share and to validate against.
pub struct CompiledSchema {
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for CompiledSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledSchema").finish_non_exhaustive()
    }
}

/// Compiles `schema`, enforcing the size and depth bounds first.
///
/// # Errors
/// When the schema is too large, too deep, or invalid.
pub fn compile(schema: &Value) -> Result<CompiledSchema, SchemaError> {
    let size = serde_json::to_vec(schema).map(|v| v.len()).unwrap_or(usize::MAX);
    if size > MAX_SCHEMA_BYTES {
        return Err(SchemaError::TooLarge(size));
    }
    if depth(schema) > MAX_SCHEMA_DEPTH {
        return Err(SchemaError::TooDeep);
    }
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(schema)
        .map_err(|e| SchemaError::Invalid(e.to_string()))?;
    Ok(CompiledSchema { validator })
}

impl CompiledSchema {
    /// Validates `instance`; on failure, readable messages naming the JSON
    /// pointer of each problem (at most a handful).
    ///
    /// # Errors
    /// The list of problems found.
    pub fn validate(&self, instance: &Value) -> Result<(), Vec<String>> {
        // The common case, valid input, without building any error.
        if self.validator.is_valid(instance) {
            return Ok(());
        }
        let errors: Vec<String> = self
            .validator
            .iter_errors(instance)
            .take(MAX_REPORTED_ERRORS)
            .map(|e| {
                let path = e.instance_path().to_string();
                if path.is_empty() { e.to_string() } else { format!("{path}: {e}") }
            })
            .collect();
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }
}

fn depth(value: &Value) -> usize {
    match value {
        Value::Object(map) => 1 + map.values().map(depth).max().unwrap_or(0),
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn validates_2020_12_by_default() {
        let schema = compile(&json!({
            "type": "object",
            "$defs": {"n": {"type": "integer", "minimum": 0}},
            "properties": {"n": {"$ref": "#/$defs/n"}},
            "required": ["n"],
            "additionalProperties": false
        }))
        .unwrap();
        assert!(schema.validate(&json!({"n": 3})).is_ok());
        let errors = schema.validate(&json!({"n": -1, "x": 1})).unwrap_err();
        assert!(errors.iter().any(|e| e.starts_with("/n")), "{errors:?}");
    }

    #[test]
    fn never_fetches_a_remote_ref() {
        let err = compile(&json!({"$ref": "https://example.com/schema.json"})).unwrap_err();
        assert!(matches!(err, SchemaError::Invalid(_)), "{err}");
    }

    #[test]
    fn refuses_deep_and_large_schemas() {
        let mut deep = json!({"type": "object"});
        for _ in 0..40 {
            deep = json!({"allOf": [deep]});
        }
        assert!(matches!(compile(&deep), Err(SchemaError::TooDeep)));
        let large = json!({"enum": vec!["x".repeat(1000); 300]});
        assert!(matches!(compile(&large), Err(SchemaError::TooLarge(_))));
    }
}
