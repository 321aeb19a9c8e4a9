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

/// The most heaps (arenas) glibc keeps for [`Heaps::Few`]. By default a thread that finds the
/// heaps busy gets one of its own, up to 8 per core, and each keeps the memory its thread
/// freed: an ingest's 25 or so threads (parse and `gunzip` workers, the converter's, the
/// operator walk's) left 4–5 MiB more at the anonymous peak of a 1 GB `.gz` trace than with 8
/// heaps shared among them, and were no faster (PERFORMANCE.md, sessions 43–44). The workers
/// reuse their buffers, so they seldom allocate at once; 4 heaps saved a MiB more and read the
/// plain trace slower, 16 kept 1–3 MiB of the 4–5.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENA_MAX: libc::c_int = 8;

/// How a command's threads share the allocator's heaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heaps {
    /// A few heaps ([`ARENA_MAX`]) for all of them: `ingest` (and `capture`, which ingests
    /// its passes), whose workers reuse their buffers and whose memory the scale targets bound.
    Few,
    /// As many as glibc gives by default, up to 8 a core. The site build renders pages on
    /// every core and allocates all the time: with 8 heaps it took 20–23% more CPU time on a
    /// 16-core host for the same wall time and no less memory (PERFORMANCE.md, session 44).
    Many,
}

/// Sets [`MMAP_THRESHOLD`], and [`ARENA_MAX`] where `heaps` asks for few (glibc only;
/// elsewhere the allocator is left as it is).
pub fn configure(heaps: Heaps) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `mallopt` changes one malloc tunable and is thread-safe; it is called in `main`
    // once the flags are parsed, before any other thread starts.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        if heaps == Heaps::Few {
            libc::mallopt(libc::M_ARENA_MAX, ARENA_MAX);
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = heaps;
}
