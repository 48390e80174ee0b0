//! The conformance fixture: every tool, resource and prompt that the official
//! MCP conformance suite (`@modelcontextprotocol/conformance`) calls, with the
//! payloads its scenarios expect. Off unless configured
//! (`SWITCHYARD_FIXTURE=conformance`); it exists so the suite runs against the
//! real server, through the real catalog, dispatch and transport.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use switchyard_core::catalog::ListKind;
use switchyard_core::plugin::{CompletionRef, PluginResult};
use switchyard_core::tasks::TaskSupport;
use switchyard_core::{CallContext, Outcome, Plugin, PluginError};
use switchyard_protocol::capabilities::ClientCapability;
use switchyard_protocol::logging::LoggingLevel;
use switchyard_protocol::method::input;

/// A 1×1 red PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// The fixture. Two hooks mutate its lists, so it keeps that state.
#[derive(Debug, Default)]
pub struct ConformanceFixture {
    extra_tool: AtomicBool,
    extra_prompt: AtomicBool,
}

impl ConformanceFixture {
    /// A fixture with its base lists.
    pub fn new() -> Self {
        Self::default()
    }
}

fn no_args() -> Value {
    json!({ "type": "object", "additionalProperties": false })
}

fn tool(name: &str, description: &str, input_schema: Value) -> Value {
    json!({ "name": name, "description": description, "inputSchema": input_schema })
}

fn text(text: impl Into<String>) -> Value {
    json!({ "content": [{ "type": "text", "text": text.into() }] })
}

fn complete(result: Value) -> PluginResult<Outcome> {
    Ok(Outcome::Complete(result))
}

fn elicit(message: &str, properties: Value, required: &[&str]) -> Value {
    json!({
        "method": input::ELICIT,
        "params": { "message": message, "requestedSchema": { "type": "object", "properties": properties, "required": required } }
    })
}

fn sample(prompt: &str, max_tokens: u32) -> Value {
    json!({
        "method": input::CREATE_MESSAGE,
        "params": { "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }], "maxTokens": max_tokens }
    })
}

fn roots() -> Value {
    json!({ "method": input::LIST_ROOTS, "params": {} })
}

fn ask(requests: &[(&str, Value)], state: Option<Value>) -> PluginResult<Outcome> {
    let requests = requests.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
    Ok(Outcome::InputRequired { requests, state })
}

/// The client's answer to `key`, if this is a retry that carries it.
fn answer<'a>(cx: &'a CallContext, key: &str) -> Option<&'a Value> {
    cx.input().and_then(|round| round.responses.get(key))
}

/// The `content` of an accepted elicitation answer.
fn accepted<'a>(cx: &'a CallContext, key: &str) -> Option<&'a Map<String, Value>> {
    answer(cx, key).filter(|a| a.get("action").and_then(Value::as_str) == Some("accept"))?.get("content")?.as_object()
}

fn sampled_text(response: &Value) -> String {
    response.get("content").and_then(|c| c.get("text")).and_then(Value::as_str).unwrap_or_default().to_owned()
}

fn round(cx: &CallContext) -> u64 {
    cx.input().and_then(|i| i.state.as_ref()).and_then(|s| s.get("round")).and_then(Value::as_u64).unwrap_or(0)
}

fn wav() -> String {
    // A 16-bit mono PCM WAV with eight samples of silence.
    let samples = [0u8; 16];
    let mut bytes = Vec::with_capacity(44 + samples.len());
    bytes.extend_from_slice(b"RIFF");
    bytes.extend_from_slice(&(36 + samples.len() as u32).to_le_bytes());
    bytes.extend_from_slice(b"WAVEfmt ");
    bytes.extend_from_slice(&16u32.to_le_bytes());
    bytes.extend_from_slice(&1u16.to_le_bytes()); // PCM
    bytes.extend_from_slice(&1u16.to_le_bytes()); // mono
    bytes.extend_from_slice(&8000u32.to_le_bytes());
    bytes.extend_from_slice(&16000u32.to_le_bytes());
    bytes.extend_from_slice(&2u16.to_le_bytes());
    bytes.extend_from_slice(&16u16.to_le_bytes());
    bytes.extend_from_slice(b"data");
    bytes.extend_from_slice(&(samples.len() as u32).to_le_bytes());
    bytes.extend_from_slice(&samples);
    STANDARD.encode(bytes)
}

