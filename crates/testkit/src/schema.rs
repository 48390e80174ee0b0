//! The official MCP 2026-07-28 JSON schema, used to check every message the
//! server sends in tests.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// The schema, with validators compiled per definition on first use.
#[derive(Clone)]
pub struct SpecSchema {
    document: Arc<Value>,
    /// The Tasks extension's schema (`ext-tasks/schema.json` beside it), for
    /// the definitions the core schema does not have.
    tasks: Arc<Value>,
    compiled: Arc<Mutex<HashMap<String, Arc<jsonschema::Validator>>>>,
}

impl SpecSchema {
    /// Loads `shared/spec/2026-07-28/schema.json` from beside the checkout
    /// (where CI puts it), or from `MCP_SCHEMA` if set.
    ///
    /// # Panics
    /// When the file is missing: the tests would check nothing without it.
    pub fn load() -> Self {
        let path = std::env::var_os("MCP_SCHEMA").map(PathBuf::from).unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/spec/2026-07-28/schema.json")
        });
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("the MCP schema is needed at {} ({e}); set MCP_SCHEMA", path.display()));
        let document: Value = serde_json::from_str(&text).expect("schema.json is JSON");
        let tasks_path = path.parent().and_then(|p| p.parent()).map(|p| p.join("ext-tasks/schema.json"));
        let tasks = tasks_path.and_then(|p| std::fs::read_to_string(p).ok()).map_or_else(
            || json!({ "$defs": {} }),
            |text| serde_json::from_str(&text).expect("ext-tasks schema is JSON"),
        );
        Self { document: Arc::new(document), tasks: Arc::new(tasks), compiled: Arc::default() }
    }

    fn validator(&self, definition: &str) -> Arc<jsonschema::Validator> {
        let mut compiled = self.compiled.lock().expect("not poisoned");
        let validator = compiled.entry(definition.to_owned()).or_insert_with(|| {
            let in_core = self.document["$defs"].get(definition).is_some();
            let mut root = if in_core { (*self.document).clone() } else { (*self.tasks).clone() };
            root.as_object_mut().expect("schema root is an object").retain(|k, _| k == "$defs" || k == "$schema");
            root["$ref"] = json!(format!("#/$defs/{definition}"));
            Arc::new(jsonschema::validator_for(&root).expect("the official schema compiles"))
        });
        Arc::clone(validator)
    }

    /// Checks `instance` against `$defs/definition`.
    ///
    /// # Panics
    /// With every problem, when it does not conform.
    pub fn check(&self, definition: &str, instance: &Value) {
        let validator = self.validator(definition);
        let problems: Vec<String> =
            validator.iter_errors(instance).map(|e| format!("{}: {e}", e.instance_path())).collect();
        assert!(problems.is_empty(), "not a valid {definition}: {problems:#?}\n{instance:#}");
    }

    /// Checks one server message: a notification, an error response, or a
    /// result response (against the result type of `method`, when known).
    pub fn check_message(&self, message: &Value, method: Option<&str>) {
        if message.get("method").is_some() {
            assert!(message.get("id").is_none(), "the server must never send a request: {message}");
            // The Tasks extension's notification is in its own schema.
            let definition = if message["method"] == "notifications/tasks" {
                "TaskStatusNotification"
            } else {
                "ServerNotification"
            };
            self.check(definition, message);
        } else if message.get("error").is_some() {
            self.check("JSONRPCErrorResponse", message);
        } else {
            self.check("JSONRPCResultResponse", message);
            let result = &message["result"];
            let definition = match (method, result["resultType"].as_str()) {
                (_, Some("input_required")) => Some("InputRequiredResult"),
                (Some("tools/call"), Some("task")) => Some("CreateTaskResult"),
                (Some("tasks/get"), _) => Some("GetTaskResult"),
                (Some("tasks/update"), _) => Some("UpdateTaskResult"),
                (Some("tasks/cancel"), _) => Some("CancelTaskResult"),
                (Some("server/discover"), _) => Some("DiscoverResult"),
                (Some("tools/list"), _) => Some("ListToolsResult"),
                (Some("tools/call"), _) => Some("CallToolResult"),
                (Some("resources/list"), _) => Some("ListResourcesResult"),
                (Some("resources/templates/list"), _) => Some("ListResourceTemplatesResult"),
                (Some("resources/read"), _) => Some("ReadResourceResult"),
                (Some("prompts/list"), _) => Some("ListPromptsResult"),
                (Some("prompts/get"), _) => Some("GetPromptResult"),
                (Some("completion/complete"), _) => Some("CompleteResult"),
                (Some("subscriptions/listen"), _) => Some("SubscriptionsListenResult"),
                _ => None,
            };
            if let Some(definition) = definition {
                self.check(definition, result);
            }
        }
    }
}
