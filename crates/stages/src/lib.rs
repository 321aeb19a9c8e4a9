//! Stage markers for Rust workloads: the same NVTX conventions as llmprof's Python workload
//! driver, so `llmprof capture --cmd "./my-infer" --stages prefill,decode` sees a Rust workload's
//! stages exactly as it sees a target's.
//!
//! Memory: this crate needs no CUDA, so it cannot read a caching allocator's peaks and writes
//! no memory keys on its `stages.jsonl` lines; a Rust workload's Memory table is NVML's used
//! memory over its stage windows, labelled so (the Python package's `llmprof.stage` reports
//! PyTorch's allocator).
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
//!
//! Under `llmprof capture --cmd` (`LLMPROF_OUT_DIR` set) every stage also appends its host
//! wall-clock window to `$LLMPROF_OUT_DIR/stages.jsonl` when its guard drops, one JSON object a
//! line: `{"stage":"prefill","start_ns":…,"end_ns":…,"pid":…}`, ns since the Unix epoch (the
//! clock of llmprof's NVML sampler). llmprof compares the profiled passes with the baseline
//! stage by stage from these windows instead of whole-process walls, which hold interpreter
//! start-up and model load ([`WINDOWS_FILE`]). Any workload may write the same lines; a failed
//! write is ignored, never a crash.

use std::cell::RefCell;
use std::fs::File;
use std::io::Write;
use std::marker::PhantomData;
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

/// The prompt's forward pass (and the first token).
pub const PREFILL: &str = "prefill";
/// The decode loop: every generated token after the first.
pub const DECODE: &str = "decode";
/// Prefix of warm-up ranges, which analysis excludes.
pub const WARMUP_PREFIX: &str = "warmup_";

/// The file in `$LLMPROF_OUT_DIR` that receives each stage's window, one JSON line per stage
/// instance.
pub const WINDOWS_FILE: &str = "stages.jsonl";

/// `$LLMPROF_OUT_DIR/stages.jsonl`, opened for appending on first use; `None` outside llmprof
/// or when it cannot be opened.
fn sink() -> Option<&'static Mutex<File>> {
    static SINK: OnceLock<Option<Mutex<File>>> = OnceLock::new();
    SINK.get_or_init(|| {
        let dir = std::env::var_os("LLMPROF_OUT_DIR").filter(|d| !d.is_empty())?;
        open_windows(Path::new(&dir)).map(Mutex::new)
    })
    .as_ref()
}

/// `dir/stages.jsonl` opened for appending (so the runs of one pass share it).
fn open_windows(dir: &Path) -> Option<File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(WINDOWS_FILE))
        .ok()
}

/// ns since the Unix epoch.
fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// One line of `stages.jsonl`.
fn window_line(stage: &str, start_ns: i64, end_ns: i64, pid: u32) -> String {
    let mut name = String::with_capacity(stage.len() + 2);
    for c in stage.chars() {
        match c {
            '"' => name.push_str("\\\""),
            '\\' => name.push_str("\\\\"),
            c if (c as u32) < 0x20 => name.push_str(&format!("\\u{:04x}", c as u32)),
            c => name.push(c),
        }
    }
    format!("{{\"stage\":\"{name}\",\"start_ns\":{start_ns},\"end_ns\":{end_ns},\"pid\":{pid}}}\n")
}

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
    /// When it opened, ns since the Unix epoch.
    start_ns: i64,
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
            start_ns: now_ns(),
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
        if let Some(file) = sink() {
            let line = window_line(&self.name, self.start_ns, now_ns(), std::process::id());
            if let Ok(mut f) = file.lock() {
                let _ = f.write_all(line.as_bytes());
            }
        }
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

    /// The lines llmprof's `--cmd` overhead reads, appended by each run of a pass.
    #[test]
    fn windows_are_json_lines_appended_to_the_pass_directory() {
        assert_eq!(
            window_line("prefill", 10, 25, 7),
            "{\"stage\":\"prefill\",\"start_ns\":10,\"end_ns\":25,\"pid\":7}\n"
        );
        assert_eq!(
            window_line("a\"b\\c\nd", 0, 1, 1),
            "{\"stage\":\"a\\\"b\\\\c\\u000ad\",\"start_ns\":0,\"end_ns\":1,\"pid\":1}\n"
        );
        let dir = std::env::temp_dir().join(format!("llmprof-stages-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for run in 0..2 {
            let mut f = open_windows(&dir).unwrap();
            f.write_all(window_line("decode", run, run + 5, 1).as_bytes())
                .unwrap();
        }
        let text = std::fs::read_to_string(dir.join(WINDOWS_FILE)).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(text.lines().count(), 2);
        assert!(now_ns() > 1_600_000_000_000_000_000);
    }

    #[test]
    fn names_follow_the_driver() {
        assert_eq!(stage_name(DECODE, false), "decode");
        assert_eq!(stage_name("vision_encoder", true), "warmup_vision_encoder");
    }
}