fn string_arg(description: &str) -> Value {
    json!({ "type": "string", "description": description })
}

impl Plugin for ConformanceFixture {
    fn id(&self) -> &str {
        "builtin.conformance"
    }

    fn tools(&self) -> Vec<Value> {
        let mut tools = vec![
            tool("test_simple_text", "Returns simple text.", no_args()),
            tool("test_image_content", "Returns an image.", no_args()),
            tool("test_audio_content", "Returns audio.", no_args()),
            tool("test_embedded_resource", "Returns an embedded resource.", no_args()),
            tool("test_resource_link", "Returns a link to a resource (not a conformance fixture).", no_args()),
            tool("test_multiple_content_types", "Returns text, an image and a resource.", no_args()),
            tool("test_tool_with_logging", "Logs three messages while it runs.", no_args()),
            tool("test_logging_tool", "Logs a message (only when the request sets a log level).", no_args()),
            tool("test_tool_with_progress", "Reports progress 0, 50, 100 of 100.", no_args()),
            tool("test_error_handling", "Always fails.", no_args()),
            // The Tasks extension's fixtures.
            tool(
                "greet",
                "Says hello (never a task).",
                json!({ "type": "object", "properties": { "name": string_arg("Who to greet") }, "required": ["name"] }),
            ),
            tool(
                "slow_compute",
                "Sleeps `seconds`, then answers (a task when the client takes tasks).",
                json!({ "type": "object", "properties": {
                    "seconds": { "type": "number", "minimum": 0, "maximum": 600 },
                    "label": string_arg("A label echoed in the answer") }, "required": ["seconds"] }),
            ),
            tool("failing_job", "Fails as a tool after a second (tasks only).", no_args()),
            tool("protocol_error_job", "Fails with an internal error after a moment (a task).", no_args()),
            tool("test_tool_with_task", "Asks for a name (MRTR), then answers from a task (tasks only).", no_args()),
            tool(
                "confirm_delete",
                "Asks to confirm a deletion (from a task, when the client takes tasks).",
                json!({ "type": "object", "properties": { "filename": string_arg("The file to delete") } }),
            ),
            tool("multi_input", "Asks two questions at once (from a task, when the client takes tasks).", no_args()),
            tool(
                "test_sampling",
                "Asks the client to sample.",
                json!({
                "type": "object", "properties": { "prompt": string_arg("The prompt to send to the LLM") }, "required": ["prompt"] }),
            ),
            tool(
                "test_elicitation",
                "Asks the user for input.",
                json!({
                "type": "object", "properties": { "message": string_arg("The message to show the user") }, "required": ["message"] }),
            ),
            tool("test_elicitation_sep1034_defaults", "Elicits with defaults of every primitive type.", no_args()),
            tool("test_elicitation_sep1330_enums", "Elicits with every enum shape.", no_args()),
            tool("test_streaming_elicitation", "Asks the user for input.", no_args()),
            tool("test_missing_capability", "Needs the sampling capability.", no_args()),
            tool("test_trigger_tool_change", "Adds or removes a tool.", no_args()),
            tool("test_trigger_prompt_change", "Adds or removes a prompt.", no_args()),
            tool("test_input_required_result_elicitation", "MRTR: one elicitation.", no_args()),
            tool("test_input_required_result_sampling", "MRTR: one sampling request.", no_args()),
            tool("test_input_required_result_list_roots", "MRTR: one roots request.", no_args()),
            tool("test_input_required_result_request_state", "MRTR: state round-trip.", no_args()),
            tool("test_input_required_result_multiple_inputs", "MRTR: three requests at once.", no_args()),
            tool("test_input_required_result_multi_round", "MRTR: two rounds.", no_args()),
            tool("test_input_required_result_tampered_state", "MRTR: integrity-protected state.", no_args()),
            tool("test_input_required_result_capabilities", "MRTR: only declared capabilities.", no_args()),
            tool(
                "test_custom_header",
                "Mirrors its region argument into the Mcp-Param-Region header.",
                json!({
                    "type": "object",
                    "properties": {
                        "region": { "type": "string", "description": "A region name", "x-mcp-header": "Region" },
                        "count": { "type": "integer", "x-mcp-header": "Count" },
                        "dryRun": { "type": "boolean", "x-mcp-header": "Dry-Run" }
                    },
                    "required": ["region"]
                }),
            ),
            json!({
                "name": "json_schema_2020_12_tool",
                "description": "Tool with JSON Schema 2020-12 features",
                "inputSchema": {
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "type": "object",
                    "$defs": { "address": { "$anchor": "addressDef", "type": "object",
                        "properties": { "street": { "type": "string" }, "city": { "type": "string" } } } },
                    "properties": {
                        "name": { "type": "string" },
                        "address": { "$ref": "#/$defs/address" },
                        "contactMethod": { "type": "string", "enum": ["phone", "email"] },
                        "phone": { "type": "string" },
                        "email": { "type": "string" }
                    },
                    "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
                    "if": { "properties": { "contactMethod": { "const": "phone" } }, "required": ["contactMethod"] },
                    "then": { "required": ["phone"] },
                    "else": { "required": ["email"] },
                    "additionalProperties": false
                }
            }),
        ];
        if self.extra_tool.load(Ordering::SeqCst) {
            tools.push(tool("test_dynamic_tool", "Appears after test_trigger_tool_change.", no_args()));
        }
        tools
    }

