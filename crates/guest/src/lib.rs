//! Guest SDK for Switchyard WASM plugins.
//!
//! A plugin is a WebAssembly module built from Rust for `wasm32-wasip1`. The
//! author describes each tool and writes it as a plain function from its
//! arguments to a result; [`export_plugin!`] generates the exports the host
//! calls. The host runs every call in a fresh instance, with a fuel or time
//! budget and a memory cap, and with no filesystem, network, environment or
//! clock beyond what the plugin's spec grants.
//!
//! A tool's function takes its arguments as a type deriving
//! `serde::Deserialize`, read straight from the call's JSON, or as a
//! [`Value`] to read by hand; a structured result may be any type deriving
//! `serde::Serialize`, or a `Value`. The typed forms build no map, a large
//! part of what a small tool's call costs in the guest. They need serde's
//! derive in the plugin's crate: `serde = { version = "1", features =
//! ["derive"] }` beside `switchyard-guest`.
//!
//! ```ignore
//! use serde::{Deserialize, Serialize};
//! use switchyard_guest::{Plugin, Tool, ToolResult, json, Value};
//!
//! fn plugin() -> Plugin {
//!     // The definitions are built when the host asks for the tools, not on
//!     // every call (each call runs in a fresh instance that builds the plugin).
//!     Plugin::new().deferred_tool("shout", shout_tool, shout).deferred_tool("count", count_tool, count)
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
//! fn count_tool() -> Tool {
//!     Tool::new("count", "Counts the words of a text.")
//!         .input_schema(json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}))
//!         .output_schema(json!({"type": "object", "properties": {"words": {"type": "integer"}}, "required": ["words"]}))
//! }
//!
//! #[derive(Deserialize)]
//! struct Text {
//!     text: String,
//! }
//!
//! #[derive(Serialize)]
//! struct Words {
//!     words: usize,
//! }
//!
//! fn count(args: Text) -> Result<ToolResult, String> {
//!     Ok(ToolResult::structured(Words { words: args.text.split_whitespace().count() }))
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
//! | `switchyard_input_buffer` (optional) | `() -> i64` | packed, its low half the capacity: where the host may write a call's input without calling `switchyard_alloc` (asked once, at load) |
//!
//! The optional export only spares the host a call. A host that knows it
//! writes an input that fits there and calls `switchyard_call` with that
//! address; a longer input, or a host that does not know it, goes through
//! `switchyard_alloc`, which stays required. A module with it runs on any
//! host of version 1, and a module without it on this one. A module written
//! without this SDK that exports it must keep the buffer at the same address
//! in every fresh instance, within the memory it has when `_initialize` has
//! run, and for nothing else: the host asks once and a buffer outside that
//! memory fails the load.
//!
//! A reactor's `_initialize`, when present, is called first. The host never
//! frees guest memory: an instance lives for one call. A trap (a panic, say),
//! running out of fuel or time, or exceeding the memory cap ends the call
//! with an `isError` result; the server is unaffected.

#[doc(hidden)]
pub mod abi;
mod arena;
mod result;

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

pub use arena::CallArena;
pub use result::ToolResult;
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

/// A tool's implementation: its arguments in, read as `A`, a result or an
/// error message out. An `Err` becomes an `isError` result with that message.
///
/// `A` is [`Value`] for a tool that reads its arguments by hand, or any type
/// deriving `serde::Deserialize`, which the arguments are read into straight
/// from the call's JSON: no map is built for them, and a call whose arguments
/// do not fit the type gets an `isError` result with serde's reason (a
/// missing member by name; a value of the wrong type by what was expected and
/// where, counted within the arguments).
///
/// [`Plugin::tool`] and [`Plugin::deferred_tool`] take any function or
/// closure of this shape, and `A` from it: a function names it in its
/// signature, and a closure must name it too (`|args: Value| …`), as nothing
/// else tells which type to read. A `Handler`, a function pointer, is taken
/// too and called through the pointer; a function given by name is called
/// directly, which in WASM is cheaper (see `run`).
pub type Handler<A = Value> = fn(A) -> Result<ToolResult, String>;

