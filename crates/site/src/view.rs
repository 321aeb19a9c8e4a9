//! A bundle turned into display rows: every number formatted once, here, so that the HTML page
//! and `report.md` show the same tables. Templates only lay rows out.

use llmprof_bundle::{names, Bundle, OpKind, StageRole};

/// One table: headers, rows of cells, and which columns hold numbers (right-aligned).
#[derive(Debug, Clone, Default)]
pub struct TableView {
    pub headers: Vec<String>,
    pub numeric: Vec<bool>,
    pub rows: Vec<Vec<String>>,
}

impl TableView {
    fn new(headers: &[(&str, bool)]) -> Self {
        Self::with_headers(headers)
    }

    /// An empty table with `(header, numeric)` columns.
    pub fn with_headers(headers: &[(&str, bool)]) -> Self {
        TableView {
            headers: headers.iter().map(|(h, _)| h.to_string()).collect(),
            numeric: headers.iter().map(|(_, n)| *n).collect(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Appends a row.
    pub fn push(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// `(cell, numeric)` pairs of row `i`, for templates.
    pub fn cells(&self, i: usize) -> Vec<(&str, bool)> {
        self.rows
            .get(i)
            .map(|r| {
                r.iter()
                    .zip(self.numeric.iter().chain(std::iter::repeat(&false)))
                    .map(|(c, n)| (c.as_str(), *n))
                    .collect()
            })
            .unwrap_or_default()
    }
}

pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

fn msf(ns: f64) -> String {
    format!("{:.3}", ns / 1e6)
}

fn us(ns: f64) -> String {
    format!("{:.2}", ns / 1e3)
}

fn pct(p: f64) -> String {
    format!("{p:.1}")
}

fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "n/a".to_string())
}

/// Ratio (0–1) as a percentage with two decimals.
fn ratio(v: Option<f64>) -> String {
    opt(v, |x| format!("{:.2}", x * 100.0))
}

/// Everything a run page and its report show.
#[derive(Debug, Clone)]
pub struct RunView {
    pub run_id: String,
    pub title: String,
    pub label: Option<String>,
    pub captured_at: String,
    pub model: String,
    pub device: String,
    pub environment: TableView,
    pub aggregates: TableView,
    pub stages: TableView,
    pub vision_note: String,
    pub mfu: TableView,
    pub mfu_notes: Vec<String>,
    pub peak_line: String,
    pub tokens_line: Option<String>,
    pub operators: TableView,
    pub operators_total: usize,
    pub kernels: TableView,
    pub kernels_total: usize,
    pub findings: Vec<FindingView>,
    pub summary: String,
    pub overhead: String,
    pub overhead_table: TableView,
    pub passes: TableView,
    pub manifest: TableView,
    pub snapshot: TableView,
    pub missing: Vec<String>,
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
    /// Index-page columns.
    pub index: IndexRow,
}

#[derive(Debug, Clone)]
pub struct FindingView {
    pub title: String,
    pub evidence: Vec<String>,
    pub recommendation: String,
}

/// One row of the index table; `sort` keys are numbers for numeric columns.
#[derive(Debug, Clone, Default)]
pub struct IndexRow {
    pub run_id: String,
    /// The run's directory name in the site (`runs/<dir>/`), set by the site builder.
    pub dir: String,
    pub label: String,
    pub model: String,
    pub device: String,
    pub date: String,
    pub prefill_ms: Option<f64>,
    pub decode_tps: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub mfu_prefill: Option<f64>,
    pub mbu_decode: Option<f64>,
    pub bottleneck: String,
}

impl IndexRow {
    /// `(text, sort key)` cells in index-table column order, after run/label/model/device/date.
    pub fn numbers(&self) -> Vec<(String, String)> {
        let cell = |v: Option<f64>, digits: usize| match v {
            Some(x) => (format!("{x:.digits$}"), format!("{x}")),
            None => ("n/a".to_string(), String::new()),
        };
        vec![
            cell(self.prefill_ms, 2),
            cell(self.decode_tps, 1),
            cell(self.ttft_ms, 2),
            cell(self.tpot_ms, 2),
            cell(self.mfu_prefill.map(|x| x * 100.0), 2),
            cell(self.mbu_decode.map(|x| x * 100.0), 2),
        ]
    }
}

const TOP: usize = 20;

/// The finding that names the run's main bottleneck: an inconsistency first, then what limits
/// decode (serving cost), then prefill, then kernel-level findings.
fn top_bottleneck(a: &llmprof_bundle::Analysis) -> String {
    let rank = |f: &llmprof_bundle::Finding| {
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

impl RunView {
    pub fn of(b: &Bundle) -> RunView {
        let a = b.analysis.as_ref();
        let model = b
            .model
            .as_ref()
            .and_then(|m| m.model_type.clone())
            .unwrap_or_else(|| "unknown model".into());
        let device = b
            .device
            .as_ref()
            .map(|d| d.name.clone())
            .unwrap_or_else(|| "unknown device".into());
        let title = match &b.label {
            Some(l) => format!("{l} — {model} on {device}"),
            None => format!("{model} on {device}"),
        };

        // Environment.
        let mut env = TableView::new(&[("", false), ("", false)]);
        if let Some(d) = &b.device {
            env.row(vec!["GPU".into(), d.name.clone()]);
            if let Some(v) = d.sm_count {
                env.row(vec!["SMs".into(), v.to_string()]);
            }
            if let Some(v) = d.memory_bytes {
                env.row(vec![
                    "Memory".into(),
                    format!("{:.1} GiB", v as f64 / (1u64 << 30) as f64),
                ]);
            }
            if let Some(v) = d.memory_bandwidth_bytes_per_s {
                env.row(vec![
                    "Memory bandwidth".into(),
                    format!("{:.0} GB/s", v as f64 / 1e9),
                ]);
            }
            if let Some(v) = d.sm_clock_max_hz {
                env.row(vec![
                    "SM clock (max)".into(),
                    format!("{} MHz", v / 1_000_000),
                ]);
            }
            if let Some(v) = &d.compute_capability {
                env.row(vec!["Compute capability".into(), v.clone()]);
            }
        }
        let e = &b.environment;
        for (k, v) in [
            ("Driver", &e.driver_version),
            ("CUDA (driver API)", &e.cuda_driver_version),
            ("CUDA runtime", &e.cuda_runtime_version),
            ("CUPTI", &e.cupti_version),
            ("OS", &e.os),
            ("CPU", &e.cpu),
            ("Host", &e.hostname),
            ("nsys export schema", &e.nsys_export_schema),
        ] {
            if let Some(v) = v {
                env.row(vec![k.into(), v.clone()]);
            }
        }
        if let Some(n) = e.cpu_cores {
            env.row(vec!["CPU cores".into(), n.to_string()]);
        }
        for t in &e.tools {
            env.row(vec![t.name.clone(), t.version.clone()]);
        }

        // Aggregates.
        let t = &b.totals;
        let mut agg = TableView::new(&[("", false), ("", true)]);
        agg.row(vec![
            "Timing source".into(),
            b.timing_source
                .map_or("–".into(), |s| s.as_str().to_string()),
        ]);
        agg.row(vec!["Kernels".into(), thousands(t.kernels)]);
        agg.row(vec!["Kernel time (ms)".into(), ms(t.kernel_ns)]);
        agg.row(vec![
            "Memcpy / memset".into(),
            format!(
                "{} / {} ({} ms)",
                thousands(t.memcpys),
                thousands(t.memsets),
                ms(t.memcpy_ns + t.memset_ns)
            ),
        ]);
        agg.row(vec!["GPU busy (ms)".into(), ms(t.gpu_busy_ns)]);
        agg.row(vec!["GPU span (ms)".into(), ms(t.gpu_span_ns)]);
        agg.row(vec!["Streams".into(), t.streams.to_string()]);
        agg.row(vec![
            "GPU ops outside every stage".into(),
            thousands(t.unattributed_gpu_ops),
        ]);
        let mut index = IndexRow {
            run_id: b.run_id.clone(),
            label: b.label.clone().unwrap_or_default(),
            model: model.clone(),
            device: device.clone(),
            date: b.captured_at.clone().unwrap_or_default(),
            ..IndexRow::default()
        };
        if let Some(a) = a {
            let r = &a.run;
            if let Some(d) = &r.ttft {
                agg.row(vec![
                    "TTFT, prefill wall (median ms)".into(),
                    msf(d.median_ns),
                ]);
                index.ttft_ms = Some(d.median_ns / 1e6);
            }
            if let Some(d) = &r.tpot {
                agg.row(vec![
                    "TPOT (median / p90 ms)".into(),
                    format!("{} / {}", msf(d.median_ns), msf(d.p90_ns)),
                ]);
                index.tpot_ms = Some(d.median_ns / 1e6);
            }
            if let Some(v) = r.generated_tokens {
                agg.row(vec!["Generated tokens".into(), thousands(v)]);
            }
            if let Some(v) = r.decode_tokens_per_s {
                agg.row(vec!["Decode tokens/s".into(), format!("{v:.1}")]);
                index.decode_tps = Some(v);
            }
            if let Some(v) = r.model_mfu {
                agg.row(vec!["Model MFU (%)".into(), format!("{:.2}", v * 100.0)]);
            }
        }
        agg.row(vec![
            "Operators".into(),
            thousands(b.operators.len() as u64),
        ]);
        agg.row(vec![
            "Nsight Compute kernels".into(),
            thousands(b.ncu.len() as u64),
        ]);
        // Energy per stage of the baseline pass (NVML power integrated over the stage windows).
        for e in b.capture.iter().flat_map(|c| &c.energy) {
            agg.row(vec![
                format!("Energy (J), {} (baseline, per instance)", e.stage),
                format!("{:.3}", e.energy_j),
            ]);
            if let Some(j) = e.j_per_token {
                agg.row(vec![format!("J/token, {}", e.stage), format!("{j:.5}")]);
            }
        }

        // Per-stage timings; vision sub-stages go to the note below the table.
        let mut stages = TableView::new(&[
            ("Stage", false),
            ("Instances", true),
            ("Wall (ms)", true),
            ("Mean (ms)", true),
            ("Median (ms)", true),
            ("GPU proj (ms)", true),
            ("GPU ops", true),
            ("Kernel (ms)", true),
            ("GPU busy (%)", true),
        ]);
        let mut vision = Vec::new();
        for s in &b.stages {
            if StageRole::of_name(&s.name) == StageRole::Vision {
                vision.push(s);
                continue;
            }
            let name = if s.domain.is_empty() {
                s.name.clone()
            } else {
                format!("{}:{}", s.domain, s.name)
            };
            stages.row(vec![
                format!("{}{}", "· ".repeat(s.depth as usize), name),
                thousands(s.instances),
                ms(s.wall_ns),
                msf(s.wall.mean_ns),
                msf(s.wall.median_ns),
                ms(s.gpu_proj_ns),
                thousands(s.gpu_ops),
                ms(s.kernel_ns),
                pct(s.gpu_busy_pct),
            ]);
            if StageRole::of_name(&s.name) == StageRole::Prefill && index.prefill_ms.is_none() {
                index.prefill_ms = Some(s.wall.median_ns / 1e6);
            }
        }
        let vision_note = if vision.is_empty() {
            "Vision processing: no vision stages (SAM, CLIP/encoder, projector) in this run.".into()
        } else {
            let parts: Vec<String> = vision
                .iter()
                .map(|s| format!("{} {} ms", s.name, ms(s.wall_ns)))
                .collect();
            let prefill = b
                .stages
                .iter()
                .find(|s| StageRole::of_name(&s.name) == StageRole::Prefill);
            let share = a
                .and_then(|a| a.findings.iter().find(|f| f.id == "vision_share"))
                .map(|f| format!(" — {}", f.title))
                .unwrap_or_default();
            format!(
                "Vision processing (SAM + CLIP/encoder + projector): {}{}{}.",
                parts.join(", "),
                prefill
                    .map(|p| format!(", inside a prefill of {} ms", ms(p.wall_ns)))
                    .unwrap_or_default(),
                share
            )
        };

        // MFU / MBU.
        let mut mfu = TableView::new(&[
            ("Stage", false),
            ("FLOPs", true),
            ("TFLOP/s", true),
            ("MFU (%)", true),
            ("MFU busy (%)", true),
            ("GB/s", true),
            ("MBU (%)", true),
            ("FLOP/byte", true),
            ("Bound", false),
        ]);
        let mut mfu_notes = Vec::new();
        let mut peak_line = "No analysis in this bundle.".to_string();
        let mut tokens_line = None;
        if let Some(a) = a {
            peak_line = match (&a.peak, &a.peak_note) {
                (Some(p), _) => format!(
                    "Peak: {} TFLOP/s ({}) and {} GB/s — {}.",
                    p.tflops, p.dtype, p.gbps, p.source
                ),
                (None, Some(why)) => format!("Peak: n/a — {why}."),
                _ => "Peak: n/a.".into(),
            };
            for s in &a.stages {
                let flops = s.flops.map(|f| {
                    format!(
                        "{f:.3e}{}",
                        if s.flops_source.as_deref() == Some("counted") {
                            " (counted)"
                        } else {
                            ""
                        }
                    )
                });
                mfu.row(vec![
                    s.name.clone(),
                    flops.unwrap_or_else(|| "n/a".into()),
                    opt(s.tflops, |v| format!("{v:.2}")),
                    ratio(s.mfu),
                    ratio(s.mfu_busy),
                    opt(s.gbps, |v| format!("{v:.0}")),
                    ratio(s.mbu),
                    opt(s.intensity, |v| format!("{v:.1}")),
                    s.bound.clone(),
                ]);
                if let Some(d) = s.counted_vs_analytic_pct {
                    mfu_notes.push(format!(
                        "{}: counted {:.3e} vs analytic {:.3e} FLOPs ({d:+.1}%).",
                        s.name,
                        s.counted_flops.unwrap_or(0.0),
                        s.analytic_flops.unwrap_or(0.0)
                    ));
                }
                if let Some(n) = &s.note {
                    mfu_notes.push(format!("{}: {n}.", s.name));
                }
                match s.role {
                    StageRole::Prefill if index.mfu_prefill.is_none() => index.mfu_prefill = s.mfu,
                    StageRole::Decode if index.mbu_decode.is_none() => index.mbu_decode = s.mbu,
                    _ => {}
                }
            }
            if let Some(m) = &a.model {
                mfu_notes.extend(m.conventions.iter().map(|c| format!("Convention: {c}")));
            } else if let Some(why) = &a.model_note {
                mfu_notes.push(format!("Model: {why}."));
            }
            if let Some(why) = &a.inconsistent {
                mfu_notes.insert(0, format!("Inconsistent run: {why}."));
            }
            index.bottleneck = top_bottleneck(a);
        }
        if let Some(w) = &b.workload {
            tokens_line = Some(format!("Tokens: {}.", w.describe()));
        }

        // Top operators.
        let mut operators = TableView::new(&[
            ("Operator", false),
            ("Calls", true),
            ("CPU total (ms)", true),
            ("CPU self (ms)", true),
            ("Device (ms)", true),
            ("Device self (ms)", true),
            ("Device mean (µs)", true),
        ]);
        for o in b.operators.iter().take(TOP) {
            operators.row(vec![
                o.name.clone(),
                thousands(o.calls),
                ms(o.cpu_total_ns),
                ms(o.cpu_self_ns),
                ms(o.device_ns),
                ms(o.device_self_ns),
                us(o.device_mean_ns),
            ]);
        }

        // Top kernels, with ncu columns when ncu data exist.
        let with_ncu = !b.ncu.is_empty();
        let mut headers = vec![
            ("Kernel", false),
            ("Category", false),
            ("Calls", true),
            ("Total (ms)", true),
            ("Time (%)", true),
            ("Mean (µs)", true),
            ("Median (µs)", true),
        ];
        if with_ncu {
            headers.extend([
                ("SM (%)", true),
                ("Memory (%)", true),
                ("DRAM (%)", true),
                ("Occupancy ach/theo (%)", true),
                ("Tensor pipe (%)", true),
            ]);
        }
        let mut kernels = TableView::new(&headers);
        let mut ks: Vec<_> = b
            .kernels
            .iter()
            .filter(|k| k.kind == OpKind::Kernel)
            .collect();
        ks.sort_by(|x, y| y.total_ns.cmp(&x.total_ns).then(x.id.cmp(&y.id)));
        let kernels_total = ks.len();
        for k in ks.into_iter().take(TOP) {
            let mut row = vec![
                names::display_name(&k.name),
                k.category.as_str().to_string(),
                thousands(k.calls),
                ms(k.total_ns),
                pct(k.time_pct),
                us(k.mean_ns),
                us(k.median_ns),
            ];
            if with_ncu {
                let n = k.ncu.first().and_then(|&i| b.ncu.get(i as usize));
                let f = |v: Option<f64>| opt(v, pct);
                row.extend([
                    f(n.and_then(|n| n.sm_throughput_pct)),
                    f(n.and_then(|n| n.memory_throughput_pct)),
                    f(n.and_then(|n| n.dram_throughput_pct)),
                    match n {
                        Some(n) => format!(
                            "{}/{}",
                            f(n.achieved_occupancy_pct),
                            f(n.theoretical_occupancy_pct)
                        ),
                        None => "n/a".into(),
                    },
                    f(n.and_then(|n| n.tensor_pipe_pct)),
                ]);
            }
            kernels.row(row);
        }

        let findings = a
            .map(|a| {
                a.findings
                    .iter()
                    .map(|f| FindingView {
                        title: f.title.clone(),
                        evidence: f.evidence.clone(),
                        recommendation: f.recommendation.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let summary = a.map(|a| a.summary.clone()).unwrap_or_default();

        let mut inputs = TableView::new(&[("Source", false), ("Path", false), ("Bytes", true)]);
        for i in &b.inputs {
            inputs.row(vec![
                i.source.as_str().to_string(),
                i.path.clone(),
                thousands(i.bytes),
            ]);
        }
        let tools = e
            .tools
            .iter()
            .map(|t| format!("{} {}", t.name, t.version))
            .collect::<Vec<_>>()
            .join("; ");
        let mut diagnostics = TableView::new(&[
            ("Source", false),
            ("What", false),
            ("Count", true),
            ("Severity", false),
            ("Example", false),
        ]);
        for d in &b.diagnostics {
            diagnostics.row(vec![
                d.source.as_str().to_string(),
                d.message.clone(),
                thousands(d.count),
                format!("{:?}", d.severity).to_lowercase(),
                d.example.clone(),
            ]);
        }

        // Capture: overhead against the baseline, passes with their command lines, manifest.
        let mut overhead_table = TableView::new(&[
            ("Pass", false),
            ("Stage", false),
            ("Baseline median (ms)", true),
            ("Profiled median (ms)", true),
            ("Overhead (%)", true),
        ]);
        let mut passes = TableView::new(&[
            ("Pass", false),
            ("Wall (s)", true),
            ("Result", false),
            ("Command", false),
        ]);
        let mut manifest =
            TableView::new(&[("Artifact", false), ("Bytes", true), ("sha256", false)]);
        let mut snapshot = TableView::new(&[("", false), ("", false)]);
        let mut missing = Vec::new();
        let overhead = match &b.capture {
            Some(c) => {
                for o in &c.overhead {
                    overhead_table.row(vec![
                        o.pass.clone(),
                        o.stage.clone(),
                        msf(o.baseline_median_ns),
                        msf(o.profiled_median_ns),
                        format!("{:+.1}", o.overhead_pct),
                    ]);
                }
                for p in &c.passes {
                    passes.row(vec![
                        p.name.clone(),
                        format!("{:.1}", p.wall_ns as f64 / 1e9),
                        p.outcome(),
                        p.command.join(" "),
                    ]);
                }
                for m in &c.manifest {
                    manifest.row(vec![m.path.clone(), thousands(m.bytes), m.sha256.clone()]);
                }
                let e = &c.snapshot;
                for (k, v) in [
                    ("llmprof", Some(e.llmprof.clone())),
                    ("Python", e.python.clone()),
                    ("torch", e.torch.clone()),
                    ("transformers", e.transformers.clone()),
                    ("CUDA", e.cuda.clone()),
                    ("GPU", e.gpu.clone()),
                    ("GPU UUID", e.gpu_uuid.clone()),
                    ("Driver", e.driver.clone()),
                    (
                        "Power limit (W)",
                        e.power_limit_w.map(|w| format!("{w:.0}")),
                    ),
                    (
                        "SM clock max (MHz)",
                        e.sm_clock_max_mhz.map(|v| v.to_string()),
                    ),
                    (
                        "Memory clock max (MHz)",
                        e.mem_clock_max_mhz.map(|v| v.to_string()),
                    ),
                    ("MIG mode", e.mig_mode.clone()),
                    ("Device index", e.device_index.map(|v| v.to_string())),
                ] {
                    if let Some(v) = v.filter(|v| !v.is_empty()) {
                        snapshot.row(vec![k.into(), v]);
                    }
                }
                for (tool, v) in &e.tools {
                    snapshot.row(vec![tool.clone(), v.clone()]);
                }
                missing = c.missing.clone();
                let text = match &c.baseline {
                    Some(base) => format!(
                        "Each profiled pass is compared with an unprofiled baseline of {} \
                         iteration(s) (iteration time varies {:.1}% between repeats, std/mean). \
                         Timings from a pass with high overhead are inflated by the profiler.",
                        base.iterations, base.iteration_cv_pct
                    ),
                    None => "No baseline pass ran, so the profilers' overhead is unknown.".into(),
                };
                // How the Aggregates' energy rows were computed.
                match &c.energy_note {
                    Some(n) => format!("{text} {n}"),
                    None => text,
                }
            }
            None => "Not measured: this run was ingested from existing captures, so there is no \
                     unprofiled baseline to compare with. Profiled timings include the \
                     profilers' own overhead (CUPTI tracing slows kernel launches)."
                .into(),
        };

        RunView {
            run_id: b.run_id.clone(),
            title,
            label: b.label.clone(),
            captured_at: b.captured_at.clone().unwrap_or_else(|| "unknown".into()),
            model,
            device,
            environment: env,
            aggregates: agg,
            stages,
            vision_note,
            mfu,
            mfu_notes,
            peak_line,
            tokens_line,
            operators,
            operators_total: b.operators.len(),
            kernels,
            kernels_total,
            findings,
            summary,
            overhead,
            overhead_table,
            passes,
            manifest,
            snapshot,
            missing,
            inputs,
            model_config: b
                .model
                .as_ref()
                .and_then(|m| serde_json::to_string_pretty(&m.config).ok()),
            command: e.command.clone(),
            tools,
            diagnostics,
            launches: crate::launches::launch_table(b),
            graph_note: crate::launches::graph_trace_note(b),
            compile: crate::launches::compile_table(b),
            index,
        }
    }
}
