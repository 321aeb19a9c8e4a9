//! `analysis`: what the analysis crate computes from the measurements. Scripts read these
//! names (`stages[].mfu`, `findings[].evidence`, `summary`, ...): keep them stable.
//!
//! * `mfu` and `mbu` are **fractions** (0.012 = 1.2 %), unlike the `*_pct` fields elsewhere.
//! * `mfu` divides by the stage's wall time (NVTX range); `mfu_busy` by the union of its GPU
//!   activity (`gpu_busy_ns`, CUDA graph work included): "MFU while the GPU is busy". Bundles
//!   analysed before 2026-11-23 divided by the projected span `gpu_proj_ns` instead, nearly
//!   the whole wall of a launch-bound stage; `llmprof analyze RUN` recomputes them.
//! * A value that cannot be computed is `null`, and `note` says why; no number is invented.

use serde::{Deserialize, Serialize};

use crate::Distribution;

/// Everything analysis derives from a bundle.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// The peak the ratios are relative to.
    #[serde(default)]
    pub peak: Option<Peak>,
    /// Why there is no peak, when there is none.
    #[serde(default)]
    pub peak_note: Option<String>,
    #[serde(default)]
    pub model: Option<ModelSummary>,
    /// Why analytic FLOPs are unavailable, e.g. "FLOPs unknown for model_type X; give counted
    /// FLOPs".
    #[serde(default)]
    pub model_note: Option<String>,
    pub stages: Vec<StageAnalysis>,
    pub run: RunMetrics,
    /// Per Nsight Compute kernel.
    #[serde(default)]
    pub kernels: Vec<KernelAnalysis>,
    pub findings: Vec<Finding>,
    /// A short narrative written from the findings.
    pub summary: String,
    /// Set when a ratio exceeded 1 (MFU or MBU > 100 %): token counts or the peak are wrong,
    /// and the ratios are withheld.
    #[serde(default)]
    pub inconsistent: Option<String>,
    /// The KV cache computed against measured, and the batch headroom (see [`Headroom`]);
    /// `None` without the baseline's memory record.
    #[serde(default)]
    pub memory: Option<MemoryAnalysis>,
}

/// What analysis makes of `capture.memory`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryAnalysis {
    /// KV bytes per token of the model config x the cache's tokens x batch (÷ `kv_shards`);
    /// `None` without a model config.
    #[serde(default)]
    pub kv_cache_computed_bytes: Option<f64>,
    /// Measured against computed, percent; a static cache is allocated for its whole length.
    #[serde(default)]
    pub kv_cache_diff_pct: Option<f64>,
    #[serde(default)]
    pub headroom: Option<Headroom>,
    /// The tokens and batch the KV cache holds: the record's, else (a `--cmd` workload
    /// reports bytes only) the run's workload's context plus the first decode's steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_batch: Option<u64>,
    /// The GPUs the KV cache is split over (the run's parallel degree, tensor parallelism
    /// splitting the KV heads): the computed bytes are one GPU's share, as the measured are.
    /// `None` for one GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_shards: Option<u64>,
}

/// How many more sequences fit at this context length, and what decode would do with them
/// (an estimate). Every input is in the bundle; `arithmetic` writes the sum out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Headroom {
    /// Device memory one more sequence needs: the highest stage peak allocated above what stays
    /// allocated between iterations (weights and buffers), divided by the batch.
    pub bytes_per_sequence: f64,
    /// Free memory plus what the allocator reserved but did not use, less the margin.
    pub available_bytes: f64,
    /// Kept free: 10% of the device's memory.
    pub margin_bytes: f64,
    /// Sequences that fit on top of the measured batch.
    pub extra_sequences: u64,
    /// The batch the estimate uses: the measured batch plus what fits, capped (for a
    /// launch-bound decode) where the GPU's busy time per step would fill the step.
    pub suggested_batch: u64,
    pub batch: u64,
    /// Decode tokens/s measured, and estimated at `suggested_batch` if decode stays bound where
    /// it is.
    #[serde(default)]
    pub decode_tokens_per_s: Option<f64>,
    #[serde(default)]
    pub estimated_tokens_per_s: Option<f64>,
    /// The decode's bound the estimate assumes stays.
    pub bound: String,
    pub arithmetic: String,
}

/// The peak throughput and bandwidth ratios are computed against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Peak {
    /// The table row (`H200 SXM`) or `override`.
    pub name: String,
    /// Compute dtype column used: `bf16`, `fp16`, `tf32`, `fp32`, `fp8`.
    pub dtype: String,
    pub tflops: f64,
    /// GB/s (1e9 bytes/s).
    pub gbps: f64,
    /// How the row was chosen, e.g. "datasheet dense peak, matched by name `NVIDIA H200` and
    /// 139.8 GiB".
    pub source: String,
    /// Measured ceilings from calibration, when the run has them.
    #[serde(default)]
    pub measured_tflops: Option<f64>,
    #[serde(default)]
    pub measured_gbps: Option<f64>,
}

/// The model as analysis understood it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSummary {
    pub model_type: String,
    pub params: f64,
    pub active_params: f64,
    pub dtype_bytes: f64,
    pub kv_bytes_per_token: f64,
    /// The counting conventions, as sentences.
    pub conventions: Vec<String>,
}

