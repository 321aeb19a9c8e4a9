//! [`RunReport`]: everything a run page, its `report.md` and `llmprof show` display, built once
//! from a bundle by one builder per section.

mod capture;
mod efficiency;
mod headline;
mod kernels;
mod launches;
mod overview;
mod ranks;
mod stages;

use llmprof_bundle::{Analysis, Bundle, Finding, Source, StageRole};

use crate::table::TableView;

pub use capture::CaptureReport;
pub use launches::graph_trace_note;
pub use overview::{rank_line, run_rank_line};

/// Everything a run page, `report.md` and `llmprof show` show of one run.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub run_id: String,
    pub title: String,
    pub label: Option<String>,
    pub captured_at: String,
    pub model: String,
    pub device: String,
    pub environment: TableView,
    pub aggregates: TableView,
    /// TTFT, TPOT, stage wall, tokens/s, MFU and energy: medians with intervals and sources.
    pub headline: TableView,
    /// When the spread rules out a ±10% reproducibility claim.
    pub spread_warning: Option<String>,
    /// Every stage of the workload (NVTX range or `record_function`), nested ones prefixed `· `
    /// per level, warm-up folded into one row.
    pub stages: TableView,
    /// Warm-up ranges and the ranges nested in them, folded into one row of `stages`.
    pub warmup: TableView,
    /// NVTX ranges of libraries (CCCL, NCCL, …), with their GPU time; not stages.
    pub library: TableView,
    pub vision_note: String,
    pub mfu: TableView,
    pub mfu_notes: Vec<String>,
    pub peak_line: String,
    pub tokens_line: Option<String>,
    /// The `top` operators by device time, of `operators_total`.
    pub operators: TableView,
    pub operators_total: usize,
    /// The `top` kernels by GPU time (Nsight Compute columns when ncu data exist), of
    /// `kernels_total`.
    pub kernels: TableView,
    pub kernels_total: usize,
    /// Memcpy and memset rows.
    pub memory_ops: TableView,
    /// The `top` Nsight Compute results by duration.
    pub ncu: TableView,
    pub findings: Vec<FindingView>,
    pub summary: String,
    pub capture: CaptureReport,
    pub inputs: TableView,
    pub model_config: Option<String>,
    pub command: Option<String>,
    pub tools: String,
    pub diagnostics: TableView,
    /// Launch calls and CUDA graphs per stage, and how graphs were traced.
    pub launches: TableView,
    pub graph_note: Option<String>,
    /// How the capture compiled the decode step, per pass.
    pub compile: TableView,
    /// A multi-rank run's ranks: a note, one row per rank, the stage skew.
    pub ranks_note: Option<String>,
    pub ranks: TableView,
    pub skew: TableView,
    /// A multi-rank capture's per-rank record: baseline, overhead, energy.
    pub rank_capture: TableView,
    /// A rank's communication per window, and the collectives (of every rank in a
    /// multi-rank run).
    pub comm_windows: TableView,
    pub collectives: TableView,
    /// The index page's row.
    pub index: IndexRow,
}

/// A finding as shown: its title, evidence lines and recommendation.
#[derive(Debug, Clone)]
pub struct FindingView {
    pub title: String,
    pub evidence: Vec<String>,
    pub recommendation: String,
}

impl RunReport {
    /// The report of `b`, with the `top` kernels, operators and Nsight Compute results.
    pub fn of(b: &Bundle, top: usize) -> RunReport {
        let a = b.analysis.as_ref();
        let (model, device) = (overview::model_name(b), overview::device_name(b));
        let title = match &b.label {
            Some(l) => format!("{l} — {model} on {device}"),
            None => format!("{model} on {device}"),
        };
        let kernels = kernels::kernels(b, top);
        RunReport {
            run_id: b.run_id.clone(),
            title,
            label: b.label.clone(),
            captured_at: b.captured_at.clone().unwrap_or_else(|| "unknown".into()),
            environment: overview::environment(b),
            aggregates: overview::aggregates(b),
            headline: headline::table(b),
            spread_warning: a.and_then(|a| a.run.spread_warning.clone()),
            stages: stages::table(b),
            warmup: stages::warmup_table(b),
            library: stages::library_table(b),
            vision_note: stages::vision_note(b),
            mfu: efficiency::table(b),
            mfu_notes: efficiency::notes(b),
            peak_line: efficiency::peak_line(a),
            tokens_line: b
                .workload
                .as_ref()
                .map(|w| format!("Tokens: {}.", crate::paths::shown_in(&w.describe()))),
            operators: kernels::operators(b, top),
            operators_total: b.operators.len(),
            kernels_total: kernels.1,
            kernels: kernels.0,
            memory_ops: kernels::memory_ops(b),
            ncu: kernels::ncu(b, top),
            findings: a.map(findings).unwrap_or_default(),
            summary: a.map(|a| a.summary.clone()).unwrap_or_default(),
            capture: CaptureReport::of(b),
            inputs: overview::inputs(b),
            model_config: b.model.as_ref().map(llmprof_bundle::ModelInfo::config_text),
            command: b.environment.command.clone(),
            tools: overview::tools(b),
            diagnostics: overview::diagnostics(b),
            launches: launches::launch_table(b),
            graph_note: launches::graph_trace_note(b),
            compile: launches::compile_table(b),
            ranks_note: ranks::ranks_note(b),
            ranks: ranks::rank_table(b),
            skew: ranks::skew_table(b),
            rank_capture: ranks::capture_table(b),
            comm_windows: ranks::comm_windows(b),
            collectives: ranks::collectives(b),
            index: IndexRow::of(b),
            model,
            device,
        }
    }
}

