//! Shared by every fuzz target: an allocator that aborts on any single allocation over
//! [`MAX_ALLOCATION`], so a length taken on trust from a crafted header is reported as a crash
//! even when the memory is never touched (libFuzzer's own `-malloc_limit_mb` needs a
//! sanitizer's malloc hooks, and `-rss_limit_mb` only sees pages in use).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, Ordering};

/// The largest single allocation a target may make.
pub const MAX_ALLOCATION: usize = 512 << 20;

pub struct Guard;

unsafe impl GlobalAlloc for Guard {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        check(layout.size());
        System.alloc_zeroed(layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        check(new_size);
        System.realloc(ptr, layout, new_size)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

fn check(size: usize) {
    static TRIPPED: AtomicBool = AtomicBool::new(false);
    if size > MAX_ALLOCATION && !TRIPPED.swap(true, Ordering::SeqCst) {
        // Small allocations from here on are fine; only the huge one is refused.
        eprintln!(
            "==alloc-guard== an allocation of {size} bytes (over {MAX_ALLOCATION}) was asked for\n{}",
            std::backtrace::Backtrace::force_capture()
        );
        std::process::abort();
    }
}

#[global_allocator]
static GUARD: Guard = Guard;
