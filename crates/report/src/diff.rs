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
    /// What a budget names it by: `decode.wall`, `decode.tpot`, `prefill.mfu`.
    pub key: String,
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
            rows.push(compare(
                format!("{name}.wall"),
                format!("{name} wall (ms)"),
                &stage_walls(a, &name),
                &stage_walls(b, &name),
            ));
            if let (Some(x), Some(y)) = (stage_mfu(a, &name), stage_mfu(b, &name)) {
                rows.push(compare(
                    format!("{name}.mfu"),
                    format!("{name} MFU (%)"),
                    &x,
                    &y,
                ));
            }
        }
        if let (Some(x), Some(y)) = (tpot(a), tpot(b)) {
            rows.push(compare("decode.tpot".into(), "TPOT (ms)".into(), &x, &y));
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

/// `slower`, `faster` (`higher`, `lower` for MFU), `no significant change`, or why nothing can
/// be said.
pub fn verdict_text(r: &DiffRow) -> String {
    let time = !r.key.ends_with(".mfu");
    match r.verdict {
        Verdict::Higher if time => "slower".into(),
        Verdict::Lower if time => "faster".into(),
        Verdict::Higher => "higher".into(),
        Verdict::Lower => "lower".into(),
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

fn compare(key: String, metric: String, a: &[f64], b: &[f64]) -> DiffRow {
    let s = shift(a, b);
    DiffRow {
        key,
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

/// Measured instance wall times of the stage, ms (every stage of that name at the top
/// level; warm-up instances left out).
fn stage_walls(b: &Bundle, name: &str) -> Vec<f64> {
    b.workload_stages()
        .filter(|s| s.depth == 0 && s.name == name)
        .flat_map(|s| s.measured_instances())
        .map(|(_, i)| i.wall_ns as f64 / 1e6)
        .collect()
}

/// MFU (%) of each instance of the stage: the analysis' FLOPs per instance over the instance's
/// wall, against the run's peak; `None` without FLOPs or a peak.
fn stage_mfu(b: &Bundle, name: &str) -> Option<Vec<f64>> {
    let a = b.analysis.as_ref()?;
    let tflops = a.peak.as_ref()?.tflops;
    let sa = a.stages.iter().find(|s| s.name == name)?;
    let stage = b
        .stage(sa.stage)
        .filter(|s| s.depth == 0 && s.instances > 0)?;
    let per_instance = sa.flops? / stage.instances as f64;
    stage
        .measured_instances()
        .map(|(_, i)| {
            (i.wall_ns > 0)
                .then(|| per_instance / (i.wall_ns as f64 * 1e-9) / (tflops * 1e12) * 100.0)
        })
        .collect()
}

/// TPOT per measured decode instance, ms: its wall over its steps; `None` without the steps.
fn tpot(b: &Bundle) -> Option<Vec<f64>> {
    let decode = b
        .workload_stages()
        .find(|s| s.depth == 0 && StageRole::of_name(&s.name) == StageRole::Decode)?;
    let w = b.workload.as_ref()?;
    decode
        .measured_instances()
        .map(|(i, inst)| {
            let steps = w.steps_of_instance(i).filter(|&s| s > 0)?;
            Some(inst.wall_ns as f64 / steps as f64 / 1e6)
        })
        .collect()
}

/// One term of a budget: `decode.tpot<=+5%`.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// The row's key (`prefill.ttft` is `prefill.wall`).
    pub key: String,
    /// The term as written.
    pub term: String,
    /// `true` for `<=` (B may rise at most `limit_pct`), `false` for `>=` (may fall at most).
    pub at_most: bool,
    pub limit_pct: f64,
}

/// Parses `decode.tpot<=+5%,prefill.ttft<=+5%,prefill.mfu>=-5%`; the error names the bad term
/// and says what a term looks like.
pub fn parse_budget(text: &str) -> Result<Vec<Budget>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|term| {
            let bad = |why: &str| {
                format!(
                    "budget term `{term}`: {why}; write STAGE.METRIC<=+N% or STAGE.METRIC>=-N% \
                     with METRIC wall, ttft (prefill), tpot (decode) or mfu"
                )
            };
            let (lhs, rhs, at_most) = match (term.split_once("<="), term.split_once(">=")) {
                (Some((l, r)), None) => (l, r, true),
                (None, Some((l, r))) => (l, r, false),
                _ => return Err(bad("no single <= or >=")),
            };
            let (stage, metric) = lhs
                .trim()
                .rsplit_once('.')
                .ok_or_else(|| bad("no STAGE."))?;
            let metric = match metric {
                "wall" | "mfu" | "tpot" => metric,
                "ttft" => "wall",
                _ => return Err(bad(&format!("unknown metric `{metric}`"))),
            };
            let pct = rhs
                .trim()
                .strip_suffix('%')
                .ok_or_else(|| bad("the limit needs a %"))?;
            let limit_pct: f64 = pct
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite())
                .ok_or_else(|| bad(&format!("`{pct}` is not a number")))?;
            if stage.is_empty() {
                return Err(bad("no stage name"));
            }
            Ok(Budget {
                key: format!("{stage}.{metric}"),
                term: term.to_string(),
                at_most,
                limit_pct,
            })
        })
        .collect()
}

/// How a budget fared.
#[derive(Debug, Clone, PartialEq)]
pub enum BudgetResult {
    /// The whole interval of Δ% is beyond the limit: exceeded beyond noise.
    Exceeded { delta_pct: (f64, f64) },
    /// Some of the interval is within the limit.
    Within { delta_pct: (f64, f64) },
    /// No interval (too few samples), or the runs lack the figure: nothing can be claimed.
    Unknown(String),
}

impl Diff {
    /// Judges `budget` on this diff: Δ% of B against A's median, with the shift's interval.
    pub fn judge(&self, budget: &Budget) -> BudgetResult {
        let Some(row) = self.rows.iter().find(|r| r.key == budget.key) else {
            return BudgetResult::Unknown(format!("the runs have no `{}`", budget.key));
        };
        let (Some(a), Some((lo, hi, _))) = (row.a, row.shift.and_then(|s| s.ci)) else {
            return BudgetResult::Unknown(verdict_text(row));
        };
        if a.median == 0.0 {
            return BudgetResult::Unknown("A's median is 0".into());
        }
        let pct = (lo / a.median * 100.0, hi / a.median * 100.0);
        let beyond = if budget.at_most {
            pct.0 > budget.limit_pct
        } else {
            pct.1 < budget.limit_pct
        };
        if beyond {
            BudgetResult::Exceeded { delta_pct: pct }
        } else {
            BudgetResult::Within { delta_pct: pct }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse_and_bad_terms_are_named() {
        let b = parse_budget("decode.tpot<=+5%, prefill.ttft<=+5%,prefill.mfu>=-5%").unwrap();
        assert_eq!(b.len(), 3);
        assert_eq!(
            (b[1].key.as_str(), b[1].at_most, b[1].limit_pct),
            ("prefill.wall", true, 5.0)
        );
        assert_eq!(
            (b[2].key.as_str(), b[2].at_most, b[2].limit_pct),
            ("prefill.mfu", false, -5.0)
        );
        for bad in [
            "decode.tpot<5%",
            "decode.speed<=5%",
            "decode.tpot<=5",
            "decode.tpot<=x%",
            ".wall<=5%",
        ] {
            let e = parse_budget(bad).unwrap_err();
            assert!(e.contains(&format!("`{bad}`")), "{e}");
        }
    }
}
