//! The Per-Stage Timings table and the vision note.

use llmprof_bundle::{Bundle, StageRole};

use crate::fmt::{ms, ms_f, pct, thousands};
use crate::run::source_name;
use crate::table::{Column, TableView};

/// One row per stage, nested stages prefixed `· ` per level, `domain:name` outside the
/// default NVTX domain.
pub(super) fn table(b: &Bundle) -> TableView {
    let source = match b.timing_source {
        Some(s) => format!(
            "NVTX ranges projected onto the GPU ops of {}",
            source_name(s)
        ),
        None => "NVTX ranges".into(),
    };
    let mut t = TableView::new(vec![
        Column::text("Stage"),
        Column::num("Instances"),
        Column::num("Wall (ms)"),
        Column::num("Mean (ms)").optional(),
        Column::num("Median (ms)"),
        Column::num("GPU proj (ms)"),
        Column::num("GPU ops"),
        Column::num("Kernel (ms)"),
        Column::num("GPU busy (%)"),
    ])
    .from_source(source);
    for s in b.workload_stages() {
        let name = if s.domain.is_empty() {
            s.name.clone()
        } else {
            format!("{}:{}", s.domain, s.name)
        };
        t.push(vec![
            format!("{}{}", "· ".repeat(s.depth as usize), name),
            thousands(s.instances),
            ms(s.wall_ns),
            ms_f(s.wall.mean_ns),
            ms_f(s.wall.median_ns),
            ms(s.gpu_proj_ns),
            thousands(s.gpu_ops),
            ms(s.kernel_ns),
            pct(s.gpu_busy_pct),
        ]);
    }
    t
}

/// NVTX ranges of libraries (non-default domains the capture did not name): their GPU time,
/// never shown as stages.
pub(super) fn library_table(b: &Bundle) -> TableView {
    let mut t = TableView::new(vec![
        Column::text("Range"),
        Column::num("Instances"),
        Column::num("Wall (ms)"),
        Column::num("GPU proj (ms)"),
        Column::num("GPU ops"),
        Column::num("Kernel (ms)"),
    ])
    .from_source("NVTX ranges in library domains (CCCL, NCCL, cuBLAS, …), kept in the bundle");
    for s in b.stages.iter().filter(|s| b.is_library_range(s)) {
        t.push(vec![
            format!("{}:{}", s.domain, s.name),
            thousands(s.instances),
            ms(s.wall_ns),
            ms(s.gpu_proj_ns),
            thousands(s.gpu_ops),
            ms(s.kernel_ns),
        ]);
    }
    t
}

/// The vision sub-stages' wall time and their share of prefill, in one sentence.
pub(super) fn vision_note(b: &Bundle) -> String {
    let vision: Vec<String> = b
        .stages
        .iter()
        .filter(|s| StageRole::of_name(&s.name) == StageRole::Vision)
        .map(|s| format!("{} {} ms", s.name, ms(s.wall_ns)))
        .collect();
    if vision.is_empty() {
        return "Vision processing: no vision stages (SAM, CLIP/encoder, projector) in this run."
            .into();
    }
    let prefill = b
        .stages
        .iter()
        .find(|s| StageRole::of_name(&s.name) == StageRole::Prefill)
        .map(|p| format!(", inside a prefill of {} ms", ms(p.wall_ns)))
        .unwrap_or_default();
    let share = b
        .analysis
        .as_ref()
        .and_then(|a| a.findings.iter().find(|f| f.id == "vision_share"))
        .map(|f| format!(" — {}", f.title))
        .unwrap_or_default();
    format!(
        "Vision processing (SAM + CLIP/encoder + projector): {}{prefill}{share}.",
        vision.join(", ")
    )
}
