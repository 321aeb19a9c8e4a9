//! The comparison of runs: per run, the numbers the compare page's tables, its SVG charts and
//! the viewer's canvas all show ([`RunSummary`]), and the tables built from them. One
//! definition each:
//!
//! * stage time is the **median wall time of one instance** of each top-level stage
//!   (warm-up excluded), so runs with different instance counts compare;
//! * the kernel-category mix counts **kernel time inside those stages** (warm-up, model
//!   loading and work outside every stage excluded; memcpy/memset excluded), as a share, per
//!   processed token or per forward step ([`Norm`]).

use llmprof_bundle::{is_warmup, Bundle, Category, HeadlineBasis, OpKind, StageRole};

use crate::fmt::{fixed, ms_f};
use crate::table::{Column, TableView};

/// The numbers one run contributes to a comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    /// Which run this is to the page (the site's directory name; the run id by default).
    pub id: String,
    pub run_id: String,
    /// The label, else the run id.
    pub title: String,
    /// Top-level stages (warm-up excluded): name and median wall time per instance, ns — the
    /// unprofiled baseline's for the stages it timed, when the run has one.
    pub stages: Vec<(String, f64)>,
    /// Whether the run's headline numbers come from its unprofiled baseline (else its trace).
    pub baseline: bool,
    /// MFU and MBU (%) of the first prefill and decode stages.
    pub prefill_mfu_mbu: (Option<f64>, Option<f64>),
    pub decode_mfu_mbu: (Option<f64>, Option<f64>),
    pub decode_tokens_per_s: Option<f64>,
    /// Prompt (plus image) tokens × batch over the median prefill wall time.
    pub prefill_tokens_per_s: Option<f64>,
    /// Median TTFT and TPOT of the analysis, ms.
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    /// Kernel time by category, ns, inside the run's top-level stages.
    pub mix: Vec<(Category, u64)>,
    /// Tokens the run processed: prompt (plus image) tokens per prefill instance and every
    /// generated token, × batch.
    pub tokens: Option<u64>,
    /// Forward steps: prefill instances plus decode steps.
    pub steps: Option<u64>,
}

/// How the category mix is normalised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Norm {
    /// µs of kernel time per processed token.
    PerToken,
    /// µs of kernel time per forward step.
    PerStep,
    /// % of the kernel time in the measured stages.
    Share,
}

impl Norm {
    /// `token`, `step` or `share`; anything else is per token.
    pub fn parse(s: &str) -> Norm {
        match s {
            "step" => Norm::PerStep,
            "share" => Norm::Share,
            _ => Norm::PerToken,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Norm::PerToken => "token",
            Norm::PerStep => "step",
            Norm::Share => "share",
        }
    }

    /// The chart title and table heading of the mix under this normalisation.
    pub fn title(self) -> &'static str {
        match self {
            Norm::PerToken => {
                "Kernel time in the measured stages by category, per processed token (µs)"
            }
            Norm::PerStep => {
                "Kernel time in the measured stages by category, per forward step (µs)"
            }
            Norm::Share => "Kernel time in the measured stages by category (%)",
        }
    }

    /// How the mix under this normalisation is computed.
    pub fn source(self) -> &'static str {
        match self {
            Norm::PerToken => {
                "kernel time per category inside the top-level stages (warm-up and memcpy/memset \
                 excluded) over the processed tokens (prompt and image tokens per prefill plus \
                 generated tokens)"
            }
            Norm::PerStep => {
                "kernel time per category inside the top-level stages (warm-up and memcpy/memset \
                 excluded) over the forward steps (prefill instances plus decode steps)"
            }
            Norm::Share => {
                "kernel time per category inside the top-level stages (warm-up and memcpy/memset \
                 excluded) as a share of their sum"
            }
        }
    }
}

/// A figure of a run, with the label its table row and its chart group use.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// The table row: `Prefill MFU (%)`.
    pub label: &'static str,
    /// The chart group: `prefill MFU`.
    pub short: &'static str,
    pub value: fn(&RunSummary) -> Option<f64>,
    /// Decimals in a table cell.
    pub digits: usize,
}

