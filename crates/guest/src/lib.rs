//! Guest SDK for Switchyard WASM plugins.
//!
//! A plugin is a WebAssembly module built from Rust for `wasm32-wasip1`. The
//! author describes each tool and writes it as a plain function from its JSON
//! arguments to a result; [`export_plugin!`] generates the exports the host
//! calls. The host runs every call in a fresh instance, with a fuel or time
//! budget and a memory cap, and with no filesystem, network, environment or
//! clock beyond what the plugin's spec grants.
//!
//! ```ignore
//! use switchyard_guest::{Plugin, Tool, ToolResult, json, Value};
//!
//! fn plugin() -> Plugin {
//!     // The definition is built when the host asks for the tools, not on
//!     // every call (each call runs in a fresh instance that builds the plugin).
//!     Plugin::new().deferred_tool("shout", shout_tool, shout)
//! }
//!
//! fn shout_tool() -> Tool {
//!     Tool::new("shout", "Upper-cases a text.")
//!         .input_schema(json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}))
//! }
//!
//! fn shout(args: Value) -> Result<ToolResult, String> {
//!     let text = args["text"].as_str().ok_or("text must be a string")?;
//!     Ok(ToolResult::text(text.to_uppercase()))
//! }
//!
//! switchyard_guest::export_plugin!(plugin);
//! ```
//!
//! Build with `cargo build --release --target wasm32-wasip1` and a crate type
//! of `cdylib`; the module is `target/wasm32-wasip1/release/NAME.wasm`.
//!
//! A module whose tools allocate little may also make [`CallArena`] its
//! global allocator: small blocks are taken by moving a pointer, as an
//! instance lives one call (its docs say what that costs):
//!
//! ```ignore
//! #[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
//! #[global_allocator]
//! static ALLOCATOR: switchyard_guest::CallArena = switchyard_guest::CallArena;
//! ```
//!
//! # The interface (ABI version 1)
//!
//! The host and guest exchange UTF-8 JSON through the guest's linear memory.
//! A "packed" value is `(ptr << 32) | len` in a `u64`. The module exports:
//!
//! | export | signature | meaning |
//! |---|---|---|
//! | `memory` | memory | the linear memory |
//! | `switchyard_abi_version` | `() -> i32` | `1` (asked once, when the host loads the module) |
//! | `switchyard_alloc` | `(len: i32) -> i32` | a buffer of `len` bytes for the host to write input into |
//! | `switchyard_describe` | `() -> i64` | packed `{"tools": [Tool, …]}` (MCP `Tool` objects, names without the namespace) |
//! | `switchyard_call` | `(ptr: i32, len: i32) -> i64` | input `{"name": …, "arguments": {…}}`, output packed `CallToolResult` |
//!
//! A reactor's `_initialize`, when present, is called first. The host never
//! frees guest memory: an instance lives for one call. A trap (a panic, say),
//! running out of fuel or time, or exceeding the memory cap ends the call
//! with an `isError` result; the server is unaffected.

mod arena;

pub use arena::CallArena;
pub use serde_json::{Map, Value, json};

/// The interface version this SDK speaks.
pub const ABI_VERSION: i32 = 1;

/// A tool's description, as MCP `tools/list` shows it (before the host adds
/// the plugin's namespace to the name).
#[derive(Debug, Clone)]
pub struct Tool {
    definition: Map<String, Value>,
}

impl Tool {
    /// A tool taking an object with any properties; refine it with [`Tool::input_schema`].
    pub fn new(name: &str, description: &str) -> Self {
        let mut definition = Map::new();
        definition.insert("name".into(), json!(name));
        definition.insert("description".into(), json!(description));
        definition.insert("inputSchema".into(), json!({"type": "object"}));
        Self { definition }
    }

    /// The JSON Schema (2020-12) of the arguments; its root must be `"type": "object"`.
    #[must_use]
    pub fn input_schema(mut self, schema: Value) -> Self {
        self.definition.insert("inputSchema".into(), schema);
        self
    }

