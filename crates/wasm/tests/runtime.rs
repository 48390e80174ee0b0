//! The WASM host against hand-written modules: the guest interface, and every
//! way a hostile module can misbehave (endless loop, memory bomb, fuel burn,
//! trap, exit), each ending as an `isError` result while the runtime goes on.

// Helpers here are test code too; clippy only knows #[test] functions as such.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use switchyard_core::{CallContext, Outcome, Plugin, PluginError};
use switchyard_wasm::{LoadError, Runtime, RuntimeConfig, WasmPlugin, WasmSpec};

const DESCRIBE: &str = r#"{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}"#;
const RESULT: &str = r#"{"content":[{"type":"text","text":"ok"}]}"#;
/// The result `seen`, beside [`RESULT`]'s `ok`.
const SEEN_RESULT: &str = r#"{"content":[{"type":"text","text":"seen"}]}"#;

/// A module speaking ABI 1 whose `switchyard_call` body is `call_body`.
fn module(call_body: &str) -> Vec<u8> {
    abi_module(r#"(import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))"#, "", call_body)
}

/// A module speaking ABI 1 that imports `imports`, holds `data` beside the
/// tool list (1024) and the results `ok` (2048) and `seen` (3072), and whose
/// `switchyard_call` body is `call_body`.
fn abi_module(imports: &str, data: &str, call_body: &str) -> Vec<u8> {
    let escape = |s: &str| s.replace('"', "\\\"");
    format!(
        r#"(module
  {imports}
  (memory (export "memory") 1)
  (data (i32.const 1024) "{describe}")
  (data (i32.const 2048) "{result}")
  (data (i32.const 3072) "{seen}")
  {data}
  (func (export "switchyard_abi_version") (result i32) i32.const 1)
  (func (export "switchyard_alloc") (param i32) (result i32) i32.const 8192)
  (func (export "switchyard_describe") (result i64) i64.const {describe_packed})
  (func (export "switchyard_call") (param i32 i32) (result i64) {call_body}))"#,
        describe = escape(DESCRIBE),
        result = escape(RESULT),
        seen = escape(SEEN_RESULT),
        describe_packed = (1024u64 << 32) | DESCRIBE.len() as u64,
    )
    .into_bytes()
}

/// A call body answering [`RESULT`], `ok`, as [`abi_module`] holds it.
fn ok_body() -> String {
    format!("i64.const {}", (2048u64 << 32) | RESULT.len() as u64)
}

/// A call body answering [`SEEN_RESULT`], `seen`, as [`abi_module`] holds it.
fn seen_body() -> String {
    format!("i64.const {}", (3072u64 << 32) | SEEN_RESULT.len() as u64)
}

fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn runtime() -> Arc<Runtime> {
    Runtime::new(RuntimeConfig { max_instances: 4, max_memory_bytes: 64 << 20, pooling: true }).unwrap()
}

/// `bytes` loaded under a spec of `members` and the artifact's digest; a
/// directory it grants must lie in `host_dirs`.
async fn load_spec(
    runtime: &Arc<Runtime>,
    bytes: Vec<u8>,
    mut members: Value,
    host_dirs: &switchyard_wasm::HostDirs,
) -> Result<WasmPlugin, LoadError> {
    let sha = digest(&bytes);
    let module = runtime.compile(&sha, bytes).await?;
    members["artifact"] = json!(sha);
    let spec = WasmSpec::parse(&members, 64 << 20, host_dirs).unwrap();
    WasmPlugin::load(runtime, "plg_test", &module, spec).await
}

async fn load(runtime: &Arc<Runtime>, bytes: Vec<u8>, limits: Value) -> Result<WasmPlugin, LoadError> {
    load_spec(runtime, bytes, json!({"limits": limits}), &switchyard_wasm::HostDirs::default()).await
}

async fn call(plugin: &WasmPlugin) -> Result<Outcome, PluginError> {
    plugin.call_tool("t", Map::new(), CallContext::detached(Instant::now() + Duration::from_secs(30))).await
}

/// The text of a complete result's first content block.
fn text_of(outcome: Result<Outcome, PluginError>) -> String {
    match outcome {
        Ok(Outcome::Complete(result)) => result["content"][0]["text"].as_str().unwrap_or_default().to_owned(),
        other => panic!("expected a result, got {other:?}"),
    }
}

