//! Communication and ranks: what one rank's trace says of its collectives (`communication`),
//! and what a multi-rank run holds of each rank (`ranks`).
//!
//! # `communication` (any bundle whose trace has communication kernels)
//!
//! Computed once, in ingest, from the rank's own GPU ops on its own clock:
//!
//! * [`Collective`] rows: communication kernels grouped by collective, process group and
//!   dtype. The collective comes from the kernel's `Collective name` argument (the PyTorch
//!   profiler's NCCL metadata) when the trace gives it, else from the kernel name's pattern
//!   ([`crate::names::collective`]), and `source` says which.
//! * [`CommWindow`]s: the whole trace's GPU span and each measured stage's instances (their
//!   GPU windows, first to last op attributed to the instance). Inside a window, over every
//!   stream of the rank:
//!   * `comm_ns`: the union of communication kernels;
//!   * `compute_ns`: the union of every other kernel ("computation");
//!   * `exposed_comm_ns`: communication with no computation kernel running beside it
//!     (`comm_ns − |comm ∩ compute|`); `overlap_pct` = `(comm − exposed) / comm`;
//!   * the time no computation kernel runs (`window_ns − compute_ns`) split by cause:
//!     `comm_wait_ns` (a communication kernel runs: the exposed communication), `host_ns`
//!     (nothing runs, and the op that ends the gap was launched after the gap began: the GPU
//!     waited for the host) and `other_ns` (the rest: memcpy/memset, or work that was enqueued
//!     but waited on a dependency or synchronization).
//!
//! # `ranks` (a multi-rank run's top-level bundle only)
//!
//! A multi-rank run is `runs/<id>/bundle.json` plus one complete single-rank run per rank in
//! `runs/<id>/ranks/<rank>/` (`bundle.json`, `timeline.json`). The top-level bundle's tables
//! aggregate across ranks as [`RankSet::aggregation`] says (stage instances pooled, kernel and
//! operator counts and times summed), holds no timeline of its own, and its [`RankSet`] lists
//! each rank with its clock alignment and the per-rank figures the rank table and the skew
//! chart show.

use serde::{Deserialize, Serialize};

/// A rank's communication kernels and how they overlap computation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Communication {
    /// Per collective, process group and dtype; by total time, largest first.
    pub collectives: Vec<Collective>,
    /// The whole trace first (`stage: None`), then each measured stage.
    pub windows: Vec<CommWindow>,
}

/// Communication kernels of one collective type, process group and dtype.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Collective {
    /// `allreduce`, `allgather`, `reducescatter`, `broadcast`, `reduce`, `sendrecv`,
    /// `alltoall`, … (lower case, no separators); `unknown` when neither the arguments nor the
    /// name say.
    pub collective: String,
    /// The process group's name (`Process Group Name`), when the trace gives it.
    #[serde(default)]
    pub process_group: Option<String>,
    /// `Group size`, when the trace gives it.
    #[serde(default)]
    pub group_size: Option<u32>,
    /// `dtype` (`Float`, `BFloat16`, …), when the trace gives it.
    #[serde(default)]
    pub dtype: Option<String>,
    pub calls: u64,
    pub total_ns: u64,
    /// Sum of `In msg nelems` over the calls that give it.
    #[serde(default)]
    pub in_elements: Option<u64>,
    /// `in_elements` × the dtype's size, when both are known.
    #[serde(default)]
    pub in_bytes: Option<u64>,
    /// `kernel args` (the PyTorch profiler's NCCL metadata) or `kernel name`.
    pub source: String,
}

/// Communication, computation and idle time inside one window of a rank's GPU time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CommWindow {
    /// The measured stage (`stages[]` id); `None` for the whole trace.
    #[serde(default)]
    pub stage: Option<u32>,
    /// The stage's name, or `whole trace`.
    pub name: String,
    /// How many windows (stage instances) are summed.
    pub instances: u64,
    pub window_ns: u64,
    pub comm_ns: u64,
    pub compute_ns: u64,
    pub exposed_comm_ns: u64,
    /// `(comm − exposed) / comm` × 100; 0 without communication.
    pub overlap_pct: f64,
    /// No computation kernel runs while a communication kernel does (= `exposed_comm_ns`).
    pub comm_wait_ns: u64,
    /// Nothing runs, and the op ending the gap was launched after the gap began.
    pub host_ns: u64,
    /// The rest of the time without computation.
    pub other_ns: u64,
}

