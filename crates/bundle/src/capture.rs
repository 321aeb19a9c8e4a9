//! What `llmprof capture` adds to a bundle: how the run was captured (passes and their exact
//! command lines), the unprofiled baseline and the profilers' overhead against it, an
//! environment snapshot, an inputs manifest with sha256, the NVML time series, and the energy
//! of each stage of the baseline pass.
//!
//! # Energy
//!
//! [`Capture::energy`] holds one [`StageEnergy`] per stage of the unprofiled baseline pass. The
//! workload records each stage instance's window on the host's wall clock (ns since the Unix
//! epoch, the clock [`NvmlSeries::t_ns`] uses); capture integrates the power readings over each
//! window with the trapezoid rule on the piecewise-linear power curve (linear interpolation
//! between readings, clipped at the window's ends) and averages over the measured instances.
//! A failed read is a gap ([`NvmlSeries::power_gaps`]), never a 0 W sample: a window that
//! touches one is left out, as is one the readings do not cover. Decode steps are not resolved
//! one by one: the decode stage is integrated over the whole decode loop and divided by its
//! steps for J/token. J/token is prefill J per prompt token (text plus image tokens, times the
//! batch) and decode J per generated token (decode steps times the batch).
//!
//! NVML refreshes power and its energy counter less often than it is sampled (every ~100 ms on
//! the H100 and H200 hosts, sampled every 24.3 ms); the series records both periods as read
//! from its own samples ([`NvmlSeries::measured_interval_ms`], [`NvmlSeries::power_update_ms`],
//! [`NvmlSeries::energy_update_ms`]). A window shorter than two refreshes holds one or two
//! readings, so its J/token is withheld ([`StageEnergy::withheld`] says why;
//! [`StageEnergy::updates_per_window`] how many refreshes it spans). For prefill, whose windows
//! are that short, the baseline pass runs back-to-back prefills for about 2 s after its
//! measured iterations; that one window gives the prefill row ([`StageEnergy::windows`] is
//! `loop`, `instances` the prefills in it) whenever it is long enough.
//!
//! [`NvmlSeries::power_source`] says whether the power is NVML's instant reading or its 1 s
//! average (Ampere and newer average `nvmlDeviceGetPowerUsage` over 1 s, which smears short
//! stages); it is chosen when sampling starts and kept, so one series never mixes the two.
//! [`StageEnergy::counter_energy_j`] repeats the integral with NVML's total-energy counter as a
//! cross-check. These fields are additive (serde defaults): bundles written before them read
//! with no energy, no resolution fields and no gaps.
//!
//! With `llmprof capture --cmd` the workload's stages are unknown to the host, so the one row
//! is the whole command (stage `command`) and has no J/token.

use serde::{Deserialize, Serialize};

use crate::Distribution;

