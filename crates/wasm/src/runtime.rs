//! The engine, the module cache, the epoch ticker, and running one call in a
//! fresh, limited instance.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use wasmtime::{
    Config, Enabled, Engine, Extern, Instance, InstanceAllocationStrategy, InstancePre, Linker, Module, ModuleExport,
    PoolingAllocationConfig, ResourceLimiter, Store, Trap, TypedFunc, UpdateDeadline, WasmParams, WasmResults,
};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

use crate::spec::{Grants, Limits};

/// How often the epoch ticks: the granularity of deadlines and cancellation.
const TICK: Duration = Duration::from_millis(10);
/// How much of a failing module's stderr is kept to explain the failure.
const STDERR_CAPACITY: usize = 4096;
/// How much of a pooled slot's linear memory stays resident between calls
/// (reset to the module's image in place, not given back to the kernel).
const KEEP_RESIDENT: usize = 1 << 20;
/// The same for a slot's tables.
const TABLE_KEEP_RESIDENT: usize = 64 << 10;
/// The largest JSON document a module may hand back.
const MAX_OUTPUT: usize = 8 << 20;

/// Process-wide settings of the WASM runtime.
#[derive(Debug, Clone, Copy)]
pub struct RuntimeConfig {
    /// Most instances alive at once (calls beyond it wait). Default 64.
    pub max_instances: u32,
    /// The cap on any plugin's memory, in bytes. Default 256 MiB.
    pub max_memory_bytes: usize,
    /// Preallocate instance slots (fast instantiation, more virtual memory
    /// reserved up front). Default true.
    pub pooling: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self { max_instances: 64, max_memory_bytes: 256 << 20, pooling: true }
    }
}

/// Why a module could not be loaded as a plugin.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The bytes are not the artifact the spec names.
    #[error("artifact digest mismatch: expected {expected}, got {actual}")]
    DigestMismatch {
        /// The digest in the spec.
        expected: String,
        /// The digest of the bytes.
        actual: String,
    },
    /// Not a valid module, or it imports something the host does not offer.
    #[error("invalid module: {0}")]
    Invalid(String),
    /// The module does not speak the guest interface.
    #[error("module does not implement the Switchyard guest interface: {0}")]
    Interface(String),
    /// Describing the module's tools failed.
    #[error("describing the module's tools failed: {0}")]
    Describe(String),
}

/// What the host keeps per instance.
pub(crate) struct HostState {
    /// The instance's WASI context. Built before the run when the spec
    /// grants anything (a granted directory is checked again before each
    /// run, and a failed check must fail the call before the module runs;
    /// variables are granted with it); else only on the module's first WASI
    /// call ([`HostState::wasi`]), which a call making none never makes, as
    /// the units example's does not (#18: making the context and dropping
    /// it were about 2,000 of that call's instructions).
    wasi: Option<WasiP1Ctx>,
    /// The module's stderr, kept (bounded) to explain a failure.
    stderr: MemoryOutputPipe,
    limiter: MemoryCap,
}

impl HostState {
    /// The WASI context, made now if the run did not need it before: with
    /// nothing granted, as it would have been made before the run.
    fn wasi(&mut self) -> &mut WasiP1Ctx {
        let Self { wasi, stderr, .. } = self;
        wasi.get_or_insert_with(|| wasi_builder(stderr).build_p1())
    }
}

/// A WASI context's builder granting nothing but `stderr`.
fn wasi_builder(stderr: &MemoryOutputPipe) -> WasiCtxBuilder {
    let mut wasi = WasiCtxBuilder::new();
    wasi.stderr(stderr.clone());
    wasi
}

