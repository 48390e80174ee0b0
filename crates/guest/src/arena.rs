//! [`CallArena`]: an allocator for a module whose instance lives one call.

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
/// What each chunk holds: a few times what a small tool's call allocates,
/// so that most calls take one.
const CHUNK: usize = 16 * 1024;
/// The alignment of a chunk, and the largest a block taken from one may ask.
const CHUNK_ALIGN: usize = 16;
const CHUNK_LAYOUT: Layout = match Layout::from_size_align(CHUNK, CHUNK_ALIGN) {
    Ok(layout) => layout,
    Err(_) => panic!("a chunk's layout is valid"),
};

/// A global allocator for a module whose instance lives one call.
///
/// The host runs every call in a fresh instance and drops it afterwards, so
/// nothing a call allocates outlives it. The C library's allocator, which a
/// module otherwise uses, keeps free lists for memory that will be reused;
/// in a call that allocates a few dozen small blocks, that bookkeeping was
/// about a quarter of the guest's own work (the units example, counted
/// natively by callgrind). This allocator takes small blocks (up to 2 KiB,
/// aligned to at most 16) from 16 KiB chunks it asks the C library for, by
/// moving a pointer, and reuses a block only when it is the last one given
/// out: a temporary freed before the next allocation, or a buffer grown
/// while it is the newest (a `Vec` being written, a `String` being built).
///
/// What it costs: a small block freed out of order is not reused until the
/// call ends. A tool that keeps allocating and freeing small blocks out of
/// order (a map it keeps inserting into and removing from, say) takes more
/// memory under it than under the C library's allocator, and may reach the
/// memory cap its spec sets. Larger blocks, and more strictly aligned ones,
/// go to the C library's allocator and are freed there as before.
///
/// It is a `GlobalAlloc` only on `wasm32` without threads, where a module's
/// code runs on one thread. Opt in, in the module's crate, with the same
/// condition (so that the crate still builds for the host, for its tests):
///
/// ```ignore
/// #[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
/// #[global_allocator]
/// static ALLOCATOR: switchyard_guest::CallArena = switchyard_guest::CallArena;
/// ```
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

#[allow(unsafe_code, reason = "an allocator: unsafe by contract, and over the C library's allocator")]
impl Arena {
    pub(crate) const fn new() -> Self {
        Self { next: 0, end: 0, last: 0 }
    }

    /// A block for `layout`, or null when the C library has no memory left.
    ///
    /// # Safety
    /// As [`GlobalAlloc::alloc`]: `layout` has a non-zero size.
    pub(crate) unsafe fn alloc(&mut self, layout: Layout) -> *mut u8 {
        if !small(layout) {
            // SAFETY: `layout` has a non-zero size (this function's contract).
            return unsafe { System.alloc(layout) };
        }
        if let Some(start) = self.take(layout) {
            return start as *mut u8;
        }
        // What is left of the current chunk stays unused: less than a small
        // block and its alignment.
        // SAFETY: a chunk's layout has a non-zero size.
        let base = unsafe { System.alloc(CHUNK_LAYOUT) };
        let Some(end) = (base as usize).checked_add(CHUNK).filter(|_| !base.is_null()) else {
            return std::ptr::null_mut();
        };
        (self.next, self.end) = (base as usize, end);
        self.take(layout).map_or(std::ptr::null_mut(), |start| start as *mut u8)
    }

