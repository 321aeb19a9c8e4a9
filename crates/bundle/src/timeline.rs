//! `timeline.json`: every GPU op and range of a run, column-oriented so that a browser parses
//! a million kernels quickly (one `JSON.parse` of a few flat integer arrays, no per-kernel
//! objects).
//!
//! All times are nanoseconds relative to [`Timeline::t0_ns`] (the earliest GPU op or range
//! start). Column `i` of every array in one group describes the same record. Kernel rows refer
//! to `bundle.json`'s `kernels[]` by index (`kernel`), stages by `stages[]` index (`stage`,
//! `null` outside every stage).

use serde::{Deserialize, Serialize};

use crate::{Launch, OptU32};

/// The run's GPU ops and stage ranges on one time axis.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    pub schema_version: u32,
    pub run_id: String,
    /// Absolute time (source clock, ns) that every relative time is measured from.
    pub t0_ns: i64,
    /// Last op or range end, relative to `t0_ns`.
    pub end_ns: u64,
    /// UTC ns since the Unix epoch of `t0_ns`, when the source records its clock's epoch
    /// (Nsight Systems' session start, the PyTorch profiler's `baseTimeNanoseconds`). It puts
    /// NVML samples, which carry UTC times, on this time axis.
    #[serde(default)]
    pub t0_epoch_ns: Option<i64>,
    /// Distinct kernel launch geometries; `kernels.launch` indexes into this list.
    #[serde(default)]
    pub launches: Vec<Launch>,
    /// CUDA stream ids; `stream` columns index into this list.
    pub streams: Vec<u64>,
    pub kernels: TimelineKernels,
    pub mem_ops: TimelineMemOps,
    pub ranges: TimelineRanges,
    /// The CUDA API calls that launched the ops above. Not part of `timeline.json`: the store
    /// writes it beside it as `launch_calls.json` ([`LAUNCH_CALLS_FILE`]) and reads it back on
    /// request (`llmprof_store::read_launch_calls`), so the viewer, which draws no launch
    /// calls, never parses them.
    #[serde(skip)]
    pub calls: TimelineCalls,
}

/// `launch_calls.json`: the CUDA runtime or driver API calls that launched the timeline's GPU
/// ops (calls that launched no traced op are left out), sorted by start, and each op's call.
/// Written only when the source traced launch calls (runs ingested since it exists).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimelineCalls {
    /// Start relative to `t0_ns`; negative for a call made before the first op or range.
    pub start: Vec<i64>,
    pub dur: Vec<u64>,
    /// Index into `threads`: the calling thread.
    pub thread: Vec<u32>,
    /// The source's correlation id, shared by the call and the ops it launched.
    pub correlation: Vec<i64>,
    /// Index into `names`: the API function (`cudaLaunchKernel`, `cuLaunchKernel`,
    /// `cudaGraphLaunch`, …, as the source spells it), or `null` where the source does not
    /// name it.
    pub name: Vec<OptU32>,
    /// OS thread ids of the calling threads.
    pub threads: Vec<u64>,
    /// Distinct API function names.
    pub names: Vec<String>,
    /// Per entry of `names`: a driver API function (`cu*`), not a runtime one (`cuda*`).
    pub driver: Vec<bool>,
    /// Per row of the timeline's `kernels` (same order): its launch call (position in these
    /// columns), or `null` where none was traced.
    pub kernel_call: Vec<OptU32>,
    /// The same for the timeline's `mem_ops`.
    pub mem_op_call: Vec<OptU32>,
}

/// The file name of [`TimelineCalls`] in a run directory.
pub const LAUNCH_CALLS_FILE: &str = "launch_calls.json";

impl TimelineCalls {
    /// Whether the timeline holds no launch calls.
    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
    }
}

/// Kernel launches, sorted by start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimelineKernels {
    pub start: Vec<u64>,
    pub dur: Vec<u64>,
    /// Index into [`Timeline::streams`].
    pub stream: Vec<u32>,
    /// Index into `kernels[]` of the bundle.
    pub kernel: Vec<u32>,
    /// Innermost enclosing stage (`stages[]` index), or `null`.
    pub stage: Vec<OptU32>,
    /// Launch geometry (index into [`Timeline::launches`]), or `null` where the source has
    /// none. Empty in timelines written before this column existed.
    #[serde(default)]
    pub launch: Vec<OptU32>,
    /// The innermost range instance the kernel is attributed to (position in
    /// [`Timeline::ranges`]), or `null`. Attribution follows the launching CPU call, so the
    /// kernel itself may run after that range ended. Empty in older timelines.
    #[serde(default)]
    pub range: Vec<OptU32>,
    /// The CUDA graph that ran the op (the graph's id as Nsight Systems numbers it), or `null`.
    /// Empty when the trace holds no graph work. Graph spans of graph-level traces are rows
    /// too, their `kernel` a `kind: "graph"` row.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graph: Vec<OptU32>,
    /// The op's node index within that graph (node-level Nsight Systems traces), or `null`.
    /// Empty when no op has one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graph_node: Vec<OptU32>,
}

impl TimelineKernels {
    /// The kernels at `rows` (positions in these columns), every column this has.
    pub fn rows(&self, rows: impl Iterator<Item = usize> + Clone) -> TimelineKernels {
        let n = self.start.len();
        let opt = |col: &[OptU32]| -> Vec<OptU32> {
            if col.len() == n {
                rows.clone().map(|i| col[i]).collect()
            } else {
                Vec::new()
            }
        };
        TimelineKernels {
            start: rows.clone().map(|i| self.start[i]).collect(),
            dur: rows.clone().map(|i| self.dur[i]).collect(),
            stream: rows.clone().map(|i| self.stream[i]).collect(),
            kernel: rows.clone().map(|i| self.kernel[i]).collect(),
            stage: opt(&self.stage),
            launch: opt(&self.launch),
            range: opt(&self.range),
            graph: opt(&self.graph),
            graph_node: opt(&self.graph_node),
        }
    }
}

/// Memcpys and memsets, sorted by start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimelineMemOps {
    pub start: Vec<u64>,
    pub dur: Vec<u64>,
    pub stream: Vec<u32>,
    /// Index into `kernels[]` (the memcpy-kind or memset row).
    pub kernel: Vec<u32>,
    pub bytes: Vec<u64>,
    pub stage: Vec<OptU32>,
}

/// Stage range instances (NVTX ranges or annotations), sorted by start.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimelineRanges {
    pub start: Vec<u64>,
    pub dur: Vec<u64>,
    /// `stages[]` index.
    pub stage: Vec<u32>,
    /// Nesting depth on its thread (0 = outermost).
    pub depth: Vec<u32>,
    /// OS thread id.
    pub tid: Vec<u64>,
}

impl Timeline {
    /// Parses `timeline.json` text.
    pub fn from_json(text: &str) -> Result<Timeline, serde_json::Error> {
        serde_json::from_str(text)
    }
}
