//! `llmprof show`: a run's tables on the terminal, or its summary as JSON.

use std::io::Write;

use anyhow::Result;
use llmprof_bundle::{names, Analysis, Bundle, OpKind, Summary};

use crate::args::ShowConfig;
use crate::table::{ms, pct, thousands, us, Align, Table};

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
    let mut s = String::new();
    header(b, &mut s);
    section(
        &mut s,
        "Stages (NVTX ranges / record_function)",
        stages(b),
        width,
    );
    let n_kernels = b
        .kernels
        .iter()
        .filter(|k| k.kind == OpKind::Kernel)
        .count();
    section(
        &mut s,
        &format!(
            "Top kernels by GPU time ({} of {n_kernels}; time % of all kernel time)",
            top.min(n_kernels)
        ),
        kernels(b, top),
        width,
    );
    let mem = memory_ops(b);
    if !mem.is_empty() {
        section(&mut s, "Memory operations", mem, width);
    }
    if !b.operators.is_empty() {
        section(
            &mut s,
            &format!(
                "Top operators by device time ({} of {}; total = inclusive, self = exclusive)",
                top.min(b.operators.len()),
                b.operators.len()
            ),
            operators(b, top),
            width,
        );
    }
    if !b.ncu.is_empty() {
        section(&mut s, "Nsight Compute", ncu(b, top), width);
    }
    if let Some(c) = &b.capture {
        capture(&mut s, b, c, width);
    }
    let launches = llmprof_site::launches::launch_table(b);
    if !launches.is_empty() {
        section(
            &mut s,
            "Launches and CUDA graphs (a graph launch is one call; per step = per decode step)",
            from_view(&launches),
            width,
        );
        if let Some(n) = llmprof_site::launches::graph_trace_note(b) {
            s.push_str(&wrap(&n, width, 2));
        }
    }
    if let Some(a) = &b.analysis {
        analysis(&mut s, b, a, width);
    }
    if !b.diagnostics.is_empty() {
        section(&mut s, "Diagnostics", diagnostics(b), width);
    }
    s
}

/// How the run was captured: passes, the baseline, overhead, what is missing.
fn capture(s: &mut String, b: &Bundle, c: &llmprof_bundle::Capture, width: usize) {
    s.push_str(&format!(
        "\nCapture ({} mode, {} {}){}\n",
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
    ));
    if let Some(cmd) = &c.command {
        s.push_str(&wrap(&format!("command   sh -c {cmd:?}"), width, 2));
        if !c.stage_names.is_empty() {
            s.push_str(&format!("  stages    {}\n", c.stage_names.join(", ")));
        }
    }
    let mut t = Table::new(
        &[
            ("pass", Align::Left),
            ("wall s", Align::Right),
            ("result", Align::Left),
        ],
        2,
    );
    for p in &c.passes {
        t.row(vec![
            p.name.clone(),
            format!("{:.1}", p.wall_ns as f64 / 1e9),
            p.outcome(),
        ]);
    }
    s.push_str(&t.render(width));
    if let Some(b) = &c.baseline {
        s.push_str(&format!(
            "  baseline  {} iterations: prefill median {} ms, decode median {} ms, step median {} µs; iteration CV {:.1}%\n",
            b.iterations,
            ms(b.prefill.median_ns as u64),
            ms(b.decode.median_ns as u64),
            us(b.decode_step.median_ns),
            b.iteration_cv_pct
        ));
    }
    optimize(s, b, c, width);
    for o in &c.overhead {
        s.push_str(&format!(
            "  overhead  {} pass on {}: {:+.1}% ({} → {} ms median){}\n",
            o.pass,
            o.stage,
            o.overhead_pct,
            ms(o.baseline_median_ns as u64),
            ms(o.profiled_median_ns as u64),
            match o.pair_range_pct {
                Some([lo, hi]) =>
                    format!("; {} interleaved pairs, {lo:+.1}% to {hi:+.1}%", o.pairs),
                None => String::new(),
            }
        ));
    }
    for e in &c.energy {
        s.push_str(&format!(
            "  energy    {}: {} J per instance, {:.0} W mean over {} ms × {} ({} sample{}){}\n",
            e.stage,
            joules(e.energy_j),
            e.mean_power_w,
            ms(e.wall_ns as u64),
            e.instances,
            e.samples,
            if e.samples == 1 { "" } else { "s" },
            match (e.j_per_token, e.tokens) {
                (Some(j), Some(t)) => format!("; {} mJ/token ({t} tokens)", joules(j * 1e3)),
                _ => String::new(),
            }
        ));
    }
    if let Some(n) = &c.energy_note {
        s.push_str(&wrap(&format!("note: {n}"), width, 2));
    }
    for m in &c.missing {
        s.push_str(&wrap(&format!("missing   {m}"), width, 2));
    }
}