/// MFU and MBU of prefill and decode, % (one chart).
pub const EFFICIENCY: [Metric; 4] = [
    Metric {
        label: "Prefill MFU (%)",
        short: "prefill MFU",
        value: |r| r.prefill_mfu_mbu.0,
        digits: 2,
    },
    Metric {
        label: "Prefill MBU (%)",
        short: "prefill MBU",
        value: |r| r.prefill_mfu_mbu.1,
        digits: 2,
    },
    Metric {
        label: "Decode MFU (%)",
        short: "decode MFU",
        value: |r| r.decode_mfu_mbu.0,
        digits: 2,
    },
    Metric {
        label: "Decode MBU (%)",
        short: "decode MBU",
        value: |r| r.decode_mfu_mbu.1,
        digits: 2,
    },
];

/// Decode tokens/s (one chart).
pub const DECODE_TPS: Metric = Metric {
    label: "Decode tokens/s",
    short: "decode",
    value: |r| r.decode_tokens_per_s,
    digits: 1,
};

/// Prefill tokens/s (one chart).
pub const PREFILL_TPS: Metric = Metric {
    label: "Prefill tokens/s (prompt tokens × batch / median prefill wall)",
    short: "prefill",
    value: |r| r.prefill_tokens_per_s,
    digits: 1,
};

/// Median TTFT and TPOT, ms (tables only).
pub const LATENCY: [Metric; 2] = [
    Metric {
        label: "TTFT median (ms)",
        short: "TTFT",
        value: |r| r.ttft_ms,
        digits: 2,
    },
    Metric {
        label: "TPOT median (ms)",
        short: "TPOT",
        value: |r| r.tpot_ms,
        digits: 2,
    },
];

impl RunSummary {
    pub fn from_bundle(b: &Bundle) -> RunSummary {
        let a = b.analysis.as_ref();
        let role_metrics = |role: StageRole| {
            a.and_then(|a| a.stages.iter().find(|s| s.role == role))
                .map_or((None, None), |s| {
                    (s.mfu.map(|v| v * 100.0), s.mbu.map(|v| v * 100.0))
                })
        };
        let w = b.workload.as_ref();
        let batch = w.map_or(1, |w| w.batch());
        let context = w.and_then(|w| w.context_before_decode());
        let prefill = b
            .stages
            .iter()
            .find(|s| StageRole::of_name(&s.name) == StageRole::Prefill);
        let prefill_wall = prefill.map(|s| headline_wall(b, s));
        let prefill_tokens_per_s = match (context, prefill_wall) {
            (Some(c), Some(w)) if w > 0.0 => Some((c * batch) as f64 / (w / 1e9)),
            _ => None,
        };
        let generated = a.and_then(|a| a.run.generated_tokens);
        let prefills = prefill.map(|s| s.instances);
        let tokens = match (context, prefills, generated) {
            (Some(c), Some(p), Some(g)) => c
                .checked_mul(batch)
                .and_then(|x| x.checked_mul(p))
                .and_then(|x| x.checked_add(g)),
            _ => None,
        };
        let decode_steps: Option<u64> = w
            .and_then(|w| w.decode_steps.as_ref())
            .and_then(|d| d.value.iter().try_fold(0u64, |a, &x| a.checked_add(x)));
        RunSummary {
            id: b.run_id.clone(),
            run_id: b.run_id.clone(),
            title: b.label.clone().unwrap_or_else(|| b.run_id.clone()),
            stages: measured_stages(b)
                .map(|s| (s.name.clone(), headline_wall(b, s)))
                .collect(),
            baseline: a.is_some_and(|a| a.run.basis == HeadlineBasis::Baseline),
            prefill_mfu_mbu: role_metrics(StageRole::Prefill),
            decode_mfu_mbu: role_metrics(StageRole::Decode),
            decode_tokens_per_s: a.and_then(|a| a.run.decode_tokens_per_s),
            prefill_tokens_per_s,
            ttft_ms: a
                .and_then(|a| a.run.ttft.as_ref())
                .map(|d| d.median_ns / 1e6),
            tpot_ms: a
                .and_then(|a| a.run.tpot.as_ref())
                .map(|d| d.median_ns / 1e6),
            mix: mix(b),
            tokens,
            steps: prefills
                .zip(decode_steps)
                .and_then(|(p, d)| p.checked_add(d)),
        }
    }

