//! The in-process cost of one WASM tool call, without HTTP: the host's floor
//! (a module that only answers) against the units example, with and without
//! the pooling allocator. Explains the `plugin-call` figures.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::{Map, json};
use sha2::{Digest, Sha256};
use switchyard_core::{CallContext, Plugin};
use switchyard_wasm::{Runtime, RuntimeConfig, WasmPlugin, WasmSpec};

/// A module that answers every call at once: the host's own cost. It keeps
/// room for the input at 8192, as the guest SDK's modules do, so the host
/// writes it there without calling `switchyard_alloc`.
fn empty_module() -> Vec<u8> {
    let document = r#"{"tools":[],"content":[]}"#;
    format!(
        r#"(module (memory (export "memory") 1) (data (i32.const 2048) "{}")
  (func (export "switchyard_abi_version") (result i32) i32.const 1)
  (func (export "switchyard_alloc") (param i32) (result i32) i32.const 8192)
  (func (export "switchyard_input_buffer") (result i64) i64.const {input_buffer})
  (func (export "switchyard_describe") (result i64) i64.const {packed})
  (func (export "switchyard_call") (param i32 i32) (result i64) i64.const {packed}))"#,
        document.replace('"', r#"\""#),
        packed = (2048u64 << 32) | document.len() as u64,
        input_buffer = (8192u64 << 32) | 4096,
    )
    .into_bytes()
}

async fn per_call(
    runtime: &std::sync::Arc<Runtime>,
    bytes: Vec<u8>,
    tool: &str,
    calls: u32,
) -> anyhow::Result<Duration> {
    let sha: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    let module = runtime.compile(&sha, bytes).await?;
    let spec = WasmSpec::parse(&json!({"artifact": sha}), 256 << 20, &switchyard_wasm::HostDirs::default())?;
    let plugin = WasmPlugin::load(runtime, "measure", &module, spec).await?;
    let mut arguments = Map::new();
    arguments.insert("value".into(), json!(1));
    arguments.insert("from".into(), json!("mi"));
    arguments.insert("to".into(), json!("km"));
    let started = Instant::now();
    for _ in 0..calls {
        let cx = CallContext::detached(Instant::now() + Duration::from_secs(5));
        plugin.call_tool(tool, arguments.clone(), cx).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(started.elapsed() / calls)
}

pub(crate) async fn wasm_call(units: &Path, calls: u32, pooling_only: bool) -> anyhow::Result<()> {
    let units =
        std::fs::read(units).with_context(|| format!("reading {} (build the example first)", units.display()))?;
    println!("## one WASM tool call in process, no HTTP, {calls} sequential calls\n");
    println!("| allocator | empty module (host floor) | units_convert |");
    println!("|---|---|---|");
    let allocators: &[bool] = if pooling_only { &[true] } else { &[true, false] };
    for &pooling in allocators {
        let runtime = Runtime::new(RuntimeConfig { pooling, ..RuntimeConfig::default() })?;
        let floor = per_call(&runtime, empty_module(), "t", calls).await?;
        let convert = per_call(&runtime, units.clone(), "convert", calls).await?;
        let name = if pooling { "pooling" } else { "on demand" };
        println!("| {name} | {:.1} µs | {:.1} µs |", floor.as_secs_f64() * 1e6, convert.as_secs_f64() * 1e6);
    }
    Ok(())
}