    fn prompts(&self) -> Vec<Value> {
        let mut prompts = vec![
            json!({ "name": "test_simple_prompt", "description": "A simple prompt without arguments." }),
            json!({ "name": "test_prompt_with_arguments", "description": "A prompt with two required arguments.", "arguments": [
                { "name": "arg1", "description": "First test argument", "required": true },
                { "name": "arg2", "description": "Second test argument", "required": true }] }),
            json!({ "name": "test_prompt_with_embedded_resource", "description": "A prompt that embeds a resource.", "arguments": [
                { "name": "resourceUri", "description": "URI of the resource to embed", "required": true }] }),
            json!({ "name": "test_prompt_with_image", "description": "A prompt with an image." }),
            json!({ "name": "test_input_required_result_prompt", "description": "A prompt that asks for context first (MRTR)." }),
        ];
        if self.extra_prompt.load(Ordering::SeqCst) {
            prompts.push(
                json!({ "name": "test_dynamic_prompt", "description": "Appears after test_trigger_prompt_change." }),
            );
        }
        prompts
    }

    fn resources(&self) -> Vec<Value> {
        vec![
            json!({ "uri": "test://static-text", "name": "static-text", "description": "A static text resource.", "mimeType": "text/plain" }),
            json!({ "uri": "test://static-binary", "name": "static-binary", "description": "A static binary resource.", "mimeType": "image/png" }),
            json!({ "uri": "test://watched-resource", "name": "watched-resource", "description": "A resource that changes.", "mimeType": "text/plain" }),
        ]
    }

    fn task_support(&self, tool: &str) -> TaskSupport {
        match tool {
            "slow_compute" | "protocol_error_job" | "confirm_delete" | "multi_input" => TaskSupport::Optional,
            "failing_job" | "test_tool_with_task" => TaskSupport::Required,
            _ => TaskSupport::Forbidden,
        }
    }

