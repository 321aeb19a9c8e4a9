//! What `llmprof capture` recorded of how the run was made: the passes with their command
//! lines, the unprofiled baseline, the profilers' overhead, energy, the environment snapshot,
//! the manifest and what is missing.

use llmprof_bundle::{Bundle, Capture, StageTimings};

use crate::fmt::{bytes, joules, ms_f, thousands, us};
use crate::table::{Column, TableView};

/// The capture's sections; empty tables and `None`s for an ingested run.
#[derive(Debug, Clone, Default)]
pub struct CaptureReport {
    /// `standard mode, target qwen2.5-0.5b`, or `…, INTERRUPTED: partial`; `None` when the run
    /// was ingested from existing captures.
    pub heading: Option<String>,
    /// The user's command line and stage names, for `--cmd` captures.
    pub command: Option<String>,
    pub stage_names: Vec<String>,
    /// What the overhead figures mean, or why there are none.
    pub overhead_text: String,
    /// The unprofiled baseline in one line.
    pub baseline: Option<String>,
    pub overhead: TableView,
    pub passes: TableView,
    pub energy: TableView,
    pub energy_note: Option<String>,
    /// Device memory of the baseline pass (empty without a memory record).
    pub memory: TableView,
    pub manifest: TableView,
    pub snapshot: TableView,
    pub missing: Vec<String>,
    /// `--set` overrides as given.
    pub overrides: Vec<String>,
    /// `nsys traced CUDA graphs at node level`.
    pub graph_trace: Option<String>,
    /// `2 ranks under torch.distributed.run … on GPUs 0,1 (tensor parallel); …`.
    pub ranks: Option<String>,
}

impl CaptureReport {
    pub(super) fn of(b: &Bundle) -> CaptureReport {
        let Some(c) = &b.capture else {
            return CaptureReport {
                overhead_text: "Not measured: this run was ingested from existing captures, so \
                                there is no unprofiled baseline to compare with. Profiled \
                                timings include the profilers' own overhead (CUPTI tracing \
                                slows kernel launches)."
                    .into(),
                ..CaptureReport::default()
            };
        };
        CaptureReport {
            heading: Some(heading(c)),
            command: c.command.clone(),
            stage_names: c.stage_names.clone(),
            overhead_text: overhead_text(c),
            baseline: c.baseline.as_ref().map(|t| baseline_line(c, t)),
            overhead: overhead(c),
            passes: passes(c),
            energy: energy(c),
            energy_note: c.energy_note.clone(),
            memory: memory(b),
            manifest: manifest(c),
            snapshot: snapshot(c),
            missing: c.missing.clone(),
            overrides: c.overrides.clone(),
            graph_trace: c
                .cuda_graph_trace
                .as_ref()
                .map(|l| format!("nsys traced CUDA graphs at {l} level")),
            ranks: c.ranks.as_ref().map(|r| {
                let devices: Vec<String> = r.devices.iter().map(u32::to_string).collect();
                format!(
                    "{} rank(s) under {} on GPU(s) {} (tensor parallel {}, ncu on rank {}); {}",
                    r.nproc,
                    r.launcher,
                    devices.join(","),
                    r.nproc,
                    r.ncu_rank,
                    r.note
                )
            }),
        }
    }
}

/// The unprofiled baseline in one line, with what `--repeats auto` reached.
fn baseline_line(c: &Capture, t: &StageTimings) -> String {
    // A `--cmd` workload's windows may hold only one stage, and never its decode steps.
    let medians: Vec<String> = [
        (
            t.prefill.count,
            format!("prefill median {} ms", ms_f(t.prefill.median_ns)),
        ),
        (
            t.decode.count,
            format!("decode median {} ms", ms_f(t.decode.median_ns)),
        ),
        (
            t.decode_step.count,
            format!("step median {} µs", us(t.decode_step.median_ns)),
        ),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(_, text)| text)
    .collect();
    let mut line = format!(
        "{} iterations from {} process(es): {}; iteration CV {:.1}% (the Headline numbers give \
         each figure's interval)",
        t.iterations,
        t.processes.max(1),
        medians.join(", "),
        t.iteration_cv_pct
    );
    if let Some(a) = &c.auto_repeats {
        let widths: Vec<String> = (a.stages.iter())
            .map(|s| match s.half_width_pct {
                Some(h) => format!("{} ±{h:.1}%", s.stage),
                None => format!("{} without an interval", s.stage),
            })
            .collect();
        line.push_str(&format!(
            ". --repeats auto: target ±{:.1}% {} after {} added round(s), {:.0} s of baseline \
             passes (cap {} s): {}",
            a.target_pct,
            if a.met { "met" } else { "not met" },
            a.rounds,
            a.baseline_s,
            a.cap_s,
            widths.join(", ")
        ));
    }
    line
}

