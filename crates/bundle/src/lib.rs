//! The llmprof run bundle: the one contract between capture/ingest, analysis, the site and the
//! WASM viewer.
//!
//! Every crate reads and writes only these types, and this crate has no I/O-heavy or GPU
//! dependency so that it compiles for `wasm32-unknown-unknown` and the viewer deserializes the
//! very same structs.
//!
//! # On disk
//!
//! A run is a directory `runs/<run-id>/` holding
//!
//! * `bundle.json`: one [`Bundle`], pretty-printed JSON;
//! * `timeline.json`: one [`Timeline`] (present when [`Bundle::timeline`] is `Some`), kept apart
//!   because it grows with the number of kernels while everything in `bundle.json` grows with the
//!   number of *distinct* kernels, stages and operators;
//! * `launch_calls.json`: one [`TimelineCalls`], the launch calls of the timeline's ops, when the
//!   source traced them; kept apart from the timeline (it about doubles it) because only the
//!   Chrome export reads it.
//!
//! # Conventions
//!
//! * **Time** is integer nanoseconds (`*_ns`, `i64`/`u64`). Absolute timestamps are on the
//!   source's own clock (Nsight Systems' session clock, or the PyTorch profiler's microsecond
//!   clock converted exactly to ns); the timeline stores them relative to [`Timeline::t0_ns`].
//!   Floats appear only for means, medians, standard deviations and percentages.
//! * **Means and medians** follow `nsys stats`: the median of an even count is the mean of the two
//!   middle values; the standard deviation is the sample standard deviation (n − 1), 0 for n = 1.
//! * **Percentages** are 0–100, never 0–1.
//! * **Names** are kept exactly as the source prints them: kernel names are the demangled names
//!   `nsys stats -r cuda_gpu_kern_sum` prints, stage names are the NVTX or `record_function`
//!   text without the domain prefix.
//!
//! # Top-level fields of `bundle.json`
//!
//! | field | type | what it holds |
//! |---|---|---|
//! | `schema_version` | integer | [`SCHEMA_VERSION`]; bumped on any incompatible change, with a migration note below |
//! | `run_id` | string | the directory name under `runs/` |
//! | `label` | string? | the user's `--label` |
//! | `llmprof_version` | string | the version of llmprof that wrote the bundle |
//! | `captured_at` | string? | UTC time the profile started (RFC 3339), from the inputs |
//! | `inputs[]` | [`InputFile`] | every file ingested, with its kind and size |
//! | `timing_source` | string? | `"nsys"` or `"kineto"`: which input `stages`, `kernels` and the timeline come from |
//! | `device` | [`Device`]? | the GPU as the inputs reveal it |
//! | `environment` | [`Environment`] | driver, CUDA, CUPTI, OS, CPU and tool versions |
//! | `model` | [`ModelInfo`]? | the Hugging Face `config.json` given with `--model-config` |
//! | `workload` | [`Workload`]? | token accounting (batch, prompt, image, decode steps), each count with its source |
//! | `counted_flops[]` | [`CountedFlops`] | per-stage FLOPs measured by the workload (e.g. `FlopCounterMode`) |
//! | `calibration` | [`Calibration`]? | measured device ceilings (matmul TFLOP/s, copy GB/s) and peak overrides |
//! | `analysis` | [`Analysis`]? | MFU/MBU, roofline position, findings and summary (see `analysis.rs`) |
//! | `capture` | [`Capture`]? | how `llmprof capture` made the run: passes, command lines, baseline, overhead, environment snapshot, manifest |
//! | `nvml` | [`NvmlSeries`]? | GPU power, clocks, utilization, memory, temperature and throttling over time |
//! | `totals` | [`Totals`] | whole-run GPU totals |
//! | `stages[]` | [`Stage`] | every NVTX range / `record_function` annotation, with its instances |
//! | `kernels[]` | [`Kernel`] | per distinct kernel name (and one row per memcpy kind and for memset) |
//! | `instance_kernels[]` | [`InstanceKernels`] | per instance of each measured stage: kernel time by category and for the run's top kernels (see `samples.rs`); absent in older bundles |
//! | `operators[]` | [`Operator`] | PyTorch operators (PyTorch profiler input only) |
//! | `ncu[]` | [`NcuKernel`] | Nsight Compute per-kernel metrics, joined to `kernels[]` |
//! | `timeline` | [`TimelineInfo`]? | how to find `timeline.json` and what it holds |
//! | `diagnostics[]` | [`Diagnostic`] | each class of skipped or doubtful input, with a count and an example |
//! | `warmup` | [`WarmupInstances`]? | how warm-up instances (`stages[].instance_list[].warmup`) were chosen |
//! | `communication` | [`Communication`]? | collectives, and communication/computation overlap and idle time per window (`ranks.rs`) |
//! | `ranks` | [`RankSet`]? | a multi-rank run's ranks, clock alignment, rank table and skew (`ranks.rs`) |
//!
//! ## Paths
//!
//! Every file a bundle names (`inputs[].path`, `model.source`, the `metadata …` sources of
//! `workload` and `counted_flops`, `calibration.sources`, `diagnostics[].file`, `ncu[].file`)
//! is written as `llmprof ingest` was given it, relative paths staying relative. A capture's
//! bundle names them relative to the run directory (`raw/metadata.json`), as it does the
//! capture's working directory inside `environment.command` and `capture.passes[].command`
//! (`driver.py raw/nsys/plan.json`): no path of the capture host's working directory remains.
//!
//! ## Self and inclusive columns
//!
//! * [`Stage::wall_ns`] is inclusive of nested stages (it is the range's duration), as in
//!   `nsys stats -r nvtx_sum`. A GPU op counts toward *every* stage whose range encloses the
//!   call that launched it, so a parent stage's `gpu_ops` includes its children's. Never add
//!   stage rows up; use [`Totals`] for whole-run numbers.
//! * [`Operator::cpu_total_ns`] and [`Operator::device_ns`] are inclusive (an operator's children
//!   included); [`Operator::cpu_self_ns`] and [`Operator::device_self_ns`] are exclusive. Only the
//!   self columns add up across rows: the sum of `device_self_ns` over all operators is the
//!   kernel time that operators launched. A nested call of an operator with the same name as
//!   one of its ancestors is not counted again in the inclusive columns.
//!
//! # Migration notes
//!
//! * Version 1: first version.
//! * Version 2: adds `workload`, `counted_flops`, `calibration` and `analysis`. All are
//!   optional: a version-1 bundle reads as version 2 with them absent.
//! * Version 3: adds `capture` and `nvml`, both optional; older bundles read unchanged.
//!   Later additive fields, same version (each has a serde default, so earlier version-3
//!   bundles read with them empty): `capture.energy[]` ([`StageEnergy`]: J per stage and
//!   J/token of the baseline pass), `capture.energy_note`, `capture.interrupted`,
//!   `capture.command` and `capture.stage_names` (`--cmd` workloads), `nvml.power_source`,
//!   `nvml.energy_mj`, `capture.overhead[].pairs` and `.pair_range_pct` (interleaved overhead
//!   repeats).
//! * Version 4: CUDA graphs. `kernels[].kind` gains `graph` (one row per graph traced whole,
//!   `--cuda-graph-trace=graph`, with the category `cuda graph`); stages gain
//!   `graph_launches`, `graph_kernels` and `graph_busy_ns`, kernels `graph_calls`, totals
//!   `graphs`, `graph_ns`, `graph_kernels`, `graph_launches` and `graph_trace`, the timeline's
//!   kernels the `graph` and `graph_node` columns. All have defaults, so version-3 bundles read
//!   unchanged; a version-3 reader refuses version 4 (the new enum values).
//!   Later additive fields, same version: `instance_kernels[]` ([`InstanceKernels`], written
//!   only when non-empty; earlier version-4 bundles read with it empty), `stages[].parents` (a
//!   range name whose instances sit in different places), `stages[].instance_list[].warmup`
//!   and `warmup` (warm-up instances). With them `stages[].parent` became the stage enclosing
//!   *every* instance (`None` when they differ); bundles written before hold the first
//!   instance's parent there, and paths of the capture host's working directory
//!   (`/tmp/runs/.capture-…/raw/…`) where sources now say `raw/…`.
//!   Also: `environment.distributed` ([`Distributed`]: rank, world size, backend, NCCL version
//!   and process groups from the PyTorch profiler's `distributedInfo`).
//!   Also: `capture.memory` ([`MemoryRecord`]: the baseline pass's peak allocated/reserved
//!   bytes per stage, weights, the KV cache measured after the decode with its tokens and
//!   batch, free and total device memory; for a `--cmd` workload, `nvml_used`: NVML's used
//!   memory of the whole device inside each stage's windows).
//!   Also: `capture.ranks` ([`CaptureRanks`]: a `--nproc` capture's rank count, GPUs in rank
//!   order, the rank ncu profiled, the launcher, where each rank's raw files are, and `rank`:
//!   which rank's record this is — `None` in a multi-rank capture's own bundle, whose record
//!   is the group's: baseline and overhead per iteration of the slowest rank, energy summed
//!   over the GPUs; each rank's own is in `ranks/<r>/bundle.json`).
//!   Also: `analysis.memory.kv_shards` (the GPUs a tensor-parallel KV cache is split over).
//!   Also: `capture.auto_repeats` ([`AutoRepeats`], the outcome
//!   of `--repeats auto`) and `capture.overhead[].basis` (what an overhead's medians are
//!   medians of: iterations, a `--cmd` workload's stage windows, or whole processes).
//!   Also: `nvml.measured_interval_ms`, `.power_update_ms`,
//!   `.energy_update_ms` (NVML's resolution read from the series), `nvml.power_gaps` and
//!   `.energy_gaps` (failed reads: 0 in the column, no reading), `capture.energy[].windows`,
//!   `.updates_per_window` and `.withheld` (J/token withheld for windows shorter than two NVML
//!   refreshes; prefill from a loop of back-to-back prefills), and
//!   `capture.baseline.sub_stages[]` ([`SubStageTiming`]: sub-stages timed by CUDA events).
//!   Also: `launch_calls.json` beside the timeline ([`TimelineCalls`]: the CUDA API calls that
//!   launched the traced ops, with thread, correlation id and API name, and each op's call),
//!   written only when the source traced launch calls; runs without it export no launch calls
//!   or flows (`llmprof export --format chrome`).
//!   Also: `communication` ([`Communication`]) and `ranks` ([`RankSet`]), both omitted when
//!   absent, and the multi-rank run layout `ranks/<rank>/` (see `ranks.rs`).
//!
//! # CUDA graphs
//!
//! A graph launch is one CUDA API call (`cudaGraphLaunch`) that runs many GPU ops. How much of
//! it a trace shows depends on how it was recorded ([`GraphTrace`]):
//!
//! * `node` (`nsys --cuda-graph-trace=node`, and the PyTorch profiler): every kernel, memcpy and
//!   memset inside the graph is recorded with the launch's correlation id; nsys adds the graph
//!   and node ids.
//! * `graph` (`nsys`'s default `--cuda-graph-trace=graph`): one span per graph launch, the
//!   kernels inside it not recorded. Those spans are `kind: "graph"` rows of `kernels[]` and
//!   rows of the timeline's kernel columns; they count in GPU busy time and
//!   [`Stage::graph_launches`], not in [`Stage::kernels`].
//!
//! [`Stage::gpu_ops`] and [`Stage::gpu_proj_ns`] are Nsight Systems' `nvtx_gpu_proj_sum`
//! numbers exactly: GPU ops are the distinct correlation ids of the kernels, memcpys and
//! memsets attributed to the stage, so a graph launch counts once at node level however many
//! kernels it ran, and not at all at graph level (nsys 2025.3 leaves graph spans out of the
//! projection). [`Stage::kernels`], [`Stage::graph_launches`] and [`Stage::gpu_busy_ns`] count
//! what the GPU ran at either level.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod analysis;
mod capture;
pub mod chunks;
pub mod names;
mod opt;
mod ranks;
mod samples;
mod stats;
mod summary;
pub mod time;
mod timeline;
mod warmup;
mod workload;