/// How a run was captured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Capture {
    /// Target name (`qwen2.5-0.5b`) and the resolved target config, as JSON.
    pub target: String,
    pub target_config: serde_json::Value,
    /// `light`, `standard` or `deep`.
    pub mode: String,
    pub passes: Vec<PassRecord>,
    /// Unprofiled timings, warm-up excluded.
    #[serde(default)]
    pub baseline: Option<StageTimings>,
    /// Per profiled pass and stage: median wall against the baseline median.
    #[serde(default)]
    pub overhead: Vec<Overhead>,
    #[serde(default)]
    pub snapshot: EnvSnapshot,
    /// Every artifact kept under `raw/`, with its size and sha256.
    #[serde(default)]
    pub manifest: Vec<ManifestEntry>,
    /// What is missing from this run and how to get it.
    #[serde(default)]
    pub missing: Vec<String>,
    /// Energy per stage of the baseline pass (see the module docs); empty without NVML.
    #[serde(default)]
    pub energy: Vec<StageEnergy>,
    /// How the energy was computed, or why there is none.
    #[serde(default)]
    pub energy_note: Option<String>,
    /// `true` when Ctrl-C stopped the capture: the interrupted pass is recorded, later passes
    /// did not run, and `missing` says what that left out.
    #[serde(default)]
    pub interrupted: bool,
    /// `llmprof capture --cmd`: the user's workload command (run with `sh -c`), else `None`.
    #[serde(default)]
    pub command: Option<String>,
    /// `--stages`: the NVTX ranges of a `--cmd` workload that count as stages.
    #[serde(default)]
    pub stage_names: Vec<String>,
    /// `--set KEY=VALUE` overrides applied to the target file (already in `target_config`).
    #[serde(default)]
    pub overrides: Vec<String>,
    /// How the decode step was compiled and its CUDA graph captured, per pass that ran the
    /// target (`[optimize]`); empty for eager runs and `--cmd` workloads.
    #[serde(default)]
    pub compile: Vec<CompileRecord>,
    /// How the Nsight Systems pass traced CUDA graphs: `node` (every kernel, the default) or
    /// `graph` (one span per launch); `None` without an nsys pass or in older bundles.
    #[serde(default)]
    pub cuda_graph_trace: Option<String>,
    /// `--nproc N`: the target ran under torchrun with tensor parallelism; `None` for one
    /// process (and in older bundles).
    #[serde(default)]
    pub ranks: Option<CaptureRanks>,
    /// Device memory the baseline pass measured (see [`MemoryRecord`]); `None` for `--cmd`,
    /// without CUDA, and in older bundles.
    #[serde(default)]
    pub memory: Option<MemoryRecord>,
    /// `--repeats auto`: how many fresh baseline processes it took to bring each measured
    /// stage's 95% confidence interval within the target, or why it stopped short; `None` for a
    /// fixed `--repeats` and in older bundles.
    #[serde(default)]
    pub auto_repeats: Option<AutoRepeats>,
}

/// The outcome of `llmprof capture --repeats auto`: the baseline pass ran in fresh processes
/// (`raw/baseline/`, `raw/baseline-2/`, ...) until the pooled 95% confidence interval of every
/// measured stage's median — prefill and decode wall per iteration for a target, the whole
/// command's wall for `--cmd` — was at most `target_pct` of that median on either side, or until
/// the baseline passes had run `cap_s` seconds. The interval pools the variance between the
/// processes (the spread of their medians, Student t) with the order-statistics interval of
/// all iterations, whichever is wider.
/// Device memory of the baseline pass, as PyTorch's caching allocator and CUDA report it
/// (`torch.cuda.max_memory_allocated/reserved`, `mem_get_info`), in bytes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryRecord {
    /// The file it was read from (`raw/baseline/baseline.json`) and how it was measured.
    pub source: String,
    /// Every parameter and buffer of the model.
    #[serde(default)]
    pub weights_bytes: Option<u64>,
    /// Free and total device memory after the measured iterations (`cudaMemGetInfo`).
    #[serde(default)]
    pub free_bytes: Option<u64>,
    #[serde(default)]
    pub total_bytes: Option<u64>,
    /// Allocated and reserved by the allocator at that moment.
    #[serde(default)]
    pub allocated_bytes: Option<u64>,
    #[serde(default)]
    pub reserved_bytes: Option<u64>,
    /// Per stage: the largest peak over the measured iterations (peaks reset at each stage's
    /// start).
    #[serde(default)]
    pub stages: Vec<StageMemory>,
    /// Bytes the KV cache's key/value tensors held after the decode (a static cache: its whole
    /// allocation), the cache kind, and the tokens x batch it held.
    #[serde(default)]
    pub kv_cache_bytes: Option<u64>,
    #[serde(default)]
    pub kv_cache_kind: Option<String>,
    #[serde(default)]
    pub kv_tokens: Option<u64>,
    #[serde(default)]
    pub batch_size: Option<u64>,
    /// The stages' peaks are NVML's used memory of the whole device (a `--cmd` workload that
    /// reported none), not the allocator's: both peak fields hold it.
    #[serde(default)]
    pub nvml_used: bool,
}

/// One stage's peak device memory in the baseline pass.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageMemory {
    pub stage: String,
    pub peak_allocated_bytes: u64,
    pub peak_reserved_bytes: u64,
}

