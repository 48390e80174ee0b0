//! [`CallArena`]: an allocator for a module whose instance lives one call.
//!
//! The host runs every call in a fresh instance and drops it afterwards, so
//! nothing a call allocates outlives it. The C library's allocator, which a
//! module otherwise uses, keeps free lists for memory that will be reused;
//! in a call that allocates a few dozen small blocks, that bookkeeping was
//! about a quarter of the guest's own work (the units example, counted
//! natively by callgrind). This allocator takes small blocks from chunks it
//! asks the C library for, by moving a pointer, and reuses a block only when
//! it is the last one given out: a temporary freed before the next
//! allocation, or a buffer grown while it is the newest (a `Vec` being
//! written, a `String` being built).
//!
//! What it costs: a small block freed out of order is not reused until the
//! call ends. A tool that keeps allocating and freeing small blocks out of
//! order (a map it keeps inserting into and removing from, say) takes more
//! memory under it than under the C library's allocator, and may reach the
//! memory cap its spec sets. Large blocks (over 2 KiB, [`SMALL`]) go to the
//! C library's allocator and are freed there as before.
//!
//! Opt in, in the module's crate:
//!
//! ```ignore
//! #[global_allocator]
//! static ALLOCATOR: switchyard_guest::CallArena = switchyard_guest::CallArena;
//! ```

#![cfg_attr(
    not(all(target_family = "wasm", not(target_feature = "atomics"))),
    allow(
        dead_code,
        reason = "the arena is a global allocator only on `wasm32` without threads; elsewhere its tests use it"
    )
)]

use std::alloc::{GlobalAlloc, Layout, System};

/// The largest block taken from a chunk; larger ones go to the C library.
pub(crate) const SMALL: usize = 2048;
/// What each chunk holds. Small enough that the first fits in what the
/// linker leaves free of a module's initial memory, so that a call's few
/// allocations do not grow the memory (a call into the host).
const CHUNK: usize = 16 * 1024;
/// The alignment of a chunk, and the largest a block taken from one may ask.
const CHUNK_ALIGN: usize = 16;

/// The global allocator of a module whose instance lives one call (module docs).
/// It is one only on `wasm32` without threads, where a module's code runs on
/// one thread: elsewhere it is not a `GlobalAlloc`.
#[derive(Debug, Clone, Copy, Default)]
pub struct CallArena;

/// Whether `layout`'s block is taken from a chunk. Decided by the layout
/// alone, which `dealloc` and `realloc` are given as `alloc` was, so that a
/// block is always given back to where it came from.
fn small(layout: Layout) -> bool {
    layout.size() <= SMALL && layout.align() <= CHUNK_ALIGN
}

/// The state of the arena: the current chunk's free part, and the last
/// block taken from it.
#[derive(Debug)]
pub(crate) struct Arena {
    /// The first free byte of the current chunk.
    next: usize,
    /// The end of the current chunk (0 before the first).
    end: usize,
    /// Where the last block taken begins (0 when it was given back).
    last: usize,
}

impl Arena {
    pub(crate) const fn new() -> Self {
        Self { next: 0, end: 0, last: 0 }
    }

    /// A block for `layout`, or null when the C library has no memory left.
    pub(crate) fn alloc(&mut self, layout: Layout) -> *mut u8 {
        if !small(layout) {
            // SAFETY: `layout` is what `GlobalAlloc::alloc` was given, of non-zero size.
            #[allow(unsafe_code, reason = "a large block is the C library's")]
            return unsafe { System.alloc(layout) };
        }
        if let Some(start) = self.take(layout) {
            return start as *mut u8;
        }
        // The current chunk's rest is left unused: at most a small block's size.
        let chunk = Layout::from_size_align(CHUNK, CHUNK_ALIGN).expect("a valid chunk layout");
        // SAFETY: the chunk's layout has a non-zero size.
        #[allow(unsafe_code, reason = "a chunk is the C library's, never given back")]
        let base = unsafe { System.alloc(chunk) };
        if base.is_null() {
            return base;
        }
        self.next = base as usize;
        self.end = base as usize + CHUNK;
        self.take(layout).map_or(std::ptr::null_mut(), |start| start as *mut u8)
    }

