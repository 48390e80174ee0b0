//! The parameters of a request, by method, read from the JSON once: what
//! each method needs is taken out of the `params` object (moved, not
//! copied) into a typed [`Params`], and a parameter of the wrong shape is a
//! [`ParamsError`] naming it. What no method reads stays in the object
//! (a legacy request's `_meta`, members of extensions we do not serve).
//!
//! Shapes only: whether the tool exists, the arguments fit its schema, or a
//! cursor decodes is the data layer's business.

use serde_json::{Map, Value};

use crate::Method;

/// A request's parameters, typed by its method.
#[derive(Debug, Clone, PartialEq)]
pub enum Params {
    /// `tools/call`
    CallTool {
        /// The tool.
        name: String,
        /// Its arguments; `None` when the member is absent or `null` (a
        /// sealed `requestState` binds to the request as sent).
        arguments: Option<Map<String, Value>>,
        /// The answers and state of a later round.
        retry: Retry,
    },
    /// `resources/read`
    ReadResource {
        /// The resource.
        uri: String,
        /// The answers and state of a later round.
        retry: Retry,
    },
    /// `prompts/get`
    GetPrompt {
        /// The prompt.
        name: String,
        /// Its arguments, every value a string; `None` when absent or `null`.
        arguments: Option<Map<String, Value>>,
        /// The answers and state of a later round.
        retry: Retry,
    },
    /// `completion/complete`
    Complete {
        /// What is completed.
        reference: CompletionTarget,
        /// The argument being completed.
        argument: String,
        /// What the user typed so far.
        value: String,
        /// The values of the other arguments (`context.arguments`).
        context: Map<String, Value>,
    },
    /// `tools/list`, `prompts/list`, `resources/list`, `resources/templates/list`
    List {
        /// Where the previous page ended.
        cursor: Option<String>,
    },
    /// `subscriptions/listen`
    Listen(ListenFilter),
    /// `tasks/get` and `tasks/cancel`
    Task {
        /// The task.
        task_id: String,
    },
    /// `tasks/update`
    UpdateTask {
        /// The task.
        task_id: String,
        /// Answers to its input requests, by key; each an object.
        input_responses: Map<String, Value>,
    },
    /// `initialize` (legacy)
    Initialize {
        /// The revision the client asked for.
        protocol_version: Option<String>,
    },
    /// A method without parameters of its own (`server/discover`, `ping`, …).
    None,
}

/// What a completion is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompletionTarget {
    /// `ref/prompt` by name.
    Prompt(String),
    /// `ref/resource` by URI or URI template.
    Resource(String),
}

/// The members of a later round of a multi-round request (MRTR).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Retry {
    /// `inputResponses`: the client's answers, by key; each an object.
    pub input_responses: Option<Map<String, Value>>,
    /// `requestState`: the state sealed in the previous round.
    pub request_state: Option<String>,
}

impl Retry {
    /// Whether this is a later round at all.
    pub fn is_retry(&self) -> bool {
        self.input_responses.is_some() || self.request_state.is_some()
    }
}

/// What `subscriptions/listen` asks for (`notifications`, a `SubscriptionFilter`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListenFilter {
    /// `toolsListChanged`
    pub tools: bool,
    /// `promptsListChanged`
    pub prompts: bool,
    /// `resourcesListChanged`
    pub resources: bool,
    /// `resourceSubscriptions`: URIs whose `resources/updated` to send.
    pub resource_uris: Vec<String>,
    /// `taskIds` (Tasks extension), when the member is present at all.
    pub task_ids: Option<Vec<String>>,
}

/// A parameter of the wrong shape, named as the client wrote it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamsError {
    /// A required member is missing.
    #[error("{0} is required")]
    Missing(&'static str),
    /// A member that must be a string is not.
    #[error("{0} must be a string")]
    NotString(String),
    /// A member that must be an object is not.
    #[error("{0} must be an object")]
    NotObject(String),
    /// A member that must be a boolean is not.
    #[error("{0} must be a boolean")]
    NotBoolean(String),
    /// A member that must be an array of strings is not.
    #[error("{0} must be an array of strings")]
    NotStrings(String),
    /// `ref.type` names neither a prompt nor a resource.
    #[error("ref.type must be ref/prompt or ref/resource")]
    UnknownReference,
}

/// Parameters that do not fit their method: why, and what of them the
/// transport's checks before the method runs still compare with its
/// headers (`Mcp-Name`, `Mcp-Param-*`), as far as those members were well
/// formed themselves.
#[derive(Debug, Clone, PartialEq)]
pub struct Malformed {
    /// The first member of the wrong shape.
    pub error: ParamsError,
    /// The item the request names, when that member is a string.
    pub name: Option<String>,
    /// A `tools/call`'s arguments, when they are an object.
    pub arguments: Option<Map<String, Value>>,
}