/// The ranks of a multi-rank run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RankSet {
    /// The job's world size, as every rank's trace states it.
    pub world_size: u32,
    /// The ranks present, by rank.
    pub ranks: Vec<RankEntry>,
    /// Ranks of `0..world_size` with no input.
    #[serde(default)]
    pub missing: Vec<u32>,
    /// The tensor-/expert-parallel degree the MFU divides by, with its source.
    #[serde(default)]
    pub parallel_degree: Option<u32>,
    #[serde(default)]
    pub parallel_degree_source: Option<String>,
    /// How the top-level tables combine the ranks, in words.
    pub aggregation: String,
    /// Per top-level measured stage: its time on each rank and the spread.
    #[serde(default)]
    pub skew: Vec<StageSkew>,
}

/// One rank of a multi-rank run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RankEntry {
    pub rank: u32,
    /// The rank's run directory, relative to the run (`ranks/<rank>`).
    pub dir: String,
    /// The rank's input files, as given.
    pub inputs: Vec<String>,
    /// The GPU, as the rank's trace names it.
    #[serde(default)]
    pub device: Option<String>,
    /// Added to the rank's own timestamps to put them on the run's clock (rank 0's): the
    /// difference of the ranks' epoch offsets. 0 for rank 0, and when unknown.
    pub clock_offset_ns: i64,
    /// What the alignment rests on (`baseTimeNanoseconds`, `nsys session start`, or why none).
    pub clock_source: String,
    pub kernels: u64,
    pub kernel_ns: u64,
    pub gpu_busy_ns: u64,
    /// Communication kernel time and the exposed part, over the whole trace.
    pub comm_ns: u64,
    pub exposed_comm_ns: u64,
    /// Idle without computation, by cause, over the whole trace.
    pub host_idle_ns: u64,
    pub other_idle_ns: u64,
    /// The rank's collectives (its `communication.collectives`).
    #[serde(default)]
    pub collectives: Vec<Collective>,
    /// What a capture measured on this rank and its GPU, in brief (its run, `ranks/<rank>/`,
    /// holds the whole record); `None` for traces ingested as ranks and in older bundles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<RankCapture>,
}

/// A rank's own capture record, in brief: the run's capture record is the group's (each
/// iteration as long as its slowest rank, energy summed over the GPUs), this is the rank's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RankCapture {
    /// The rank's GPU as NVML names it.
    #[serde(default)]
    pub gpu_uuid: Option<String>,
    /// Medians of the unprofiled baseline's measured iterations on this rank, ns.
    #[serde(default)]
    pub prefill_ns: Option<f64>,
    #[serde(default)]
    pub decode_ns: Option<f64>,
    /// Each profiled pass's overhead on this rank, per stage.
    #[serde(default)]
    pub overhead: Vec<crate::Overhead>,
    /// Energy of this rank's GPU per stage instance.
    #[serde(default)]
    pub energy: Vec<crate::StageEnergy>,
}

impl RankCapture {
    /// The brief of a rank's capture record.
    pub fn of(c: &crate::Capture) -> Self {
        let b = c.baseline.as_ref();
        RankCapture {
            gpu_uuid: c.snapshot.gpu_uuid.clone(),
            prefill_ns: b.map(|b| b.prefill.median_ns),
            decode_ns: b.map(|b| b.decode.median_ns),
            overhead: c.overhead.clone(),
            energy: c.energy.clone(),
        }
    }
}

/// One stage's time on every rank.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageSkew {
    pub stage: String,
    /// Per rank (in `RankSet::ranks` order): the median wall time of the stage's measured
    /// instances, ns; `None` where the rank has no measured instance.
    pub median_ns: Vec<Option<f64>>,
    /// Per rank: communication time inside the stage (sum over instances), ns.
    pub comm_ns: Vec<u64>,
    /// (max − min) / min of the medians, %.
    pub spread_pct: f64,
    /// The rank with the longest median.
    pub slowest_rank: u32,
    pub fastest_rank: u32,
}