/// Refuses memory and table growth past the plugin's caps, and remembers
/// that it did, so the failure can be named.
struct MemoryCap {
    memory_bytes: usize,
    exceeded: bool,
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.memory_bytes {
            self.exceeded = true;
            return Err(wasmtime::Error::msg("memory cap exceeded"));
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// One process's WASM runtime. Cheap to share (`Arc`).
pub struct Runtime {
    engine: Engine,
    linker: Linker<HostState>,
    modules: Mutex<HashMap<String, Module>>,
    instances: Arc<Semaphore>,
    config: RuntimeConfig,
    ticker_stop: Arc<AtomicBool>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("config", &self.config).finish_non_exhaustive()
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.ticker_stop.store(true, Ordering::Relaxed);
    }
}

/// A module linked against the host, with the guest interface's exports
/// found once: a call looks them up by index, not by name.
pub(crate) struct Prepared {
    pre: InstancePre<HostState>,
    /// A reactor's constructor, when the module has one that takes and
    /// returns nothing (any other `_initialize` is not one, and is left alone).
    initialize: Option<Export>,
    abi_version: Export,
    memory: Export,
    alloc: Export,
    describe: Export,
    call: Export,
    /// The optional export saying where a call's input may be written
    /// without asking `switchyard_alloc` for a buffer.
    input_buffer: Option<Export>,
    /// What it said, when the module was loaded: every instance of a module
    /// has its statics at the same addresses.
    input_at: OnceLock<InputBuffer>,
}

/// Where a module takes a call's input without `switchyard_alloc`: checked
/// at load to lie within the memory the module then had. Trusted no further
/// than any of the module's own output: every write is still bounds-checked
/// (a write outside its memory fails the call), and one inside it can harm
/// only the module.
#[derive(Debug, Clone, Copy)]
struct InputBuffer {
    ptr: u32,
    capacity: u32,
}

/// One of a module's exports, by index, with its name for errors.
struct Export {
    name: &'static str,
    index: ModuleExport,
}

/// Which export a run calls.
pub(crate) enum Entry<'a> {
    Describe,
    Call(&'a [u8]),
}

/// How a run failed; every variant becomes an `isError` result or a load error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    #[error("ran out of fuel (its limit is {0})")]
    OutOfFuel(u64),
    #[error("did not finish within its deadline")]
    Timeout,
    #[error("was cancelled")]
    Cancelled,
    #[error("exceeded its memory cap of {} MiB", .0 >> 20)]
    Memory(usize),
    #[error("trapped: {0}")]
    Trap(String),
    #[error("exited with status {0}")]
    Exit(i32),
    #[error("broke the guest interface: {0}")]
    Interface(String),
}

impl Runtime {
    /// Builds the engine (falling back from pooling to on-demand allocation
    /// when the pool cannot be reserved) and starts the epoch ticker.
    ///
    /// # Errors
    /// When no engine can be built, or WASI cannot be linked.
    pub fn new(config: RuntimeConfig) -> Result<Arc<Self>, LoadError> {
        let engine = match Self::engine(config, config.pooling) {
            Ok(engine) => engine,
            Err(error) if config.pooling => {
                tracing::warn!(%error, "pooling allocator unavailable; allocating WASM instances on demand");
                Self::engine(config, false).map_err(|e| LoadError::Invalid(e.to_string()))?
            }
            Err(error) => return Err(LoadError::Invalid(error.to_string())),
        };
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_async(&mut linker, HostState::wasi)
            .map_err(|e| LoadError::Invalid(e.to_string()))?;
        let ticker_stop = Arc::new(AtomicBool::new(false));
        let (weak, stop) = (engine.weak(), Arc::clone(&ticker_stop));
        // A plain thread: the ticker must keep time even when every async
        // worker is busy, and it costs one wake-up per tick.
        std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(TICK);
                    match weak.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .map_err(|e| LoadError::Invalid(format!("cannot start the epoch ticker: {e}")))?;
        Ok(Arc::new(Self {
            engine,
            linker,
            modules: Mutex::new(HashMap::new()),
            instances: Arc::new(Semaphore::new(config.max_instances as usize)),
            config,
            ticker_stop,
        }))
    }

