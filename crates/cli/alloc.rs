//! The allocator's policy for a batch tool that builds large arrays and frees them.

/// glibc serves a block of at least this many bytes from a mapping of its own, returned to the
/// system as soon as the block is freed. This is glibc's initial threshold, but by default it
/// rises to the size of the largest such block freed (up to 32 MB); blocks of a few MB then
/// come from the heap, where freed ones stay resident, so ingest's working columns (a few MB
/// each for a million kernels) add up in the peak instead of going back between steps.
/// Keeping it fixed took the anonymous peak of 1 GB traces down by 6–12% with no change in
/// time (PERFORMANCE.md); fixing it higher (1 MB) kept the workers' per-piece buffers
/// in the heap instead, and a 180 MB `.gz` trace's peak grew by a third.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 128 << 10;

/// The most heaps (arenas) glibc keeps. By default a thread that finds the heaps busy gets one
/// of its own, up to 8 per core, and each keeps the memory its thread freed: an ingest's 25 or
/// so threads (parse and `gunzip` workers, the converter's, the operator walk's) left 4–5 MiB
/// more at the anonymous peak of a 1 GB `.gz` trace than with 8 heaps shared among them, and
/// were no faster (PERFORMANCE.md, session 43). The workers reuse their buffers, so they
/// seldom allocate at once; 4 heaps saved a MiB more and read the plain trace slower.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENA_MAX: libc::c_int = 8;

/// Sets [`MMAP_THRESHOLD`] and [`ARENA_MAX`] (glibc only; elsewhere the allocator is left as
/// it is).
pub fn configure() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` changes one malloc tunable and is thread-safe; it is called first
    // thing in `main`, before any other thread starts.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_ARENA_MAX, ARENA_MAX);
    }
}
