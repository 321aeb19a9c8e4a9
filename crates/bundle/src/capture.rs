//! What `llmprof capture` adds to a bundle: how the run was captured (passes and their exact
//! command lines), the unprofiled baseline and the profilers' overhead against it, an
//! environment snapshot, an inputs manifest with sha256, and the NVML time series.

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
}

/// The profiler's overhead on one stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Overhead {
    pub pass: String,
    pub stage: String,
    pub baseline_median_ns: f64,
    pub profiled_median_ns: f64,
    /// (profiled − baseline) / baseline, in percent.
    pub overhead_pct: f64,
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
}

/// A named time window on the NVML clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Window {
    pub name: String,
    pub start_ns: i64,
    pub end_ns: i64,
}