    /// The median wall time per instance of stage `name`, ns.
    pub fn stage_ns(&self, name: &str) -> Option<f64> {
        self.stages.iter().find(|(n, _)| n == name).map(|s| s.1)
    }

    /// The category mix under `norm`, or why it cannot be computed.
    pub fn mix_values(&self, norm: Norm) -> Result<Vec<(Category, f64)>, String> {
        let total: u64 = self.mix.iter().fold(0u64, |a, m| a.saturating_add(m.1));
        let div = match norm {
            Norm::PerToken => self
                .tokens
                .filter(|&t| t > 0)
                .map(|t| t as f64 * 1e3)
                .ok_or_else(|| format!("{}: token count unknown", self.title))?,
            Norm::PerStep => self
                .steps
                .filter(|&s| s > 0)
                .map(|s| s as f64 * 1e3)
                .ok_or_else(|| format!("{}: step count unknown", self.title))?,
            Norm::Share if total > 0 => total as f64 / 100.0,
            Norm::Share => return Err(format!("{}: no kernels", self.title)),
        };
        Ok(self
            .mix
            .iter()
            .map(|&(c, ns)| (c, ns as f64 / div))
            .collect())
    }
}

/// Top-level stages of the workload, warm-up and library ranges excluded: what a comparison
/// measures.
/// The median wall of one instance of a top-level stage, ns: the headline's (the unprofiled
/// baseline's, when the run has one and timed a stage of this role), else the trace's.
fn headline_wall(b: &Bundle, s: &llmprof_bundle::Stage) -> f64 {
    let role = StageRole::of_name(&s.name);
    b.analysis
        .as_ref()
        .filter(|a| a.run.basis == HeadlineBasis::Baseline && role != StageRole::Other)
        .and_then(|a| {
            a.run
                .stage_wall_ns
                .iter()
                .find(|w| StageRole::of_name(&w.stage) == role)
        })
        .map_or(s.wall.median_ns, |w| w.wall_ns.median)
}

fn measured_stages(b: &Bundle) -> impl Iterator<Item = &llmprof_bundle::Stage> {
    b.workload_stages()
        .filter(|s| s.depth == 0 && !is_warmup(&s.name))
}

/// Kernel time per category inside the measured stages.
fn mix(b: &Bundle) -> Vec<(Category, u64)> {
    let measured: Vec<u32> = measured_stages(b).map(|s| s.id).collect();
    Category::ALL
        .iter()
        .map(|&c| {
            let ns = b
                .kernels
                .iter()
                .filter(|k| k.kind == OpKind::Kernel && k.category == c)
                .flat_map(|k| k.by_stage.iter())
                .filter(|bs| measured.contains(&bs.stage))
                .fold(0u64, |a, bs| a.saturating_add(bs.total_ns));
            (c, ns)
        })
        .collect()
}

/// Runs side by side.
#[derive(Debug, Clone, Default)]
pub struct Comparison {
    pub runs: Vec<RunSummary>,
}

impl Comparison {
    /// The comparison of `bundles`, in order.
    pub fn of(bundles: &[&Bundle]) -> Comparison {
        Comparison {
            runs: bundles.iter().map(|b| RunSummary::from_bundle(b)).collect(),
        }
    }