    /// The JSON Schema of `structuredContent`; the host checks results against it.
    #[must_use]
    pub fn output_schema(mut self, schema: Value) -> Self {
        self.definition.insert("outputSchema".into(), schema);
        self
    }

    /// A display title.
    #[must_use]
    pub fn title(mut self, title: &str) -> Self {
        self.definition.insert("title".into(), json!(title));
        self
    }

    /// MCP tool annotations (`readOnlyHint`, `idempotentHint`, …).
    #[must_use]
    pub fn annotations(mut self, annotations: Value) -> Self {
        self.definition.insert("annotations".into(), annotations);
        self
    }

    fn name(&self) -> &str {
        self.definition.get("name").and_then(Value::as_str).unwrap_or_default()
    }
}

/// What a tool returns: an MCP `CallToolResult`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResult {
    result: Map<String, Value>,
}

impl ToolResult {
    /// A text result.
    pub fn text(text: impl Into<String>) -> Self {
        Self::from_content(vec![json!({"type": "text", "text": text.into()})])
    }

    /// A structured result: `structuredContent` is `value`, and the content
    /// carries the same value as JSON text for clients that read only text.
    pub fn structured(value: Value) -> Self {
        // Not `value.to_string()`: `Display` writes through the formatting
        // machinery, which cost the units example's call a tenth of its work.
        let mut result = Self::text(serde_json::to_string(&value).unwrap_or_default());
        result.result.insert("structuredContent".into(), value);
        result
    }

    /// A tool-level failure the model should see (`isError: true`).
    pub fn error(message: impl Into<String>) -> Self {
        let mut result = Self::text(message);
        result.result.insert("isError".into(), json!(true));
        result
    }

    /// A result with these content blocks (MCP `ContentBlock` objects).
    pub fn from_content(content: Vec<Value>) -> Self {
        let mut result = Map::new();
        result.insert("content".into(), Value::Array(content));
        Self { result }
    }

    /// Says this result may be reused for `ttl_ms` milliseconds: by any
    /// caller when `public`, else by the same caller only. The host keeps
    /// it in its answer cache, for a tool annotated `readOnlyHint`, and
    /// answers the same call with it meanwhile, without running the module.
    #[must_use]
    pub fn reusable_for(mut self, ttl_ms: u64, public: bool) -> Self {
        self.result.insert("ttlMs".into(), json!(ttl_ms));
        self.result.insert("cacheScope".into(), json!(if public { "public" } else { "private" }));
        self
    }

    /// The `CallToolResult` object.
    pub fn into_value(self) -> Value {
        Value::Object(self.result)
    }
}

/// A tool's implementation: arguments in, a result or an error message out.
/// An `Err` becomes an `isError` result with that message.
pub type Handler = fn(Value) -> Result<ToolResult, String>;

/// How a tool's definition is had: built already, or built when the host
/// asks for the module's tools.
enum Definition {
    Built(Tool),
    Deferred(fn() -> Tool),
}

/// One tool: the name calls are dispatched by, its definition, its handler.
struct Entry {
    name: String,
    definition: Definition,
    handler: Handler,
}

/// The tools of one module.
#[derive(Default)]
pub struct Plugin {
    tools: Vec<Entry>,
}

impl Plugin {
    /// A plugin with no tools yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool.
    #[must_use]
    pub fn tool(mut self, tool: Tool, handler: Handler) -> Self {
        let name = tool.name().to_owned();
        self.tools.push(Entry { name, definition: Definition::Built(tool), handler });
        self
    }