/// How a `--nproc` capture ran its ranks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CaptureRanks {
    /// Processes, one per GPU (the tensor-parallel degree).
    pub nproc: u32,
    /// CUDA device indexes in rank order (`CUDA_VISIBLE_DEVICES`).
    pub devices: Vec<u32>,
    /// The rank Nsight Compute profiled (deep mode).
    pub ncu_rank: u32,
    /// The launcher: `torch.distributed.run --standalone --nproc-per-node N`.
    pub launcher: String,
    /// Which rank this record is of: `Some(r)` in rank r's run (`ranks/<r>/bundle.json`),
    /// `None` in the run's own bundle, whose record is the whole group's (and in bundles
    /// written before this field, whose tables came from rank 0).
    #[serde(default)]
    pub rank: Option<u32>,
    /// Where each rank's outputs are: rank 0 in `raw/<pass>/`, rank r in
    /// `raw/ranks/<r>/<pass>/` (`raw/<pass>/rank-<r>/` in runs before the ranks were ingested).
    pub note: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AutoRepeats {
    /// The half-width asked for, percent of the median (2).
    pub target_pct: f64,
    /// Seconds the baseline passes may take in all (`--repeats-cap`).
    pub cap_s: u64,
    /// `true` when every stage's half-width reached the target.
    pub met: bool,
    /// Baseline passes the rule added after those the plan lists.
    pub rounds: u32,
    /// Fresh processes the baseline iterations came from, in all.
    pub processes: u32,
    /// Measured baseline iterations (for `--cmd`: command runs), in all.
    pub iterations: u64,
    /// Seconds the baseline passes took, every process included.
    pub baseline_s: f64,
    /// Each measured stage's interval after the last round.
    pub stages: Vec<StageCi>,
}

/// One measured stage's median and 95% confidence interval after a `--repeats auto` round.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageCi {
    /// `prefill`, `decode`, or `command` for a `--cmd` workload.
    pub stage: String,
    /// Samples (iterations, or command runs).
    pub n: u64,
    pub median_ns: f64,
    /// The interval's larger half-width, percent of the median; `None` with too few samples
    /// for a 95% interval (fewer than 6 in one process).
    #[serde(default)]
    pub half_width_pct: Option<f64>,
}

/// One pass's `torch.compile` of the decode step, before its warm-up and outside every
/// measured range: compile time (the first compiled call) and graph capture time (CUDAGraph
/// Trees record on the next call), or why compiling failed (the pass then measured the eager
/// step).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompileRecord {
    pub pass: String,
    /// `torch.compile` mode: `default`, `reduce-overhead`, `max-autotune`.
    pub mode: String,
    /// KV cache: `dynamic` or `static`.
    pub cache: String,
    /// `ok`, or `failed` (the eager step was measured instead).
    pub status: String,
    #[serde(default)]
    pub compile_s: Option<f64>,
    #[serde(default)]
    pub capture_s: Option<f64>,
    /// Which part failed (`compile`, `graph capture`), where (`file.py:line in fn`) and why.
    #[serde(default)]
    pub failed_part: Option<String>,
    #[serde(default)]
    pub location: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    /// Inductor's reasons for running the compiled step without CUDA graphs, if it did.
    #[serde(default)]
    pub cudagraphs_skipped: Vec<String>,
}

impl CompileRecord {
    /// `compile failed at modeling_x.py:211 in forward: Unsupported: ...` (the error's first
    /// line) when compiling failed, else `None`.
    pub fn failure(&self) -> Option<String> {
        (self.status == "failed").then(|| {
            format!(
                "{} failed at {}: {}",
                self.failed_part.as_deref().unwrap_or("compile"),
                self.location.as_deref().unwrap_or("an unknown place"),
                self.error
                    .as_deref()
                    .unwrap_or("")
                    .lines()
                    .next()
                    .unwrap_or("")
            )
        })
    }
}

