//! The WASM plugin kind: tool plugins as sandboxed WebAssembly modules, run
//! with wasmtime.
//!
//! A module speaks the guest interface documented in the `switchyard-guest`
//! crate (ABI version 1: JSON in and out through linear memory). This crate is
//! the host side:
//!
//! - [`Runtime`]: one per process. One engine (Cranelift; the pooling
//!   allocator by default, so instantiating is cheap), modules compiled once
//!   per artifact digest and shared by every plugin using that artifact, an
//!   epoch ticker for wall-clock deadlines, and a cap on concurrent instances.
//! - [`WasmSpec`]: what a registered plugin's spec says: the artifact digest,
//!   limits (fuel, memory, timeout) and grants (directories, environment);
//!   a directory grant must lie inside what the operator made grantable
//!   ([`HostDirs`]), so a plugin author cannot preopen `/proc` or a mounted
//!   service-account token.
//! - [`WasmPlugin`]: a `core::Plugin`. Its tool list is read once from the
//!   module at load; every call runs in a fresh instance, on a fiber polled
//!   by the calling task (the guest yields to other tasks at every epoch
//!   tick, and a blocking thread's hand-off would cost more than the call).
//!
//! Isolation: WASI preview 1 with nothing granted by default: no preopened
//! directories, no environment, no arguments, no stdin; stdout is discarded
//! and stderr kept (bounded) to explain a failure. Preview 1 has no way to
//! open sockets, so a module has no network at all. A trap, running out of
//! fuel, passing the deadline, growing memory past the cap or exiting is an
//! `isError` result for that call; the server is never affected.
//!
//! This crate knows no HTTP and no SQL: the caller fetches artifact bytes.

mod plugin;
mod runtime;
mod settings;
mod spec;

pub use plugin::WasmPlugin;
pub use runtime::{LoadError, Runtime, RuntimeConfig};
pub use settings::RawWasm;
pub use spec::{Grants, HostDirs, Limits, Preopen, SpecError, WasmSpec};