pub use analysis::{
    is_warmup, Analysis, Finding, HeadlineBasis, Headroom, KernelAnalysis, LaunchFacts, Measure,
    MemoryAnalysis, ModelSummary, Peak, RunMetrics, StageAnalysis, StageRole, StageWall,
};
pub use capture::{
    AutoRepeats, Capture, CaptureRanks, CompileRecord, EnvSnapshot, IterationSample, ManifestEntry,
    MemoryRecord, NvmlSeries, Overhead, PassRecord, StageCi, StageEnergy, StageMemory,
    StageTimings, SubStageTiming, Window,
};
pub use chunks::{ChunkInfo, ChunkedTimeline, Overview, OverviewLane};
pub use opt::OptU32;
pub use ranks::{
    Collective, CommWindow, Communication, RankCapture, RankEntry, RankSet, StageSkew,
};
pub use samples::{CategorySamples, InstanceKernels, KernelSamples, TOP_KERNELS};
pub use stats::Distribution;
pub use summary::{Summary, SummaryKernel, SummaryOperator, SummaryStage};
pub use timeline::{
    Timeline, TimelineCalls, TimelineKernels, TimelineMemOps, TimelineRanges, LAUNCH_CALLS_FILE,
};
pub use warmup::WarmupInstances;
pub use workload::{Calibration, CountedFlops, RunMetadata, Sourced, Workload};

