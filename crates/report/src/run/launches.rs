//! Two tables shared by the run page, `report.md` and `llmprof show`: how the host fed the GPU
//! per stage (launch calls, CUDA graph launches, kernels per graph, GPU time inside graphs,
//! from the analysis' launch facts), and how the capture compiled the decode step.

use llmprof_bundle::{Bundle, GraphTrace};

use crate::fmt::{per_step, thousands};
use crate::table::{Column, TableView};

/// One row per analysed stage that launched GPU work; empty when none did or the bundle has
/// no analysis.
pub(super) fn launch_table(b: &Bundle) -> TableView {
    let mut t = TableView::new(vec![
        Column::text("Stage"),
        Column::num("Launch calls"),
        Column::num("CUDA graph launches"),
        Column::num("Calls / step"),
        Column::num("Graphs / step"),
        Column::num("Kernels / step"),
        Column::num("Kernels / graph").optional(),
        Column::num("GPU time in graphs (%)").optional(),
        Column::num("GPU work / call (µs)").optional(),
        Column::num("Call (µs)").optional(),
    ])
    .from_source("launch calls of the timing source; per step from the workload's decode steps");
    let Some(a) = &b.analysis else {
        return t;
    };
    let us = |v: Option<f64>| v.map_or("–".into(), |x| format!("{:.1}", x / 1e3));
    for sa in &a.stages {
        let (Some(f), Some(s)) = (&sa.launch, b.stage(sa.stage)) else {
            continue;
        };
        t.push(vec![
            sa.name.clone(),
            thousands(s.launches),
            thousands(s.graph_launches),
            per_step(f.launches_per_step),
            per_step(f.graph_launches_per_step),
            per_step(f.kernels_per_step),
            per_step(f.kernels_per_graph),
            per_step(f.graph_share_pct),
            us(f.gpu_ns_per_launch),
            us(f.launch_call_ns),
        ]);
    }
    t
}

/// How CUDA graphs were traced, for the note under the launch table.
pub fn graph_trace_note(b: &Bundle) -> Option<String> {
    match b.totals.graph_trace? {
        GraphTrace::Node => Some(format!(
            "{} kernels ran inside {} CUDA graph launches, traced one by one (node level).",
            thousands(b.totals.graph_kernels),
            thousands(b.totals.graph_launches)
        )),
        GraphTrace::Graph => Some(format!(
            "{} CUDA graph launches were traced whole (graph level): their GPU time counts in \
             busy time, but the kernels inside them are unknown; capture with \
             `--cuda-graph-trace node` to see them.",
            thousands(b.totals.graphs)
        )),
    }
}

/// One row per pass that compiled the decode step (`[optimize]`); empty for eager runs.
pub(super) fn compile_table(b: &Bundle) -> TableView {
    let mut t = TableView::new(vec![
        Column::text("Pass"),
        Column::text("torch.compile mode"),
        Column::text("KV cache"),
        Column::num("Compile (s)"),
        Column::num("Graph capture (s)"),
        Column::text("Result"),
    ])
    .from_source("the capture driver's compile records");
    let secs = |v: Option<f64>| v.map_or("–".into(), |x| format!("{x:.2}"));
    for r in b.capture.iter().flat_map(|c| &c.compile) {
        let result = match (r.failure(), r.cudagraphs_skipped.first()) {
            (Some(f), _) => format!("{f}; the pass measured the eager step"),
            (None, Some(skip)) => format!("compiled without CUDA graphs: {skip}"),
            (None, None) => r.status.clone(),
        };
        t.push(vec![
            r.pass.clone(),
            r.mode.clone(),
            r.cache.clone(),
            secs(r.compile_s),
            secs(r.capture_s),
            result,
        ]);
    }
    t
}
