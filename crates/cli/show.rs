//! `llmprof show`: a run's report on the terminal, or its summary as JSON. Every table and
//! number comes from the report crate ([`RunReport`]), the one the site renders.

use std::io::Write;

use anyhow::Result;
use llmprof_bundle::{Analysis, Bundle, Summary};
use llmprof_report::fmt::{ms, thousands};
use llmprof_report::{CaptureReport, RunReport, TableView};

use crate::args::ShowConfig;
use crate::table;

pub fn run(cfg: ShowConfig) -> Result<()> {
    let bundle = llmprof_store::read_bundle(&cfg.run)?;
    let mut out = std::io::stdout().lock();
    if cfg.json {
        serde_json::to_writer_pretty(&mut out, &Summary::of(&bundle, cfg.top))?;
        writeln!(out)?;
        return Ok(());
    }
    let width = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(120usize)
        .max(60);
    out.write_all(render(&bundle, cfg.top, width).as_bytes())?;
    Ok(())
}

/// The whole terminal report.
pub fn render(b: &Bundle, top: usize, width: usize) -> String {
    let r = RunReport::of(b, top);
    let mut s = String::new();
    header(b, &mut s);
    if let Some(note) = &r.ranks_note {
        section(&mut s, "Ranks", &r.ranks, width);
        s.push_str(&wrap(note, width, 2));
        if !r.skew.is_empty() {
            section(
                &mut s,
                "Rank skew (median stage wall per rank)",
                &r.skew,
                width,
            );
        }
        if !r.rank_capture.is_empty() {
            section(
                &mut s,
                "Capture by rank (each rank's own baseline, overhead and GPU energy)",
                &r.rank_capture,
                width,
            );
        }
    }
    if !r.comm_windows.is_empty() {
        section(
            &mut s,
            "Communication (exposed = no compute kernel beside it; idle = no compute kernel)",
            &r.comm_windows,
            width,
        );
    }
    if !r.collectives.is_empty() {
        section(&mut s, "Collectives", &r.collectives, width);
    }
    section(
        &mut s,
        "Stages (NVTX ranges / record_function)",
        &r.stages,
        width,
    );
    if !r.library.is_empty() {
        section(
            &mut s,
            "Library ranges (NVTX domains of CUDA libraries; kept, but not stages)",
            &r.library,
            width,
        );
    }
    section(
        &mut s,
        &format!(
            "Top kernels by GPU time ({} of {}; time % of all kernel time)",
            r.kernels.rows.len(),
            r.kernels_total
        ),
        &r.kernels,
        width,
    );
    if !r.memory_ops.is_empty() {
        section(&mut s, "Memory operations", &r.memory_ops, width);
    }
    if !r.operators.is_empty() {
        let title = format!(
            "Top operators by device time ({} of {}; total = inclusive, self = exclusive)",
            r.operators.rows.len(),
            r.operators_total
        );
        section(&mut s, &title, &r.operators, width);
    }
    if !r.ncu.is_empty() {
        section(&mut s, "Nsight Compute", &r.ncu, width);
    }
    if b.capture.is_some() {
        capture(&mut s, &r, width);
    }
    if !r.launches.is_empty() {
        section(
            &mut s,
            "Launches and CUDA graphs (a graph launch is one call; per step = per decode step)",
            &r.launches,
            width,
        );
        if let Some(n) = &r.graph_note {
            s.push_str(&wrap(n, width, 2));
        }
    }
    if let Some(a) = &b.analysis {
        analysis(&mut s, b, a, &r, width);
    }
    if !r.diagnostics.is_empty() {
        section(&mut s, "Diagnostics", &r.diagnostics, width);
    }
    s
}

/// How the run was captured: passes, the baseline, overhead, energy, what is missing.
fn capture(s: &mut String, r: &RunReport, width: usize) {
    let c: &CaptureReport = &r.capture;
    if let Some(h) = &c.heading {
        s.push_str(&format!("\nCapture ({h})\n"));
    }
    if let Some(cmd) = &c.command {
        s.push_str(&wrap(&format!("command   sh -c {cmd:?}"), width, 2));
        if !c.stage_names.is_empty() {
            s.push_str(&format!("  stages    {}\n", c.stage_names.join(", ")));
        }
    }
    s.push_str(&table::render(&c.passes, width));
    if let Some(b) = &c.baseline {
        s.push_str(&wrap(&format!("baseline  {b}"), width, 2));
    }
    if let Some(r) = &c.ranks {
        s.push_str(&format!("  ranks     {r}\n"));
    }
    if !c.overrides.is_empty() {
        s.push_str(&format!("  set       {}\n", c.overrides.join(", ")));
    }
    if let Some(g) = &c.graph_trace {
        s.push_str(&format!("  graphs    {g}\n"));
    }
    if !r.compile.is_empty() {
        s.push_str(
            "  compile   the decode step, before each pass's warm-up (outside measured ranges):\n",
        );
        s.push_str(&indent(&table::render(&r.compile, width)));
    }
    if !c.overhead.is_empty() {
        s.push_str("  overhead  each profiled pass against the unprofiled baseline:\n");
        s.push_str(&indent(&table::render(&c.overhead, width)));
    }
    if !c.memory.is_empty() {
        s.push_str("  memory    device memory of the baseline pass:\n");
        s.push_str(&indent(&table::render(&c.memory, width)));
    }
    if !c.energy.is_empty() {
        s.push_str("  energy    per stage instance of the baseline pass:\n");
        s.push_str(&indent(&table::render(&c.energy, width)));
    }
    if let Some(n) = &c.energy_note {
        s.push_str(&wrap(&format!("note: {n}"), width, 2));
    }
    for m in &c.missing {
        s.push_str(&wrap(&format!("missing   {m}"), width, 2));
    }
}