/// Version of the `bundle.json` / `timeline.json` format written by this crate.
pub const SCHEMA_VERSION: u32 = 4;

/// File name of the bundle inside a run directory.
pub const BUNDLE_FILE: &str = "bundle.json";
/// File name of the timeline side file inside a run directory.
pub const TIMELINE_FILE: &str = "timeline.json";

/// One profiled run, normalized from whatever tools produced it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bundle {
    pub schema_version: u32,
    pub run_id: String,
    #[serde(default)]
    pub label: Option<String>,
    pub llmprof_version: String,
    #[serde(default)]
    pub captured_at: Option<String>,
    #[serde(default)]
    pub inputs: Vec<InputFile>,
    #[serde(default)]
    pub timing_source: Option<Source>,
    #[serde(default)]
    pub device: Option<Device>,
    #[serde(default)]
    pub environment: Environment,
    #[serde(default)]
    pub model: Option<ModelInfo>,
    #[serde(default)]
    pub workload: Option<Workload>,
    #[serde(default)]
    pub counted_flops: Vec<CountedFlops>,
    #[serde(default)]
    pub calibration: Option<Calibration>,
    #[serde(default)]
    pub totals: Totals,
    #[serde(default)]
    pub stages: Vec<Stage>,
    #[serde(default)]
    pub kernels: Vec<Kernel>,
    /// Per-instance kernel time of the measured stages (`samples.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instance_kernels: Vec<InstanceKernels>,
    #[serde(default)]
    pub operators: Vec<Operator>,
    #[serde(default)]
    pub ncu: Vec<NcuKernel>,
    #[serde(default)]
    pub timeline: Option<TimelineInfo>,
    #[serde(default)]
    pub diagnostics: Vec<Diagnostic>,
    #[serde(default)]
    pub analysis: Option<Analysis>,
    #[serde(default)]
    pub capture: Option<Capture>,
    #[serde(default)]
    pub nvml: Option<NvmlSeries>,
    /// How warm-up instances were told from measured ones (see [`WarmupInstances`]).
    #[serde(default)]
    pub warmup: Option<WarmupInstances>,
    /// The rank's communication kernels and their overlap with computation (`ranks.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub communication: Option<Communication>,
    /// A multi-rank run's ranks (its top-level bundle only; `ranks.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranks: Option<RankSet>,
}