fn tool_error(result: Result<Outcome, PluginError>) -> String {
    match result {
        Err(PluginError::Tool(message)) => message,
        other => panic!("expected a tool error, got {other:?}"),
    }
}

#[tokio::test]
async fn describes_and_calls() {
    let runtime = runtime();
    let plugin = load(&runtime, module(&ok_body()), json!({})).await.unwrap();
    assert_eq!(plugin.tools(), vec![json!({"name": "t", "inputSchema": {"type": "object"}})]);
    let Outcome::Complete(result) = call(&plugin).await.unwrap() else { panic!("not complete") };
    assert_eq!(result["content"][0]["text"], "ok");
}

#[tokio::test]
async fn a_tools_call_takes_the_result_as_the_module_wrote_it() {
    let runtime = runtime();
    let plugin = load(&runtime, module(&ok_body()), json!({})).await.unwrap();
    let cx = CallContext::detached(Instant::now() + Duration::from_secs(30)).taking_result_text();
    let Outcome::CompleteText(text) = plugin.call_tool("t", Map::new(), cx).await.unwrap() else { panic!("not text") };
    assert_eq!(text.as_str(), RESULT);
    let Outcome::Complete(value) = call(&plugin).await.unwrap() else { panic!("not complete") };
    assert_eq!(text.into_value(), value, "the same result either way");
}

#[tokio::test]
async fn an_endless_loop_times_out_and_others_keep_running() {
    let runtime = runtime();
    let spinning =
        load(&runtime, module("(loop $l (br $l)) i64.const 0"), json!({"timeout_ms": 2000, "fuel": u64::MAX / 2}))
            .await
            .unwrap();
    let healthy = load(&runtime, module(&ok_body()), json!({})).await.unwrap();
    let started = Instant::now();
    let (spun, fine) = tokio::join!(call(&spinning), async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let begun = Instant::now();
        (call(&healthy).await, begun.elapsed())
    });
    assert!(tool_error(spun).contains("deadline"));
    assert!(started.elapsed() < Duration::from_secs(4), "stopped after {:?}", started.elapsed());
    assert!(fine.0.is_ok());
    assert!(fine.1 < Duration::from_millis(1000), "a healthy call waited {:?} behind a spinning one", fine.1);
}

#[tokio::test]
async fn a_memory_bomb_hits_the_cap() {
    let runtime = runtime();
    let bomb = "(loop $l (drop (memory.grow (i32.const 16))) (br $l)) i64.const 0";
    let plugin = load(&runtime, module(bomb), json!({"memory_mib": 4})).await.unwrap();
    assert!(tool_error(call(&plugin).await).contains("memory cap of 4 MiB"));
}

#[tokio::test]
async fn fuel_runs_out() {
    let runtime = runtime();
    let plugin = load(&runtime, module("(loop $l (br $l)) i64.const 0"), json!({"fuel": 100000})).await.unwrap();
    assert!(tool_error(call(&plugin).await).contains("ran out of fuel"));
}

#[tokio::test]
async fn traps_and_exits_are_tool_errors() {
    let runtime = runtime();
    let trapping = load(&runtime, module("unreachable"), json!({})).await.unwrap();
    assert!(tool_error(call(&trapping).await).contains("trapped"));
    let exiting = load(&runtime, module("(call $exit (i32.const 3)) i64.const 0"), json!({})).await.unwrap();
    assert!(tool_error(call(&exiting).await).contains("exited with status 3"));
    // Output pointing outside memory is caught, not read.
    let wild = load(&runtime, module(&format!("i64.const {}", (70_000u64 << 32) | 10)), json!({})).await.unwrap();
    assert!(call(&wild).await.is_err());
    // After all that, the runtime still serves.
    let healthy = load(&runtime, module(&ok_body()), json!({})).await.unwrap();
    assert!(call(&healthy).await.is_ok());
}

