//! Format-free records that every trace parser feeds to the [`crate::convert::TraceConverter`].
//!
//! A record holds integer nanoseconds on the source's clock and the keys needed to join a GPU
//! op to the CUDA API call that launched it: `(process, correlation)`. Each parser decides what
//! `process` and `thread` mean for its format, as long as it is consistent: Nsight Systems uses
//! its `globalPid`/`globalTid`, the PyTorch profiler one process per trace.

use llmprof_bundle::{Launch, StageKind};

/// An NVTX range or `record_function` annotation instance.
#[derive(Debug, Clone, Copy)]
pub struct RangeRecord<'a> {
    /// Key of the thread the range was opened on (unique across processes).
    pub thread: u64,
    /// OS thread id, for display.
    pub tid: u64,
    pub domain: &'a str,
    pub name: &'a str,
    pub kind: StageKind,
    pub start: i64,
    pub end: i64,
    /// The range was ended on another thread than the one that started it (an NVTX start/end
    /// range can be). Nsight Systems projects no GPU work onto such a range: the launches of
    /// neither thread belong to it. Its wall time still counts.
    pub ended_on_other_thread: bool,
}

/// A CUDA API call that may have launched GPU work (runtime or driver API).
#[derive(Debug, Clone, Copy)]
pub struct LaunchRecord {
    pub process: u64,
    /// Key of the calling thread (unique across processes).
    pub thread: u64,
    /// OS thread id, for display.
    pub tid: u64,
    /// A driver API call (`cu*`, nsys' `CUPTI_ACTIVITY_KIND_DRIVER`, kineto's `cuda_driver`).
    pub driver: bool,
    pub start: i64,
    pub end: i64,
    pub correlation: i64,
    /// The call launches a CUDA graph (`cudaGraphLaunch`, `cuGraphLaunch`): every GPU op it
    /// ran belongs to the graph.
    pub graph: bool,
}

impl LaunchRecord {
    /// Whether a CUDA API function name (as nsys or the PyTorch profiler print it,
    /// `cudaGraphLaunch_v10000`, `cuGraphLaunch_ptsz`) launches a graph.
    pub fn is_graph_launch(api_name: &str) -> bool {
        api_name.contains("GraphLaunch")
    }
}

/// Where a GPU op sits in a CUDA graph, as far as the source says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphRef {
    /// The graph's id (Nsight Systems' numbering), when known.
    pub graph: Option<u32>,
    /// The op's node index within the graph, when known.
    pub node: Option<u32>,
}

/// What a GPU op did.
#[derive(Debug, Clone, Copy)]
pub enum GpuOp<'a> {
    Kernel {
        /// Demangled name.
        name: &'a str,
        /// The source's short name, when it has one.
        short_name: Option<&'a str>,
        launch: Option<Launch>,
        /// A collective's metadata, where the source gives it per kernel.
        comm: Option<CommArgs<'a>>,
    },
    Memcpy {
        /// Direction as Nsight Systems words it: `Host-to-Device`, `Device-to-Host`, ...
        direction: &'a str,
        bytes: u64,
    },
    Memset {
        bytes: u64,
    },
    /// A CUDA graph launch traced whole (Nsight Systems' `--cuda-graph-trace=graph`): one span
    /// for all the work of the launch.
    Graph {
        graph: u32,
    },
}

/// What a trace says of the collective a communication kernel ran (the PyTorch profiler's
/// NCCL metadata on the kernel event).
#[derive(Debug, Clone, Copy)]
pub struct CommArgs<'a> {
    /// `Collective name` as written (`allreduce`, `_allgather_base`, …).
    pub collective: &'a str,
    pub in_elements: Option<u64>,
    pub dtype: Option<&'a str>,
    pub group_size: Option<u32>,
    pub process_group: Option<&'a str>,
}

/// A kernel, memcpy or memset executed on the GPU.
#[derive(Debug, Clone, Copy)]
pub struct GpuOpRecord<'a> {
    pub process: u64,
    /// Correlation id of the launching API call, when the source recorded one.
    pub correlation: Option<i64>,
    pub stream: u64,
    pub start: i64,
    pub end: i64,
    pub op: GpuOp<'a>,
    /// The graph the op ran in, when the source says so per op (node-level nsys traces).
    pub graph: Option<GraphRef>,
}