impl Bundle {
    /// An empty bundle of the current schema version.
    pub fn new(run_id: impl Into<String>) -> Self {
        Bundle {
            schema_version: SCHEMA_VERSION,
            run_id: run_id.into(),
            label: None,
            llmprof_version: String::new(),
            captured_at: None,
            inputs: Vec::new(),
            timing_source: None,
            device: None,
            environment: Environment::default(),
            model: None,
            workload: None,
            counted_flops: Vec::new(),
            calibration: None,
            totals: Totals::default(),
            stages: Vec::new(),
            kernels: Vec::new(),
            instance_kernels: Vec::new(),
            operators: Vec::new(),
            ncu: Vec::new(),
            timeline: None,
            diagnostics: Vec::new(),
            analysis: None,
            capture: None,
            nvml: None,
            warmup: None,
            communication: None,
            ranks: None,
        }
    }

    /// Parses `bundle.json` text, refusing bundles written by a newer llmprof.
    pub fn from_json(text: &str) -> Result<Bundle, BundleError> {
        let probe: VersionProbe = serde_json::from_str(text).map_err(BundleError::Json)?;
        if probe.schema_version > SCHEMA_VERSION {
            return Err(BundleError::TooNew {
                found: probe.schema_version,
                supported: SCHEMA_VERSION,
            });
        }
        serde_json::from_str(text).map_err(BundleError::Json)
    }

    /// The stage with this id, if any.
    pub fn stage(&self, id: u32) -> Option<&Stage> {
        self.stages.get(id as usize)
    }

    /// Whether `stage` is a library's NVTX range (CUDA 13's CCCL, NCCL, cuBLAS, …) rather than
    /// a stage of the workload: a range in a non-default NVTX domain that the capture's
    /// `--stages` did not name (as `name` or `domain:name`). Library ranges stay in the bundle
    /// and the timeline, but are never shown as stages or analysed as one.
    pub fn is_library_range(&self, stage: &Stage) -> bool {
        let named = self.capture.as_ref().map_or(&[][..], |c| &c.stage_names);
        is_library_range(&stage.domain, &stage.name, named)
    }

    /// The per-instance kernel time of stage `id`, when the bundle has it.
    pub fn instance_kernels_of(&self, id: u32) -> Option<&InstanceKernels> {
        self.instance_kernels.iter().find(|s| s.stage == id)
    }

    /// The workload's stages: every stage but library ranges.
    pub fn workload_stages(&self) -> impl Iterator<Item = &Stage> {
        self.stages.iter().filter(|s| !self.is_library_range(s))
    }
}

/// Whether a range of `name` in NVTX `domain` is a library's rather than the workload's: a
/// non-default domain that `named` (the capture's `--stages`, as `name` or `domain:name`) does
/// not name. [`Bundle::is_library_range`] applies it with the bundle's capture record; ingest
/// applies it with the names it is given, before there is a bundle.
pub fn is_library_range(domain: &str, name: &str, named: &[String]) -> bool {
    if domain.is_empty() {
        return false;
    }
    let qualified = format!("{domain}:{name}");
    !named.iter().any(|n| *n == name || *n == qualified)
}