impl Params {
    /// Takes what `method` needs out of `params`.
    ///
    /// # Errors
    /// The first member of the wrong shape, with the name and arguments
    /// read before it.
    pub fn take(method: &Method, params: &mut Map<String, Value>) -> Result<Self, Malformed> {
        let malformed = |error| Malformed { error, name: None, arguments: None };
        match method {
            Method::CallTool | Method::GetPrompt => {
                let name = required_string(params, "name", "params.name").map_err(malformed)?;
                let arguments = optional_object(params, "arguments", "params.arguments")
                    .map_err(|error| Malformed { error, name: Some(name.clone()), arguments: None })?;
                let rest = |error| Malformed { error, name: Some(name.clone()), arguments: arguments.clone() };
                if *method == Method::GetPrompt
                    && let Some((key, _)) = arguments.iter().flatten().find(|(_, value)| !value.is_string())
                {
                    return Err(rest(ParamsError::NotString(format!("prompt argument {key}"))));
                }
                let retry = Retry::take(params).map_err(rest)?;
                Ok(if *method == Method::CallTool {
                    Self::CallTool { name, arguments, retry }
                } else {
                    Self::GetPrompt { name, arguments, retry }
                })
            }
            Method::ReadResource | Method::GetTask | Method::CancelTask | Method::UpdateTask => {
                let member = if *method == Method::ReadResource { "uri" } else { "taskId" };
                let named = if *method == Method::ReadResource { "params.uri" } else { "params.taskId" };
                let name = required_string(params, member, named).map_err(malformed)?;
                let rest = |error| Malformed { error, name: Some(name.clone()), arguments: None };
                Ok(match method {
                    Method::ReadResource => Self::ReadResource { retry: Retry::take(params).map_err(rest)?, uri: name },
                    Method::UpdateTask => {
                        let Some(Value::Object(input_responses)) = params.remove("inputResponses") else {
                            return Err(rest(ParamsError::Missing("params.inputResponses (an object)")));
                        };
                        objects_only(&input_responses).map_err(rest)?;
                        Self::UpdateTask { task_id: name, input_responses }
                    }
                    _ => Self::Task { task_id: name },
                })
            }
            _ => Self::take_unnamed(method, params).map_err(malformed),
        }
    }

    /// The methods whose parameters name no item.
    fn take_unnamed(method: &Method, params: &mut Map<String, Value>) -> Result<Self, ParamsError> {
        Ok(match method {
            Method::Complete => Self::take_complete(params)?,
            Method::ListTools | Method::ListPrompts | Method::ListResources | Method::ListResourceTemplates => {
                Self::List { cursor: optional_string(params, "cursor", "params.cursor")? }
            }
            Method::Listen => Self::Listen(ListenFilter::take(params)?),
            Method::Initialize => {
                // Negotiated leniently: a version of another shape is no version.
                let protocol_version = match params.remove("protocolVersion") {
                    Some(Value::String(version)) => Some(version),
                    _ => None,
                };
                Self::Initialize { protocol_version }
            }
            _ => Self::None,
        })
    }

    fn take_complete(params: &mut Map<String, Value>) -> Result<Self, ParamsError> {
        let Some(mut reference) = params.remove("ref") else { return Err(ParamsError::Missing("params.ref")) };
        let reference = match reference.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => CompletionTarget::Prompt(string_in(&mut reference, "name", "ref.name")?),
            Some("ref/resource") => CompletionTarget::Resource(string_in(&mut reference, "uri", "ref.uri")?),
            _ => return Err(ParamsError::UnknownReference),
        };
        let mut argument = params.remove("argument").unwrap_or(Value::Null);
        let (argument, value) =
            (string_in(&mut argument, "name", "argument.name")?, string_in(&mut argument, "value", "argument.value")?);
        let context = match params.remove("context") {
            Some(Value::Object(mut context)) => match context.remove("arguments") {
                Some(Value::Object(arguments)) => arguments,
                _ => Map::new(),
            },
            _ => Map::new(),
        };
        Ok(Self::Complete { reference, argument, value, context })
    }

    /// The item a request names (`name`, `uri` or `taskId`), as header
    /// checks and rate limits compare it.
    pub fn name(&self) -> Option<&str> {
        match self {
            Self::CallTool { name, .. } | Self::GetPrompt { name, .. } => Some(name),
            Self::ReadResource { uri, .. } => Some(uri),
            Self::Task { task_id } | Self::UpdateTask { task_id, .. } => Some(task_id),
            _ => None,
        }
    }

    /// The later-round members of a multi-round request, for the methods
    /// that have them.
    pub fn retry(&self) -> Option<&Retry> {
        match self {
            Self::CallTool { retry, .. } | Self::ReadResource { retry, .. } | Self::GetPrompt { retry, .. } => {
                Some(retry)
            }
            _ => None,
        }
    }

    /// The members that identify the request across its rounds, as the
    /// client sent them (without `inputResponses` and `requestState`): what
    /// a sealed `requestState` is bound to. Written into `rest`, the members
    /// no method reads.
    pub fn bound(&self, mut rest: Map<String, Value>) -> Map<String, Value> {
        match self {
            Self::CallTool { name, arguments, .. } | Self::GetPrompt { name, arguments, .. } => {
                rest.insert("name".into(), Value::from(name.as_str()));
                if let Some(arguments) = arguments {
                    rest.insert("arguments".into(), Value::Object(arguments.clone()));
                }
            }
            Self::ReadResource { uri, .. } => {
                rest.insert("uri".into(), Value::from(uri.as_str()));
            }
            _ => {}
        }
        rest
    }
}