    /// Stage names of every run, in order of first appearance, at most `max`.
    pub fn stage_names(&self, max: usize) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for (n, _) in self.runs.iter().flat_map(|r| &r.stages) {
            if names.len() < max && !names.contains(n) {
                names.push(n.clone());
            }
        }
        names
    }

    /// A table with one column per run after `first`.
    /// `; timed under the profiler for runs without one: a, b` (empty when every run has one).
    fn traced_runs(&self) -> String {
        let traced: Vec<&str> = (self.runs.iter().filter(|r| !r.baseline))
            .map(|r| r.run_id.as_str())
            .collect();
        match traced.is_empty() {
            true => String::new(),
            false => format!(
                "; the trace's instances, timed under the profiler, for runs without one: {}",
                traced.join(", ")
            ),
        }
    }

    fn table(&self, first: &str, source: &str) -> TableView {
        let columns = std::iter::once(Column::text(first))
            .chain(self.runs.iter().map(|r| Column::num(&r.run_id)))
            .collect();
        TableView::new(columns).from_source(source)
    }

    /// Median wall time per stage instance, ms (3 decimals).
    pub fn stages_table(&self) -> TableView {
        let mut t = self.table(
            "Stage",
            &format!(
                "median wall time of one instance of each top-level stage (warm-up excluded), \
                 from the unprofiled baseline{}",
                self.traced_runs()
            ),
        );
        for name in self.stage_names(usize::MAX) {
            let values: Vec<Option<f64>> = self.runs.iter().map(|r| r.stage_ns(&name)).collect();
            let cells = values
                .iter()
                .map(|v| v.map_or("–".into(), ms_f))
                .collect::<Vec<_>>();
            push_row(
                &mut t,
                name,
                cells,
                values.iter().map(|v| v.map(|ns| ns / 1e6)),
            );
        }
        t
    }

    /// MFU/MBU, tokens/s and latency, one row per [`Metric`].
    pub fn efficiency_table(&self) -> TableView {
        let mut t = self.table(
            "Metric",
            &format!(
                "the analysis' headline: MFU/MBU over stage wall time, tokens/s and latency \
                 medians, from the unprofiled baseline{}",
                self.traced_runs()
            ),
        );
        let metrics = EFFICIENCY
            .iter()
            .chain([&DECODE_TPS, &PREFILL_TPS])
            .chain(&LATENCY);
        for m in metrics {
            let values: Vec<Option<f64>> = self.runs.iter().map(m.value).collect();
            let cells = values.iter().map(|&v| fixed(v, m.digits)).collect();
            push_row(&mut t, m.label.into(), cells, values.into_iter());
        }
        t
    }

    /// The kernel-category mix under `norm`, with a total row; a run whose mix cannot be
    /// normalised shows `n/a`.
    pub fn mix_table(&self, norm: Norm) -> TableView {
        let mut t = self.table("Category", norm.source());
        let digits = if norm == Norm::Share { 1 } else { 2 };
        let mixes: Vec<Option<Vec<(Category, f64)>>> =
            self.runs.iter().map(|r| r.mix_values(norm).ok()).collect();
        let value = |m: &Option<Vec<(Category, f64)>>, c: Category| {
            m.as_ref()
                .and_then(|m| m.iter().find(|x| x.0 == c))
                .map(|x| x.1)
        };
        for c in Category::ALL {
            let values: Vec<Option<f64>> = mixes.iter().map(|m| value(m, c)).collect();
            if values.iter().all(|v| v.unwrap_or(0.0) == 0.0) {
                continue;
            }
            let cells = values.iter().map(|&v| fixed(v, digits)).collect();
            push_row(&mut t, c.as_str().into(), cells, values.into_iter());
        }
        let totals: Vec<Option<f64>> = mixes
            .iter()
            .map(|m| m.as_ref().map(|m| m.iter().map(|x| x.1).sum()))
            .collect();
        let cells = totals.iter().map(|&v| fixed(v, digits)).collect();
        push_row(&mut t, "Total".into(), cells, totals.into_iter());
        t
    }
}

fn push_row(
    t: &mut TableView,
    first: String,
    cells: Vec<String>,
    values: impl Iterator<Item = Option<f64>>,
) {
    let row = std::iter::once(first).chain(cells).collect();
    t.push_values(row, std::iter::once(None).chain(values).collect());
}