/// `--set` overrides, how nsys traced CUDA graphs, and each pass's compile of the decode step.
fn optimize(s: &mut String, b: &Bundle, c: &llmprof_bundle::Capture, width: usize) {
    if !c.overrides.is_empty() {
        s.push_str(&format!("  set       {}\n", c.overrides.join(", ")));
    }
    if let Some(level) = &c.cuda_graph_trace {
        s.push_str(&format!(
            "  graphs    nsys traced CUDA graphs at {level} level\n"
        ));
    }
    let compile = llmprof_site::launches::compile_table(b);
    if !compile.is_empty() {
        s.push_str(
            "  compile   the decode step, before each pass's warm-up (outside measured ranges):\n",
        );
        s.push_str(&from_view(&compile).render(width));
    }
}

/// Joules with three significant digits (0.0123, 1.23, 123).
fn joules(j: f64) -> String {
    if j.abs() >= 100.0 {
        format!("{j:.0}")
    } else if j.abs() >= 10.0 {
        format!("{j:.1}")
    } else if j.abs() >= 1.0 {
        format!("{j:.2}")
    } else {
        format!("{j:.3}")
    }
}

/// MFU/MBU per stage, run metrics, findings and the summary.
fn analysis(s: &mut String, b: &Bundle, a: &Analysis, width: usize) {
    s.push_str("\nMFU / MBU (wall = NVTX range time; busy = projected GPU time)\n");
    match (&a.peak, &a.peak_note) {
        (Some(p), _) => s.push_str(&format!(
            "  peak      {} TFLOP/s {}, {} GB/s — {}\n",
            p.tflops, p.dtype, p.gbps, p.source
        )),
        (None, Some(why)) => s.push_str(&format!("  peak      n/a: {why}\n")),
        _ => {}
    }
    if let Some(m) = &a.model {
        s.push_str(&format!(
            "  model     {}: {:.3} B params ({:.3} B active), KV {:.0} bytes/token\n",
            m.model_type,
            m.params / 1e9,
            m.active_params / 1e9,
            m.kv_bytes_per_token
        ));
    } else if let Some(why) = &a.model_note {
        s.push_str(&format!("  model     n/a: {why}\n"));
    }
    if let Some(w) = &b.workload {
        let wrapped = wrap(&w.describe(), width, 12);
        s.push_str(&format!("  tokens    {}", wrapped.trim_start()));
    }
    let mut t = Table::new(
        &[
            ("stage", Align::Left),
            ("FLOPs", Align::Right),
            ("TFLOP/s", Align::Right),
            ("MFU %", Align::Right),
            ("MFU busy %", Align::Right),
            ("GB/s", Align::Right),
            ("MBU %", Align::Right),
            ("FLOP/B", Align::Right),
            ("bound", Align::Left),
        ],
        0,
    );
    let f = |v: Option<f64>, digits: usize| {
        v.map(|x| format!("{x:.digits$}"))
            .unwrap_or_else(|| "n/a".into())
    };
    let pct_of = |v: Option<f64>| {
        v.map(|x| format!("{:.2}", x * 100.0))
            .unwrap_or_else(|| "n/a".into())
    };
    for st in &a.stages {
        let flops = st.flops.map(|x| {
            let tag = match st.flops_source.as_deref() {
                Some("counted") => " (counted)",
                _ => "",
            };
            format!("{:.3e}{tag}", x)
        });
        t.row(vec![
            st.name.clone(),
            flops.unwrap_or_else(|| "n/a".into()),
            f(st.tflops, 2),
            pct_of(st.mfu),
            pct_of(st.mfu_busy),
            f(st.gbps, 0),
            pct_of(st.mbu),
            f(st.intensity, 1),
            st.bound.clone(),
        ]);
    }
    s.push_str(&t.render(width));
    for st in a
        .stages
        .iter()
        .filter(|st| st.note.is_some() || st.counted_vs_analytic_pct.is_some())
    {
        if let Some(d) = st.counted_vs_analytic_pct {
            s.push_str(&format!(
                "  {}: counted {:.3e} vs analytic {:.3e} FLOPs ({d:+.1}%)\n",
                st.name,
                st.counted_flops.unwrap_or(0.0),
                st.analytic_flops.unwrap_or(0.0)
            ));
        }
        if let Some(n) = &st.note {
            s.push_str(&format!("  {}: {n}\n", st.name));
        }
    }
    let r = &a.run;
    let mut run = Vec::new();
    if let Some(d) = &r.ttft {
        run.push(format!("TTFT median {} ms", ms(d.median_ns as u64)));
    }
    if let Some(d) = &r.tpot {
        run.push(format!(
            "TPOT median {} ms (p90 {} ms)",
            ms(d.median_ns as u64),
            ms(d.p90_ns as u64)
        ));
    }
    if let Some(t) = r.decode_tokens_per_s {
        run.push(format!("{t:.1} tokens/s in decode"));
    }
    if let Some(m) = r.model_mfu {
        run.push(format!("model MFU {:.2}%", m * 100.0));
    }
    if !run.is_empty() {
        s.push_str(&format!("  run       {}\n", run.join(" · ")));
    }
    if let Some(n) = &r.note {
        s.push_str(&format!("  run       {n}\n"));
    }
    if let Some(why) = &a.inconsistent {
        s.push_str(&format!("  INCONSISTENT: {why}\n"));
    }

    s.push_str("\nFindings\n");
    for (i, finding) in a.findings.iter().enumerate() {
        s.push_str(&format!("  {}. {}\n", i + 1, finding.title));
        for e in &finding.evidence {
            s.push_str(&wrap(&format!("- {e}"), width, 5));
        }
        s.push_str(&wrap(&format!("→ {}", finding.recommendation), width, 5));
    }
    s.push_str("\nSummary\n");
    s.push_str(&wrap(&a.summary, width + 2, 2).replace("\n    ", "\n  "));
}