/// Energy of one stage of the baseline pass, from the NVML power samples integrated over the
/// stage's windows (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageEnergy {
    /// `prefill`, `decode`, or `command` for a `--cmd` workload.
    pub stage: String,
    /// Instances (measured iterations) whose windows the samples cover.
    pub instances: u64,
    /// Mean wall time of one instance's window, ns.
    pub wall_ns: f64,
    /// Mean energy of one instance, joules.
    pub energy_j: f64,
    /// `energy_j` over the window: mean power, watts.
    pub mean_power_w: f64,
    /// Power samples that fall inside the windows, over all instances.
    pub samples: u64,
    /// Tokens of one instance: prompt tokens (text + image) × batch for prefill, decode steps
    /// × batch for decode; `None` when unknown.
    #[serde(default)]
    pub tokens: Option<u64>,
    /// `energy_j / tokens`.
    #[serde(default)]
    pub j_per_token: Option<f64>,
    /// The same energy from NVML's total-energy counter interpolated at the window ends, when
    /// the GPU has the counter: a cross-check of the power integral.
    #[serde(default)]
    pub counter_energy_j: Option<f64>,
    /// Which windows were integrated: `iterations` (each measured iteration's stage window) or
    /// `loop` (one window over back-to-back prefills the baseline pass ran for energy alone,
    /// after its measured iterations; `instances` and `wall_ns` are then per prefill). Empty in
    /// bundles written before this field (`iterations`).
    #[serde(default)]
    pub windows: String,
    /// NVML refreshes one window spans: its wall over the slower of the power refresh period
    /// ([`NvmlSeries::power_update_ms`]) and the sampling period; `None` when neither is known.
    #[serde(default)]
    pub updates_per_window: Option<f64>,
    /// Why `j_per_token` is `None` although `tokens` is known: the window spans fewer than two
    /// NVML refreshes, so its energy rests on one or two readings. `None` when it is given.
    #[serde(default)]
    pub withheld: Option<String>,
    /// Energy of one instance in each window (joules), in window order: the samples the
    /// headline's interval of J/token is computed from. Empty in bundles written before this
    /// field.
    #[serde(default)]
    pub window_energy_j: Vec<f64>,
}

/// One pass of the capture: the workload run once more, under one profiler (or none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PassRecord {
    /// `baseline`, `kineto`, `nsys`, `ncu`, `flops`.
    pub name: String,
    /// The exact command line.
    pub command: Vec<String>,
    #[serde(default)]
    pub exit_code: Option<i32>,
    pub wall_ns: u64,
    pub ok: bool,
    #[serde(default)]
    pub note: Option<String>,
}

impl PassRecord {
    /// `ok`, or `failed: <note>`: the result cell every view shows for a pass.
    pub fn outcome(&self) -> String {
        if self.ok {
            "ok".into()
        } else {
            format!("failed: {}", self.note.as_deref().unwrap_or_default())
        }
    }
}

/// Host-measured stage timings over the measured iterations of one pass.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageTimings {
    pub iterations: u64,
    pub prefill: Distribution,
    pub decode: Distribution,
    pub decode_step: Distribution,
    /// Coefficient of variation of the iteration time (std / mean), in percent: the seed's
    /// ±10 % reproducibility check.
    pub iteration_cv_pct: f64,
    /// Every measured iteration, in the order they ran, with the process that ran it: the
    /// samples headline medians and their confidence intervals are computed from. Empty in
    /// bundles written before this field.
    #[serde(default)]
    pub samples: Vec<IterationSample>,
    /// Fresh processes the iterations came from (`baseline`, `baseline-2`, ...); 0 in bundles
    /// written before this field.
    #[serde(default)]
    pub processes: u32,
    /// The baseline pass's sub-stages (`[stages.modules]`), timed on the GPU: CUDA events
    /// recorded at each module's forward pre- and post-hook, read after the enclosing stage's
    /// closing synchronize, so the pass is not synchronized at sub-stage boundaries and its
    /// prefill and decode times stay the headline ones. Empty for profiled passes, targets
    /// without sub-stages and bundles written before this field.
    #[serde(default)]
    pub sub_stages: Vec<SubStageTiming>,
}