/// What a stage does, from its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageRole {
    Prefill,
    Decode,
    /// Vision encoder sub-stages of OCR / vision-language models (`sam`, `vision_encoder`,
    /// `projector`, ...).
    Vision,
    Other,
}

/// Whether a stage name marks warm-up iterations (`warmup_prefill`, as llmprof's driver names
/// them): not measured, so left out of the analysis.
pub fn is_warmup(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.starts_with("warmup") || n.starts_with("warm_up") || n.starts_with("warm-up")
}

impl StageRole {
    /// The role a stage name announces, case-insensitively: `prefill`/`prompt` or `decode`
    /// anywhere in the name (`model.prefill`, `decode_step`), or a vision sub-stage, a word of
    /// the name (split at non-letters) being `sam`, `clip`, `vit`, `projector`, or starting
    /// with `vision` or `image` (`vision_encoder`, `sam`, but not `sampling`).
    pub fn of_name(name: &str) -> StageRole {
        let n = name.to_ascii_lowercase();
        if is_warmup(&n) {
            return StageRole::Other;
        }
        if n.contains("prefill") || n.contains("prompt") {
            return StageRole::Prefill;
        }
        if n.contains("decode") {
            return StageRole::Decode;
        }
        let vision_word = n.split(|c: char| !c.is_ascii_alphabetic()).any(|w| {
            matches!(w, "sam" | "clip" | "vit" | "projector")
                || w.starts_with("vision")
                || w.starts_with("image")
        });
        if vision_word {
            StageRole::Vision
        } else {
            StageRole::Other
        }
    }
}

/// Throughput and utilization of one stage, totals over its instances.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageAnalysis {
    /// `stages[]` index.
    pub stage: u32,
    pub name: String,
    pub role: StageRole,
    /// FLOPs used for the ratios: analytic (the work the model had to do) when the model is
    /// known, else counted by the workload.
    pub flops: Option<f64>,
    /// `"analytic"` or `"counted"`.
    #[serde(default)]
    pub flops_source: Option<String>,
    #[serde(default)]
    pub analytic_flops: Option<f64>,
    #[serde(default)]
    pub counted_flops: Option<f64>,
    /// (counted − analytic) / analytic, in percent.
    #[serde(default)]
    pub counted_vs_analytic_pct: Option<f64>,
    pub bytes: Option<f64>,
    /// The wall the over-wall ratios divide by: `baseline` (the unprofiled baseline's median
    /// per instance × instances) or `trace` (the traced range, timed under the profiler).
    #[serde(default)]
    pub wall_basis: HeadlineBasis,
    /// Achieved TFLOP/s over the wall time.
    pub tflops: Option<f64>,
    pub mfu: Option<f64>,
    /// MFU over the stage's GPU busy time (`gpu_busy_ns`) instead of the wall.
    pub mfu_busy: Option<f64>,
    /// MFU against the measured matmul ceiling, when calibrated.
    #[serde(default)]
    pub mfu_vs_measured: Option<f64>,
    /// Achieved GB/s over the wall time.
    pub gbps: Option<f64>,
    pub mbu: Option<f64>,
    pub mbu_busy: Option<f64>,
    #[serde(default)]
    pub mbu_vs_measured: Option<f64>,
    /// FLOPs per byte.
    pub intensity: Option<f64>,
    /// `compute-bound`, `memory-bound`, `latency/launch-bound` or `unknown`.
    pub bound: String,
    /// Why values are missing, or how they were obtained.
    #[serde(default)]
    pub note: Option<String>,
    /// How the host fed the GPU: launch calls and CUDA graph launches (per decode step where
    /// the steps are known), kernels per graph, GPU time inside graphs. `None` in older
    /// bundles.
    #[serde(default)]
    pub launch: Option<LaunchFacts>,
}

/// How the host fed the GPU in one stage, from its launch calls: a CUDA graph launch is one
/// call however many kernels it ran. Per-step figures are over decode steps (batch-wide
/// forward steps) and are `None` for other stages or when the steps are unknown.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LaunchFacts {
    /// Decode steps over all instances, when known.
    #[serde(default)]
    pub steps: Option<u64>,
    /// Host launch calls that ran GPU work, graph launches included, per step.
    #[serde(default)]
    pub launches_per_step: Option<f64>,
    /// Kernels per step; `None` when graphs were traced whole (their kernels are unknown).
    #[serde(default)]
    pub kernels_per_step: Option<f64>,
    #[serde(default)]
    pub graph_launches_per_step: Option<f64>,
    /// Kernels one graph launch ran, on average; `None` without graph launches or when graphs
    /// were traced whole.
    #[serde(default)]
    pub kernels_per_graph: Option<f64>,
    /// Share of the stage's GPU busy time inside graphs, percent; `None` without graphs.
    #[serde(default)]
    pub graph_share_pct: Option<f64>,
    /// GPU busy time per launch call, ns: how much work each call gave the GPU.
    #[serde(default)]
    pub gpu_ns_per_launch: Option<f64>,
    /// Mean host time of one launch call (the CUDA API call itself), ns.
    #[serde(default)]
    pub launch_call_ns: Option<f64>,
}