/// A handler with its argument type erased: it reads the arguments' JSON text.
type Run = Box<dyn Fn(&str) -> Result<ToolResult, String>>;

/// `handler` behind a [`Run`]. Given a function by name, `H` is that
/// function's own type, of no size: the box allocates nothing and the
/// closure calls the function directly. A call through a pointer (the box's
/// own, to find the called tool, is one) is a `call_indirect` in WASM, whose
/// table slot the host fills in on its first use in each instance, that is
/// on every call (#18: about 850 instructions); through a function pointer
/// kept here, a call would make two.
fn run<A, H>(handler: H) -> Run
where
    A: DeserializeOwned + 'static,
    H: Fn(A) -> Result<ToolResult, String> + 'static,
{
    Box::new(move |arguments| match serde_json::from_str(arguments) {
        Ok(arguments) => handler(arguments),
        Err(e) => Err(format!("invalid arguments: {e}")),
    })
}

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
    run: Run,
}

/// The tools of one module.
#[derive(Default)]
pub struct Plugin {
    tools: Vec<Entry>,
}

/// What the host sends for a call: `{"name": …, "arguments": {…}}`. The
/// arguments are left as the text they came as, for the called tool's
/// handler to read as its own type.
#[derive(Deserialize)]
struct CallInput<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

impl Plugin {
    /// A plugin with no tools yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool. Its handler takes a [`Value`], or a type deriving
    /// `serde::Deserialize` (see [`Handler`]).
    #[must_use]
    pub fn tool<A, H>(mut self, tool: Tool, handler: H) -> Self
    where
        A: DeserializeOwned + 'static,
        H: Fn(A) -> Result<ToolResult, String> + 'static,
    {
        let name = tool.name().to_owned();
        self.tools.push(Entry { name, definition: Definition::Built(tool), run: run(handler) });
        self
    }

    /// Adds the tool `name`, whose definition `define` builds only when the
    /// host asks for the module's tools (once, at registration). Its handler
    /// takes a [`Value`], or a type deriving `serde::Deserialize` (see
    /// [`Handler`]).
    ///
    /// Every call runs in a fresh instance, so whatever [`export_plugin!`]'s
    /// function builds, it builds again for each call: with [`Plugin::tool`],
    /// every tool's description and schemas, though a call needs only the
    /// handler of one. Prefer this form for tools with schemas. The name
    /// given here is the one calls are dispatched by and the one published.
    #[must_use]
    pub fn deferred_tool<A, H>(mut self, name: &str, define: fn() -> Tool, handler: H) -> Self
    where
        A: DeserializeOwned + 'static,
        H: Fn(A) -> Result<ToolResult, String> + 'static,
    {
        self.tools.push(Entry { name: name.to_owned(), definition: Definition::Deferred(define), run: run(handler) });
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
        self.answer(input).into_value()
    }