    /// Takes `layout` from the current chunk, if it fits.
    fn take(&mut self, layout: Layout) -> Option<usize> {
        let start = self.next.checked_add(layout.align() - 1)? & !(layout.align() - 1);
        let end = start.checked_add(layout.size())?;
        if self.end == 0 || end > self.end {
            return None;
        }
        self.last = start;
        self.next = end;
        Some(start)
    }

    /// Gives back the block at `ptr`: a large one to the C library, a small
    /// one to the chunk when it is the last taken.
    pub(crate) fn dealloc(&mut self, ptr: *mut u8, layout: Layout) {
        if !small(layout) {
            // SAFETY: a large block came from `System.alloc` with this layout.
            #[allow(unsafe_code, reason = "a large block is the C library's")]
            unsafe {
                System.dealloc(ptr, layout);
            }
            return;
        }
        if self.is_last(ptr, layout.size()) {
            self.next = self.last;
            self.last = 0;
        }
    }

    /// The block at `ptr` made `new_size` bytes long: in place when it is the
    /// last taken and the chunk has room, else moved.
    pub(crate) fn realloc(&mut self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        if !small(layout) && !small(new_layout) {
            // SAFETY: a large block came from `System.alloc` with `layout`.
            #[allow(unsafe_code, reason = "a large block is the C library's")]
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        if small(new_layout) && self.is_last(ptr, layout.size()) && ptr as usize + new_size <= self.end {
            self.next = ptr as usize + new_size;
            return ptr;
        }
        let moved = self.alloc(new_layout);
        if !moved.is_null() {
            // SAFETY: both blocks are valid for the shorter of their sizes,
            // and distinct: `ptr` is still held while `moved` is taken.
            #[allow(unsafe_code, reason = "moving a block's bytes")]
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
            }
            self.dealloc(ptr, layout);
        }
        moved
    }

    /// Whether the block at `ptr`, `size` bytes long, is the last taken.
    fn is_last(&self, ptr: *mut u8, size: usize) -> bool {
        self.last != 0 && ptr as usize == self.last && self.last + size == self.next
    }
}

/// The arena of the module's one thread.
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
mod global {
    use std::alloc::{GlobalAlloc, Layout};
    use std::cell::UnsafeCell;

    use super::{Arena, CallArena};

    struct OneThread(UnsafeCell<Arena>);

    // SAFETY: a `wasm32` module without the atomics feature runs on one thread.
    #[allow(unsafe_code, reason = "the arena is reached from the module's one thread")]
    unsafe impl Sync for OneThread {}

    static ARENA: OneThread = OneThread(UnsafeCell::new(Arena::new()));