/// One sub-stage of the baseline pass, inside one top-level stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SubStageTiming {
    /// The sub-stage's name (`sam`, `vision_encoder`).
    pub name: String,
    /// The stage it ran in: `prefill` or `decode`.
    pub stage: String,
    /// GPU time of one instance: from the moment the GPU reached the module's forward to the
    /// moment it finished it (elapsed time between the two CUDA events), so GPU idle time
    /// waiting for the host's launches counts, as it does in the stage's wall time.
    pub instance: Distribution,
    /// The sub-stage's GPU time per measured iteration (its instances in that iteration
    /// added up): the number to set against that stage's wall time.
    pub per_iteration: Distribution,
    /// How it was timed (`CUDA events at the module's forward hooks`, or host time in the
    /// driver's CPU test mode).
    pub source: String,
}

/// One measured iteration of a timed pass, on the host clock.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IterationSample {
    /// Which fresh process ran it: 0 for the pass's first process (`raw/baseline/`), 1 for
    /// `raw/baseline-2/`, and so on.
    pub process: u32,
    #[serde(default)]
    pub prefill_ns: Option<u64>,
    #[serde(default)]
    pub decode_ns: Option<u64>,
    /// Decode steps this iteration ran (tokens per sequence after the first).
    #[serde(default)]
    pub decode_steps: u64,
}

/// The profiler's overhead on one stage: the median over every measured iteration of the
/// profiled passes against the median over the baseline passes. With `--overhead-repeats N`
/// the baseline and Nsight Systems passes run N times, interleaved (baseline, nsys, baseline,
/// nsys, ...), each in a fresh process, so drift and process-to-process noise fall on both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overhead {
    pub pass: String,
    pub stage: String,
    pub baseline_median_ns: f64,
    pub profiled_median_ns: f64,
    /// (profiled − baseline) / baseline, in percent.
    pub overhead_pct: f64,
    /// Interleaved baseline/profiled pass pairs the medians pool (`--overhead-repeats`); 0 in
    /// bundles written before this field (one pair).
    #[serde(default)]
    pub pairs: u64,
    /// With more than one pair: the lowest and highest overhead of a single pair, percent.
    #[serde(default)]
    pub pair_range_pct: Option<[f64; 2]>,
    /// What the two medians are medians of: `iterations` (a target's measured iterations, each
    /// stage timed inside the process, warm-up excluded, in every pass), `stage windows` (a
    /// `--cmd` workload's own stage windows from `stages.jsonl`, warm-up excluded) or `whole
    /// process` (a `--cmd` workload's wall time, interpreter start-up and model load
    /// included, so a profiler's start-up counts as overhead). `None` in bundles written before
    /// this field.
    #[serde(default)]
    pub basis: Option<String>,
}

/// The machine and software a capture ran on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EnvSnapshot {
    #[serde(default)]
    pub llmprof: String,
    #[serde(default)]
    pub python: Option<String>,
    #[serde(default)]
    pub torch: Option<String>,
    #[serde(default)]
    pub transformers: Option<String>,
    #[serde(default)]
    pub cuda: Option<String>,
    #[serde(default)]
    pub gpu: Option<String>,
    #[serde(default)]
    pub gpu_uuid: Option<String>,
    #[serde(default)]
    pub driver: Option<String>,
    #[serde(default)]
    pub power_limit_w: Option<f64>,
    #[serde(default)]
    pub sm_clock_max_mhz: Option<u32>,
    #[serde(default)]
    pub mem_clock_max_mhz: Option<u32>,
    #[serde(default)]
    pub mig_mode: Option<String>,
    #[serde(default)]
    pub device_index: Option<u32>,
    #[serde(default)]
    pub cpu: Option<String>,
    /// The cpufreq governor of the CPUs the workload ran on (`performance`, `powersave`,
    /// `schedutil`), or several joined by `, ` when they differ; `None` where Linux exposes none.
    #[serde(default)]
    pub cpu_governor: Option<String>,
    /// Current frequency of those CPUs when the capture started, MHz (median over them).
    #[serde(default)]
    pub cpu_mhz: Option<f64>,
    /// The CPUs the workload was pinned to (`0-15,32-47`, a cpuset list), from NVML's CPU
    /// affinity of the GPU; `None` when it was not pinned (`pin_note` says why).
    #[serde(default)]
    pub pinned_cpus: Option<String>,
    /// Why the workload was not pinned (`--no-pin`, NVML has no affinity, ...).
    #[serde(default)]
    pub pin_note: Option<String>,
    #[serde(default)]
    pub os: Option<String>,
    /// Tools and their versions (`nsys --version`, `ncu --version`).
    #[serde(default)]
    pub tools: Vec<(String, String)>,
}