/// A table nested under a section's text lines, two more spaces in.
fn indent(table: &str) -> String {
    table.lines().map(|l| format!("  {l}\n")).collect()
}

/// The headline numbers, MFU/MBU per stage, findings and the summary.
fn analysis(s: &mut String, b: &Bundle, a: &Analysis, r: &RunReport, width: usize) {
    if !r.headline.is_empty() {
        s.push_str("\nHeadline (median, 95% CI, n, CV; source beside each number)\n");
        s.push_str(&table::render(&r.headline, width));
        s.push_str(&wrap(&format!("Source: {}", r.headline.source), width, 2));
    }
    if let Some(w) = &r.spread_warning {
        s.push_str(&wrap(&format!("warning: {w}"), width, 2));
    }
    s.push_str(
        "\nMFU / MBU (wall = the headline wall above; busy = time the GPU ran the stage's work)\n",
    );
    s.push_str(&wrap(&r.peak_line, width, 2));
    if let Some(m) = &a.model {
        s.push_str(&format!(
            "  model     {}: {:.3} B params ({:.3} B active), KV {:.0} bytes/token\n",
            m.model_type,
            m.params / 1e9,
            m.active_params / 1e9,
            m.kv_bytes_per_token
        ));
    }
    if let Some(w) = &b.workload {
        let wrapped = wrap(&llmprof_report::paths::shown_in(&w.describe()), width, 12);
        s.push_str(&format!("  tokens    {}", wrapped.trim_start()));
    }
    s.push_str(&table::render(&r.mfu, width));
    for n in &r.mfu_notes {
        s.push_str(&wrap(n, width, 2));
    }
    if let Some(n) = &a.run.note {
        s.push_str(&format!("  run       {n}\n"));
    }
    s.push_str("\nFindings\n");
    for (i, finding) in r.findings.iter().enumerate() {
        s.push_str(&format!("  {}. {}\n", i + 1, finding.title));
        for e in &finding.evidence {
            s.push_str(&wrap(&format!("- {e}"), width, 5));
        }
        s.push_str(&wrap(&format!("→ {}", finding.recommendation), width, 5));
    }
    s.push_str("\nSummary\n");
    s.push_str(&wrap(&r.summary, width + 2, 2).replace("\n    ", "\n  "));
}

/// Wraps `text` to `width` columns: the first line indented by `indent` spaces, the following
/// ones by two more (a hanging indent under bullets).
fn wrap(text: &str, width: usize, indent: usize) -> String {
    let mut out = String::new();
    let mut line = String::new();
    let mut pad = indent;
    for word in text.split_whitespace() {
        let max = width.saturating_sub(pad).max(20);
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > max {
            out.push_str(&" ".repeat(pad));
            out.push_str(&line);
            out.push('\n');
            line.clear();
            pad = indent + 2;
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(&" ".repeat(pad));
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn section(s: &mut String, title: &str, table: &TableView, width: usize) {
    s.push('\n');
    s.push_str(title);
    s.push('\n');
    if table.is_empty() {
        s.push_str("  (none)\n");
    } else {
        s.push_str(&table::render(table, width));
    }
}

fn header(b: &Bundle, s: &mut String) {
    s.push_str(&format!("Run {}", b.run_id));
    if let Some(l) = &b.label {
        s.push_str(&format!("  ({l})"));
    }
    s.push('\n');
    if let Some(at) = &b.captured_at {
        s.push_str(&format!("  captured  {at}\n"));
    }
    if let Some(d) = &b.device {
        let mut parts = vec![d.name.clone()];
        if let Some(n) = d.sm_count {
            parts.push(format!("{n} SMs"));
        }
        if let Some(m) = d.memory_bytes {
            parts.push(llmprof_report::fmt::gib(m));
        }
        if let Some(bw) = d.memory_bandwidth_bytes_per_s {
            parts.push(llmprof_report::fmt::gbps(bw));
        }
        if let Some(cc) = &d.compute_capability {
            parts.push(format!("CC {cc}"));
        }
        s.push_str(&format!("  device    {}\n", parts.join(" · ")));
    }
    let e = &b.environment;
    let mut sw = Vec::new();
    if let Some(v) = &e.driver_version {
        sw.push(format!("driver {v}"));
    }
    if let Some(v) = &e.cuda_driver_version {
        sw.push(format!("CUDA {v}"));
    }
    for t in &e.tools {
        sw.push(format!("{} {}", t.name, t.version));
    }
    if !sw.is_empty() {
        s.push_str(&format!("  software  {}\n", sw.join(" · ")));
    }
    if let Some(d) = &e.distributed {
        let line = llmprof_report::run::run_rank_line(b, d);
        s.push_str(&format!("  rank      {line}\n"));
    }
    if let Some(m) = &b.model {
        s.push_str(&format!(
            "  model     {} ({})\n",
            m.model_type.as_deref().unwrap_or("unknown model_type"),
            llmprof_report::paths::shown(&m.source)
        ));
    }
    let t = &b.totals;
    if let Some(src) = b.timing_source {
        s.push_str(&format!(
            "  timing    from {}: {} kernels, {} memcpy, {} memset on {} stream(s); GPU busy {} ms \
             of a {} ms span\n",
            src.as_str(),
            thousands(t.kernels),
            thousands(t.memcpys),
            thousands(t.memsets),
            t.streams,
            ms(t.gpu_busy_ns),
            ms(t.gpu_span_ns)
        ));
        if let Some(r) = &b.ranks {
            s.push_str(&format!(
                "            (counts, times and busy summed over {} ranks; the span is the longest \
                 rank's)\n",
                r.ranks.len()
            ));
        }
    }
}
