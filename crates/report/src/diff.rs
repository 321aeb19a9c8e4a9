//! `llmprof diff A B`: how run B differs from run A, per measured stage and for TPOT, with
//! each median's confidence interval, the shift and its interval, and a verdict that is never
//! drawn where the intervals cannot support it ([`crate::stats`]).
//!
//! The samples are the headline's ([`crate::samples`]): the unprofiled baseline's iterations,
//! grouped by the process that ran them, when both runs have them; else each top-level stage's
//! traced instances. Per stage: wall and MFU per sample; TPOT per decode sample (its wall over
//! its steps). Kernel and kernel-category rows come from the bundles' per-instance kernel
//! samples of the trace (`diff_kernels.rs`); a run without them gets a note instead.

use llmprof_bundle::{is_warmup, Bundle, Category, HeadlineBasis, StageAnalysis, StageRole};

use crate::fmt::{fixed, NA};
use crate::samples::Samples;
use crate::stats::{pooled_median_ci, shift, MedianCi, Shift, Verdict, LEVEL};
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
    /// What the samples are (baseline iterations in both runs, or traced instances).
    pub basis: String,
    pub rows: Vec<DiffRow>,
    /// One line for each kind of row the runs cannot give, saying why.
    pub notes: Vec<String>,
}

impl Diff {
    /// B against A, on the unprofiled baseline's iterations when both runs have them, else on
    /// both traces' stage instances (never one of each: that would compare a profiled time with
    /// an unprofiled one).
    pub fn of(a: &Bundle, b: &Bundle) -> Diff {
        let (sa, sb) = (Samples::of(a), Samples::of(b));
        let baseline = sa.basis == HeadlineBasis::Baseline && sb.basis == HeadlineBasis::Baseline;
        let (sa, sb) = if baseline {
            (sa, sb)
        } else {
            (Samples::trace(a), Samples::trace(b))
        };
        let mut rows = Vec::new();
        for (name, x, y) in stage_samples(a, b, &sa, &sb, baseline) {
            let (wall_a, wall_b) = (scaled(&x, 1e-6), scaled(&y, 1e-6));
            rows.push(compare(
                format!("{name}.wall"),
                format!("{name} wall (ms)"),
                &wall_a,
                &wall_b,
            ));
            if let (Some(x), Some(y)) = (stage_mfu(a, &name, &x), stage_mfu(b, &name, &y)) {
                rows.push(compare(
                    format!("{name}.mfu"),
                    format!("{name} MFU (%)"),
                    &x,
                    &y,
                ));
            }
        }
        let (ta, tb) = (sa.tpot(), sb.tpot());
        if [&ta, &tb].iter().all(|t| t.iter().any(|g| !g.is_empty())) {
            let (ta, tb) = (scaled(&ta, 1e-6), scaled(&tb, 1e-6));
            rows.push(compare("decode.tpot".into(), "TPOT (ms)".into(), &ta, &tb));
        }
        let (kernel_rows, notes) = crate::diff_kernels::rows(a, b, &stage_names(a, b));
        rows.extend(kernel_rows);
        Diff {
            a: a.run_id.clone(),
            b: b.run_id.clone(),
            basis: if baseline {
                "both runs' unprofiled baseline iterations".into()
            } else {
                "both runs' traced stage instances, timed under the profiler (a run lacks \
                 unprofiled baseline samples)"
                    .into()
            },
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
            Column::num("Δ").optional(),
            Column::num("Δ %"),
            Column::num(&format!("Δ [{:.0}% CI]", LEVEL * 100.0)),
            Column::text("Verdict"),
        ])
        .from_source(format!(
            "{}; distribution-free intervals (order statistics for a median, Hodges–Lehmann \
             with the Mann–Whitney interval for Δ), widened for the spread between fresh \
             processes where there are several",
            self.basis
        ));
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
            format!("too few samples (n={} vs {})", n(r.a), n(r.b))
        }
    }
}

