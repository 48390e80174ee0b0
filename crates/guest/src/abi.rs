//! The memory glue behind [`export_plugin!`](crate::export_plugin); not for direct use.

use serde_json::Value;

use crate::Plugin;

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
/// its memory with it. Dropping the input, the result and the plugin first
/// was a fifth of the units example's work in the guest (callgrind,
/// natively), for memory nobody would use again.
pub fn call(plugin: Plugin, ptr: i32, len: i32) -> i64 {
    let input = input(ptr, len);
    let result = plugin.answer(&input);
    // Most results are a few hundred bytes: start there rather than grow
    // by doubling, each step a copy.
    let mut bytes = Vec::with_capacity(512);
    result.write(&mut bytes);
    std::mem::forget((plugin, input, result));
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
    let len = bytes.len() as u64;
    let ptr = bytes.as_mut_ptr() as usize as u64;
    std::mem::forget(bytes);
    ((ptr << 32) | (len & 0xffff_ffff)) as i64
}
