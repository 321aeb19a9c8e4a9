//! The Headline table: the run's latency, throughput, MFU and energy, each as a median with
//! its 95% interval, sample count and spread, its source beside it, and what the profiled pass
//! measured for the same figure (its overhead kept visible).

use llmprof_bundle::{Bundle, HeadlineBasis, Measure, RunMetrics, StageAnalysis, StageRole};

use crate::fmt::{fixed, ms_f, NA};
use crate::table::{Column, TableView};

/// One row per headline figure; empty without an analysis.
pub(super) fn table(b: &Bundle) -> TableView {
    let Some(a) = &b.analysis else {
        return TableView::new(Vec::new());
    };
    let r = &a.run;
    let mut t = TableView::new(vec![
        Column::text("Metric"),
        Column::num("Median"),
        Column::num("95% CI"),
        Column::num("n"),
        Column::num("CV (%)"),
        Column::num("Between processes (%)").optional(),
        Column::text("Source"),
        Column::text("Under the profiler").optional(),
    ])
    .from_source(source_line(
        r,
        b.capture.as_ref().is_some_and(|c| !c.energy.is_empty()),
    ));
    let basis = basis_name(r.basis);
    let ms = |v: f64| ms_f(v);
    if let Some(m) = &r.ttft_ns {
        push(
            &mut t,
            "TTFT (ms)",
            m,
            ms,
            basis,
            profiled(b, "prefill", true),
        );
    }
    if let Some(m) = &r.tpot_ns {
        // TPOT is decode wall over steps: the decode wall's overhead is its overhead.
        let overhead = profiled(b, "decode", false).map(|p| format!("{p} (decode wall)"));
        push(&mut t, "TPOT (ms)", m, ms, basis, overhead);
    }
    // TTFT is the prefill wall: only the other stages get a wall row.
    for w in r
        .stage_wall_ns
        .iter()
        .filter(|w| w.stage != "prefill" || r.ttft_ns.is_none())
    {
        let label = format!("{} wall (ms)", w.stage);
        push(
            &mut t,
            &label,
            &w.wall_ns,
            ms,
            basis,
            profiled(b, &w.stage, true),
        );
    }
    if let Some(m) = &r.decode_throughput {
        push(
            &mut t,
            "Decode tokens/s",
            m,
            |v| format!("{v:.1}"),
            basis,
            None,
        );
    }
    let top_level = |s: &&StageAnalysis| b.stage(s.stage).is_some_and(|st| st.parent.is_none());
    for s in a.stages.iter().filter(top_level) {
        mfu_row(&mut t, r, s);
    }
    if let Some(v) = r.model_mfu {
        let cells = [format!("{:.2}", v * 100.0), NA.into(), NA.into(), NA.into()];
        t.push_values(
            row("Model MFU (%)", cells, NA.into(), basis, None),
            values(Some(v * 100.0), None),
        );
    }
    energy_rows(&mut t, b);
    t
}

/// The table's source line: where the samples come from and how the intervals were computed.
fn source_line(r: &RunMetrics, energy: bool) -> String {
    let method = r
        .ttft_ns
        .as_ref()
        .or(r.tpot_ns.as_ref())
        .map_or(String::new(), |m| format!("; {}", m.method));
    format!(
        "{}{method}; MFU over the same wall, FLOPs from the model config{}",
        r.source.as_deref().unwrap_or("the trace's stage instances"),
        if energy {
            "; energy from NVML over the baseline's stage windows"
        } else {
            ""
        }
    )
}

/// `baseline` or `trace (profiled)`: the short source beside each number.
fn basis_name(b: HeadlineBasis) -> &'static str {
    match b {
        HeadlineBasis::Baseline => "baseline (unprofiled)",
        HeadlineBasis::Trace => "trace (profiled)",
    }
}

/// The profiled passes' median of the same stage with their overhead, e.g.
/// `nsys 89.2 ms (+15.3%)`, or only the overhead (`nsys +15.3%`) without `median`; `None`
/// without overhead records.
fn profiled(b: &Bundle, stage: &str, median: bool) -> Option<String> {
    let c = b.capture.as_ref()?;
    let cells: Vec<String> = c
        .overhead
        .iter()
        .filter(|o| o.stage == stage)
        .map(|o| match median {
            true => format!(
                "{} {} ms ({:+.1}%)",
                o.pass,
                ms_f(o.profiled_median_ns),
                o.overhead_pct
            ),
            false => format!("{} {:+.1}%", o.pass, o.overhead_pct),
        })
        .collect();
    (!cells.is_empty()).then(|| cells.join("; "))
}