fn findings(a: &Analysis) -> Vec<FindingView> {
    a.findings
        .iter()
        .map(|f| FindingView {
            title: crate::paths::shown_in(&f.title),
            evidence: f
                .evidence
                .iter()
                .map(|e| crate::paths::shown_in(e))
                .collect(),
            recommendation: crate::paths::shown_in(&f.recommendation),
        })
        .collect()
}

/// The tool a source stands for, as a caption names it.
pub fn source_name(s: Source) -> &'static str {
    match s {
        Source::Nsys => "Nsight Systems",
        Source::Kineto => "the PyTorch profiler",
        Source::Ncu => "Nsight Compute",
        Source::ModelConfig => "the model config",
        Source::Metadata => "the workload's metadata",
    }
}

/// One row of the index table.
#[derive(Debug, Clone, Default)]
pub struct IndexRow {
    pub run_id: String,
    /// The run's directory name in the site (`runs/<dir>/`), set by the site builder.
    pub dir: String,
    pub label: String,
    pub model: String,
    pub device: String,
    pub date: String,
    /// Where the headline numbers come from: `baseline` (unprofiled) or `trace (profiled)`.
    pub timing: String,
    /// Headline median wall time of one decode instance, ms.
    pub decode_ms: Option<f64>,
    pub decode_tps: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    /// MFU of the first prefill stage (0–1).
    pub mfu_prefill: Option<f64>,
    /// MBU of the first decode stage (0–1).
    pub mbu_decode: Option<f64>,
    pub bottleneck: String,
}

impl IndexRow {
    /// The index row of `b` (its `dir` left empty for the site to set).
    pub fn of(b: &Bundle) -> IndexRow {
        let a = b.analysis.as_ref();
        let role = |role: StageRole| a.and_then(|a| a.stages.iter().find(|s| s.role == role));
        IndexRow {
            run_id: b.run_id.clone(),
            dir: String::new(),
            label: b.label.clone().unwrap_or_default(),
            model: overview::model_name(b),
            device: overview::device_name(b),
            date: b.captured_at.clone().unwrap_or_default(),
            timing: a.map_or(String::new(), |a| match a.run.basis {
                llmprof_bundle::HeadlineBasis::Baseline => "baseline".into(),
                llmprof_bundle::HeadlineBasis::Trace => "trace (profiled)".into(),
            }),
            decode_ms: a
                .and_then(|a| a.run.stage_wall_ns.iter().find(|w| w.stage == "decode"))
                .map(|w| w.wall_ns.median / 1e6),
            decode_tps: a.and_then(|a| a.run.decode_tokens_per_s),
            ttft_ms: a
                .and_then(|a| a.run.ttft.as_ref())
                .map(|d| d.median_ns / 1e6),
            tpot_ms: a
                .and_then(|a| a.run.tpot.as_ref())
                .map(|d| d.median_ns / 1e6),
            mfu_prefill: role(StageRole::Prefill).and_then(|s| s.mfu),
            mbu_decode: role(StageRole::Decode).and_then(|s| s.mbu),
            bottleneck: a.map(top_bottleneck).unwrap_or_default(),
        }
    }

    /// `(text, sort key)` cells in index-table column order, after run/label/model/device/date.
    pub fn numbers(&self) -> Vec<(String, String)> {
        let cell = |v: Option<f64>, digits: usize| match v {
            Some(x) => (format!("{x:.digits$}"), format!("{x}")),
            None => (crate::fmt::NA.to_string(), String::new()),
        };
        vec![
            cell(self.decode_ms, 2),
            cell(self.decode_tps, 1),
            cell(self.ttft_ms, 2),
            cell(self.tpot_ms, 2),
            cell(self.mfu_prefill.map(|x| x * 100.0), 2),
            cell(self.mbu_decode.map(|x| x * 100.0), 2),
        ]
    }
}

/// The finding that names the run's main bottleneck: an inconsistency first, then what limits
/// decode (serving cost), then prefill, then kernel-level findings.
fn top_bottleneck(a: &Analysis) -> String {
    let rank = |f: &Finding| {
        let decode = f
            .stage
            .as_deref()
            .is_some_and(|s| StageRole::of_name(s) == StageRole::Decode);
        match f.id.as_str() {
            "inconsistent" => 0,
            "launch_bound" | "memory_bound" | "compute_bound" if decode => 1,
            "launch_bound" | "memory_bound" | "compute_bound" => 2,
            "tensor_cores_unused" => 3,
            "vision_share" => 4,
            "top_kernels" => 5,
            _ => 9,
        }
    };
    a.findings
        .iter()
        .filter(|f| rank(f) < 9)
        .min_by_key(|f| rank(f))
        .map(|f| f.title.clone())
        .unwrap_or_default()
}