impl Retry {
    fn take(params: &mut Map<String, Value>) -> Result<Self, ParamsError> {
        let input_responses = match params.remove("inputResponses") {
            None | Some(Value::Null) => None,
            Some(Value::Object(responses)) => {
                objects_only(&responses)?;
                Some(responses)
            }
            Some(_) => return Err(ParamsError::NotObject("inputResponses".into())),
        };
        let request_state = optional_string(params, "requestState", "requestState")?;
        Ok(Self { input_responses, request_state })
    }
}

impl ListenFilter {
    fn take(params: &mut Map<String, Value>) -> Result<Self, ParamsError> {
        let Some(Value::Object(mut notifications)) = params.remove("notifications") else {
            return Err(ParamsError::Missing("params.notifications (a SubscriptionFilter object)"));
        };
        let flag = |key: &str| match notifications.get(key) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(ParamsError::NotBoolean(format!("notifications.{key}"))),
        };
        let (tools, prompts, resources) =
            (flag("toolsListChanged")?, flag("promptsListChanged")?, flag("resourcesListChanged")?);
        let mut strings = |key: &str| match notifications.remove(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .into_iter()
                .map(|item| match item {
                    Value::String(text) => Some(text),
                    _ => None,
                })
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| ParamsError::NotStrings(format!("notifications.{key}"))),
            Some(_) => Err(ParamsError::NotStrings(format!("notifications.{key}"))),
        };
        let resource_uris = strings("resourceSubscriptions")?.unwrap_or_default();
        let task_ids = strings("taskIds")?;
        Ok(Self { tools, prompts, resources, resource_uris, task_ids })
    }
}

fn required_string(params: &mut Map<String, Value>, key: &str, named: &'static str) -> Result<String, ParamsError> {
    match params.remove(key) {
        Some(Value::String(text)) => Ok(text),
        Some(_) => Err(ParamsError::NotString(named.into())),
        None => Err(ParamsError::Missing(named)),
    }
}

fn optional_string(params: &mut Map<String, Value>, key: &str, named: &str) -> Result<Option<String>, ParamsError> {
    match params.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err(ParamsError::NotString(named.into())),
    }
}

fn optional_object(
    params: &mut Map<String, Value>,
    key: &str,
    named: &str,
) -> Result<Option<Map<String, Value>>, ParamsError> {
    match params.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map)),
        Some(_) => Err(ParamsError::NotObject(named.into())),
    }
}

/// A string member of a nested object (`ref.name`, `argument.value`).
fn string_in(object: &mut Value, key: &str, named: &str) -> Result<String, ParamsError> {
    match object.as_object_mut().and_then(|object| object.remove(key)) {
        Some(Value::String(text)) => Ok(text),
        _ => Err(ParamsError::NotString(named.into())),
    }
}

