//! How the process's memory allocator is set up, once, at the top of `main`.

/// One glibc malloc arena for the whole process. glibc gives each thread that allocates
/// concurrently an arena of its own, and memory freed in one arena is never reused by
/// another: the speech engine's transient buffers (tens of MiB per window, made on whichever
/// thread encodes or decodes) then stay resident once per thread. With one arena, peak memory
/// is the largest working set rather than the sum over threads (whisper-base on 128 s of
/// speech, two chunks at once: 386 MiB peak with glibc's default, 340 MiB with one arena, and
/// no slower: its allocations are few and large). Must run before any other thread starts.
/// Elsewhere (musl, macOS, Windows) the allocator is left as it is.
pub fn use_one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; called before other threads exist.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Hands memory the allocator holds free back to the system, so releasing a model shows in
/// the process's resident memory (glibc keeps freed memory in its heap otherwise). Elsewhere
/// nothing is done.
pub fn return_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free pages of the heap; safe from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}
