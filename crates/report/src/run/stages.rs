//! The Per-Stage Timings table and the vision note.

use llmprof_bundle::{is_warmup, Bundle, Stage, StageRole};

use crate::fmt::{ms, ms_f, pct, thousands};
use crate::run::source_name;
use crate::table::{Column, TableView};

/// One row per stage of the workload, nested stages prefixed `· ` per level, `domain:name`
/// outside the default NVTX domain; warm-up ranges fold into one `warm-up` row on top (the
/// [`warmup_table`] lists them).
pub(super) fn table(b: &Bundle) -> TableView {
    let source = match b.timing_source {
        Some(s) => format!(
            "NVTX ranges projected onto the GPU ops of {}",
            source_name(s)
        ),
        None => "NVTX ranges".into(),
    };
    let mut t = stage_columns().from_source(source);
    if let Some(row) = warmup_row(b) {
        t.push(row);
    }
    for s in b.workload_stages().filter(|s| !in_warmup(b, s)) {
        t.push(stage_row(s));
    }
    t
}

/// The warm-up ranges (and the ranges nested in them), as the stage table shows stages.
pub(super) fn warmup_table(b: &Bundle) -> TableView {
    let mut t = stage_columns().from_source("warm-up iterations: not measured, not analysed");
    for s in b.workload_stages().filter(|s| in_warmup(b, s)) {
        t.push(stage_row(s));
    }
    t
}

fn stage_columns() -> TableView {
    TableView::new(vec![
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
}

fn stage_row(s: &Stage) -> Vec<String> {
    let name = if s.domain.is_empty() {
        s.name.clone()
    } else {
        format!("{}:{}", s.domain, s.name)
    };
    vec![
        format!("{}{}", "· ".repeat(s.depth as usize), name),
        thousands(s.instances),
        ms(s.wall_ns),
        ms_f(s.wall.mean_ns),
        ms_f(s.wall.median_ns),
        ms(s.gpu_proj_ns),
        thousands(s.gpu_ops),
        ms(s.kernel_ns),
        pct(s.gpu_busy_pct),
    ]
}

/// Whether a stage is a warm-up range or nested in one.
fn in_warmup(b: &Bundle, s: &Stage) -> bool {
    let mut cur = Some(s);
    // Depth bounds the walk, whatever parent ids a bundle holds.
    for _ in 0..=s.depth {
        let Some(st) = cur else {
            return false;
        };
        if is_warmup(&st.name) {
            return true;
        }
        cur = st.parent.and_then(|p| b.stage(p));
    }
    false
}

/// One row for every top-level warm-up range: how many, their instances and summed times.
fn warmup_row(b: &Bundle) -> Option<Vec<String>> {
    let top: Vec<&Stage> = b
        .workload_stages()
        .filter(|s| s.depth == 0 && is_warmup(&s.name))
        .collect();
    if top.is_empty() {
        return None;
    }
    let sum = |f: fn(&Stage) -> u64| top.iter().fold(0u64, |a, s| a.saturating_add(f(s)));
    Some(vec![
        format!(
            "warm-up ({} range{})",
            top.len(),
            if top.len() == 1 { "" } else { "s" }
        ),
        thousands(sum(|s| s.instances)),
        ms(sum(|s| s.wall_ns)),
        String::new(),
        String::new(),
        ms(sum(|s| s.gpu_proj_ns)),
        thousands(sum(|s| s.gpu_ops)),
        ms(sum(|s| s.kernel_ns)),
        String::new(),
    ])
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