/// A row from samples grouped by process: pooled medians, and the Hodges–Lehmann shift of
/// the pooled samples. Where a side's interval had to be widened for the spread between its
/// processes, the shift's interval is widened to `Δ ± √(h_A² + h_B²)` (the two medians'
/// half-widths), since iterations of one process are not independent draws.
pub(crate) fn compare(key: String, metric: String, a: &[Vec<f64>], b: &[Vec<f64>]) -> DiffRow {
    let (fa, fb): (Vec<f64>, Vec<f64>) = (a.concat(), b.concat());
    let (ma, mb) = (pooled_median_ci(a), pooled_median_ci(b));
    let mut s = shift(&fa, &fb);
    if let (Some(s), Some(x), Some(y)) = (s.as_mut(), ma, mb) {
        if x.widened || y.widened {
            widen(s, &x, &y);
        }
    }
    DiffRow {
        key,
        metric,
        a: ma,
        b: mb,
        verdict: s.as_ref().map_or(Verdict::TooFewSamples, Verdict::of),
        shift: s,
    }
}

fn widen(s: &mut Shift, x: &MedianCi, y: &MedianCi) {
    let half = |m: &MedianCi| m.ci.map(|(lo, hi, _)| (m.median - lo).max(hi - m.median));
    if let (Some(hx), Some(hy)) = (half(x), half(y)) {
        let h = hx.hypot(hy);
        let (lo, hi) = s.ci.map_or((f64::MAX, f64::MIN), |(lo, hi, _)| (lo, hi));
        s.ci = Some(((s.delta - h).min(lo), (s.delta + h).max(hi), LEVEL));
    }
}

fn scaled(groups: &[Vec<f64>], k: f64) -> Vec<Vec<f64>> {
    groups
        .iter()
        .map(|g| g.iter().map(|v| v * k).collect())
        .collect()
}

/// Samples grouped by the process that ran them.
type Groups = Vec<Vec<f64>>;

/// The stages both runs have, with their wall samples (ns) grouped by process: prefill and
/// decode from the baseline, else every top-level measured stage of A that B has, by name.
fn stage_samples(
    a: &Bundle,
    b: &Bundle,
    sa: &Samples,
    sb: &Samples,
    baseline: bool,
) -> Vec<(String, Groups, Groups)> {
    if baseline {
        return [StageRole::Prefill, StageRole::Decode]
            .into_iter()
            .zip(["prefill", "decode"])
            .filter_map(|(role, name)| {
                let (x, y) = (sa.wall_of(role)?, sb.wall_of(role)?);
                Some((name.to_string(), x.clone(), y.clone()))
            })
            .collect();
    }
    stage_names(a, b)
        .into_iter()
        .map(|n| {
            let (x, y) = (vec![stage_walls(a, &n)], vec![stage_walls(b, &n)]);
            (n, x, y)
        })
        .collect()
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

/// Measured instance wall times of the stage, ns (every stage of that name at the top level;
/// warm-up instances left out).
fn stage_walls(b: &Bundle, name: &str) -> Vec<f64> {
    b.workload_stages()
        .filter(|s| s.depth == 0 && s.name == name)
        .flat_map(|s| s.measured_instances())
        .map(|(_, i)| i.wall_ns as f64)
        .collect()
}

/// MFU (%) of each wall sample (ns) of the stage: the analysis' FLOPs per instance over it,
/// against the run's peak; `None` without FLOPs or a peak. The analysed stage is the top-level
/// one of that name, else of that role.
fn stage_mfu(b: &Bundle, name: &str, walls: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let a = b.analysis.as_ref()?;
    let tflops = a.peak.as_ref()?.tflops;
    let top = |s: &&StageAnalysis| b.stage(s.stage).is_some_and(|st| st.parent.is_none());
    let role = StageRole::of_name(name);
    let sa = (a.stages.iter().filter(top).find(|s| s.name == name)).or_else(|| {
        (role != StageRole::Other)
            .then(|| a.stages.iter().filter(top).find(|s| s.role == role))
            .flatten()
    })?;
    let instances = b.stage(sa.stage)?.instances;
    let per_instance = sa.flops? / instances.max(1) as f64;
    let mfu = |w: &f64| (*w > 0.0).then(|| per_instance / (w * 1e-9) / (tflops * 1e12) * 100.0);
    walls
        .iter()
        .map(|g| g.iter().map(mfu).collect::<Option<Vec<f64>>>())
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