fn heading(c: &Capture) -> String {
    format!(
        "{} mode, {} {}{}",
        c.mode,
        if c.command.is_some() {
            "command"
        } else {
            "target"
        },
        c.target,
        if c.interrupted {
            ", INTERRUPTED: partial"
        } else {
            ""
        }
    )
}

fn overhead_text(c: &Capture) -> String {
    let text = match &c.baseline {
        Some(base) => format!(
            "Each profiled pass is compared with an unprofiled baseline of {} iteration(s) \
             (iteration time varies {:.1}% between repeats, std/mean). Timings from a pass with \
             high overhead are inflated by the profiler.",
            base.iterations, base.iteration_cv_pct
        ),
        None => "No baseline pass ran, so the profilers' overhead is unknown.".into(),
    };
    // How the energy figures were computed.
    match &c.energy_note {
        Some(n) => format!("{text} {n}"),
        None => text,
    }
}

/// Each profiled pass's stage medians against the baseline's, with the range over the
/// interleaved pairs when `--overhead-repeats` made some.
fn overhead(c: &Capture) -> TableView {
    let paired = c.overhead.iter().any(|o| o.pair_range_pct.is_some());
    let mut columns = vec![
        Column::text("Pass"),
        Column::text("Stage"),
        Column::num("Baseline median (ms)"),
        Column::num("Profiled median (ms)"),
        Column::num("Overhead (%)"),
    ];
    if paired {
        columns.push(Column::num("Interleaved pairs (%)").optional());
    }
    columns.push(Column::text("Medians of").optional());
    let mut t = TableView::new(columns)
        .from_source("the driver's stage timings of each pass, against the unprofiled baseline");
    for o in &c.overhead {
        let mut row = vec![
            o.pass.clone(),
            o.stage.clone(),
            ms_f(o.baseline_median_ns),
            ms_f(o.profiled_median_ns),
            format!("{:+.1}", o.overhead_pct),
        ];
        if paired {
            row.push(match o.pair_range_pct {
                Some([lo, hi]) => format!("{} pairs: {lo:+.1} to {hi:+.1}", o.pairs),
                None => String::new(),
            });
        }
        row.push(o.basis.clone().unwrap_or_else(|| "iterations".into()));
        t.push(row);
    }
    t
}

/// Every pass with its wall time, outcome and exact command line.
fn passes(c: &Capture) -> TableView {
    let mut t = TableView::new(vec![
        Column::text("Pass"),
        Column::num("Wall (s)"),
        Column::text("Result"),
        Column::text("Command").optional(),
    ]);
    for p in &c.passes {
        t.push(vec![
            p.name.clone(),
            format!("{:.1}", p.wall_ns as f64 / 1e9),
            p.outcome(),
            p.command.join(" "),
        ]);
    }
    t
}

/// Energy per stage instance of the baseline pass, from NVML power over the stage windows.
fn energy(c: &Capture) -> TableView {
    let mut t = TableView::new(vec![
        Column::text("Stage"),
        Column::num("Energy / instance (J)"),
        Column::num("Mean power (W)"),
        Column::num("Wall (ms)"),
        Column::num("Instances"),
        Column::num("NVML samples"),
        Column::num("mJ / token"),
    ])
    .from_source("NVML power integrated over the baseline pass's stage windows");
    for e in &c.energy {
        t.push(vec![
            e.stage.clone(),
            joules(e.energy_j),
            format!("{:.0}", e.mean_power_w),
            ms_f(e.wall_ns),
            thousands(e.instances),
            thousands(e.samples),
            match (e.j_per_token, &e.withheld) {
                (Some(j), _) => joules(j * 1e3),
                (None, Some(why)) => format!("withheld: {why}"),
                (None, None) => "n/a".into(),
            },
        ]);
    }
    t
}