/// One kept artifact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// Path relative to the run directory (`raw/kineto_trace.json.gz`).
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

/// NVML samples taken on their own thread during the capture, on the host's UTC clock.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NvmlSeries {
    pub interval_ms: u32,
    /// UTC ns since the epoch of each sample.
    pub t_ns: Vec<i64>,
    pub power_mw: Vec<u32>,
    pub sm_clock_mhz: Vec<u32>,
    pub mem_clock_mhz: Vec<u32>,
    pub gpu_util_pct: Vec<u32>,
    pub mem_util_pct: Vec<u32>,
    pub mem_used_bytes: Vec<u64>,
    pub temp_c: Vec<u32>,
    /// NVML clocks-event (throttle) reason bitmask; 0 = not throttled.
    pub throttle_reasons: Vec<u64>,
    /// Passes and stage windows on the same clock, for bands on charts.
    #[serde(default)]
    pub windows: Vec<Window>,
    /// What `power_mw` reads: `instant` (NVML field `NVML_FI_DEV_POWER_INSTANT`) or `average`
    /// (`nvmlDeviceGetPowerUsage`, a 1 s average on Ampere and newer); `None` in bundles
    /// written before this field.
    #[serde(default)]
    pub power_source: Option<String>,
    /// NVML's total energy counter at each sample, mJ since the driver loaded; empty when the
    /// GPU has no counter (older than Volta) or in bundles written before this field.
    #[serde(default)]
    pub energy_mj: Vec<u64>,
    /// The sampler's real period: the median interval between successive `t_ns`, ms. It is
    /// the nominal `interval_ms` plus what NVML's reads take where the sampler sleeps after
    /// them (24.3 ms for a nominal 20 on the H100 and H200 hosts). `None` in bundles written
    /// before this field or with fewer than two samples.
    #[serde(default)]
    pub measured_interval_ms: Option<f64>,
    /// How often NVML refreshed `power_mw`, detected from the data: the median interval between
    /// the samples at which the value changed, ms (about 100 ms on the H100 and H200 hosts
    /// although they were sampled every 24 ms). Close to `measured_interval_ms` when the value
    /// changed at almost every sample: NVML then refreshes at least as often as it was sampled.
    /// `None` with fewer than three changes or in bundles written before this field.
    #[serde(default)]
    pub power_update_ms: Option<f64>,
    /// The same for the total-energy counter `energy_mj`.
    #[serde(default)]
    pub energy_update_ms: Option<f64>,
    /// Indices into `t_ns` (ascending) of the samples whose power read failed. `power_mw` holds 0 there only
    /// to keep the columns aligned: it is no reading, and energy integration, charts and the
    /// viewer skip it. A failed read is never filled in with the other power source, so one
    /// series is all `power_source`. Empty when every read succeeded and in older bundles.
    #[serde(default)]
    pub power_gaps: Vec<u32>,
    /// Indices into `t_ns` (ascending) of the samples whose total-energy counter read failed (`energy_mj`
    /// holds 0 there, no reading); empty when every read succeeded and in older bundles.
    #[serde(default)]
    pub energy_gaps: Vec<u32>,
}

impl NvmlSeries {
    /// Whether sample `i` holds a power reading (not a failed read, and inside the columns).
    pub fn has_power(&self, i: usize) -> bool {
        i < self.power_mw.len()
            && u32::try_from(i).is_ok_and(|i| self.power_gaps.binary_search(&i).is_err())
    }

    /// Whether sample `i` holds a total-energy counter reading.
    pub fn has_energy(&self, i: usize) -> bool {
        i < self.energy_mj.len()
            && u32::try_from(i).is_ok_and(|i| self.energy_gaps.binary_search(&i).is_err())
    }
}

/// A named time window on the NVML clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub name: String,
    pub start_ns: i64,
    pub end_ns: i64,
}