#[tokio::test]
async fn bad_modules_are_refused_at_load() {
    let runtime = runtime();
    let bytes = module(&ok_body());
    let wrong = runtime.compile(&digest(b"something else"), bytes).await.unwrap_err();
    assert!(matches!(wrong, LoadError::DigestMismatch { .. }), "{wrong}");
    let garbage = b"\0asm garbage".to_vec();
    assert!(matches!(runtime.compile(&digest(&garbage), garbage).await, Err(LoadError::Invalid(_))));
    let no_interface = b"(module (memory (export \"memory\") 1))".to_vec();
    let err = load(&runtime, no_interface, json!({})).await.unwrap_err();
    assert!(err.to_string().contains("missing export switchyard_abi_version"), "{err}");
    let imports_more = br#"(module (import "env" "socket" (func)) (memory (export "memory") 1)
        (func (export "switchyard_abi_version") (result i32) i32.const 1)
        (func (export "switchyard_alloc") (param i32) (result i32) i32.const 0)
        (func (export "switchyard_describe") (result i64) i64.const 0)
        (func (export "switchyard_call") (param i32 i32) (result i64) i64.const 0))"#
        .to_vec();
    assert!(matches!(load(&runtime, imports_more, json!({})).await, Err(LoadError::Invalid(_))));
    // The version is asked once, at load: a module of another one never loads.
    let later_abi = String::from_utf8(module(&ok_body())).unwrap().replace(
        r#"(export "switchyard_abi_version") (result i32) i32.const 1"#,
        r#"(export "switchyard_abi_version") (result i32) i32.const 2"#,
    );
    let err = load(&runtime, later_abi.into_bytes(), json!({})).await.unwrap_err();
    assert!(err.to_string().contains("ABI version 2; this host speaks 1"), "{err}");
    let wrong_signature = String::from_utf8(module(&ok_body()))
        .unwrap()
        .replace(r#"(export "switchyard_describe") (result i64)"#, r#"(export "switchyard_describe") (result i32)"#)
        .replace(&format!("i64.const {}", (1024u64 << 32) | DESCRIBE.len() as u64), "i32.const 0");
    let err = load(&runtime, wrong_signature.into_bytes(), json!({})).await.unwrap_err();
    assert!(matches!(err, LoadError::Describe(_)) && err.to_string().contains("export switchyard_describe"), "{err}");
    // An `_initialize` that is no constructor is left alone, as before.
    let odd_initialize = String::from_utf8(module(&ok_body())).unwrap().replace(
        "(memory (export \"memory\") 1)",
        "(memory (export \"memory\") 1) (global (export \"_initialize\") i32 (i32.const 0))",
    );
    let plugin = load(&runtime, odd_initialize.into_bytes(), json!({})).await.unwrap();
    assert!(call(&plugin).await.is_ok());
}

/// Every call gets a fresh instance, even when slots, stacks and memory
/// images are reused underneath: what one call leaves in linear memory, in a
/// mutable global or in grown memory, the next never sees, whether the calls
/// run one after another or at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_call_sees_what_another_left() {
    let escape = |s: &str| s.replace('"', "\\\"");
    let bytes = format!(
        r#"(module
  (memory (export "memory") 1)
  (global $touched (mut i32) (i32.const 0))
  (data (i32.const 1024) "{describe}")
  (data (i32.const 2048) "{fresh}")
  (data (i32.const 3072) "{seen}")
  (func (export "switchyard_abi_version") (result i32) i32.const 1)
  (func (export "switchyard_alloc") (param i32) (result i32) i32.const 8192)
  (func (export "switchyard_describe") (result i64) i64.const {describe_packed})
  (func (export "switchyard_call") (param i32 i32) (result i64)
    (if (result i64)
      (i32.or (i32.or (i32.load (i32.const 4096)) (global.get $touched)) (i32.ne (memory.size) (i32.const 1)))
      (then i64.const {seen_packed})
      (else
        (i32.store (i32.const 4096) (i32.const 7))
        (global.set $touched (i32.const 1))
        (drop (memory.grow (i32.const 3)))
        (i32.store (i32.const 100000) (i32.const 9))
        i64.const {fresh_packed}))))"#,
        describe = escape(DESCRIBE),
        fresh = escape(RESULT),
        seen = escape(SEEN_RESULT),
        describe_packed = (1024u64 << 32) | DESCRIBE.len() as u64,
        fresh_packed = (2048u64 << 32) | RESULT.len() as u64,
        seen_packed = (3072u64 << 32) | SEEN_RESULT.len() as u64,
    )
    .into_bytes();
    let runtime = runtime();
    let plugin = Arc::new(load(&runtime, bytes, json!({})).await.unwrap());
    for _ in 0..20 {
        assert_eq!(text_of(call(&plugin).await), "ok");
    }
    let at_once: Vec<_> = (0..40)
        .map(|_| {
            let plugin = Arc::clone(&plugin);
            tokio::spawn(async move { call(&plugin).await })
        })
        .collect();
    for handle in at_once {
        assert_eq!(text_of(handle.await.unwrap()), "ok");
    }
}

