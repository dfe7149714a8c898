//! Integration tests of the `sampler` crate: Stan parity of the benchmark models, posterior
//! correctness of the whole sampler, decode robustness, allocation-free evaluation, chains
//! whose draws are streamed rather than kept, and the step size of each transition.

// The counting allocator below is the only unsafe code, and it only forwards to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

mod allocation;
mod bench_parity;
mod common;
mod decode_robustness;
mod posterior;
mod sbc;
mod stan_parity;
mod step_size;
mod streaming;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static ALLOCATED_BYTES: Cell<u64> = const { Cell::new(0) };
}

/// Counts allocations per thread, so that tests running in parallel do not disturb each other.
struct CountingAllocator;

// SAFETY: every method forwards to the system allocator unchanged.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|count| count.set(count.get() + 1));
        ALLOCATED_BYTES.with(|bytes| bytes.set(bytes.get() + layout.size() as u64));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|count| count.set(count.get() + 1));
        ALLOCATED_BYTES.with(|bytes| bytes.set(bytes.get() + new_size as u64));
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Allocations made so far by the calling thread.
pub fn allocations_on_this_thread() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

/// Bytes allocated so far by the calling thread (freed or not; a reallocation counts its
/// new size).
pub fn bytes_allocated_on_this_thread() -> u64 {
    ALLOCATED_BYTES.with(Cell::get)
}
