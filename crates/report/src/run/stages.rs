//! The Per-Stage Timings table and the vision note. Stages are laid out as the tree their
//! `parent`s make, so a row is shown under another only when every instance of it ran inside
//! that stage; a range name whose instances sit in different places (`Stage::parents`) is a
//! row of its own that says where: `scan (in prefill, decode)`.

use std::collections::{HashMap, HashSet};

use llmprof_bundle::{is_warmup, Bundle, Stage, StageRole};

use crate::fmt::{ms, ms_f, pct, thousands};
use crate::run::source_name;
use crate::table::{Column, TableView};

/// One row per stage of the workload, nested stages prefixed `· ` per level under their
/// parent, `domain:name` outside the default NVTX domain; warm-up ranges fold into one
/// `warm-up` row on top (the [`warmup_table`] lists them).
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
    let shown: Vec<&Stage> = b.workload_stages().filter(|s| !in_warmup(b, s)).collect();
    for (s, level) in tree(&shown) {
        t.push(stage_row(b, s, level));
    }
    t
}

/// The warm-up ranges (and the ranges nested in them), as the stage table shows stages.
pub(super) fn warmup_table(b: &Bundle) -> TableView {
    let mut t = stage_columns().from_source("warm-up iterations: not measured, not analysed");
    let shown: Vec<&Stage> = b.workload_stages().filter(|s| in_warmup(b, s)).collect();
    for (s, level) in tree(&shown) {
        t.push(stage_row(b, s, level));
    }
    t
}

/// `stages` in tree order with their nesting level: each stage, then the stages whose
/// `parent` it is, depth first; a stage whose parent is not among them (none, several, or
/// one shown elsewhere) starts a tree of its own. Siblings keep their order. Every stage is
/// listed once, whatever parent ids a bundle holds.
fn tree<'a>(stages: &[&'a Stage]) -> Vec<(&'a Stage, usize)> {
    let ids: HashSet<u32> = stages.iter().map(|s| s.id).collect();
    let mut children: HashMap<u32, Vec<&Stage>> = HashMap::new();
    let mut todo: Vec<(&Stage, usize)> = Vec::new();
    for &s in stages.iter().rev() {
        match s.parent.filter(|p| ids.contains(p) && *p != s.id) {
            Some(p) => children.entry(p).or_default().push(s),
            None => todo.push((s, 0)),
        }
    }
    let mut out: Vec<(&Stage, usize)> = Vec::with_capacity(stages.len());
    let mut seen: HashSet<u32> = HashSet::new();
    while let Some((s, level)) = todo.pop() {
        if seen.insert(s.id) {
            out.push((s, level));
            let kids = children.get(&s.id).into_iter().flatten();
            todo.extend(kids.map(|&c| (c, level + 1)));
        }
    }
    // Parents that enclose each other (a hand-made bundle) leave stages unreached.
    let unreached = stages.iter().filter(|s| !seen.contains(&s.id));
    out.extend(unreached.map(|&s| (s, 0)));
    out
}

/// `domain:name` outside the default NVTX domain, `name` inside it.
fn qualified(s: &Stage) -> String {
    if s.domain.is_empty() {
        s.name.clone()
    } else {
        format!("{}:{}", s.domain, s.name)
    }
}

/// Where the instances of a stage with several places ran: ` (in warmup_prefill, prefill,
/// top level)`; empty for a stage with one parent or none.
fn places(b: &Bundle, s: &Stage) -> String {
    if !s.has_mixed_parents() {
        return String::new();
    }
    format!(" (in {})", place_names(b, s).join(", "))
}

/// The stages the instances of `s` ran in (`top level` for those outside every stage), each
/// once in order of first appearance; empty for a top-level stage.
fn place_names(b: &Bundle, s: &Stage) -> Vec<String> {
    let name = |p: Option<u32>| match p.map(|p| b.stage(p)) {
        Some(Some(p)) => qualified(p),
        Some(None) => "?".into(),
        None => "top level".into(),
    };
    match (s.parent, s.has_mixed_parents()) {
        (_, true) => s.parents.iter().map(|&p| name(p)).collect(),
        (Some(p), false) => vec![name(Some(p))],
        (None, false) => Vec::new(),
    }
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

fn stage_row(b: &Bundle, s: &Stage, level: usize) -> Vec<String> {
    vec![
        format!("{}{}{}", "· ".repeat(level), qualified(s), places(b, s)),
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

/// Whether a stage is a warm-up range or nested in one; a stage in several places is when
/// every place is.
fn in_warmup(b: &Bundle, s: &Stage) -> bool {
    if s.has_mixed_parents() && !is_warmup(&s.name) {
        let warm = |p: &Option<u32>| {
            p.and_then(|p| b.stage(p))
                .is_some_and(|p| in_warmup_chain(b, p))
        };
        return s.parents.iter().all(warm);
    }
    in_warmup_chain(b, s)
}

/// Whether a stage or one of its `parent`s is a warm-up range.
fn in_warmup_chain(b: &Bundle, s: &Stage) -> bool {
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

/// NVTX ranges of libraries (non-default domains the capture did not name): their GPU time
/// and the stages they ran in, never shown as stages.
pub(super) fn library_table(b: &Bundle) -> TableView {
    let mut t = TableView::new(vec![
        Column::text("Range"),
        Column::num("Instances"),
        Column::num("Wall (ms)"),
        Column::num("GPU proj (ms)"),
        Column::num("GPU ops"),
        Column::num("Kernel (ms)"),
        Column::text("In"),
    ])
    .from_source("NVTX ranges in library domains (CCCL, NCCL, cuBLAS, …), kept in the bundle");
    for s in b.stages.iter().filter(|s| b.is_library_range(s)) {
        t.push(vec![
            qualified(s),
            thousands(s.instances),
            ms(s.wall_ns),
            ms(s.gpu_proj_ns),
            thousands(s.gpu_ops),
            ms(s.kernel_ns),
            place_names(b, s).join(", "),
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