    fn resource_templates(&self) -> Vec<Value> {
        vec![json!({ "uriTemplate": "test://template/{id}/data", "name": "template-data",
            "description": "Data for an id.", "mimeType": "application/json" })]
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Map<String, Value>,
        cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Outcome>> {
        Box::pin(async move { self.call(name, &arguments, &cx).await })
    }

    fn read_resource<'a>(&'a self, uri: &'a str, _cx: CallContext) -> BoxFuture<'a, PluginResult<Outcome>> {
        Box::pin(async move {
            let content = match uri {
                "test://static-text" => {
                    json!({ "uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource." })
                }
                "test://static-binary" => json!({ "uri": uri, "mimeType": "image/png", "blob": PNG }),
                "test://watched-resource" => {
                    json!({ "uri": uri, "mimeType": "text/plain", "text": "Watched resource content." })
                }
                _ => match uri.strip_prefix("test://template/").and_then(|rest| rest.strip_suffix("/data")) {
                    Some(id) if !id.is_empty() && !id.contains('/') => json!({
                        "uri": uri, "mimeType": "application/json",
                        "text": json!({ "id": id, "templateTest": true, "data": format!("Data for ID: {id}") }).to_string()
                    }),
                    _ => return Err(PluginError::ResourceNotFound { uri: uri.to_owned() }),
                },
            };
            complete(json!({ "contents": [content] }))
        })
    }

    fn get_prompt<'a>(
        &'a self,
        name: &'a str,
        arguments: Map<String, Value>,
        cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Outcome>> {
        Box::pin(async move {
            let arg = |k: &str| arguments.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
            let user = |content: Value| json!({ "role": "user", "content": content });
            let messages = match name {
                "test_simple_prompt" => {
                    vec![user(json!({ "type": "text", "text": "This is a simple prompt for testing." }))]
                }
                "test_prompt_with_arguments" => vec![user(json!({ "type": "text",
                    "text": format!("Prompt with arguments: arg1='{}', arg2='{}'", arg("arg1"), arg("arg2")) }))],
                "test_prompt_with_embedded_resource" => vec![
                    user(
                        json!({ "type": "resource", "resource": { "uri": arg("resourceUri"), "mimeType": "text/plain",
                        "text": "Embedded resource content for testing." } }),
                    ),
                    user(json!({ "type": "text", "text": "Please process the embedded resource above." })),
                ],
                "test_prompt_with_image" => vec![
                    user(json!({ "type": "image", "data": PNG, "mimeType": "image/png" })),
                    user(json!({ "type": "text", "text": "Please analyze the image above." })),
                ],
                "test_input_required_result_prompt" => match accepted(&cx, "user_context") {
                    None => {
                        return ask(
                            &[(
                                "user_context",
                                elicit(
                                    "What context should the prompt use?",
                                    json!({ "context": { "type": "string" } }),
                                    &["context"],
                                ),
                            )],
                            None,
                        );
                    }
                    Some(content) => {
                        let context = content.get("context").and_then(Value::as_str).unwrap_or_default();
                        vec![user(json!({ "type": "text", "text": format!("Use this context: {context}") }))]
                    }
                },
                "test_dynamic_prompt" => vec![user(json!({ "type": "text", "text": "A dynamic prompt." }))],
                _ => return Err(PluginError::InvalidParams(format!("Unknown prompt: {name}"))),
            };
            complete(json!({ "messages": messages }))
        })
    }

    fn complete<'a>(
        &'a self,
        reference: &'a CompletionRef,
        argument: &'a str,
        value: &'a str,
        _context: &'a Map<String, Value>,
    ) -> BoxFuture<'a, PluginResult<Vec<String>>> {
        Box::pin(async move {
            let candidates: &[&str] = match (reference, argument) {
                (CompletionRef::Prompt(_), _) => &["paris", "park", "party", "hello", "world"],
                (CompletionRef::Resource(_), "id") => &["1", "2", "3", "123"],
                _ => &[],
            };
            Ok(candidates.iter().filter(|c| c.starts_with(value)).map(|c| (*c).to_owned()).collect())
        })
    }
}