    /// Adds the tool `name`, whose definition `define` builds only when the
    /// host asks for the module's tools (once, at registration).
    ///
    /// Every call runs in a fresh instance, so whatever [`export_plugin!`]'s
    /// function builds, it builds again for each call: with [`Plugin::tool`],
    /// every tool's description and schemas, though a call needs only the
    /// handler of one. Prefer this form for tools with schemas. The name
    /// given here is the one calls are dispatched by and the one published.
    #[must_use]
    pub fn deferred_tool(mut self, name: &str, define: fn() -> Tool, handler: Handler) -> Self {
        self.tools.push(Entry { name: name.to_owned(), definition: Definition::Deferred(define), handler });
        self
    }

    /// The `{"tools": […]}` document `switchyard_describe` returns.
    pub fn describe(&self) -> Value {
        let tools = self.tools.iter().map(|entry| {
            let mut definition = match &entry.definition {
                Definition::Built(tool) => tool.definition.clone(),
                Definition::Deferred(define) => define().definition,
            };
            definition.insert("name".into(), json!(entry.name));
            Value::Object(definition)
        });
        json!({"tools": tools.collect::<Vec<_>>()})
    }

    /// Runs the call described by `input` (`{"name", "arguments"}`), returning a `CallToolResult`.
    pub fn call(&self, input: &[u8]) -> Value {
        self.answer(input).0
    }

    /// The call's `CallToolResult`, and what is left of its parsed input,
    /// for [`abi::call`] to leave unfreed.
    fn answer(&self, input: &[u8]) -> (Value, Value) {
        let mut input: Value = match serde_json::from_slice(input) {
            Ok(input) => input,
            Err(e) => {
                return (ToolResult::error(format!("malformed call from the host: {e}")).into_value(), Value::Null);
            }
        };
        let arguments = input.get_mut("arguments").map_or_else(|| json!({}), Value::take);
        let name = input.get("name").and_then(Value::as_str).unwrap_or_default();
        let result = match self.tools.iter().find(|entry| entry.name == name) {
            Some(entry) => (entry.handler)(arguments).unwrap_or_else(ToolResult::error).into_value(),
            None => ToolResult::error(format!("unknown tool {name}")).into_value(),
        };
        (result, input)
    }
}

/// Generates the module's exports from a function returning the [`Plugin`].
///
/// The function runs for every call (each call gets a fresh instance), so
/// register tools with [`Plugin::deferred_tool`] to keep their definitions
/// out of that path.
///
/// ```ignore
/// switchyard_guest::export_plugin!(plugin);
/// ```
#[macro_export]
macro_rules! export_plugin {
    ($plugin:path) => {
        #[allow(unsafe_code, reason = "the export names are the interface the host links against")]
        #[doc = "The guest interface version."]
        #[unsafe(no_mangle)]
        pub extern "C" fn switchyard_abi_version() -> i32 {
            $crate::ABI_VERSION
        }

        #[allow(unsafe_code, reason = "the export names are the interface the host links against")]
        #[doc = "A buffer for the host's input."]
        #[unsafe(no_mangle)]
        pub extern "C" fn switchyard_alloc(len: i32) -> i32 {
            $crate::abi::alloc(len)
        }

        #[allow(unsafe_code, reason = "the export names are the interface the host links against")]
        #[doc = "The module's tools."]
        #[unsafe(no_mangle)]
        pub extern "C" fn switchyard_describe() -> i64 {
            $crate::abi::output(&$plugin().describe())
        }

        #[allow(unsafe_code, reason = "the export names are the interface the host links against")]
        #[doc = "Runs one tool call."]
        #[unsafe(no_mangle)]
        pub extern "C" fn switchyard_call(ptr: i32, len: i32) -> i64 {
            $crate::abi::call($plugin(), ptr, len)
        }
    };
}

/// The memory glue behind [`export_plugin!`]; not for direct use.
#[doc(hidden)]
pub mod abi {
    use serde_json::Value;

    /// A buffer the host writes `len` bytes of input into. Leaked on purpose:
    /// [`input`] takes it back.
    pub fn alloc(len: i32) -> i32 {
        let len = usize::try_from(len).unwrap_or(0);
        let mut buffer = Vec::<u8>::with_capacity(len);
        let ptr = buffer.as_mut_ptr();
        std::mem::forget(buffer);
        ptr as usize as i32
    }