    fn engine(config: RuntimeConfig, pooling: bool) -> wasmtime::Result<Engine> {
        let mut wasm = Config::new();
        wasm.consume_fuel(true).epoch_interruption(true);
        if pooling {
            let mut pool = PoolingAllocationConfig::new();
            pool.total_core_instances(config.max_instances)
                .total_memories(config.max_instances)
                .total_tables(config.max_instances)
                // Every call runs on a fiber of its own: one stack per instance.
                .total_stacks(config.max_instances)
                .max_memory_size(config.max_memory_bytes)
                // A slot's pages that the last call dirtied are found with the
                // PAGEMAP_SCAN ioctl (Linux 6.7 and later; elsewhere this is
                // off) and put back to the module's image with `memset`,
                // instead of `madvise` giving them all back and the next call
                // faulting each in again: that pair was a third of a call's
                // cost. Each slot keeps at most this much resident, so what
                // the pool holds stays within `max_instances` times it.
                .pagemap_scan(Enabled::Auto)
                .linear_memory_keep_resident(KEEP_RESIDENT.min(config.max_memory_bytes))
                .table_keep_resident(TABLE_KEEP_RESIDENT);
            wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        }
        Engine::new(&wasm)
    }

    /// The runtime's settings.
    pub fn config(&self) -> RuntimeConfig {
        self.config
    }

    /// The compiled module for `digest`, if this process compiled it already.
    pub fn cached_module(&self, digest: &str) -> Option<Module> {
        self.modules.lock().unwrap_or_else(|p| p.into_inner()).get(digest).cloned()
    }

    /// Checks `bytes` against `digest` and compiles them (off the async
    /// threads), once per digest per process.
    ///
    /// # Errors
    /// A digest mismatch or an invalid module.
    pub async fn compile(&self, digest: &str, bytes: Vec<u8>) -> Result<Module, LoadError> {
        if let Some(module) = self.cached_module(digest) {
            return Ok(module);
        }
        let actual: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
        if actual != digest {
            return Err(LoadError::DigestMismatch { expected: digest.to_owned(), actual });
        }
        let engine = self.engine.clone();
        let module = tokio::task::spawn_blocking(move || Module::new(&engine, &bytes))
            .await
            .map_err(|e| LoadError::Invalid(format!("compilation panicked: {e}")))?
            .map_err(|e| LoadError::Invalid(format!("{e:#}")))?;
        self.modules.lock().unwrap_or_else(|p| p.into_inner()).insert(digest.to_owned(), module.clone());
        Ok(module)
    }