/// What [`wasi_module`]'s guest may write to stderr.
const SAID: &str = "the guest said so";

/// A module whose call runs `call_body`, with WASI's `fd_write` and
/// `environ_sizes_get` imported, [`SAID`] at 4200 and an iovec of it at
/// 4096, and the results `ok` (2048) and `seen` (3072) to return.
fn wasi_module(call_body: &str) -> Vec<u8> {
    let imports = r#"(import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_sizes_get" (func $environ_sizes (param i32 i32) (result i32)))"#;
    let data = format!(
        r#"(data (i32.const 4096) "\68\10\00\00\{said_len:02x}\00\00\00")
  (data (i32.const 4200) "{SAID}")"#,
        said_len = SAID.len(),
    );
    abi_module(imports, &data, call_body)
}

/// [`wasi_module`] of `call_body`, loaded with `grants`.
async fn load_granted(runtime: &Arc<Runtime>, call_body: &str, grants: Value) -> WasmPlugin {
    load_with(runtime, wasi_module(call_body), grants, &switchyard_wasm::HostDirs::default()).await
}

/// `bytes` loaded with `grants`, which may name directories in `host_dirs`.
async fn load_with(
    runtime: &Arc<Runtime>,
    bytes: Vec<u8>,
    grants: Value,
    host_dirs: &switchyard_wasm::HostDirs,
) -> WasmPlugin {
    load_spec(runtime, bytes, json!({"grants": grants}), host_dirs).await.unwrap()
}

#[tokio::test]
async fn wasi_is_there_when_a_call_first_asks_for_it_and_grants_only_what_the_spec_says() {
    let runtime = runtime();
    let granting = json!({"env": {"UNITS": "metric"}});
    // What the module writes to stderr before it traps explains the trap,
    // whether its WASI context is made at that write or before the run.
    let said = "(drop (call $fd_write (i32.const 2) (i32.const 4096) (i32.const 1) (i32.const 4104))) unreachable";
    for grants in [json!({}), granting.clone()] {
        let error = tool_error(call(&load_granted(&runtime, said, grants.clone()).await).await);
        assert!(error.contains("trapped") && error.contains(SAID), "{grants}: {error}");
    }
    // `ok` when the module sees exactly `expected` environment variables, else `seen`.
    let counting = |expected: u32| {
        format!(
            "(drop (call $environ_sizes (i32.const 4400) (i32.const 4404))) \
             (if (result i64) (i32.eq (i32.load (i32.const 4400)) (i32.const {expected})) \
             (then {ok}) (else {seen}))",
            ok = ok_body(),
            seen = seen_body(),
        )
    };
    let ungranted = load_granted(&runtime, &counting(0), json!({})).await;
    assert_eq!(text_of(call(&ungranted).await), "ok", "no variable without a grant");
    let granted = load_granted(&runtime, &counting(1), granting).await;
    assert_eq!(text_of(call(&granted).await), "ok", "the granted variable, and it alone");
}

#[tokio::test]
async fn a_granted_directory_is_there_from_the_start_and_checked_before_each_run() {
    let runtime = runtime();
    let allowed = tempfile::tempdir().unwrap();
    let granted_dir = allowed.path().join("data");
    std::fs::create_dir(&granted_dir).unwrap();
    let host_dirs = switchyard_wasm::HostDirs { readable: vec![allowed.path().to_owned()], writable: Vec::new() };
    // `ok` when descriptor 3 is a preopened directory, else `seen`.
    let bytes = abi_module(
        r#"(import "wasi_snapshot_preview1" "fd_prestat_get" (func $prestat (param i32 i32) (result i32)))"#,
        "",
        &format!(
            "(if (result i64) (i32.eqz (call $prestat (i32.const 3) (i32.const 4400))) \
             (then {ok}) (else {seen}))",
            ok = ok_body(),
            seen = seen_body(),
        ),
    );
    let ungranted = load_with(&runtime, bytes.clone(), json!({}), &host_dirs).await;
    assert_eq!(text_of(call(&ungranted).await), "seen", "no directory without a grant");
    let grants = json!({"dirs": [{"host": granted_dir.to_str().unwrap(), "guest": "/data"}]});
    let granted = load_with(&runtime, bytes, grants, &host_dirs).await;
    assert_eq!(text_of(call(&granted).await), "ok", "the granted directory");
    // A link planted in its place since registration fails the call before the module runs.
    std::fs::remove_dir(&granted_dir).unwrap();
    std::os::unix::fs::symlink("/", &granted_dir).unwrap();
    let error = tool_error(call(&granted).await);
    assert!(error.contains("granted directory /data"), "{error}");
}