/// Wraps `text` to `width` columns: the first line indented by `indent` spaces, the following
/// ones by two more (a hanging indent under bullets).
/// A site table (computed once in the view layer) as a terminal table.
fn from_view(v: &llmprof_site::view::TableView) -> Table {
    let cols: Vec<(&str, Align)> = v
        .headers
        .iter()
        .zip(&v.numeric)
        .map(|(h, &n)| (h.as_str(), if n { Align::Right } else { Align::Left }))
        .collect();
    let mut t = Table::new(&cols, 2);
    for r in &v.rows {
        t.row(r.clone());
    }
    t
}

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

fn section(s: &mut String, title: &str, table: Table, width: usize) {
    s.push('\n');
    s.push_str(title);
    s.push('\n');
    if table.is_empty() {
        s.push_str("  (none)\n");
    } else {
        s.push_str(&table.render(width));
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
            parts.push(format!("{:.1} GiB", m as f64 / (1u64 << 30) as f64));
        }
        if let Some(bw) = d.memory_bandwidth_bytes_per_s {
            parts.push(format!("{:.0} GB/s", bw as f64 / 1e9));
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
    if let Some(m) = &b.model {
        s.push_str(&format!(
            "  model     {} ({})\n",
            m.model_type.as_deref().unwrap_or("unknown model_type"),
            m.source
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
    }
}

fn stages(b: &Bundle) -> Table {
    let mut t = Table::new(
        &[
            ("stage", Align::Left),
            ("inst", Align::Right),
            ("wall ms", Align::Right),
            ("GPU proj ms", Align::Right),
            ("GPU ops", Align::Right),
            ("kernel ms", Align::Right),
            ("GPU busy %", Align::Right),
        ],
        0,
    );
    for st in &b.stages {
        let indent = "  ".repeat(st.depth as usize);
        let name = if st.domain.is_empty() {
            st.name.clone()
        } else {
            format!("{}:{}", st.domain, st.name)
        };
        t.row(vec![
            format!("{indent}{name}"),
            thousands(st.instances),
            ms(st.wall_ns),
            ms(st.gpu_proj_ns),
            thousands(st.gpu_ops),
            ms(st.kernel_ns),
            pct(st.gpu_busy_pct),
        ]);
    }
    t
}

fn kernels(b: &Bundle, top: usize) -> Table {
    let mut t = Table::new(
        &[
            ("kernel", Align::Left),
            ("category", Align::Left),
            ("calls", Align::Right),
            ("total ms", Align::Right),
            ("time %", Align::Right),
            ("mean µs", Align::Right),
            ("median µs", Align::Right),
        ],
        0,
    );
    let mut rows: Vec<_> = b
        .kernels
        .iter()
        .filter(|k| k.kind == OpKind::Kernel)
        .collect();
    rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.id.cmp(&b.id)));
    for k in rows.into_iter().take(top) {
        t.row(vec![
            names::display_name(&k.name),
            k.category.as_str().to_string(),
            thousands(k.calls),
            ms(k.total_ns),
            pct(k.time_pct),
            us(k.mean_ns),
            us(k.median_ns),
        ]);
    }
    t
}

fn memory_ops(b: &Bundle) -> Table {
    let mut t = Table::new(
        &[
            ("operation", Align::Left),
            ("count", Align::Right),
            ("total ms", Align::Right),
            ("MB", Align::Right),
            ("median µs", Align::Right),
        ],
        0,
    );
    for k in b.kernels.iter().filter(|k| k.kind != OpKind::Kernel) {
        t.row(vec![
            k.name.clone(),
            thousands(k.calls),
            ms(k.total_ns),
            format!("{:.1}", k.bytes.unwrap_or(0) as f64 / 1e6),
            us(k.median_ns),
        ]);
    }
    t
}

fn operators(b: &Bundle, top: usize) -> Table {
    let mut t = Table::new(
        &[
            ("operator", Align::Left),
            ("calls", Align::Right),
            ("CPU total ms", Align::Right),
            ("CPU self ms", Align::Right),
            ("device ms", Align::Right),
            ("device self ms", Align::Right),
        ],
        0,
    );
    for o in b.operators.iter().take(top) {
        t.row(vec![
            o.name.clone(),
            thousands(o.calls),
            ms(o.cpu_total_ns),
            ms(o.cpu_self_ns),
            ms(o.device_ns),
            ms(o.device_self_ns),
        ]);
    }
    t
}

fn ncu(b: &Bundle, top: usize) -> Table {
    let mut t = Table::new(
        &[
            ("kernel", Align::Left),
            ("range", Align::Left),
            ("dur µs", Align::Right),
            ("SM %", Align::Right),
            ("mem %", Align::Right),
            ("DRAM %", Align::Right),
            ("occ ach/theo %", Align::Right),
            ("tensor %", Align::Right),
        ],
        0,
    );
    let opt = |v: Option<f64>| v.map(pct).unwrap_or_else(|| "–".into());
    let mut rows: Vec<_> = b.ncu.iter().collect();
    rows.sort_by(|a, b| {
        b.duration_ns
            .unwrap_or(0.0)
            .total_cmp(&a.duration_ns.unwrap_or(0.0))
    });
    for n in rows.into_iter().take(top) {
        let name = n
            .kernel
            .and_then(|k| b.kernels.get(k as usize))
            .map(|k| names::display_name(&k.name))
            .unwrap_or_else(|| names::display_name(&n.name));
        t.row(vec![
            name,
            n.nvtx_range.clone().unwrap_or_default(),
            n.duration_ns.map(us).unwrap_or_else(|| "–".into()),
            opt(n.sm_throughput_pct),
            opt(n.memory_throughput_pct),
            opt(n.dram_throughput_pct),
            format!(
                "{}/{}",
                opt(n.achieved_occupancy_pct),
                opt(n.theoretical_occupancy_pct)
            ),
            opt(n.tensor_pipe_pct),
        ]);
    }
    t
}

fn diagnostics(b: &Bundle) -> Table {
    let mut t = Table::new(
        &[
            ("what", Align::Left),
            ("count", Align::Right),
            ("severity", Align::Left),
            ("source", Align::Left),
        ],
        0,
    );
    for d in &b.diagnostics {
        t.row(vec![
            d.message.clone(),
            thousands(d.count),
            format!("{:?}", d.severity).to_lowercase(),
            d.source.as_str().to_string(),
        ]);
    }
    t
}
