//! The MFU / MBU table, its notes and the peak it divides by.

use llmprof_bundle::{Analysis, Bundle, StageAnalysis};

use crate::fmt::{fixed, ratio_pct, NA};
use crate::table::{Column, TableView};

/// One row per analysed stage: FLOPs, achieved rates, MFU/MBU and the bound.
pub(super) fn table(b: &Bundle) -> TableView {
    let mut t = TableView::new(vec![
        Column::text("Stage"),
        Column::num("FLOPs"),
        Column::num("TFLOP/s"),
        Column::num("MFU (%)"),
        Column::num("MFU busy (%)"),
        Column::num("GB/s"),
        Column::num("MBU (%)"),
        Column::num("FLOP/byte"),
        Column::text("Bound"),
    ])
    .from_source(
        "FLOPs and bytes from the model config; time from the stage's headline wall (the \
         unprofiled baseline's median per instance where the run has one, else the NVTX range; \
         busy: the union of its GPU activity in the trace)",
    );
    for s in b.analysis.iter().flat_map(|a| &a.stages) {
        t.push(vec![
            s.name.clone(),
            flops(s),
            fixed(s.tflops, 2),
            ratio_pct(s.mfu),
            ratio_pct(s.mfu_busy),
            fixed(s.gbps, 0),
            ratio_pct(s.mbu),
            fixed(s.intensity, 1),
            s.bound.clone(),
        ]);
    }
    t
}

/// `1.234e12`, tagged `(counted)` when counted by the capture's FLOP counter.
fn flops(s: &StageAnalysis) -> String {
    let tag = match s.flops_source.as_deref() {
        Some("counted") => " (counted)",
        _ => "",
    };
    s.flops.map_or(NA.into(), |f| format!("{f:.3e}{tag}"))
}

/// Counted-vs-analytic FLOPs, per-stage notes, the model's conventions, an inconsistency.
pub(super) fn notes(b: &Bundle) -> Vec<String> {
    let Some(a) = &b.analysis else {
        return Vec::new();
    };
    let mut notes = Vec::new();
    if let Some(why) = &a.inconsistent {
        notes.push(format!("Inconsistent run: {why}."));
    }
    for s in &a.stages {
        if let Some(d) = s.counted_vs_analytic_pct {
            notes.push(format!(
                "{}: counted {:.3e} vs analytic {:.3e} FLOPs ({d:+.1}%).",
                s.name,
                s.counted_flops.unwrap_or(0.0),
                s.analytic_flops.unwrap_or(0.0)
            ));
        }
        if let Some(n) = &s.note {
            notes.push(format!("{}: {n}.", s.name));
        }
    }
    if let Some(m) = &a.model {
        notes.extend(m.conventions.iter().map(|c| format!("Convention: {c}")));
    } else if let Some(why) = &a.model_note {
        notes.push(format!("Model: {why}."));
    }
    notes
}

/// The peak MFU and MBU divide by, and where it comes from.
pub(super) fn peak_line(a: Option<&Analysis>) -> String {
    let Some(a) = a else {
        return "No analysis in this bundle.".into();
    };
    match (&a.peak, &a.peak_note) {
        (Some(p), _) => format!(
            "Peak: {} TFLOP/s ({}) and {} GB/s — {}.",
            p.tflops, p.dtype, p.gbps, p.source
        ),
        (None, Some(why)) => format!("Peak: n/a — {why}."),
        _ => "Peak: n/a.".into(),
    }
}