fn push(
    t: &mut TableView,
    label: &str,
    m: &Measure,
    f: impl Fn(f64) -> String,
    basis: &str,
    profiled: Option<String>,
) {
    let ci = m.ci.map_or(format!("{NA} (n < 6)"), |[lo, hi]| {
        format!("{} – {}", f(lo), f(hi))
    });
    let cells = [f(m.median), ci, m.n.to_string(), format!("{:.1}", m.cv_pct)];
    let between = fixed(m.between_cv_pct, 1);
    let scale = if label.ends_with("(ms)") { 1e-6 } else { 1.0 };
    t.push_values(
        row(label, cells, between, basis, profiled),
        values(Some(m.median * scale), Some(m.n as f64)),
    );
}

fn row(
    label: &str,
    [median, ci, n, cv]: [String; 4],
    between: String,
    basis: &str,
    profiled: Option<String>,
) -> Vec<String> {
    vec![
        label.into(),
        median,
        ci,
        n,
        cv,
        between,
        basis.into(),
        profiled.unwrap_or_else(|| NA.into()),
    ]
}

/// The unrounded values of a row's numeric cells (median and n).
fn values(median: Option<f64>, n: Option<f64>) -> Vec<Option<f64>> {
    vec![None, median, None, n, None, None, None, None]
}

/// A stage's MFU over the headline wall, with the interval the wall's interval gives it
/// (MFU is FLOPs over wall: the wall's bounds, swapped).
fn mfu_row(t: &mut TableView, r: &RunMetrics, s: &StageAnalysis) {
    let Some(mfu) = s.mfu else {
        return;
    };
    let wall = r
        .stage_wall_ns
        .iter()
        .find(|w| StageRole::of_name(&w.stage) == s.role && s.wall_basis == r.basis)
        .map(|w| &w.wall_ns);
    let pct = |v: f64| format!("{:.2}", v * 100.0);
    let (ci, n, cv) = match wall {
        Some(w) => (
            w.ci.map_or(NA.into(), |[lo, hi]| {
                format!(
                    "{} – {}",
                    pct(mfu * w.median / hi),
                    pct(mfu * w.median / lo)
                )
            }),
            w.n.to_string(),
            format!("{:.1}", w.cv_pct),
        ),
        None => (NA.into(), NA.into(), NA.into()),
    };
    let basis = basis_name(s.wall_basis);
    t.push_values(
        row(
            &format!("{} MFU (%)", s.name),
            [pct(mfu), ci, n, cv],
            NA.into(),
            basis,
            None,
        ),
        values(Some(mfu * 100.0), None),
    );
}

/// Energy per token of each baseline stage (NVML over the baseline's windows), with the
/// interval of the per-window energies where the run kept them.
fn energy_rows(t: &mut TableView, b: &Bundle) {
    for e in b.capture.iter().flat_map(|c| &c.energy) {
        let (Some(j), Some(tokens)) = (e.j_per_token, e.tokens.filter(|&t| t > 0)) else {
            continue;
        };
        let per_token: Vec<f64> = (e.window_energy_j.iter())
            .map(|w| w / tokens as f64 * 1e3)
            .collect();
        let m = crate::stats::median_ci(&per_token);
        let mj = |v: f64| format!("{v:.2}");
        // The median of the windows where the run kept them (the mean over instances, J/token of
        // the capture's energy table, otherwise).
        let median = m.map_or(j * 1e3, |m| m.median);
        let cells = [
            mj(median),
            m.and_then(|m| m.ci)
                .map_or(NA.into(), |(lo, hi, _)| format!("{} – {}", mj(lo), mj(hi))),
            m.map_or(e.instances, |m| m.n as u64).to_string(),
            m.map_or(NA.into(), |m| format!("{:.1}", m.cv_pct)),
        ];
        let source = match m {
            Some(m) if m.n == 1 => "baseline NVML, one window".to_string(),
            Some(m) => format!("baseline NVML, median of {} windows", m.n),
            None => format!("baseline NVML, mean of {} instances", e.instances),
        };
        t.push_values(
            row(
                &format!("{} mJ/token", e.stage),
                cells,
                NA.into(),
                &source,
                None,
            ),
            values(Some(median), Some(e.instances as f64)),
        );
    }
}