    fn arena() -> &'static mut Arena {
        // SAFETY: one thread, and no call below re-enters the allocator, so
        // this is the only reference while it is used.
        #[allow(unsafe_code, reason = "the arena is reached from the module's one thread")]
        unsafe {
            &mut *ARENA.0.get()
        }
    }

    // SAFETY: every block is taken from memory no other block holds, aligned
    // and sized as asked (`Arena`), and is given back where it came from.
    #[allow(unsafe_code, reason = "the module's global allocator")]
    unsafe impl GlobalAlloc for CallArena {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            arena().alloc(layout)
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            arena().dealloc(ptr, layout);
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            arena().realloc(ptr, layout, new_size)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    /// Writes `byte` over the block, as its owner would.
    fn fill(ptr: *mut u8, size: usize, byte: u8) {
        #[allow(unsafe_code, reason = "the test owns the block")]
        // SAFETY: the block is `size` bytes, held by the test.
        unsafe {
            std::ptr::write_bytes(ptr, byte, size);
        }
    }

    fn bytes(ptr: *mut u8, size: usize) -> Vec<u8> {
        #[allow(unsafe_code, reason = "the test owns the block")]
        // SAFETY: the block is `size` bytes, held by the test.
        unsafe {
            std::slice::from_raw_parts(ptr, size).to_vec()
        }
    }

    #[test]
    fn blocks_are_aligned_and_never_overlap() {
        let mut arena = Arena::new();
        let mut held: Vec<(usize, usize)> = Vec::new();
        for (i, (size, align)) in [(1, 1), (3, 2), (8, 8), (5, 16), (SMALL, 16), (7, 4), (SMALL, 1)].iter().enumerate()
        {
            for _ in 0..40 {
                let ptr = arena.alloc(layout(*size, *align));
                assert!(!ptr.is_null());
                assert_eq!(ptr as usize % align, 0, "block {i} misaligned");
                fill(ptr, *size, i as u8);
                held.push((ptr as usize, *size));
            }
        }
        held.sort_unstable();
        for pair in held.windows(2) {
            assert!(pair[0].0 + pair[0].1 <= pair[1].0, "{pair:?} overlap");
        }
    }

    #[test]
    fn the_last_block_is_reused_and_grown_in_place_others_are_not() {
        let mut arena = Arena::new();
        let first = arena.alloc(layout(24, 8));
        let second = arena.alloc(layout(24, 8));
        // Freed last: the next block takes its place.
        arena.dealloc(second, layout(24, 8));
        assert_eq!(arena.alloc(layout(16, 8)), second);
        // Freed out of order: not reused.
        arena.dealloc(first, layout(24, 8));
        assert_ne!(arena.alloc(layout(24, 8)), first);
        // The newest block grows where it is, and keeps its bytes.
        let growing = arena.alloc(layout(100, 1));
        fill(growing, 100, 7);
        assert_eq!(arena.realloc(growing, layout(100, 1), 400), growing);
        assert_eq!(bytes(growing, 100), vec![7; 100]);
        // An older one moves, with its bytes.
        let older = growing;
        let _newer = arena.alloc(layout(8, 8));
        let moved = arena.realloc(older, layout(400, 1), 800);
        assert_ne!(moved, older);
        assert_eq!(bytes(moved, 100), vec![7; 100]);
    }

    #[test]
    fn large_blocks_and_blocks_crossing_the_size_go_to_the_c_library_and_back() {
        let mut arena = Arena::new();
        let small_block = arena.alloc(layout(SMALL, 8));
        fill(small_block, SMALL, 3);
        // Grown past the small size: moved out of the chunk, bytes kept.
        let large = arena.realloc(small_block, layout(SMALL, 8), 3 * SMALL);
        assert_eq!(bytes(large, SMALL), vec![3; SMALL]);
        fill(large, 3 * SMALL, 4);
        let larger = arena.realloc(large, layout(3 * SMALL, 8), 10 * SMALL);
        assert_eq!(bytes(larger, 3 * SMALL), vec![4; 3 * SMALL]);
        // Shrunk to a small size: back into a chunk, bytes kept.
        let shrunk = arena.realloc(larger, layout(10 * SMALL, 8), 64);
        assert_eq!(bytes(shrunk, 64), vec![4; 64]);
        arena.dealloc(shrunk, layout(64, 8));
        // A large alignment is the C library's too.
        let page = arena.alloc(layout(64, 4096));
        assert_eq!(page as usize % 4096, 0);
        arena.dealloc(page, layout(64, 4096));
    }

    #[test]
    fn a_full_chunk_is_followed_by_a_new_one() {
        let mut arena = Arena::new();
        let blocks: Vec<usize> = (0..3 * CHUNK / SMALL).map(|_| arena.alloc(layout(SMALL, 16)) as usize).collect();
        let chunks = blocks.windows(2).filter(|pair| pair[1] != pair[0] + SMALL).count();
        assert!(chunks >= 2, "{chunks} new chunks for three chunks' worth");
    }
}