/// The baseline's memory: weights, each stage's peak, the KV cache measured and computed from
/// the config, the device's free memory, and the headroom analysis found.
fn memory(b: &Bundle) -> TableView {
    let mut t = TableView::new(vec![
        Column::text("Memory"),
        Column::num("Bytes"),
        Column::text("Note"),
    ]);
    let Some(m) = b.capture.as_ref().and_then(|c| c.memory.as_ref()) else {
        return t;
    };
    t = t.from_source(&m.source);
    let a = b.analysis.as_ref().and_then(|a| a.memory.as_ref());
    let mut row = |what: &str, v: Option<f64>, note: String| {
        if let Some(v) = v {
            t.push(vec![what.to_string(), bytes(v), note]);
        }
    };
    row(
        "weights",
        m.weights_bytes.map(|v| v as f64),
        "parameters and buffers".into(),
    );
    for s in &m.stages {
        if m.nvml_used {
            row(
                &format!("{} peak used (NVML)", s.stage),
                Some(s.peak_allocated_bytes as f64),
                "the whole device, every process".into(),
            );
            continue;
        }
        row(
            &format!("{} peak allocated", s.stage),
            Some(s.peak_allocated_bytes as f64),
            format!("reserved {}", bytes(s.peak_reserved_bytes as f64)),
        );
    }
    let tokens = m.kv_tokens.or(a.and_then(|a| a.kv_tokens));
    let batch = m.batch_size.or(a.and_then(|a| a.kv_batch));
    let held = match (tokens, batch) {
        (Some(t), Some(b)) => format!("{} tokens × batch {b}", thousands(t)),
        _ => String::new(),
    };
    let kind = m.kv_cache_kind.as_ref().map(|k| format!("{k} cache"));
    let note: Vec<String> = kind
        .into_iter()
        .chain(Some(held.clone()))
        .filter(|s| !s.is_empty())
        .collect();
    row(
        "KV cache, measured",
        m.kv_cache_bytes.map(|v| v as f64),
        note.join(", "),
    );
    if let Some(c) = a.and_then(|a| a.kv_cache_computed_bytes) {
        let shards = (a.and_then(|a| a.kv_shards))
            .map_or(String::new(), |n| format!(" ÷ {n} GPUs (tensor parallel)"));
        let diff = a
            .and_then(|a| a.kv_cache_diff_pct)
            .map_or(String::new(), |d| format!("; measured differs by {d:+.1}%"));
        row(
            "KV cache, computed",
            Some(c),
            format!("model config × {held}{shards}{diff}"),
        );
    }
    row(
        "free after the iterations",
        m.free_bytes.map(|v| v as f64),
        m.total_bytes
            .map_or(String::new(), |t| format!("of {}", bytes(t as f64))),
    );
    if let Some(h) = a.and_then(|a| a.headroom.as_ref()) {
        row(
            "per extra sequence",
            Some(h.bytes_per_sequence),
            format!(
                "{} more fit; suggested batch {} (headroom finding)",
                thousands(h.extra_sequences),
                h.suggested_batch
            ),
        );
    }
    t
}

fn manifest(c: &Capture) -> TableView {
    let mut t = TableView::new(vec![
        Column::text("Artifact"),
        Column::num("Bytes"),
        Column::text("sha256"),
    ]);
    for m in &c.manifest {
        t.push(vec![m.path.clone(), thousands(m.bytes), m.sha256.clone()]);
    }
    t
}

/// The environment the capture recorded before its first pass.
fn snapshot(c: &Capture) -> TableView {
    let mut t = TableView::new(vec![Column::text(""), Column::text("")]);
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
        ("CPU", e.cpu.clone()),
        (
            "CPU pinning",
            e.pinned_cpus
                .as_ref()
                .map(|c| format!("pinned to CPUs {c} (NVML's affinity of the GPU)"))
                .or_else(|| e.pin_note.as_ref().map(|n| format!("not pinned: {n}"))),
        ),
        ("CPU governor", e.cpu_governor.clone()),
        ("CPU MHz at start", e.cpu_mhz.map(|v| format!("{v:.0}"))),
        ("Device index", e.device_index.map(|v| v.to_string())),
    ] {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            t.push(vec![k.into(), v]);
        }
    }
    for (tool, v) in &e.tools {
        t.push(vec![tool.clone(), v.clone()]);
    }
    t
}
