//! The server's global allocator: mimalloc, asked the way its fast paths
//! expect.
//!
//! Request handling allocates many small, short-lived JSON values; mimalloc
//! serves that pattern with less CPU than glibc's malloc (`loadtest/figures-history.md`).
//! The `mimalloc` crate hands every allocation to `mi_malloc_aligned`, whatever
//! alignment it asks for. That function's fast path takes only blocks of up to
//! 1 KiB; a larger one (a request's body, a boxed request future, hyper's
//! buffers) went through its generic aligned path, about 190 instructions,
//! 12.5 times per `tools/call`: 3.8% of the call's instructions (callgrind,
//! `loadtest/callgrind-tools-call.sh`). Every mimalloc block is aligned to at
//! least a word (its smallest block is 8 bytes, and all its block sizes are
//! multiples of 8), so a layout that asks for no more than that goes to
//! `mi_malloc`, whose fast path takes any small size and whose slower one
//! takes any other directly. Larger alignments (a cache-padded structure) keep
//! the aligned entry points.

#![allow(unsafe_code, reason = "a global allocator is an unsafe impl over mimalloc's C functions")]

use core::alloc::{GlobalAlloc, Layout};
use core::ffi::c_void;

use libmimalloc_sys::{
    mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned, mi_zalloc, mi_zalloc_aligned,
};

/// The alignment every mimalloc block has: a word.
const WORD: usize = core::mem::size_of::<usize>();

/// mimalloc as the global allocator:
/// `#[global_allocator] static ALLOCATOR: Allocator = Allocator;`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Allocator;

// SAFETY: each method passes the layout's size (and, above a word, its
// alignment) to the mimalloc function of the same contract, and frees with
// `mi_free`, which takes any block mimalloc returned. Blocks from `mi_malloc`,
// `mi_zalloc` and `mi_realloc` are word-aligned, which is all a layout of at
// most a word's alignment asks.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller gives a layout of non-zero size (GlobalAlloc's contract).
        unsafe {
            if layout.align() <= WORD {
                mi_malloc(layout.size()).cast()
            } else {
                mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        unsafe {
            if layout.align() <= WORD {
                mi_zalloc(layout.size()).cast()
            } else {
                mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from mimalloc.
        unsafe { mi_free(ptr.cast::<c_void>()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout`; the block
        // moved keeps the alignment `layout` asked for.
        unsafe {
            if layout.align() <= WORD {
                mi_realloc(ptr.cast::<c_void>(), new_size).cast()
            } else {
                mi_realloc_aligned(ptr.cast::<c_void>(), new_size, layout.align()).cast()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_have_the_alignment_their_layout_asks_for() {
        let allocator = Allocator;
        for align in [1, 2, 4, 8, 16, 64, 128, 4096, 1 << 17] {
            for size in [1, 7, 8, 24, 100, 1000, 1025, 5000, 100_000, 3_000_000] {
                let layout = Layout::from_size_align(size, align).unwrap_or_else(|_| unreachable!("valid"));
                let aligned = |block: *mut u8| !block.is_null() && (block as usize).is_multiple_of(align);
                // SAFETY: a non-zero size; each block is freed once, with its layout.
                unsafe {
                    // A block written and freed is likely the next one handed
                    // out: zeroing is then tested on memory that was not zero.
                    let dirty = allocator.alloc(layout);
                    assert!(aligned(dirty), "{size} bytes at {align}");
                    dirty.write_bytes(0xA5, size);
                    allocator.dealloc(dirty, layout);
                    let zeroed = allocator.alloc_zeroed(layout);
                    assert!(aligned(zeroed), "zeroed {size} bytes at {align}");
                    assert!((0..size).all(|i| *zeroed.add(i) == 0), "zeroed {size} bytes at {align}");
                    let block = allocator.alloc(layout);
                    assert!(aligned(block), "{size} bytes at {align}");
                    block.write_bytes(0xA5, size);
                    let grown = allocator.realloc(block, layout, size * 3);
                    assert!(aligned(grown), "grown {size} bytes at {align}");
                    assert!((0..size).all(|i| *grown.add(i) == 0xA5), "grown {size} bytes kept at {align}");
                    let grown_layout = Layout::from_size_align_unchecked(size * 3, align);
                    let shrunk = allocator.realloc(grown, grown_layout, size.div_ceil(2));
                    assert!(aligned(shrunk), "shrunk {size} bytes at {align}");
                    assert!((0..size.div_ceil(2)).all(|i| *shrunk.add(i) == 0xA5), "shrunk {size} bytes kept");
                    allocator.dealloc(shrunk, Layout::from_size_align_unchecked(size.div_ceil(2), align));
                    allocator.dealloc(zeroed, layout);
                }
            }
        }
    }
}
