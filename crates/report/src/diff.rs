//! `llmprof diff A B`: how run B differs from run A, per measured stage and for TPOT, with
//! each median's confidence interval, the shift and its interval, and a verdict that is never
//! drawn where the intervals cannot support it ([`crate::stats`]).
//!
//! The samples are what the bundles hold per instance: each top-level stage's instance wall
//! times (the timing pass), and TPOT per decode instance (its wall over its steps). Kernels and
//! categories have no per-instance samples in a bundle, so they are not diffed.

use llmprof_bundle::{is_warmup, Bundle, StageRole};

use crate::fmt::{fixed, NA};
use crate::stats::{median_ci, shift, MedianCi, Shift, Verdict, LEVEL};
use crate::table::{Column, TableView};

/// One compared figure.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffRow {
    /// `decode wall (ms)`, `TPOT (ms)`.
    pub metric: String,
    pub a: Option<MedianCi>,
    pub b: Option<MedianCi>,
    pub shift: Option<Shift>,
    pub verdict: Verdict,
}

impl DiffRow {
    /// Δ of the medians in percent of A's.
    pub fn delta_pct(&self) -> Option<f64> {
        let (a, b) = (self.a?, self.b?);
        (a.median != 0.0).then(|| (b.median - a.median) / a.median * 100.0)
    }
}

/// Run B against run A.
#[derive(Debug, Clone, PartialEq)]
pub struct Diff {
    pub a: String,
    pub b: String,
    pub rows: Vec<DiffRow>,
}

impl Diff {
    pub fn of(a: &Bundle, b: &Bundle) -> Diff {
        let mut rows = Vec::new();
        for name in stage_names(a, b) {
            let row = compare(
                format!("{name} wall (ms)"),
                &stage_walls(a, &name),
                &stage_walls(b, &name),
            );
            rows.push(row);
        }
        if let (Some(x), Some(y)) = (tpot(a), tpot(b)) {
            rows.push(compare("TPOT (ms)".into(), &x, &y));
        }
        Diff {
            a: a.run_id.clone(),
            b: b.run_id.clone(),
            rows,
        }
    }

    /// The diff as a table: both medians with their intervals, Δ, Δ%, the shift's interval and
    /// the verdict.
    pub fn table(&self) -> TableView {
        let mut t = TableView::new(vec![
            Column::text("Metric"),
            Column::num(&format!("A median [{:.0}% CI]", LEVEL * 100.0)),
            Column::num(&format!("B median [{:.0}% CI]", LEVEL * 100.0)),
            Column::num("Δ"),
            Column::num("Δ %"),
            Column::num(&format!("Δ [{:.0}% CI]", LEVEL * 100.0)),
            Column::text("Verdict"),
        ])
        .from_source(
            "per-instance samples of each run; distribution-free intervals (order statistics \
             for a median, Hodges–Lehmann with the Mann–Whitney interval for Δ)",
        );
        for r in &self.rows {
            t.push(vec![
                r.metric.clone(),
                median_cell(r.a),
                median_cell(r.b),
                fixed(r.shift.map(|s| s.delta), 3),
                r.delta_pct().map_or(NA.into(), |p| format!("{p:+.1}")),
                r.shift
                    .and_then(|s| s.ci)
                    .map_or(NA.into(), |(lo, hi, _)| format!("[{lo:.3}, {hi:.3}]")),
                verdict_text(r),
            ]);
        }
        t
    }
}

fn median_cell(m: Option<MedianCi>) -> String {
    match m {
        None => NA.into(),
        Some(m) => match m.ci {
            Some((lo, hi, _)) => format!("{:.3} [{lo:.3}, {hi:.3}] n={}", m.median, m.n),
            None => format!("{:.3} n={}", m.median, m.n),
        },
    }
}

/// `slower`, `faster`, `no significant change`, or why nothing can be said.
pub fn verdict_text(r: &DiffRow) -> String {
    match r.verdict {
        Verdict::Higher => "slower".into(),
        Verdict::Lower => "faster".into(),
        Verdict::NoChange => "no significant change".into(),
        Verdict::TooFewSamples => {
            let n = |m: Option<MedianCi>| m.map_or(0, |m| m.n);
            format!(
                "too few samples (n={} vs {}) for a {:.0}% interval",
                n(r.a),
                n(r.b),
                LEVEL * 100.0
            )
        }
    }
}

fn compare(metric: String, a: &[f64], b: &[f64]) -> DiffRow {
    let s = shift(a, b);
    DiffRow {
        metric,
        a: median_ci(a),
        b: median_ci(b),
        verdict: s.as_ref().map_or(Verdict::TooFewSamples, Verdict::of),
        shift: s,
    }
}

/// Top-level measured stages of A that B has too, in A's order.
fn stage_names(a: &Bundle, b: &Bundle) -> Vec<String> {
    let top = |x: &Bundle| -> Vec<String> {
        x.workload_stages()
            .filter(|s| s.depth == 0 && !is_warmup(&s.name))
            .map(|s| s.name.clone())
            .collect()
    };
    let in_b = top(b);
    let mut names = top(a);
    names.retain(|n| in_b.contains(n));
    names.dedup();
    names
}

/// Instance wall times of the stage, ms (every stage of that name at the top level).
fn stage_walls(b: &Bundle, name: &str) -> Vec<f64> {
    b.workload_stages()
        .filter(|s| s.depth == 0 && s.name == name)
        .flat_map(|s| &s.instance_list)
        .map(|i| i.wall_ns as f64 / 1e6)
        .collect()
}

/// TPOT per decode instance, ms: its wall over its steps; `None` without the steps.
fn tpot(b: &Bundle) -> Option<Vec<f64>> {
    let decode = b
        .workload_stages()
        .find(|s| s.depth == 0 && StageRole::of_name(&s.name) == StageRole::Decode)?;
    let w = b.workload.as_ref()?;
    decode
        .instance_list
        .iter()
        .enumerate()
        .map(|(i, inst)| {
            let steps = w.steps_of_instance(i).filter(|&s| s > 0)?;
            Some(inst.wall_ns as f64 / steps as f64 / 1e6)
        })
        .collect()
}