#[derive(Deserialize)]
struct VersionProbe {
    schema_version: u32,
}

/// Why a `bundle.json` could not be read.
#[derive(Debug)]
pub enum BundleError {
    Json(serde_json::Error),
    TooNew { found: u32, supported: u32 },
}

impl std::fmt::Display for BundleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BundleError::Json(e) => write!(f, "not a valid llmprof bundle: {e}"),
            BundleError::TooNew { found, supported } => write!(
                f,
                "bundle schema version {found} is newer than this llmprof understands \
                 ({supported}); upgrade llmprof"
            ),
        }
    }
}

impl std::error::Error for BundleError {}

/// The tool an input came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Nsight Systems SQLite export.
    Nsys,
    /// PyTorch profiler (Kineto) chrome trace.
    Kineto,
    /// Nsight Compute CSV.
    Ncu,
    /// Hugging Face `config.json`.
    ModelConfig,
    /// `metadata.json` of the workload (token counts, counted FLOPs).
    Metadata,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Nsys => "nsys",
            Source::Kineto => "kineto",
            Source::Ncu => "ncu",
            Source::ModelConfig => "model_config",
            Source::Metadata => "metadata",
        }
    }
}

/// One file that went into the bundle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputFile {
    pub source: Source,
    /// The path as given on the command line.
    pub path: String,
    pub bytes: u64,
}

/// The GPU the run used, as the inputs reveal it. Fields the inputs do not reveal are `None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Device {
    pub name: String,
    #[serde(default)]
    pub index: Option<u32>,
    #[serde(default)]
    pub uuid: Option<String>,
    #[serde(default)]
    pub chip: Option<String>,
    /// `"9.0"` style.
    #[serde(default)]
    pub compute_capability: Option<String>,
    #[serde(default)]
    pub sm_count: Option<u32>,
    #[serde(default)]
    pub memory_bytes: Option<u64>,
    /// Peak DRAM bandwidth as the driver reports it (bytes/s).
    #[serde(default)]
    pub memory_bandwidth_bytes_per_s: Option<u64>,
    #[serde(default)]
    pub sm_clock_max_hz: Option<u64>,
    #[serde(default)]
    pub memory_clock_max_hz: Option<u64>,
    #[serde(default)]
    pub l2_cache_bytes: Option<u64>,
    #[serde(default)]
    pub bus_location: Option<String>,
    /// Which inputs described this device.
    #[serde(default)]
    pub sources: Vec<Source>,
}

/// Software and host facts the inputs reveal.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Environment {
    #[serde(default)]
    pub driver_version: Option<String>,
    /// CUDA driver API version, `"13.0"` style.
    #[serde(default)]
    pub cuda_driver_version: Option<String>,
    #[serde(default)]
    pub cuda_runtime_version: Option<String>,
    #[serde(default)]
    pub cupti_version: Option<String>,
    #[serde(default)]
    pub os: Option<String>,
    #[serde(default)]
    pub cpu: Option<String>,
    #[serde(default)]
    pub cpu_cores: Option<u32>,
    #[serde(default)]
    pub hostname: Option<String>,
    /// Profiler tools and their versions, e.g. Nsight Systems, PyTorch profiler schema.
    #[serde(default)]
    pub tools: Vec<ToolInfo>,
    /// `EXPORT_SCHEMA_VERSION` of the Nsight Systems SQLite export.
    #[serde(default)]
    pub nsys_export_schema: Option<String>,
    /// The profiled program's command line, where the input records it.
    #[serde(default)]
    pub command: Option<String>,
    /// The process's place in a distributed job, where the trace records it (the PyTorch
    /// profiler's `distributedInfo`); `None` for a single process.
    #[serde(default)]
    pub distributed: Option<Distributed>,
}

/// One rank of a distributed job, as its trace describes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Distributed {
    pub rank: u32,
    pub world_size: u32,
    /// `nccl`, `gloo`, ….
    #[serde(default)]
    pub backend: Option<String>,
    #[serde(default)]
    pub nccl_version: Option<String>,
    /// The job's process groups (`pg_config`).
    #[serde(default)]
    pub process_groups: Vec<ProcessGroup>,
}

/// A process group of a distributed job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessGroup {
    /// `pg_name` (`"0"`), and `pg_desc` (`default_pg`) when given.
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    pub size: u32,
    /// Global ranks in the group.
    #[serde(default)]
    pub ranks: Vec<u32>,
}

/// A profiling tool and its version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    pub name: String,
    pub version: String,
}