fn objects_only(responses: &Map<String, Value>) -> Result<(), ParamsError> {
    match responses.iter().find(|(_, value)| !value.is_object()) {
        Some((key, _)) => Err(ParamsError::NotObject(format!("inputResponses.{key}"))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn take(method: &str, params: Value) -> (Result<Params, Malformed>, Map<String, Value>) {
        let Value::Object(mut params) = params else { panic!("an object") };
        (Params::take(&Method::parse(method), &mut params), params)
    }

    #[test]
    fn what_a_method_reads_is_moved_out_and_the_rest_stays() {
        let (params, rest) = take(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}, "requestState": "s", "_meta": {"progressToken": 1}}),
        );
        let params = params.unwrap();
        assert_eq!(params.name(), Some("echo"));
        let Params::CallTool { arguments, retry, .. } = &params else { panic!("{params:?}") };
        assert_eq!(arguments.as_ref().unwrap()["text"], "hi");
        assert!(retry.is_retry() && retry.input_responses.is_none());
        assert_eq!(Value::Object(rest.clone()), json!({"_meta": {"progressToken": 1}}));
        // What a sealed state is bound to: the request without its round's members.
        assert_eq!(
            Value::Object(params.bound(rest)),
            json!({"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": 1}})
        );
    }

    #[test]
    fn a_parameter_of_the_wrong_shape_is_named() {
        for (method, params, said) in [
            ("tools/call", json!({}), "params.name is required"),
            ("tools/call", json!({"name": 1}), "params.name must be a string"),
            ("tools/call", json!({"name": "t", "arguments": []}), "params.arguments must be an object"),
            ("tools/call", json!({"name": "t", "inputResponses": {"a": 1}}), "inputResponses.a must be an object"),
            ("tools/call", json!({"name": "t", "requestState": 7}), "requestState must be a string"),
            ("prompts/get", json!({"name": "p", "arguments": {"n": 1}}), "prompt argument n must be a string"),
            (
                "completion/complete",
                json!({"ref": {"type": "ref/other"}}),
                "ref.type must be ref/prompt or ref/resource",
            ),
            (
                "completion/complete",
                json!({"ref": {"type": "ref/prompt", "name": "p"}}),
                "argument.name must be a string",
            ),
            ("tools/list", json!({"cursor": 3}), "params.cursor must be a string"),
            ("subscriptions/listen", json!({}), "params.notifications (a SubscriptionFilter object) is required"),
            (
                "subscriptions/listen",
                json!({"notifications": {"toolsListChanged": "yes"}}),
                "notifications.toolsListChanged must be a boolean",
            ),
            (
                "subscriptions/listen",
                json!({"notifications": {"taskIds": [1]}}),
                "notifications.taskIds must be an array of strings",
            ),
            ("tasks/get", json!({"taskId": 5}), "params.taskId must be a string"),
            ("tasks/update", json!({"taskId": "t"}), "params.inputResponses (an object) is required"),
        ] {
            let (taken, _) = take(method, params.clone());
            assert_eq!(taken.unwrap_err().error.to_string(), said, "{method} {params}");
        }
    }

    #[test]
    fn malformed_parameters_keep_what_the_header_checks_compare() {
        let (taken, _) = take("tools/call", json!({"name": "b", "arguments": {"k": 1}, "requestState": 5}));
        let malformed = taken.unwrap_err();
        assert_eq!(malformed.error, ParamsError::NotString("requestState".into()));
        assert_eq!(
            (malformed.name.as_deref(), malformed.arguments),
            (Some("b"), Some(json!({"k": 1}).as_object().unwrap().clone()))
        );
        let (taken, _) = take("tools/call", json!({"name": "b", "arguments": []}));
        assert_eq!(taken.unwrap_err().name.as_deref(), Some("b"), "the name, though the arguments are not an object");
        let (taken, _) = take("tasks/update", json!({"taskId": "t"}));
        assert_eq!(taken.unwrap_err().name.as_deref(), Some("t"));
        let (taken, _) = take("tools/call", json!({"name": 7}));
        assert_eq!(taken.unwrap_err().name, None);
    }

    #[test]
    fn a_request_is_bound_as_it_was_sent() {
        // Without arguments, as with them: what a sealed state digests is
        // the request's members as the client sent them (and as replicas
        // before typed parameters digested them).
        for sent in [json!({"name": "t"}), json!({"name": "t", "arguments": {}}), json!({"name": "t", "x": 1})] {
            let (params, rest) = take("tools/call", sent.clone());
            assert_eq!(Value::Object(params.unwrap().bound(rest)), sent);
        }
    }

    #[test]
    fn listen_filters_and_completions_read_whole() {
        let (filter, _) = take(
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true, "resourceSubscriptions": ["file:///a"], "taskIds": []}}),
        );
        assert_eq!(
            filter.unwrap(),
            Params::Listen(ListenFilter {
                tools: true,
                resource_uris: vec!["file:///a".into()],
                task_ids: Some(vec![]),
                ..ListenFilter::default()
            })
        );
        let (complete, _) = take(
            "completion/complete",
            json!({"ref": {"type": "ref/resource", "uri": "file:///{x}"}, "argument": {"name": "x", "value": "a"},
                   "context": {"arguments": {"y": "b"}}}),
        );
        let Params::Complete { reference, argument, value, context } = complete.unwrap() else { panic!() };
        assert_eq!(reference, CompletionTarget::Resource("file:///{x}".into()));
        assert_eq!((argument.as_str(), value.as_str(), &context["y"]), ("x", "a", &json!("b")));
        assert_eq!(take("ping", json!({"x": 1})).0.unwrap(), Params::None);
    }
}