    /// Takes back the buffer [`alloc`] gave out, now holding `len` bytes of input.
    pub fn input(ptr: i32, len: i32) -> Vec<u8> {
        let len = usize::try_from(len).unwrap_or(0);
        if len == 0 {
            return Vec::new();
        }
        #[allow(unsafe_code, reason = "the host wrote exactly `len` bytes into the buffer `alloc(len)` returned")]
        // SAFETY: `ptr` came from `alloc(len)` with capacity `len`, and the host
        // initialised all `len` bytes before calling in.
        unsafe {
            Vec::from_raw_parts(ptr as usize as *mut u8, len, len)
        }
    }

    /// Runs one call for the host and returns its packed output.
    ///
    /// Nothing the call built is freed: the instance ends with the call, and
    /// its memory with it. Dropping the parsed input, the result, the plugin
    /// and the input's buffer first was a fifth of the units example's work
    /// in the guest (callgrind, natively), for memory nobody would use again.
    pub fn call(plugin: super::Plugin, ptr: i32, len: i32) -> i64 {
        let input = input(ptr, len);
        let (result, rest) = plugin.answer(&input);
        let packed = output(&result);
        std::mem::forget((plugin, input, result, rest));
        packed
    }

    /// Serialises `value` and leaks it for the host to read; the instance
    /// ends after the call, so nothing needs freeing.
    pub fn output(value: &Value) -> i64 {
        // Most results are a few hundred bytes: start there rather than grow
        // by doubling, each step a copy.
        let mut bytes = Vec::with_capacity(512);
        if serde_json::to_writer(&mut bytes, value).is_err() {
            bytes.clear();
        }
        let len = bytes.len() as u64;
        let ptr = bytes.as_mut_ptr() as usize as u64;
        std::mem::forget(bytes);
        ((ptr << 32) | (len & 0xffff_ffff)) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn double(args: Value) -> Result<ToolResult, String> {
        let n = args["n"].as_f64().ok_or("n must be a number")?;
        Ok(ToolResult::structured(json!({"value": n * 2.0})))
    }

    #[test]
    fn dispatches_by_name_and_turns_errors_into_is_error() {
        let plugin = Plugin::new().tool(Tool::new("double", "Doubles n."), double);
        assert_eq!(plugin.describe()["tools"][0]["name"], "double");
        let ok = plugin.call(br#"{"name":"double","arguments":{"n":2}}"#);
        assert_eq!(ok["structuredContent"]["value"], 4.0);
        let bad = plugin.call(br#"{"name":"double","arguments":{}}"#);
        assert_eq!(bad["isError"], true);
        assert_eq!(bad["content"][0]["text"], "n must be a number");
        assert_eq!(plugin.call(br#"{"name":"nope"}"#)["isError"], true);
        assert_eq!(plugin.call(b"not json")["isError"], true);
    }

    fn never_defined() -> Tool {
        panic!("a call must not build definitions")
    }

    fn defined() -> Tool {
        Tool::new("double", "Doubles n.").input_schema(json!({"type": "object", "required": ["n"]}))
    }

    #[test]
    fn deferred_definitions_are_built_to_describe_never_to_call() {
        let calling = Plugin::new().deferred_tool("double", never_defined, double);
        assert_eq!(calling.call(br#"{"name":"double","arguments":{"n":2}}"#)["structuredContent"]["value"], 4.0);
        let describing = Plugin::new().deferred_tool("double", defined, double).tool(Tool::new("eager", "E."), double);
        let tools = describing.describe();
        assert_eq!(tools["tools"][0]["name"], "double");
        assert_eq!(tools["tools"][0]["inputSchema"]["required"][0], "n");
        assert_eq!(tools["tools"][1]["name"], "eager");
    }
}