/// The model's Hugging Face `config.json`, kept whole for analysis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    #[serde(default)]
    pub model_type: Option<String>,
    /// Where the config came from (path as given).
    pub source: String,
    pub config: serde_json::Value,
}

impl ModelInfo {
    /// The config as indented JSON text, as a page shows it.
    pub fn config_text(&self) -> String {
        serde_json::to_string_pretty(&self.config).unwrap_or_default()
    }
}

/// Whole-run GPU totals over every GPU op in the timing source, attributed or not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    pub kernels: u64,
    pub kernel_ns: u64,
    pub memcpys: u64,
    pub memcpy_ns: u64,
    pub memsets: u64,
    pub memset_ns: u64,
    /// First GPU op start to last GPU op end.
    pub gpu_span_ns: u64,
    /// Union of all GPU op intervals (time at least one op ran).
    pub gpu_busy_ns: u64,
    /// GPU ops launched outside every stage.
    pub unattributed_gpu_ops: u64,
    /// Distinct CUDA streams that ran GPU ops.
    pub streams: u32,
    /// Graph launches recorded as one span each (graph-level traces), and their summed time.
    #[serde(default)]
    pub graphs: u64,
    #[serde(default)]
    pub graph_ns: u64,
    /// Kernels that graph launches ran (node-level traces and the PyTorch profiler).
    #[serde(default)]
    pub graph_kernels: u64,
    /// Host calls that launched a CUDA graph and have GPU work in the trace.
    #[serde(default)]
    pub graph_launches: u64,
    /// How the trace recorded CUDA graphs; `None` when it holds no graph work.
    #[serde(default)]
    pub graph_trace: Option<GraphTrace>,
}

/// How a trace recorded the GPU work of CUDA graph launches (see "CUDA graphs" above).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GraphTrace {
    /// Every kernel inside a graph, with the launch's correlation id.
    Node,
    /// One span per graph launch; the kernels inside are not recorded.
    Graph,
}

/// How a stage was marked.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum StageKind {
    /// NVTX push/pop range (`nsys` style "PushPop").
    #[default]
    PushPop,
    /// NVTX start/end range (`nsys` style "StartEnd").
    StartEnd,
    /// PyTorch `record_function` annotation (`user_annotation` in the trace).
    Annotation,
}

/// One NVTX range name (or `record_function` name), with every instance of it.
///
/// Attribution follows Nsight Systems' NVTX projection: a GPU op belongs to a range instance when
/// the CUDA API call that launched it (joined on the correlation id) started inside the range on
/// the range's thread.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    /// Index of this stage in `stages[]`.
    pub id: u32,
    /// NVTX domain; `""` for the default domain and for `record_function` annotations.
    pub domain: String,
    pub name: String,
    pub kind: StageKind,
    /// The stage whose ranges directly enclose every instance of this one; `None` for a
    /// top-level stage and for one whose instances sit in different places (then `parents`
    /// lists them). A reader that nests stages by `parent` therefore never shows a stage
    /// under a parent that only some of its instances had.
    pub parent: Option<u32>,
    /// Where the instances sit when that differs between them: each distinct enclosing stage
    /// once (`null` for instances at the top level), in order of first appearance, e.g.
    /// CCCL's `cub::DeviceScan::InclusiveScan` in `[warmup_prefill, warmup_decode, prefill,
    /// decode]`. Empty when every instance has the same parent (`parent`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parents: Vec<Option<u32>>,
    /// Nesting depth of the first instance (0 = top level).
    pub depth: u32,
    pub instances: u64,
    /// Sum of instance durations (as `nvtx_sum`'s "Total Time").
    pub wall_ns: u64,
    /// Distribution of instance durations.
    pub wall: Distribution,
    /// Sum over instances of (last attributed GPU op end − first attributed GPU op start), as
    /// `nvtx_gpu_proj_sum`'s "Total Proj Time". Instances without GPU ops add 0.
    pub gpu_proj_ns: u64,
    /// GPU ops as `nvtx_gpu_proj_sum` counts them ("Total GPU Ops"): distinct launching calls
    /// (correlation ids) of the kernels, memcpys and memsets attributed to the stage, so a
    /// graph launch is one op at node level and none at graph level (see "CUDA graphs").
    pub gpu_ops: u64,
    /// Sum of attributed kernel durations (memcpy/memset excluded).
    pub kernel_ns: u64,
    pub kernels: u64,
    /// CUDA API calls (launches) that started inside the stage and launched GPU ops, and
    /// their summed host duration: the CPU cost of launching the stage's work.
    #[serde(default)]
    pub launches: u64,
    #[serde(default)]
    pub launch_api_ns: u64,
    /// Union of attributed GPU op intervals (graph spans included), summed over instances.
    pub gpu_busy_ns: u64,
    /// `gpu_busy_ns` over the stage's window, in percent: the instances' wall time, each
    /// extended to the end of its GPU work where that outlasts the range (a range closed
    /// before the GPU finished what it launched, such as PyTorch's per-call annotations of a
    /// compiled graph). Equal to `gpu_busy_ns / wall_ns` for ranges that synchronize before
    /// they close, as llmprof's driver's do; at most 100.
    pub gpu_busy_pct: f64,
    /// Of `launches`, the CUDA graph launches (`cudaGraphLaunch`): one host call each, however
    /// many kernels the graph ran.
    #[serde(default)]
    pub graph_launches: u64,
    /// Of `kernels`, those a graph launch ran (node-level traces; 0 at graph level, where they
    /// are not recorded).
    #[serde(default)]
    pub graph_kernels: u64,
    /// Union of the GPU time inside graphs (graph spans, or the graph kernels' intervals),
    /// summed over instances: the part of `gpu_busy_ns` that graphs ran.
    #[serde(default)]
    pub graph_busy_ns: u64,
    pub instance_list: Vec<StageInstance>,
}