    /// The call's result. Only the envelope is read here; the arguments are
    /// read by the called tool's handler alone, as the type it takes.
    fn answer(&self, input: &[u8]) -> ToolResult {
        let input: CallInput<'_> = match serde_json::from_slice(input) {
            Ok(input) => input,
            Err(e) => return ToolResult::error(format!("malformed call from the host: {e}")),
        };
        let arguments = input.arguments.map_or("{}", RawValue::get);
        match self.tools.iter().find(|entry| entry.name == input.name) {
            Some(entry) => (entry.run)(arguments).unwrap_or_else(ToolResult::error),
            None => ToolResult::error(format!("unknown tool {}", input.name)),
        }
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
        #[doc = "Where the host may write a call's input without asking for a buffer."]
        #[unsafe(no_mangle)]
        pub extern "C" fn switchyard_input_buffer() -> i64 {
            $crate::abi::input_buffer()
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

    #[derive(Deserialize)]
    struct Scale {
        n: f64,
        unit: String,
        #[serde(default)]
        by: Option<f64>,
    }

    fn scale(args: Scale) -> Result<ToolResult, String> {
        #[derive(serde::Serialize)]
        struct Scaled {
            value: f64,
            unit: String,
        }
        Ok(ToolResult::structured(Scaled { value: args.n * args.by.unwrap_or(2.0), unit: args.unit }))
    }

    #[test]
    fn a_typed_handler_gets_its_arguments_read_into_its_type() {
        let plugin =
            Plugin::new().deferred_tool("scale", never_defined, scale).deferred_tool("double", never_defined, double);
        let ok = plugin.call(br#"{"name":"scale","arguments":{"unit":"m","n":1.5,"extra":[1,{"a":2}]}}"#);
        assert_eq!(ok["structuredContent"], json!({"value": 3.0, "unit": "m"}));
        // The name may come escaped, and after the arguments; the arguments not at all.
        let escaped = plugin.call(br#"{"arguments":{"n":1,"unit":"\u00b5m","by":3},"name":"sc\u0061le"}"#);
        assert_eq!(escaped["structuredContent"], json!({"value": 3.0, "unit": "\u{b5}m"}));
        assert_eq!(plugin.call(br#"{"name":"double","arguments":{"n":4}}"#)["structuredContent"]["value"], 8.0);
        // What the host is given: the result written from its parts.
        let mut out = Vec::new();
        plugin.answer(br#"{"name":"scale","arguments":{"n":0.5,"unit":"m"}}"#).write(&mut out);
        assert_eq!(
            String::from_utf8_lossy(&out),
            r#"{"content":[{"type":"text","text":"{\"value\":1.0,\"unit\":\"m\"}"}],"structuredContent":{"value":1.0,"unit":"m"}}"#
        );
        // A handler taking a `Value` is given `{}` for absent or null arguments.
        for input in [&br#"{"name":"double","arguments":null}"#[..], br#"{"name":"double"}"#] {
            assert_eq!(plugin.call(input)["content"][0]["text"], "n must be a number");
        }
        for (input, said) in [
            (&br#"{"name":"scale","arguments":{"n":"one","unit":"m"}}"#[..], "invalid arguments: invalid type: string"),
            (br#"{"name":"scale","arguments":{"n":1}}"#, "invalid arguments: missing field `unit`"),
            (br#"{"name":"scale"}"#, "invalid arguments: missing field `n`"),
            (br#"{"name":"scale","arguments":null}"#, "invalid arguments: missing field `n`"),
            (br#"{"arguments":{}}"#, "malformed call from the host: missing field `name`"),
            (br#"{"name":"scale","arguments":{"n":1,"unit":"m"}"#, "malformed call from the host"),
        ] {
            let result = plugin.call(input);
            assert_eq!(result["isError"], true, "{}", String::from_utf8_lossy(input));
            let text = result["content"][0]["text"].as_str().unwrap_or_default();
            assert!(text.starts_with(said), "{text:?} for {}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn a_closure_is_a_handler_when_it_names_its_argument_type() {
        let factor = 3.0;
        let plugin = Plugin::new()
            .tool(Tool::new("triple", "Triples n."), move |args: Scale| {
                Ok(ToolResult::structured(json!({"value": args.n * factor, "unit": args.unit})))
            })
            .deferred_tool("echo", never_defined, |args: Value| Ok(ToolResult::text(args.to_string())));
        let tripled = plugin.call(br#"{"name":"triple","arguments":{"n":2,"unit":"m"}}"#);
        assert_eq!(tripled["structuredContent"], json!({"value": 6.0, "unit": "m"}));
        assert_eq!(plugin.call(br#"{"name":"echo","arguments":{"a":1}}"#)["content"][0]["text"], r#"{"a":1}"#);
    }
}