/// A repeated measure: its median with a 95% confidence interval, the sample count and spread,
/// and how the interval was computed. Units are the field's (`_ns`, tokens/s, a fraction).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Measure {
    /// Samples (iterations or instances).
    pub n: u64,
    /// Fresh processes they came from.
    pub processes: u32,
    pub median: f64,
    /// The 95% interval `[lo, hi]`; `None` when the sample is too small for one (fewer than 6
    /// samples of one process).
    #[serde(default)]
    pub ci: Option<[f64; 2]>,
    /// std / mean of the samples, percent.
    pub cv_pct: f64,
    /// With several processes: the CV of their medians, percent (the spread between processes).
    #[serde(default)]
    pub between_cv_pct: Option<f64>,
    /// How the interval was computed (distribution-free order statistics, or widened to the
    /// spread of the process medians).
    pub method: String,
}

/// Where the run's headline latency and throughput come from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeadlineBasis {
    /// The capture's unprofiled baseline pass: host-timed iterations, no profiler attached.
    Baseline,
    /// The trace's own stage instances (an ingest-only run, or a capture without a baseline):
    /// timed under a profiler.
    #[default]
    Trace,
}

/// Run-level serving numbers: the run's headline latency and throughput. With a baseline pass
/// (`basis: baseline`) they are the unprofiled iterations'; otherwise the trace's measured stage
/// instances', labelled as such. The profiled passes give attribution (busy %, kernels,
/// operators, shares) and their overhead against these numbers (`capture.overhead`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunMetrics {
    #[serde(default)]
    pub basis: HeadlineBasis,
    /// Where the samples come from, naming files relative to the run directory
    /// (`unprofiled baseline pass (raw/baseline/baseline.json), 1 process × 10 iterations`).
    #[serde(default)]
    pub source: Option<String>,
    /// Time to first token: prefill wall per iteration (baseline) or instance (trace).
    #[serde(default)]
    pub ttft: Option<Distribution>,
    /// Time per output token: decode wall / decode steps, per iteration or decode instance.
    #[serde(default)]
    pub tpot: Option<Distribution>,
    /// `ttft` with its interval (ns).
    #[serde(default)]
    pub ttft_ns: Option<Measure>,
    /// `tpot` with its interval (ns).
    #[serde(default)]
    pub tpot_ns: Option<Measure>,
    /// Wall time of one instance of each top-level measured stage (`prefill`, `decode`; ns).
    #[serde(default)]
    pub stage_wall_ns: Vec<StageWall>,
    /// Generated tokens per second of decode wall, per iteration.
    #[serde(default)]
    pub decode_throughput: Option<Measure>,
    /// Set when the spread makes the seed's ±10% reproducibility impossible to claim: a headline
    /// interval wider than ±10% of its median, or processes more than 10% apart.
    #[serde(default)]
    pub spread_warning: Option<String>,
    /// Generated tokens (batch × decode steps over all decode instances).
    #[serde(default)]
    pub generated_tokens: Option<u64>,
    /// Context length (keys attended, the new token included) of the first and the last
    /// decode step of each decode instance; it grows by one per step in between.
    #[serde(default)]
    pub decode_context: Vec<[u64; 2]>,
    /// Generated tokens per second of decode wall.
    #[serde(default)]
    pub decode_tokens_per_s: Option<f64>,
    /// FLOPs of all stages with FLOPs over their summed wall, against the peak.
    #[serde(default)]
    pub model_mfu: Option<f64>,
    #[serde(default)]
    pub note: Option<String>,
}

/// The headline wall of one instance of a stage.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StageWall {
    pub stage: String,
    pub wall_ns: Measure,
}

/// An Nsight Compute kernel classified.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelAnalysis {
    /// `ncu[]` index.
    pub ncu: u32,
    pub name: String,
    /// `compute-bound`, `memory-bound`, `latency-bound` or `balanced`.
    pub bound: String,
    pub tensor_cores: String,
    #[serde(default)]
    pub occupancy: Option<String>,
}

/// One diagnosis: what is wrong, the measured evidence, and what to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable rule id, e.g. `launch_bound`.
    pub id: String,
    /// The stage it concerns, if any.
    #[serde(default)]
    pub stage: Option<String>,
    pub title: String,
    /// Measured numbers and where they came from.
    pub evidence: Vec<String>,
    pub recommendation: String,
}

#[cfg(test)]
mod tests {
    use super::StageRole::{self, *};

    #[test]
    fn roles_from_names() {
        let role = StageRole::of_name;
        assert_eq!(role("prefill"), Prefill);
        assert_eq!(role("decode_step"), Decode);
        assert_eq!(role("sam"), Vision);
        assert_eq!(role("vision_encoder"), Vision);
        assert_eq!(role("model.projector"), Vision);
        assert_eq!(role("sampling"), Other);
        assert_eq!(role("warmup_prefill"), Other);
        assert_eq!(role("warmup_decode"), Other);
        assert_eq!(role("ProfilerStep#3"), Other);
    }
}