/// One occurrence of a stage's range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageInstance {
    pub start_ns: i64,
    pub end_ns: i64,
    pub wall_ns: u64,
    /// Thread the range was opened on (OS thread id).
    pub tid: u64,
    pub gpu_ops: u64,
    pub kernel_ns: u64,
    /// First attributed GPU op start / last end; `None` when no GPU op was attributed.
    pub gpu_start_ns: Option<i64>,
    pub gpu_end_ns: Option<i64>,
    pub gpu_busy_ns: u64,
    /// Whether the instance ran before the measurement (see [`WarmupInstances`]): TTFT, TPOT
    /// and diffs read [`Stage::measured_instances`], which leaves these out.
    #[serde(default, skip_serializing_if = "is_false")]
    pub warmup: bool,
}

fn is_false(b: &bool) -> bool {
    !b
}

/// Coarse kernel class used for the category mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Category {
    #[serde(rename = "gemm")]
    Gemm,
    #[serde(rename = "attention")]
    Attention,
    #[serde(rename = "moe/routing")]
    MoeRouting,
    #[serde(rename = "elementwise")]
    Elementwise,
    #[serde(rename = "reduction/norm")]
    ReductionNorm,
    #[serde(rename = "memcpy/memset")]
    MemcpyMemset,
    #[serde(rename = "communication")]
    Communication,
    /// A CUDA graph traced whole (graph level): its kernels are not known one by one.
    #[serde(rename = "cuda graph")]
    CudaGraph,
    #[serde(rename = "other")]
    Other,
}

impl Category {
    pub const ALL: [Category; 9] = [
        Category::Gemm,
        Category::Attention,
        Category::MoeRouting,
        Category::Elementwise,
        Category::ReductionNorm,
        Category::MemcpyMemset,
        Category::Communication,
        Category::CudaGraph,
        Category::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Category::Gemm => "gemm",
            Category::Attention => "attention",
            Category::MoeRouting => "moe/routing",
            Category::Elementwise => "elementwise",
            Category::ReductionNorm => "reduction/norm",
            Category::MemcpyMemset => "memcpy/memset",
            Category::Communication => "communication",
            Category::CudaGraph => "cuda graph",
            Category::Other => "other",
        }
    }
}

/// What kind of GPU op a `kernels[]` row aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    Kernel,
    Memcpy,
    Memset,
    /// A CUDA graph launch traced as one span (graph-level traces): one row per graph id.
    Graph,
}

/// Launch geometry of a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Launch {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    #[serde(default)]
    pub registers_per_thread: Option<u32>,
}

/// One distinct kernel name (or memcpy kind, or memset), aggregated over all its calls.
///
/// For `kind == "kernel"` the columns equal `nsys stats -r cuda_gpu_kern_sum`; memcpy and memset
/// rows use the names and numbers of `cuda_gpu_mem_time_sum` (`[CUDA memcpy Host-to-Device]`,
/// `[CUDA memset]`); `kind == "graph"` rows (`CUDA graph 4`) are the launches of one graph
/// traced whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kernel {
    /// Index of this row in `kernels[]`; the timeline refers to kernels by it.
    pub id: u32,
    pub kind: OpKind,
    pub name: String,
    pub short_name: String,
    pub category: Category,
    pub calls: u64,
    pub total_ns: u64,
    pub mean_ns: f64,
    pub median_ns: f64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub std_ns: f64,
    /// Share of the total time of all rows of the same `kind`, in percent (`Time (%)`).
    pub time_pct: f64,
    /// Per stage: calls and time attributed to it (a call counts for every enclosing stage).
    pub by_stage: Vec<KernelStage>,
    /// The most frequent launch geometry, where known.
    #[serde(default)]
    pub launch: Option<Launch>,
    /// How many distinct launch geometries the calls used.
    #[serde(default)]
    pub launch_variants: u32,
    /// Bytes moved (memcpy/memset rows).
    #[serde(default)]
    pub bytes: Option<u64>,
    /// Of `calls`, those a CUDA graph launch ran.
    #[serde(default)]
    pub graph_calls: u64,
    /// Indexes into `ncu[]` of the Nsight Compute results for this kernel.
    #[serde(default)]
    pub ncu: Vec<u32>,
}