impl ConformanceFixture {
    async fn call(&self, name: &str, arguments: &Map<String, Value>, cx: &CallContext) -> PluginResult<Outcome> {
        let string = |k: &str| arguments.get(k).and_then(Value::as_str).unwrap_or_default().to_owned();
        match name {
            "test_simple_text" => complete(text("This is a simple text response for testing.")),
            "test_image_content" => {
                complete(json!({ "content": [{ "type": "image", "data": PNG, "mimeType": "image/png" }] }))
            }
            "test_audio_content" => {
                complete(json!({ "content": [{ "type": "audio", "data": wav(), "mimeType": "audio/wav" }] }))
            }
            "test_embedded_resource" => complete(json!({ "content": [{ "type": "resource", "resource": {
                "uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content." } }] })),
            "test_resource_link" => {
                complete(json!({ "content": [{ "type": "resource_link", "uri": "test://static-text",
                "name": "static-text", "mimeType": "text/plain", "annotations": { "audience": ["user"], "priority": 0.5 } }] }))
            }
            "test_multiple_content_types" => complete(json!({ "content": [
                { "type": "text", "text": "Multiple content types test:" },
                { "type": "image", "data": PNG, "mimeType": "image/png" },
                { "type": "resource", "resource": { "uri": "test://mixed-content-resource", "mimeType": "application/json",
                    "text": "{\"test\":\"data\",\"value\":123}" } }] })),
            "test_tool_with_logging" => {
                for (i, message) in ["Tool execution started", "Tool processing data", "Tool execution completed"]
                    .into_iter()
                    .enumerate()
                {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    cx.log(LoggingLevel::Info, Some("conformance"), json!(message)).await;
                }
                complete(text("Tool with logging executed successfully"))
            }
            "test_logging_tool" => {
                cx.log(LoggingLevel::Info, Some("conformance"), json!("test_logging_tool ran")).await;
                complete(text("Logging tool executed"))
            }
            "test_tool_with_progress" => {
                for (i, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    cx.progress(progress, Some(100.0), None).await;
                }
                complete(text("Progress tool executed successfully"))
            }
            "test_error_handling" => {
                Err(PluginError::Tool("This tool intentionally returns an error for testing".into()))
            }
            "test_sampling" => match answer(cx, "sampling") {
                None => ask(&[("sampling", sample(&string("prompt"), 100))], None),
                Some(response) => complete(text(format!("LLM response: {}", sampled_text(response)))),
            },
            "test_elicitation" => match answer(cx, "elicitation") {
                None => ask(
                    &[(
                        "elicitation",
                        elicit(
                            &string("message"),
                            json!({
                    "username": { "type": "string", "description": "User's response" },
                    "email": { "type": "string", "description": "User's email address" } }),
                            &["username", "email"],
                        ),
                    )],
                    None,
                ),
                Some(response) => complete(text(format!("User response: {response}"))),
            },
            "test_elicitation_sep1034_defaults" => match answer(cx, "defaults") {
                None => ask(
                    &[(
                        "defaults",
                        elicit(
                            "Please review and update the form fields with defaults",
                            json!({
                    "name": { "type": "string", "description": "User name", "default": "John Doe" },
                    "age": { "type": "integer", "description": "User age", "default": 30 },
                    "score": { "type": "number", "description": "User score", "default": 95.5 },
                    "status": { "type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active" },
                    "verified": { "type": "boolean", "description": "Verification status", "default": true } }),
                            &[],
                        ),
                    )],
                    None,
                ),
                Some(response) => complete(text(elicitation_summary(response))),
            },
            "test_elicitation_sep1330_enums" => match answer(cx, "enums") {
                None => ask(
                    &[(
                        "enums",
                        elicit(
                            "Please select options from the enum fields",
                            json!({
                    "untitledSingle": { "type": "string", "enum": ["option1", "option2", "option3"] },
                    "titledSingle": { "type": "string", "oneOf": [
                        { "const": "value1", "title": "First Option" }, { "const": "value2", "title": "Second Option" },
                        { "const": "value3", "title": "Third Option" }] },
                    "legacyEnum": { "type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"] },
                    "untitledMulti": { "type": "array", "items": { "type": "string", "enum": ["option1", "option2", "option3"] } },
                    "titledMulti": { "type": "array", "items": { "anyOf": [
                        { "const": "value1", "title": "First Choice" }, { "const": "value2", "title": "Second Choice" },
                        { "const": "value3", "title": "Third Choice" }] } } }),
                            &[],
                        ),
                    )],
                    None,
                ),
                Some(response) => complete(text(elicitation_summary(response))),
            },
            "test_streaming_elicitation" => match answer(cx, "confirm") {
                None => ask(
                    &[(
                        "confirm",
                        elicit("Please confirm to continue", json!({ "ok": { "type": "boolean" } }), &["ok"]),
                    )],
                    None,
                ),
                Some(response) => complete(text(format!("Streaming elicitation completed: {response}"))),
            },
            "test_missing_capability" => {
                if !cx.client_supports(ClientCapability::Sampling) {
                    return Err(PluginError::MissingCapability(ClientCapability::Sampling));
                }
                match answer(cx, "sampling") {
                    None => ask(&[("sampling", sample("Say hello", 20))], None),
                    Some(response) => complete(text(format!("Sampled: {}", sampled_text(response)))),
                }
            }
            "test_trigger_tool_change" => {
                let now = !self.extra_tool.fetch_xor(true, Ordering::SeqCst);
                cx.list_changed(ListKind::Tools).await;
                complete(text(format!("test_dynamic_tool is now {}", if now { "listed" } else { "gone" })))
            }
            "test_trigger_prompt_change" => {
                let now = !self.extra_prompt.fetch_xor(true, Ordering::SeqCst);
                cx.list_changed(ListKind::Prompts).await;
                complete(text(format!("test_dynamic_prompt is now {}", if now { "listed" } else { "gone" })))
            }
            "test_dynamic_tool" => complete(text("The dynamic tool ran.")),
            "test_custom_header" => complete(text(format!("Region: {}", string("region")))),
            "greet" => complete(text(format!("Hello, {}!", string("name")))),
            "slow_compute" => {
                let seconds = arguments.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
                if seconds > 0.0 {
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_secs_f64(seconds)) => {}
                        () = cx.cancellation().cancelled() => return Err(PluginError::Tool("cancelled".into())),
                    }
                }
                complete(text(format!("slow_compute {} finished after {seconds} s", string("label"))))
            }
            "failing_job" => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Err(PluginError::Tool("failing_job failed, as it always does".into()))
            }
            "protocol_error_job" => {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Err(PluginError::Internal("protocol_error_job broke, as it always does".into()))
            }
            "test_tool_with_task" => match accepted(cx, "user_name") {
                None => ask(
                    &[("user_name", elicit("What is your name?", json!({ "name": { "type": "string" } }), &["name"]))],
                    None,
                ),
                Some(content) => {
                    // Long enough to become a task.
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    let name = content.get("name").and_then(Value::as_str).unwrap_or("stranger");
                    complete(text(format!("Hello, {name}! (answered from a task)")))
                }
            },
            "confirm_delete" => match accepted(cx, "confirm") {
                None => {
                    // Work first, so that a client taking tasks gets a task that then asks.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    let question = elicit(
                        &format!("Delete {}?", string("filename")),
                        json!({ "confirm": { "type": "boolean" } }),
                        &["confirm"],
                    );
                    ask(&[("confirm", question)], None)
                }
                Some(content) => complete(text(format!("Confirmed: {}", Value::Object(content.clone())))),
            },
            "multi_input" => match (accepted(cx, "first"), accepted(cx, "second")) {
                (Some(first), Some(second)) => complete(text(format!(
                    "Answers: {} and {}",
                    Value::Object(first.clone()),
                    Value::Object(second.clone())
                ))),
                _ => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    let question = |q: &str| elicit(q, json!({ "answer": { "type": "string" } }), &["answer"]);
                    ask(&[("first", question("First question?")), ("second", question("Second question?"))], None)
                }
            },
            "json_schema_2020_12_tool" => complete(text(format!("Received: {}", Value::Object(arguments.clone())))),
            _ => self.call_mrtr(name, cx),
        }
    }

    /// The `test_input_required_result_*` tools (SEP-2322 scenarios).
    fn call_mrtr(&self, name: &str, cx: &CallContext) -> PluginResult<Outcome> {
        let ask_name = || elicit("What is your name?", json!({ "name": { "type": "string" } }), &["name"]);
        match name {
            "test_input_required_result_elicitation" => match accepted(cx, "user_name") {
                // A retry without the answer (or with a malformed one) asks again (SHOULD).
                None => ask(&[("user_name", ask_name())], None),
                Some(content) => complete(text(format!(
                    "Hello, {}!",
                    content.get("name").and_then(Value::as_str).unwrap_or("stranger")
                ))),
            },
            "test_input_required_result_sampling" => match answer(cx, "capital_question") {
                None => ask(&[("capital_question", sample("What is the capital of France?", 100))], None),
                Some(response) => complete(text(format!("The model answered: {}", sampled_text(response)))),
            },
            "test_input_required_result_list_roots" => {
                match answer(cx, "client_roots").and_then(|r| r.get("roots")).and_then(Value::as_array) {
                    None => ask(&[("client_roots", roots())], None),
                    Some(roots) => {
                        let uris: Vec<&str> =
                            roots.iter().filter_map(|r| r.get("uri").and_then(Value::as_str)).collect();
                        complete(text(format!("Client roots: {}", uris.join(", "))))
                    }
                }
            }
            "test_input_required_result_request_state" => {
                let state_ok =
                    cx.input().and_then(|i| i.state.as_ref()).and_then(|s| s.get("step")) == Some(&json!("confirm"));
                match answer(cx, "confirm") {
                    Some(_) if state_ok => complete(text("state-ok: the request state was verified")),
                    _ => ask(
                        &[("confirm", elicit("Please confirm", json!({ "ok": { "type": "boolean" } }), &["ok"]))],
                        Some(json!({ "step": "confirm" })),
                    ),
                }
            }
            "test_input_required_result_multiple_inputs" => {
                match (accepted(cx, "user_name"), answer(cx, "greeting"), answer(cx, "client_roots")) {
                    (Some(name), Some(greeting), Some(_roots)) => complete(text(format!(
                        "Name: {}, greeting: {}",
                        name.get("name").and_then(Value::as_str).unwrap_or_default(),
                        sampled_text(greeting)
                    ))),
                    _ => ask(
                        &[
                            ("user_name", ask_name()),
                            ("greeting", sample("Generate a greeting", 50)),
                            ("client_roots", roots()),
                        ],
                        Some(json!({ "round": 1 })),
                    ),
                }
            }
            "test_input_required_result_multi_round" => match (round(cx), accepted(cx, "step1"), accepted(cx, "step2"))
            {
                (1, Some(step1), _) => {
                    let name = step1.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
                    ask(
                        &[(
                            "step2",
                            elicit(
                                "Step 2: What is your favorite color?",
                                json!({ "color": { "type": "string" } }),
                                &["color"],
                            ),
                        )],
                        Some(json!({ "round": 2, "name": name })),
                    )
                }
                (2, _, Some(step2)) => {
                    let state = cx.input().and_then(|i| i.state.as_ref());
                    let name = state.and_then(|s| s.get("name")).and_then(Value::as_str).unwrap_or_default();
                    let color = step2.get("color").and_then(Value::as_str).unwrap_or_default();
                    complete(text(format!("{name} likes {color}")))
                }
                _ => ask(
                    &[(
                        "step1",
                        elicit("Step 1: What is your name?", json!({ "name": { "type": "string" } }), &["name"]),
                    )],
                    Some(json!({ "round": 1 })),
                ),
            },
            "test_input_required_result_tampered_state" => match answer(cx, "confirm") {
                // Reaching here with an answer means the state opened: it was not tampered with.
                Some(_) if cx.input().is_some_and(|i| i.state.is_some()) => complete(text("state verified")),
                _ => ask(
                    &[("confirm", elicit("Please confirm", json!({ "ok": { "type": "boolean" } }), &["ok"]))],
                    Some(json!({ "issued": "tampered-state-check" })),
                ),
            },
            "test_input_required_result_capabilities" => {
                if cx.input().is_some() {
                    return complete(text("Thanks for the input"));
                }
                let mut requests = Vec::new();
                if cx.client_supports(ClientCapability::ElicitationForm) {
                    requests.push(("user_name", ask_name()));
                }
                if cx.client_supports(ClientCapability::Sampling) {
                    requests.push(("greeting", sample("Generate a greeting", 50)));
                }
                if cx.client_supports(ClientCapability::Roots) {
                    requests.push(("client_roots", roots()));
                }
                if requests.is_empty() {
                    complete(text("The client declared no capability to ask through"))
                } else {
                    ask(&requests, None)
                }
            }
            _ => Err(PluginError::InvalidParams(format!("Unknown tool: {name}"))),
        }
    }
}

fn elicitation_summary(response: &Value) -> String {
    let action = response.get("action").and_then(Value::as_str).unwrap_or("unknown");
    let content = response.get("content").cloned().unwrap_or_else(|| json!({}));
    format!("Elicitation completed: action={action}, content={content}")
}
