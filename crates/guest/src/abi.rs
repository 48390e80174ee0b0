//! The memory glue behind [`export_plugin!`](crate::export_plugin); not for direct use.

use std::cell::UnsafeCell;

use serde_json::Value;

use crate::Plugin;

/// How many bytes of input [`INPUT`] holds.
pub const INPUT_CAPACITY: usize = 64 << 10;

/// Where the host writes a call's input when it fits, so that it need not
/// call `switchyard_alloc` first: every entry into an instance costs the
/// host instructions of its own (finding the export, checking its type, a
/// fiber to run it on), about 2,500 of the units example's 89,000 a call
/// (#18). Zeroed, so it takes no room in the module file, and
/// its pages of the instance's memory are never touched until a call's
/// input is written into them.
pub static INPUT: InputBuffer = InputBuffer(UnsafeCell::new([0; INPUT_CAPACITY]));

/// [`INPUT`]'s type: bytes the host writes from outside the module.
#[repr(transparent)]
pub struct InputBuffer(UnsafeCell<[u8; INPUT_CAPACITY]>);

#[allow(unsafe_code, reason = "a module's code runs on one thread, and only the host writes the buffer")]
// SAFETY: a module's code runs on one thread; the host writes the buffer
// between entries into the instance, never during one.
unsafe impl Sync for InputBuffer {}

/// [`INPUT`]'s address and capacity, packed, for the host to ask once.
pub fn input_buffer() -> i64 {
    pack(INPUT.0.get().addr(), INPUT_CAPACITY)
}

/// A buffer the host writes `len` bytes of input into, when they do not fit
/// [`INPUT`]. Leaked on purpose: the instance ends with the call.
pub fn alloc(len: i32) -> i32 {
    let len = usize::try_from(len).unwrap_or(0);
    let mut buffer = Vec::<u8>::with_capacity(len);
    let ptr = buffer.as_mut_ptr();
    std::mem::forget(buffer);
    ptr.expose_provenance() as i32
}

/// The `len` bytes of input the host wrote at `ptr`: into [`INPUT`], or into
/// a buffer [`alloc`] gave out. Neither is freed: the instance ends with the call.
pub fn input(ptr: i32, len: i32) -> &'static [u8] {
    let len = usize::try_from(len).unwrap_or(0);
    if len == 0 {
        return &[];
    }
    let address = ptr as u32 as usize;
    let buffer = INPUT.0.get().cast::<u8>();
    let ptr = if address == buffer.addr() {
        assert!(len <= INPUT_CAPACITY, "the host wrote past the input buffer");
        buffer.cast_const()
    } else {
        std::ptr::with_exposed_provenance(address)
    };
    #[allow(unsafe_code, reason = "the host wrote exactly `len` bytes at `ptr` before calling in")]
    // SAFETY: `ptr` is `INPUT` (and `len` within it, checked above) or came
    // from `alloc(len)`, which leaked a buffer of capacity `len` and exposed
    // its address to the host. The host initialised all `len` bytes before
    // calling in, and nothing writes them during the call. `'static` holds
    // because an instance serves one call and ends with it.
    unsafe {
        std::slice::from_raw_parts(ptr, len)
    }
}

/// Runs one call for the host and returns its packed output.
///
/// Nothing the call built is freed: the instance ends with the call, and
/// its memory with it. Dropping the input, the result and the plugin first
/// was a fifth of the units example's work in the guest (callgrind,
/// natively), for memory nobody would use again.
pub fn call(plugin: Plugin, ptr: i32, len: i32) -> i64 {
    let input = input(ptr, len);
    let result = plugin.answer(input);
    // Most results are a few hundred bytes: start there rather than grow
    // by doubling, each step a copy.
    let mut bytes = Vec::with_capacity(512);
    result.write(&mut bytes);
    std::mem::forget((plugin, result));
    leak(bytes)
}

/// Serialises `value` and leaks it for the host to read.
pub fn output(value: &Value) -> i64 {
    let mut bytes = Vec::with_capacity(512);
    if serde_json::to_writer(&mut bytes, value).is_err() {
        bytes.clear();
    }
    leak(bytes)
}

/// Leaks `bytes` and packs where they are for the host; the instance ends
/// after the call, so nothing needs freeing.
fn leak(mut bytes: Vec<u8>) -> i64 {
    let packed = pack(bytes.as_mut_ptr() as usize, bytes.len());
    std::mem::forget(bytes);
    packed
}

/// `(ptr << 32) | len`: an address and a length in one value for the host.
fn pack(ptr: usize, len: usize) -> i64 {
    (((ptr as u64) << 32) | (len as u64 & 0xffff_ffff)) as i64
}