/// A kernel's share in one stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelStage {
    pub stage: u32,
    pub calls: u64,
    pub total_ns: u64,
}

/// One PyTorch operator name (`cpu_op` events), aggregated. See the module docs for which
/// columns are self and which inclusive.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Operator {
    pub name: String,
    pub calls: u64,
    /// Inclusive host time.
    pub cpu_total_ns: u64,
    /// Host time minus the time of child operators.
    pub cpu_self_ns: u64,
    /// Inclusive device time: kernels, memcpys and memsets launched by this operator or its
    /// children, found through `External id` and the correlation id.
    pub device_ns: u64,
    /// Device time of GPU ops this operator launched directly.
    pub device_self_ns: u64,
    /// GPU ops launched directly.
    pub gpu_ops: u64,
    pub cpu_mean_ns: f64,
    pub device_mean_ns: f64,
    pub by_stage: Vec<OperatorStage>,
}

/// An operator's share in one stage (the innermost stage enclosing each call's start; inclusive
/// columns as in [`Operator`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperatorStage {
    pub stage: u32,
    pub calls: u64,
    pub cpu_total_ns: u64,
    pub cpu_self_ns: u64,
    pub device_ns: u64,
}

/// Nsight Compute results for one profiled kernel launch, in base units whatever units the CSV
/// used (ns, bytes, Hz, percent).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NcuKernel {
    /// The `ID` column (per ncu report).
    pub id: u64,
    /// Kernel name as ncu printed it (ncu shortens names differently from nsys).
    pub name: String,
    /// Index into `kernels[]` when the normalized names match.
    #[serde(default)]
    pub kernel: Option<u32>,
    #[serde(default)]
    pub duration_ns: Option<f64>,
    #[serde(default)]
    pub sm_throughput_pct: Option<f64>,
    #[serde(default)]
    pub memory_throughput_pct: Option<f64>,
    #[serde(default)]
    pub dram_throughput_pct: Option<f64>,
    #[serde(default)]
    pub achieved_occupancy_pct: Option<f64>,
    #[serde(default)]
    pub theoretical_occupancy_pct: Option<f64>,
    #[serde(default)]
    pub tensor_pipe_pct: Option<f64>,
    #[serde(default)]
    pub l2_hit_pct: Option<f64>,
    #[serde(default)]
    pub dram_bytes_read: Option<f64>,
    #[serde(default)]
    pub dram_bytes_write: Option<f64>,
    #[serde(default)]
    pub registers_per_thread: Option<u32>,
    #[serde(default)]
    pub grid: Option<[u32; 3]>,
    #[serde(default)]
    pub block: Option<[u32; 3]>,
    /// NVTX range stack of the launch, e.g. `decode` (domain prefix removed).
    #[serde(default)]
    pub nvtx_range: Option<String>,
    #[serde(default)]
    pub stream: Option<u64>,
    /// Every other numeric metric of the row, keyed `section/metric` for section exports and by
    /// metric name for raw pages, in base units.
    #[serde(default)]
    pub metrics: BTreeMap<String, f64>,
    /// Which file the row came from.
    pub file: String,
}

/// Where the timeline side file is and what it holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineInfo {
    /// Path relative to the run directory.
    pub path: String,
    pub kernels: u64,
    pub mem_ops: u64,
    pub ranges: u64,
    /// The timeline's `t0_ns` (source clock) and its UTC epoch ns, where the source records
    /// its clock's epoch: what a multi-rank merge aligns ranks' clocks with. Absent in older
    /// bundles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t0_ns: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t0_epoch_ns: Option<i64>,
}

/// How serious a diagnostic is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Worth knowing; nothing was lost.
    Info,
    /// Records were skipped or a number may be off.
    Warning,
}

/// One class of skipped, unparsable or doubtful input records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnostic {
    pub source: Source,
    /// The input file.
    pub file: String,
    /// Stable machine-readable class, e.g. `kineto.kernel_without_correlation`.
    pub code: String,
    pub severity: Severity,
    /// What happened and what it means for the numbers.
    pub message: String,
    pub count: u64,
    /// One offending record, shortened.
    pub example: String,
}
