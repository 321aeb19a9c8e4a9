//! The run's identity and environment: the Environment and Aggregates tables, the inputs, the
//! tools and the ingest diagnostics.

use llmprof_bundle::Bundle;

use crate::fmt::{gbps, gib, ms, thousands};
use crate::table::{Column, TableView};

pub(super) fn model_name(b: &Bundle) -> String {
    b.model
        .as_ref()
        .and_then(|m| m.model_type.clone())
        .unwrap_or_else(|| "unknown model".into())
}

pub(super) fn device_name(b: &Bundle) -> String {
    b.device
        .as_ref()
        .map(|d| d.name.clone())
        .unwrap_or_else(|| "unknown device".into())
}

/// A two-column key/value table.
fn key_value() -> TableView {
    TableView::new(vec![Column::text(""), Column::text("")])
}

/// The GPU, the software and the host.
pub(super) fn environment(b: &Bundle) -> TableView {
    let mut env = key_value().from_source("the trace's device and environment tables");
    if let Some(d) = &b.device {
        env.push(vec!["GPU".into(), d.name.clone()]);
        let rows = [
            ("SMs", d.sm_count.map(|v| v.to_string())),
            ("Memory", d.memory_bytes.map(gib)),
            ("Memory bandwidth", d.memory_bandwidth_bytes_per_s.map(gbps)),
            (
                "SM clock (max)",
                d.sm_clock_max_hz.map(|v| format!("{} MHz", v / 1_000_000)),
            ),
            ("Compute capability", d.compute_capability.clone()),
        ];
        for (k, v) in rows {
            if let Some(v) = v {
                env.push(vec![k.into(), v]);
            }
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
            env.push(vec![k.into(), v.clone()]);
        }
    }
    if let Some(n) = e.cpu_cores {
        env.push(vec!["CPU cores".into(), n.to_string()]);
    }
    if let Some(d) = &e.distributed {
        env.push(vec!["Rank".into(), run_rank_line(b, d)]);
    }
    for t in &e.tools {
        env.push(vec![t.name.clone(), t.version.clone()]);
    }
    env
}

/// The rank line of a run: [`rank_line`] of a single-rank bundle; `2 of 128 ranks, merged ·
/// nccl · …` of a multi-rank run's top-level bundle.
pub fn run_rank_line(b: &Bundle, d: &llmprof_bundle::Distributed) -> String {
    let line = rank_line(d);
    match &b.ranks {
        Some(r) => {
            let rest: Vec<&str> = line.split(" · ").skip(1).collect();
            let mut parts = vec![format!(
                "{} of {} ranks, merged",
                r.ranks.len(),
                r.world_size
            )];
            parts.extend(rest.iter().map(|s| s.to_string()));
            parts.join(" · ")
        }
        None => line,
    }
}

/// `rank 0 of 2 · nccl · NCCL 2.17.1 · 1 process group (default_pg: ranks 0, 1)`.
pub fn rank_line(d: &llmprof_bundle::Distributed) -> String {
    let mut parts = vec![format!("rank {} of {}", d.rank, d.world_size)];
    parts.extend(d.backend.clone());
    parts.extend(d.nccl_version.as_ref().map(|v| format!("NCCL {v}")));
    let groups: Vec<String> = (d.process_groups.iter())
        .map(|g| {
            let ranks: Vec<String> = g.ranks.iter().map(u32::to_string).collect();
            let name = g.description.as_deref().unwrap_or(&g.name);
            format!("{name}: ranks {}", ranks.join(", "))
        })
        .collect();
    if !groups.is_empty() {
        parts.push(format!(
            "{} process group(s) ({})",
            groups.len(),
            groups.join("; ")
        ));
    }
    parts.join(" · ")
}

/// Totals over the run, the run metrics of the analysis, table sizes and energy.
pub(super) fn aggregates(b: &Bundle) -> TableView {
    let t = &b.totals;
    let mut agg = TableView::new(vec![Column::text(""), Column::num("")])
        .from_source("the timing source's GPU ops; run metrics from the analysis");
    agg.push(vec![
        "Timing source".into(),
        b.timing_source
            .map_or("–".into(), |s| s.as_str().to_string()),
    ]);
    agg.push(vec!["Kernels".into(), thousands(t.kernels)]);
    agg.push(vec!["Kernel time (ms)".into(), ms(t.kernel_ns)]);
    agg.push(vec![
        "Memcpy / memset".into(),
        format!(
            "{} / {} ({} ms)",
            thousands(t.memcpys),
            thousands(t.memsets),
            ms(t.memcpy_ns + t.memset_ns)
        ),
    ]);
    agg.push(vec!["GPU busy (ms)".into(), ms(t.gpu_busy_ns)]);
    agg.push(vec!["GPU span (ms)".into(), ms(t.gpu_span_ns)]);
    agg.push(vec!["Streams".into(), t.streams.to_string()]);
    agg.push(vec![
        "GPU ops outside every stage".into(),
        thousands(t.unattributed_gpu_ops),
    ]);
    run_metrics(b, &mut agg);
    agg.push(vec![
        "Operators".into(),
        thousands(b.operators.len() as u64),
    ]);
    agg.push(vec![
        "Nsight Compute kernels".into(),
        thousands(b.ncu.len() as u64),
    ]);
    agg
}

/// Generated tokens and the note of the run metrics (the figures themselves are the Headline
/// table's).
fn run_metrics(b: &Bundle, agg: &mut TableView) {
    let Some(r) = b.analysis.as_ref().map(|a| &a.run) else {
        return;
    };
    if let Some(v) = r.generated_tokens {
        agg.push(vec![
            "Generated tokens (headline samples)".into(),
            thousands(v),
        ]);
    }
}

/// The files the bundle was ingested from.
pub(super) fn inputs(b: &Bundle) -> TableView {
    let mut inputs = TableView::new(vec![
        Column::text("Source"),
        Column::text("Path"),
        Column::num("Bytes"),
    ]);
    for i in &b.inputs {
        inputs.push(vec![
            i.source.as_str().to_string(),
            crate::paths::shown(&i.path),
            thousands(i.bytes),
        ]);
    }
    inputs
}

/// `nsys 2025.3.1; ncu 2025.3.1`.
pub(super) fn tools(b: &Bundle) -> String {
    b.environment
        .tools
        .iter()
        .map(|t| format!("{} {}", t.name, t.version))
        .collect::<Vec<_>>()
        .join("; ")
}

/// What ingest skipped or doubted, one row per class of record.
pub(super) fn diagnostics(b: &Bundle) -> TableView {
    let mut t = TableView::new(vec![
        Column::text("Source"),
        Column::text("What"),
        Column::num("Count"),
        Column::text("Severity"),
        Column::text("Example").optional(),
    ])
    .from_source("the parsers' diagnostics");
    for d in &b.diagnostics {
        t.push(vec![
            d.source.as_str().to_string(),
            d.message.clone(),
            thousands(d.count),
            format!("{:?}", d.severity).to_lowercase(),
            d.example.clone(),
        ]);
    }
    t
}