    /// Takes `layout` from the current chunk, if it fits; changes nothing
    /// when it does not.
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
    ///
    /// # Safety
    /// As [`GlobalAlloc::dealloc`]: `ptr` is a block this arena gave out
    /// for `layout` and not yet took back.
    pub(crate) unsafe fn dealloc(&mut self, ptr: *mut u8, layout: Layout) {
        if !small(layout) {
            // SAFETY: a large block came from `System.alloc` with this layout.
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

    /// The block at `ptr` made `new_size` bytes long: in place when it is
    /// small and stays small and either shrinks or is the last taken and
    /// the chunk has room; else moved.
    ///
    /// # Safety
    /// As [`GlobalAlloc::realloc`]: `ptr` is a block this arena gave out for
    /// `layout` and not yet took back, and `new_size`, rounded up to the
    /// alignment, does not overflow `isize`.
    pub(crate) unsafe fn realloc(&mut self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        match (small(layout), small(new_layout)) {
            (false, false) => {
                // SAFETY: a large block came from `System.alloc` with `layout`.
                return unsafe { System.realloc(ptr, layout, new_size) };
            }
            (true, true) if self.is_last(ptr, layout.size()) => {
                if let Some(end) = (ptr as usize).checked_add(new_size).filter(|end| *end <= self.end) {
                    self.next = end;
                    return ptr;
                }
            }
            // Not the last, so never reused while held: its tail is left unused.
            (true, true) if new_size <= layout.size() => return ptr,
            _ => {}
        }
        // SAFETY: `new_layout` has `new_size`, non-zero as `GlobalAlloc::realloc` asks.
        let moved = unsafe { self.alloc(new_layout) };
        if !moved.is_null() {
            // SAFETY: both blocks are valid for the shorter of their sizes,
            // and distinct: `ptr` is still held while `moved` is taken; then
            // `ptr` is given back as this function's contract allows.
            unsafe {
                std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
        }
        moved
    }

    /// Whether the block at `ptr`, `size` bytes long, is the last taken.
    fn is_last(&self, ptr: *mut u8, size: usize) -> bool {
        self.last != 0 && ptr as usize == self.last && self.last.checked_add(size) == Some(self.next)
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

    // SAFETY: every block is taken from memory no other block holds, aligned
    // and sized as asked (`Arena`), and is given back where it came from.
    // Each method holds the only reference to the arena while it runs: the
    // module has one thread, and nothing an `Arena` method calls (the C
    // library's allocator, which calls no Rust and no host function) comes
    // back into this allocator.
    #[allow(unsafe_code, reason = "the module's global allocator")]
    unsafe impl GlobalAlloc for CallArena {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            unsafe { (*ARENA.0.get()).alloc(layout) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            unsafe { (*ARENA.0.get()).dealloc(ptr, layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            unsafe { (*ARENA.0.get()).realloc(ptr, layout, new_size) }
        }
    }
}

#[cfg(test)]
#[allow(unsafe_code, reason = "the tests hold the blocks they ask for, and give back only those")]
mod tests {
    use super::*;

    /// An arena whose blocks the test holds, read and writes.
    struct Held(Arena);

    impl Held {
        fn alloc(&mut self, size: usize, align: usize) -> usize {
            // SAFETY: every size asked for is non-zero.
            let ptr = unsafe { self.0.alloc(layout(size, align)) };
            assert!(!ptr.is_null());
            ptr as usize
        }

        fn dealloc(&mut self, block: usize, size: usize, align: usize) {
            // SAFETY: `block` was given out for this layout and is held.
            unsafe { self.0.dealloc(block as *mut u8, layout(size, align)) }
        }

        fn realloc(&mut self, block: usize, size: usize, align: usize, new_size: usize) -> usize {
            // SAFETY: `block` was given out for this layout and is held; `new_size` is small.
            let ptr = unsafe { self.0.realloc(block as *mut u8, layout(size, align), new_size) };
            assert!(!ptr.is_null());
            ptr as usize
        }
    }

    fn layout(size: usize, align: usize) -> Layout {
        Layout::from_size_align(size, align).unwrap()
    }

    /// Writes `byte` over the block, as its owner would.
    fn fill(block: usize, size: usize, byte: u8) {
        // SAFETY: the block is `size` bytes, held by the test.
        unsafe { std::ptr::write_bytes(block as *mut u8, byte, size) }
    }

    fn bytes(block: usize, size: usize) -> Vec<u8> {
        // SAFETY: the block is `size` bytes, held by the test.
        unsafe { std::slice::from_raw_parts(block as *const u8, size).to_vec() }
    }

    #[test]
    fn blocks_are_aligned_and_never_overlap() {
        let mut arena = Held(Arena::new());
        let mut held: Vec<(usize, usize)> = Vec::new();
        for (i, (size, align)) in
            [(1, 1), (3, 2), (8, 8), (5, 16), (SMALL, 16), (7, 4), (SMALL, 1), (64, 4096)].into_iter().enumerate()
        {
            for _ in 0..40 {
                let block = arena.alloc(size, align);
                assert_eq!(block % align, 0, "block {i} misaligned");
                fill(block, size, i as u8);
                held.push((block, size));
            }
        }
        held.sort_unstable();
        for pair in held.windows(2) {
            assert!(pair[0].0 + pair[0].1 <= pair[1].0, "{pair:?} overlap");
        }
    }

    #[test]
    fn the_last_block_is_reused_when_given_back_and_no_other() {
        let mut arena = Held(Arena::new());
        let first = arena.alloc(24, 8);
        let second = arena.alloc(24, 8);
        assert_eq!(second, first + 24);
        arena.dealloc(second, 24, 8);
        assert_eq!(arena.alloc(16, 8), second, "the last, given back, is taken again");
        arena.dealloc(first, 24, 8);
        assert_eq!(arena.alloc(8, 8), second + 16, "one given back out of order is not");
    }

    #[test]
    fn the_newest_block_grows_in_place_and_the_next_one_follows_it() {
        let mut arena = Held(Arena::new());
        let growing = arena.alloc(100, 1);
        fill(growing, 100, 7);
        assert_eq!(arena.realloc(growing, 100, 1, 400), growing);
        assert_eq!(bytes(growing, 100), vec![7; 100]);
        fill(growing, 400, 7);
        let newer = arena.alloc(8, 8);
        assert!(newer >= growing + 400, "the next block lies inside the grown one");
        fill(newer, 8, 9);
        assert_eq!(bytes(growing, 400), vec![7; 400]);
        // No longer the newest: it moves, with its bytes, and the newer one is untouched.
        let moved = arena.realloc(growing, 400, 1, 800);
        assert!(moved >= newer + 8);
        assert_eq!(bytes(moved, 400), vec![7; 400]);
        assert_eq!(bytes(newer, 8), vec![9; 8]);
    }

    #[test]
    fn a_block_that_shrinks_stays_and_one_without_room_moves() {
        let mut arena = Held(Arena::new());
        let older = arena.alloc(64, 8);
        let _newer = arena.alloc(8, 8);
        assert_eq!(arena.realloc(older, 64, 8, 16), older, "shrunk in place, though not the newest");
        // The newest, grown past what its chunk has left: moved to a new chunk.
        // (72 bytes taken, then seven small blocks: under a small block left.)
        let mut last = 0;
        for _ in 0..7 {
            last = arena.alloc(SMALL, 8);
        }
        fill(last, SMALL, 5);
        let newest = arena.alloc(SMALL / 2, 8);
        fill(newest, SMALL / 2, 6);
        let grown = arena.realloc(newest, SMALL / 2, 8, SMALL);
        assert_ne!(grown, newest);
        assert_eq!(bytes(grown, SMALL / 2), vec![6; SMALL / 2]);
        assert_eq!(bytes(last, SMALL), vec![5; SMALL]);
    }

    #[test]
    fn blocks_cross_between_the_chunks_and_the_c_library_with_their_bytes() {
        let mut arena = Held(Arena::new());
        let small_block = arena.alloc(SMALL, 8);
        fill(small_block, SMALL, 3);
        // Grown past the small size: moved to the C library, and the chunk's
        // last block, given back, is taken again.
        let large = arena.realloc(small_block, SMALL, 8, 3 * SMALL);
        assert_eq!(bytes(large, SMALL), vec![3; SMALL]);
        assert_eq!(arena.alloc(8, 8), small_block);
        fill(large, 3 * SMALL, 4);
        let larger = arena.realloc(large, 3 * SMALL, 8, 10 * SMALL);
        assert_eq!(bytes(larger, 3 * SMALL), vec![4; 3 * SMALL]);
        // Shrunk to a small size: back into the chunk, after its newest block.
        let shrunk = arena.realloc(larger, 10 * SMALL, 8, 64);
        assert_eq!(shrunk, small_block + 8);
        assert_eq!(bytes(shrunk, 64), vec![4; 64]);
        arena.dealloc(shrunk, 64, 8);
    }

    #[test]
    fn a_full_chunk_is_followed_by_one_new_chunk() {
        let mut arena = Held(Arena::new());
        let mut chunks = Vec::new();
        let blocks: Vec<usize> = (0..3 * CHUNK / SMALL)
            .map(|_| {
                let block = arena.alloc(SMALL, 16);
                if chunks.last() != Some(&arena.0.end) {
                    chunks.push(arena.0.end);
                }
                block
            })
            .collect();
        assert_eq!(chunks.len(), 3, "three chunks' worth took {} chunks", chunks.len());
        // A chunk holds `CHUNK / SMALL` such blocks, side by side.
        for run in blocks.chunks(CHUNK / SMALL) {
            assert!(run.windows(2).all(|pair| pair[1] == pair[0] + SMALL), "{run:?}");
        }
    }
}