/// A module that keeps room for a call's input at 16384, `capacity` bytes of
/// it (its `switchyard_input_buffer` says so, packed at `at`), whose
/// `switchyard_alloc` gives 8192 and remembers it was asked. A call answers
/// `ok` when its input (a JSON object: its first byte is checked) is at 16384
/// and nothing was allocated, `seen` when it is at 8192, and traps otherwise.
fn buffered_module(at: u64, capacity: u64, buffer_signature: &str) -> Vec<u8> {
    let bytes = abi_module(
        r#"(global $allocated (mut i32) (i32.const 0))"#,
        &format!(
            r#"(func (export "switchyard_input_buffer") {buffer_signature} i64.const {packed})"#,
            packed = (at << 32) | capacity,
        ),
        &format!(
            r#"(if (i32.ne (i32.load8_u (local.get 0)) (i32.const 123)) (then unreachable))
    (if (result i64) (i32.and (i32.eq (local.get 0) (i32.const 16384)) (i32.eqz (global.get $allocated)))
      (then {ok})
      (else (if (result i64) (i32.eq (local.get 0) (i32.const 8192))
        (then {seen})
        (else unreachable))))"#,
            ok = ok_body(),
            seen = seen_body(),
        ),
    );
    let (plain_alloc, remembering_alloc) = (
        r#"(param i32) (result i32) i32.const 8192)"#,
        r#"(param i32) (result i32) (global.set $allocated (i32.const 1)) i32.const 8192)"#,
    );
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.contains(plain_alloc), "abi_module's switchyard_alloc changed: {text}");
    text.replace(plain_alloc, remembering_alloc).into_bytes()
}

/// An input that fits where the module keeps room for it is written there,
/// without the call into `switchyard_alloc`; a longer one is not, and a
/// module that names a place outside its memory is refused at load.
#[tokio::test]
async fn an_input_that_fits_the_modules_buffer_is_written_there() {
    let runtime = runtime();
    let plugin = load(&runtime, buffered_module(16384, 64, "(result i64)"), json!({})).await.unwrap();
    let cx = || CallContext::detached(Instant::now() + Duration::from_secs(30));
    // `{"name":"t","arguments":{}}`: 27 bytes.
    assert_eq!(text_of(plugin.call_tool("t", Map::new(), cx()).await), "ok");
    let long: Map<String, Value> = [("text".to_owned(), json!("x".repeat(64)))].into_iter().collect();
    assert_eq!(text_of(plugin.call_tool("t", long, cx()).await), "seen");
    let exactly = load(&runtime, buffered_module(16384, 27, "(result i64)"), json!({})).await.unwrap();
    assert_eq!(text_of(call(&exactly).await), "ok", "an input as long as the buffer fits it");
    let one_short = load(&runtime, buffered_module(16384, 26, "(result i64)"), json!({})).await.unwrap();
    assert_eq!(text_of(call(&one_short).await), "seen");

    // The module's memory is one page, 65,536 bytes.
    let outside = load(&runtime, buffered_module(65_536 - 63, 64, "(result i64)"), json!({})).await.unwrap_err();
    assert!(
        matches!(outside, LoadError::Describe(_)) && outside.to_string().contains("outside the module's memory"),
        "{outside}"
    );
    let wrapping = load(&runtime, buffered_module(u64::from(u32::MAX), 64, "(result i64)"), json!({})).await;
    assert!(wrapping.unwrap_err().to_string().contains("outside the module's memory"));
    assert_eq!(text_of(call(&plugin).await), "ok", "the host and other modules go on");

    let err = load(&runtime, buffered_module(16384, 64, "(param i32) (result i64)"), json!({})).await.unwrap_err();
    assert!(err.to_string().contains("export switchyard_input_buffer"), "{err}");
}