    /// Links `module` against the host (WASI preview 1 only) and finds the
    /// guest interface's exports.
    pub(crate) fn prepare(&self, module: &Module) -> Result<Prepared, LoadError> {
        let export = |name: &'static str| {
            let index =
                module.get_export_index(name).ok_or_else(|| LoadError::Interface(format!("missing export {name}")))?;
            Ok::<_, LoadError>(Export { name, index })
        };
        let (memory, abi_version) = (export("memory")?, export("switchyard_abi_version")?);
        let (alloc, describe, call) =
            (export("switchyard_alloc")?, export("switchyard_describe")?, export("switchyard_call")?);
        let pre = self.linker.instantiate_pre(module).map_err(|e| LoadError::Invalid(format!("{e:#}")))?;
        let constructor = module
            .get_export("_initialize")
            .and_then(|ty| ty.func().map(|ty| ty.params().len() == 0 && ty.results().len() == 0))
            .unwrap_or(false);
        let initialize = if constructor { Some(export("_initialize")?) } else { None };
        let input_buffer = export("switchyard_input_buffer").ok();
        Ok(Prepared {
            pre,
            initialize,
            abi_version,
            memory,
            alloc,
            describe,
            call,
            input_buffer,
            input_at: OnceLock::new(),
        })
    }

    /// Waits for an instance slot, then runs `entry` in a fresh instance on
    /// this task.
    ///
    /// The guest runs on a fiber polled by the calling task, not on a
    /// blocking thread: handing each call to another thread and back cost
    /// more than the call itself (loadtest `wasm-call`). A guest that runs
    /// long gives its worker back at every epoch tick, so it delays other
    /// requests by a tick at most before they get their turn, and the
    /// deadline and cancellation are checked at the same ticks.
    pub(crate) async fn run(
        &self,
        prepared: &Prepared,
        limits: Limits,
        grants: &Grants,
        deadline: Instant,
        cancel: &CancellationToken,
        entry: Entry<'_>,
    ) -> Result<Vec<u8>, RunError> {
        let _permit = tokio::select! {
            permit = self.instances.acquire() => permit.map_err(|_| RunError::Cancelled)?,
            () = tokio::time::sleep_until(deadline.into()) => return Err(RunError::Timeout),
            () = cancel.cancelled() => return Err(RunError::Cancelled),
        };
        let mut store = self.store(limits, grants, deadline, cancel)?;
        let input = match entry {
            Entry::Describe => None,
            Entry::Call(bytes) => Some(bytes),
        };
        let result = Self::enter(prepared, &mut store, input).await;
        result.map_err(|error| {
            let limiter = &store.data().limiter;
            if limiter.exceeded {
                return RunError::Memory(limiter.memory_bytes);
            }
            if let Some(exit) = error.downcast_ref::<I32Exit>() {
                return RunError::Exit(exit.0);
            }
            match error.downcast_ref::<Trap>() {
                Some(Trap::OutOfFuel) => RunError::OutOfFuel(limits.fuel),
                Some(Trap::Interrupt) if cancel.is_cancelled() => RunError::Cancelled,
                Some(Trap::Interrupt) => RunError::Timeout,
                Some(trap) => {
                    let said = String::from_utf8_lossy(&store.data().stderr.contents()).trim().to_owned();
                    let last = said.lines().last().unwrap_or_default().chars().take(300).collect::<String>();
                    if last.is_empty() {
                        RunError::Trap(trap.to_string())
                    } else {
                        RunError::Trap(format!("{trap} ({last})"))
                    }
                }
                None => RunError::Interface(format!("{error:#}")),
            }
        })
    }

    /// A fresh store for one run: WASI with only what the spec grants, the
    /// memory cap, the fuel, and the epoch check that ends the run at its
    /// deadline or on cancellation and otherwise yields to other tasks.
    fn store(
        &self,
        limits: Limits,
        grants: &Grants,
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<Store<HostState>, RunError> {
        let stderr = MemoryOutputPipe::new(STDERR_CAPACITY);
        let wasi = if grants.is_empty() { None } else { Some(Self::granted(grants, &stderr)?) };
        let state =
            HostState { wasi, stderr, limiter: MemoryCap { memory_bytes: limits.memory_bytes, exceeded: false } };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| &mut state.limiter);
        store.set_fuel(limits.fuel).map_err(|e| RunError::Interface(e.to_string()))?;
        let deadline = deadline.min(Instant::now() + limits.timeout);
        let watch = cancel.clone();
        // Checked every tick: this is what stops an endless loop. Between
        // checks the guest yields through tokio's `yield_now`, which puts
        // it behind the tasks already waiting on this worker.
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |_| {
            Ok(if watch.is_cancelled() || Instant::now() >= deadline {
                UpdateDeadline::Interrupt
            } else {
                UpdateDeadline::YieldCustom(1, Box::pin(tokio::task::yield_now()))
            })
        });
        Ok(store)
    }

    /// The WASI context of a run whose spec grants directories or variables.
    fn granted(grants: &Grants, stderr: &MemoryOutputPipe) -> Result<WasiP1Ctx, RunError> {
        let mut wasi = wasi_builder(stderr);
        for dir in &grants.dirs {
            // A link planted since registration must not lead out of the grant.
            switchyard_core::plugin_spec::confined_now(std::path::Path::new(&dir.host), &dir.root)
                .map_err(|e| RunError::Interface(format!("granted directory {}: {e}", dir.guest)))?;
            let perms = if dir.writable { FsPerms::ReadWrite } else { FsPerms::ReadOnly };
            wasi.preopened_dir(&dir.host, &dir.guest, perms)
                .map_err(|e| RunError::Interface(format!("cannot open granted directory {}: {e}", dir.guest)))?;
        }
        for (key, value) in &grants.env {
            wasi.env(key, value);
        }
        Ok(wasi.build_p1())
    }

    async fn enter(
        prepared: &Prepared,
        store: &mut Store<HostState>,
        input: Option<&[u8]>,
    ) -> wasmtime::Result<Vec<u8>> {
        let instance = prepared.pre.instantiate_async(&mut *store).await?;
        if let Some(initialize) = &prepared.initialize {
            func::<(), ()>(&instance, store, initialize)?.call_async(&mut *store, ()).await?;
        }
        let memory = instance
            .get_module_export(&mut *store, &prepared.memory.index)
            .and_then(Extern::into_memory)
            .ok_or_else(|| wasmtime::Error::msg("no exported memory"))?;
        let packed = match input {
            None => {
                // Asked once, when the module is loaded (this run); a call
                // does not ask again.
                let version =
                    func::<(), i32>(&instance, store, &prepared.abi_version)?.call_async(&mut *store, ()).await?;
                if version != 1 {
                    wasmtime::bail!("ABI version {version}; this host speaks 1");
                }
                if let Some(export) = &prepared.input_buffer {
                    let (ptr, capacity) =
                        unpack(func::<(), i64>(&instance, store, export)?.call_async(&mut *store, ()).await?);
                    let end = u64::from(ptr) + u64::from(capacity);
                    let size = memory.data_size(&*store) as u64;
                    if end > size {
                        wasmtime::bail!(
                            "switchyard_input_buffer: {capacity} bytes at {ptr} lie outside the module's memory of {size} bytes"
                        );
                    }
                    // Asked once per load, and a plugin is loaded once.
                    let _ = prepared.input_at.set(InputBuffer { ptr, capacity });
                }
                func::<(), i64>(&instance, store, &prepared.describe)?.call_async(&mut *store, ()).await?
            }
            Some(input) => {
                let len = i32::try_from(input.len()).map_err(|_| wasmtime::Error::msg("input too large"))?;
                let ptr = match prepared.input_at.get() {
                    // The input fits where the module keeps room for it: no
                    // second entry into the instance (#18).
                    Some(at) if input.len() <= at.capacity as usize => at.ptr as i32,
                    _ => func::<i32, i32>(&instance, store, &prepared.alloc)?.call_async(&mut *store, len).await?,
                };
                memory.write(&mut *store, ptr as u32 as usize, input)?;
                func::<(i32, i32), i64>(&instance, store, &prepared.call)?.call_async(&mut *store, (ptr, len)).await?
            }
        };
        let (ptr, len) = unpack(packed);
        let (ptr, len) = (ptr as usize, len as usize);
        if len > MAX_OUTPUT {
            wasmtime::bail!("output of {len} bytes is above the {MAX_OUTPUT}-byte limit");
        }
        let mut output = vec![0; len];
        memory.read(&*store, ptr, &mut output)?;
        Ok(output)
    }
}

/// A packed value of the guest interface, `(ptr << 32) | len`, as its two halves.
fn unpack(packed: i64) -> (u32, u32) {
    let packed = packed as u64;
    ((packed >> 32) as u32, packed as u32)
}

/// The function `export` of `instance`, checked to have the signature the
/// guest interface gives it.
fn func<P: WasmParams, R: WasmResults>(
    instance: &Instance,
    store: &mut Store<HostState>,
    export: &Export,
) -> wasmtime::Result<TypedFunc<P, R>> {
    let name = export.name;
    let func = instance
        .get_module_export(&mut *store, &export.index)
        .and_then(Extern::into_func)
        .ok_or_else(|| wasmtime::Error::msg(format!("export {name} is not a function")))?;
    func.typed(&*store).map_err(|e| wasmtime::Error::msg(format!("export {name}: {e:#}")))
}
