//! `llmprof diff A B`: how run B differs from run A, per measured stage and for TPOT, with
//! each median's confidence interval, the shift and its interval, and a verdict that is never
//! drawn where the intervals cannot support it ([`crate::stats`]).
//!
//! The samples are what the bundles hold per instance: each top-level stage's instance wall
//! times (the timing pass), and TPOT per decode instance (its wall over its steps). Kernel and
//! kernel-category rows come from the bundles' per-instance kernel samples
//! (`diff_kernels.rs`); a run without them gets a note instead.

use llmprof_bundle::{is_warmup, Bundle, Category, StageRole};

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
    /// One line for each kind of row the runs cannot give, saying why.
    pub notes: Vec<String>,
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
        let (kernel_rows, notes) = crate::diff_kernels::rows(a, b, &stage_names(a, b));
        rows.extend(kernel_rows);
        Diff {
            a: a.run_id.clone(),
            b: b.run_id.clone(),
            rows,
            notes,
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
            let cells = vec![
                r.metric.clone(),
                median_cell(r.a),
                median_cell(r.b),
                fixed(r.shift.map(|s| s.delta), 3),
                r.delta_pct().map_or(NA.into(), |p| format!("{p:+.1}")),
                r.shift
                    .and_then(|s| s.ci)
                    .map_or(NA.into(), |(lo, hi, _)| format!("[{lo:.3}, {hi:.3}]")),
                verdict_text(r),
            ];
            let values = vec![
                None,
                r.a.map(|m| m.median),
                r.b.map(|m| m.median),
                r.shift.map(|s| s.delta),
                r.delta_pct(),
                None,
                None,
            ];
            t.push_values(cells, values);
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

pub(crate) fn compare(key: String, metric: String, a: &[f64], b: &[f64]) -> DiffRow {
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
pub(crate) fn stage_names(a: &Bundle, b: &Bundle) -> Vec<String> {
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
        .instance_list
        .iter()
        .map(|i| {
            (i.wall_ns > 0)
                .then(|| per_instance / (i.wall_ns as f64 * 1e-9) / (tflops * 1e12) * 100.0)
        })
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

/// Parses `decode.tpot<=+5%,prefill.ttft<=+5%,prefill.mfu>=-5%,decode.category.gemm<=+3%`;
/// the error names the bad term and says what a term looks like. A term names a diff row by
/// its key: `STAGE.wall`, `prefill.ttft` (= `prefill.wall`), `decode.tpot`, `STAGE.mfu`,
/// `STAGE.category.CATEGORY` or `STAGE.kernel.KERNEL` (keys as `llmprof diff --json` prints
/// them).
pub fn parse_budget(text: &str) -> Result<Vec<Budget>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|term| {
            let bad = |why: &str| {
                format!(
                    "budget term `{term}`: {why}; write KEY<=+N% or KEY>=-N% with KEY \
                     STAGE.wall, prefill.ttft, decode.tpot, STAGE.mfu, STAGE.category.CATEGORY \
                     or STAGE.kernel.KERNEL (the keys `llmprof diff --json` prints)"
                )
            };
            let (lhs, rhs, at_most) = match (term.split_once("<="), term.split_once(">=")) {
                (Some((l, r)), None) => (l, r, true),
                (None, Some((l, r))) => (l, r, false),
                _ => return Err(bad("no single <= or >=")),
            };
            let key = budget_key(lhs.trim()).map_err(|why| bad(&why))?;
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
            Ok(Budget {
                key,
                term: term.to_string(),
                at_most,
                limit_pct,
            })
        })
        .collect()
}

/// The diff row a budget term's left-hand side names, or why it names none.
fn budget_key(lhs: &str) -> Result<String, String> {
    for part in [".category.", ".kernel."] {
        if let Some(i) = lhs.rfind(part) {
            let (stage, name) = (&lhs[..i], &lhs[i + part.len()..]);
            if stage.is_empty() {
                return Err("no stage name".into());
            }
            if name.is_empty() {
                return Err(format!("no name after `{part}`"));
            }
            let known = Category::ALL.iter().any(|c| c.as_str() == name);
            if part == ".category." && !known {
                let all: Vec<&str> = Category::ALL.iter().map(|c| c.as_str()).collect();
                return Err(format!(
                    "unknown category `{name}` (one of {})",
                    all.join(", ")
                ));
            }
            return Ok(lhs.to_string());
        }
    }
    let (stage, metric) = lhs.rsplit_once('.').ok_or("no STAGE.")?;
    let metric = match metric {
        "wall" | "mfu" | "tpot" => metric,
        "ttft" => "wall",
        _ => return Err(format!("unknown metric `{metric}`")),
    };
    if stage.is_empty() {
        return Err("no stage name".into());
    }
    Ok(format!("{stage}.{metric}"))
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
        let b = parse_budget(
            "decode.category.reduction/norm<=+3%,model.decode.kernel.elementwise_kernel~1a2b3c4d>=-2%",
        )
        .unwrap();
        assert_eq!(b[0].key, "decode.category.reduction/norm");
        assert_eq!(
            (b[1].key.as_str(), b[1].at_most, b[1].limit_pct),
            (
                "model.decode.kernel.elementwise_kernel~1a2b3c4d",
                false,
                -2.0
            )
        );
        for bad in [
            "decode.tpot<5%",
            "decode.speed<=5%",
            "decode.tpot<=5",
            "decode.tpot<=x%",
            ".wall<=5%",
            "decode.category.gemmm<=5%",
            ".category.gemm<=5%",
            "decode.kernel.<=5%",
        ] {
            let e = parse_budget(bad).unwrap_err();
            assert!(e.contains(&format!("`{bad}`")), "{e}");
        }
    }
}
