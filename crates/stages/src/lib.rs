//! Stage markers for Rust workloads: the same NVTX conventions as llmprof's Python workload
//! driver, so `llmprof capture --cmd "./my-infer" --stages prefill,decode` sees a Rust workload's
//! stages exactly as it sees a target's.
//!
//! The conventions (from `crates/capture/src/driver/driver.py`):
//!
//! * a stage is an NVTX **push/pop** range (`nvtxRangePushA`/`nvtxRangePop`) in the **default
//!   domain**, named by the stage alone: `prefill`, `decode`, or a sub-stage such as `sam`;
//!   Nsight Compute's filter `--nvtx-include "decode/"` (the trailing slash is push/pop
//!   syntax) and Nsight Systems' NVTX projection both rely on that;
//! * warm-up iterations name their ranges `warmup_<stage>`, so analysis leaves them out
//!   ([`Stage::warmup`], [`stage_name`]);
//! * a stage closes after the GPU work it launched is done: synchronize (e.g.
//!   `cudaDeviceSynchronize`) inside the stage before its guard drops, or its wall time misses
//!   the GPU tail.
//!
//! ```
//! use llmprof_stages::{in_stage, stage, DECODE, PREFILL};
//!
//! let first_token = in_stage(PREFILL, || 42);
//! {
//!     let _decode = stage(DECODE);
//!     for _ in 0..4 { /* one decode step */ }
//! } // the decode range closes here
//! assert_eq!(first_token, 42);
//! ```
//!
//! Without a profiler attached NVTX calls are no-ops (no NVTX tool is injected), so the markers
//! can stay in production code. The crate needs no CUDA and no GPU to build or run: it uses the
//! `nvtx` crate 1.x, which compiles NVTX's C headers with `cc` (NVIDIA's `nvtx` 2.x generates
//! its bindings with bindgen at build time and so needs libclang on the build machine). Under
//! `llmprof capture --cmd`, `LLMPROF_PASS` names the pass ([`pass`]) and `LLMPROF_STAGES` the
//! stages the user asked for ([`requested_stages`]).

use std::cell::RefCell;
use std::marker::PhantomData;

/// The prompt's forward pass (and the first token).
pub const PREFILL: &str = "prefill";
/// The decode loop: every generated token after the first.
pub const DECODE: &str = "decode";
/// Prefix of warm-up ranges, which analysis excludes.
pub const WARMUP_PREFIX: &str = "warmup_";

thread_local! {
    /// The stages open on this thread, innermost last (NVTX push/pop ranges are per thread).
    static OPEN: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// The NVTX range name of `stage`: `stage`, or `warmup_<stage>` in a warm-up iteration.
pub fn stage_name(stage: &str, warmup: bool) -> String {
    if warmup {
        format!("{WARMUP_PREFIX}{stage}")
    } else {
        stage.to_string()
    }
}

/// An open stage: an NVTX push/pop range on this thread, popped when the guard drops. Not
/// `Send`: a push/pop range must end on the thread that opened it.
#[derive(Debug)]
#[must_use = "the stage ends when this guard is dropped"]
pub struct Stage {
    name: String,
    _not_send: PhantomData<*const ()>,
}

impl Stage {
    /// Opens `name` (a NUL byte in it is dropped, as NVTX strings cannot hold one).
    pub fn new(name: &str) -> Stage {
        let name: String = name.chars().filter(|&c| c != '\0').collect();
        // `nvtxRangePushA` in the default domain, as `torch.cuda.nvtx.range_push` does.
        nvtx::range_push!("{name}");
        OPEN.with(|o| o.borrow_mut().push(name.clone()));
        Stage {
            name,
            _not_send: PhantomData,
        }
    }

    /// Opens the warm-up variant of `stage` (`warmup_<stage>`).
    pub fn warmup(stage: &str) -> Stage {
        Stage::new(&stage_name(stage, true))
    }

    /// The NVTX range name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        nvtx::range_pop!();
        OPEN.with(|o| {
            let mut o = o.borrow_mut();
            if let Some(i) = o.iter().rposition(|n| *n == self.name) {
                o.remove(i);
            }
        });
    }
}

/// Opens stage `name` until the returned guard drops.
pub fn stage(name: &str) -> Stage {
    Stage::new(name)
}

/// Runs `f` inside stage `name` and returns its result.
pub fn in_stage<R>(name: &str, f: impl FnOnce() -> R) -> R {
    let _stage = Stage::new(name);
    f()
}

/// The stages open on this thread, outermost first.
pub fn open_stages() -> Vec<String> {
    OPEN.with(|o| o.borrow().clone())
}

/// The capture pass this process runs in under `llmprof capture --cmd` (`baseline`, `kineto`,
/// `nsys`, `ncu`), from `LLMPROF_PASS`; `None` outside llmprof.
pub fn pass() -> Option<String> {
    std::env::var("LLMPROF_PASS").ok().filter(|p| !p.is_empty())
}

/// The stage names given with `--stages`, from `LLMPROF_STAGES` (comma-separated); empty when
/// none were given or outside llmprof.
pub fn requested_stages() -> Vec<String> {
    std::env::var("LLMPROF_STAGES")
        .map(|s| {
            s.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_nest_and_close_with_their_guards() {
        assert!(open_stages().is_empty());
        let outer = stage(PREFILL);
        let value = in_stage("sam", || {
            assert_eq!(open_stages(), ["prefill", "sam"]);
            7
        });
        assert_eq!(value, 7);
        assert_eq!(open_stages(), ["prefill"]);
        drop(outer);
        {
            let w = Stage::warmup(DECODE);
            assert_eq!(w.name(), "warmup_decode");
            assert_eq!(open_stages(), ["warmup_decode"]);
        }
        assert!(open_stages().is_empty());
        // NUL bytes cannot reach NVTX.
        let s = stage("de\0code");
        assert_eq!(s.name(), "decode");
    }

    #[test]
    fn names_follow_the_driver() {
        assert_eq!(stage_name(DECODE, false), "decode");
        assert_eq!(stage_name("vision_encoder", true), "warmup_vision_encoder");
    }
}
