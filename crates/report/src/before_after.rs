//! Before and after: each run whose decode step was optimized (`[optimize]`: compiled, or on a
//! static KV cache) next to an eager run of the same target, the one captured closest in time.
//! Latency and throughput come from the unprofiled baseline pass; busy time, launches and the
//! kernel mix from the profiled pass that timed the stages (nsys or the PyTorch profiler).

use llmprof_bundle::{Bundle, Category, OpKind, StageRole};

use crate::fmt::figure;
use crate::table::{Column, TableView};

/// How a captured run ran its decode step: `(compile, cache)`, `("none", "dynamic")` when
/// eager; `None` for runs that `llmprof capture --target` did not make.
pub fn optimize_of(b: &Bundle) -> Option<(String, String)> {
    let c = b.capture.as_ref()?;
    if c.command.is_some() || c.target.is_empty() {
        return None;
    }
    let o = c.target_config.get("optimize");
    let field = |k: &str, default: &str| {
        o.and_then(|o| o.get(k))
            .and_then(|v| v.as_str())
            .unwrap_or(default)
            .to_string()
    };
    Some((field("compile", "none"), field("cache", "dynamic")))
}

/// `(eager, optimized)` index pairs: every optimized run with the eager run captured closest in
/// time whose target is the same in everything but `[optimize]` (model, dtype, inputs).
pub fn pairs(bundles: &[&Bundle]) -> Vec<(usize, usize)> {
    let eager = |b: &Bundle| optimize_of(b).is_some_and(|(c, k)| c == "none" && k == "dynamic");
    let target = |b: &Bundle| {
        b.capture.as_ref().map(|c| {
            let part = |k: &str| c.target_config.get(k).cloned();
            (c.target.clone(), part("model"), part("inputs"))
        })
    };
    let mut out = Vec::new();
    for (i, b) in bundles.iter().enumerate() {
        if optimize_of(b).is_none() || eager(b) {
            continue;
        }
        let closest = bundles
            .iter()
            .enumerate()
            .filter(|(_, e)| eager(e) && target(e) == target(b))
            .min_by_key(|(_, e)| distance(e.captured_at.as_deref(), b.captured_at.as_deref()));
        if let Some((j, _)) = closest {
            out.push((j, i));
        }
    }
    out
}

/// Seconds between two RFC 3339 times (a large number when either is missing).
fn distance(a: Option<&str>, b: Option<&str>) -> u64 {
    let secs = |s: &str| -> Option<i64> {
        let d: Vec<i64> = s
            .split(|c: char| !c.is_ascii_digit())
            .filter(|p| !p.is_empty())
            .take(6)
            .map(|p| p.parse().ok())
            .collect::<Option<_>>()?;
        let [y, mo, day, h, mi, se] = d[..] else {
            return None;
        };
        // Days since a fixed epoch are enough to order captures (month length approximated).
        Some((((y * 372 + mo * 31 + day) * 24 + h) * 60 + mi) * 60 + se)
    };
    match (a.and_then(secs), b.and_then(secs)) {
        (Some(x), Some(y)) => x.abs_diff(y),
        _ => u64::MAX,
    }
}

/// The table of one pair: one row per figure, the eager and optimized values, and the change.
pub fn table(before: &Bundle, after: &Bundle) -> TableView {
    let mut t = TableView::new(vec![
        Column::text("Figure"),
        Column::num(&before.run_id),
        Column::num(&after.run_id),
        Column::num("Change"),
    ])
    .from_source(
        "TTFT, TPOT and tokens/s from the unprofiled baseline; the rest from the profiled pass",
    );
    let setting =
        |b: &Bundle| optimize_of(b).map_or("?".into(), |(c, k)| format!("compile={c}, cache={k}"));
    t.rows.push(vec![
        "Decode step".into(),
        setting(before),
        setting(after),
        String::new(),
    ]);
    let (b, a) = (Figures::of(before), Figures::of(after));
    let rows: [(&str, Option<f64>, Option<f64>, Change); 8] = [
        (
            "TTFT, unprofiled median (ms)",
            b.ttft_ms,
            a.ttft_ms,
            Change::Faster,
        ),
        (
            "TPOT, unprofiled median (ms)",
            b.tpot_ms,
            a.tpot_ms,
            Change::Faster,
        ),
        (
            "Decode tokens/s, unprofiled",
            b.tokens_per_s,
            a.tokens_per_s,
            Change::Ratio,
        ),
        (
            "Decode GPU busy (%)",
            b.busy_pct,
            a.busy_pct,
            Change::Points,
        ),
        (
            "Launch calls per decode step",
            b.launches,
            a.launches,
            Change::Ratio,
        ),
        (
            "CUDA graph launches per decode step",
            b.graphs,
            a.graphs,
            Change::None,
        ),
        (
            "Kernels per decode step",
            b.kernels,
            a.kernels,
            Change::Ratio,
        ),
        (
            "Kernels per graph launch",
            b.per_graph,
            a.per_graph,
            Change::None,
        ),
    ];
    for (label, x, y, change) in rows {
        t.rows
            .push(vec![label.into(), figure(x), figure(y), change.of(x, y)]);
    }
    for cat in Category::ALL {
        let (x, y) = (b.mix_us(cat), a.mix_us(cat));
        if x.unwrap_or(0.0) == 0.0 && y.unwrap_or(0.0) == 0.0 {
            continue;
        }
        t.rows.push(vec![
            format!("{} kernel time per generated token (µs)", cat.as_str()),
            figure(x),
            figure(y),
            Change::Faster.of(x, y),
        ]);
    }
    t
}

/// What a change means for a row.
#[derive(Clone, Copy)]
enum Change {
    /// Lower is better: `16.4× faster`, `2.1× slower`.
    Faster,
    /// `×16.9`, `÷258.0`.
    Ratio,
    /// Percentage points.
    Points,
    None,
}

impl Change {
    fn of(self, before: Option<f64>, after: Option<f64>) -> String {
        let (Some(b), Some(a)) = (before, after) else {
            return String::new();
        };
        match self {
            Change::Faster if a > 0.0 && b >= a => format!("{:.1}× faster", b / a),
            Change::Faster if b > 0.0 => format!("{:.1}× slower", a / b),
            Change::Ratio if b > 0.0 && a >= b => format!("×{:.1}", a / b),
            Change::Ratio if a > 0.0 => format!("÷{:.1}", b / a),
            Change::Points => format!("{:+.1} points", a - b),
            _ => String::new(),
        }
    }
}

/// The figures of one run, each from its source (see the module docs).
struct Figures<'a> {
    bundle: &'a Bundle,
    ttft_ms: Option<f64>,
    tpot_ms: Option<f64>,
    tokens_per_s: Option<f64>,
    busy_pct: Option<f64>,
    launches: Option<f64>,
    graphs: Option<f64>,
    kernels: Option<f64>,
    per_graph: Option<f64>,
    decode: Option<&'a llmprof_bundle::Stage>,
    generated: Option<u64>,
}

impl<'a> Figures<'a> {
    fn of(b: &'a Bundle) -> Figures<'a> {
        let decode = b
            .stages
            .iter()
            .find(|s| s.depth == 0 && StageRole::of_name(&s.name) == StageRole::Decode);
        let facts = b.analysis.as_ref().and_then(|a| {
            let d = decode?;
            a.stages.iter().find(|s| s.stage == d.id)?.launch.clone()
        });
        let base = b.capture.as_ref().and_then(|c| c.baseline.as_ref());
        let inputs = b
            .capture
            .as_ref()
            .and_then(|c| c.target_config.get("inputs"));
        let num = |k: &str| inputs.and_then(|i| i.get(k)).and_then(|v| v.as_u64());
        let steps = num("max_new_tokens");
        let batch = num("batch_size").unwrap_or(1);
        let tpot_ms = base
            .zip(steps.filter(|&s| s > 0))
            .map(|(t, s)| t.decode.median_ns / s as f64 / 1e6);
        Figures {
            bundle: b,
            ttft_ms: base.map(|t| t.prefill.median_ns / 1e6),
            tpot_ms,
            tokens_per_s: tpot_ms.filter(|&t| t > 0.0).map(|t| batch as f64 * 1e3 / t),
            busy_pct: decode.map(|d| d.gpu_busy_pct),
            launches: facts.as_ref().and_then(|f| f.launches_per_step),
            graphs: facts.as_ref().and_then(|f| f.graph_launches_per_step),
            kernels: facts.as_ref().and_then(|f| f.kernels_per_step),
            per_graph: facts.as_ref().and_then(|f| f.kernels_per_graph),
            decode,
            generated: b
                .analysis
                .as_ref()
                .and_then(|a| a.run.generated_tokens)
                .filter(|&g| g > 0),
        }
    }

    /// Kernel time of one category in decode per generated token, µs.
    fn mix_us(&self, cat: Category) -> Option<f64> {
        let (d, tokens) = (self.decode?, self.generated?);
        let ns: u64 = self
            .bundle
            .kernels
            .iter()
            .filter(|k| matches!(k.kind, OpKind::Kernel | OpKind::Graph) && k.category == cat)
            .filter_map(|k| k.by_stage.iter().find(|s| s.stage == d.id))
            .map(|s| s.total_ns)
            .sum();
        Some(ns as f64 / tokens as f64 / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, at: &str, compile: &str, batch: u64) -> Bundle {
        let mut b = Bundle::new(id);
        b.captured_at = Some(at.into());
        b.capture = Some(llmprof_bundle::Capture {
            target: "qwen".into(),
            target_config: serde_json::json!({
                "model": {"dtype": "bfloat16"},
                "inputs": {"batch_size": batch, "max_new_tokens": 64},
                "optimize": {"compile": compile, "cache": "static"},
            }),
            ..Default::default()
        });
        b
    }

    #[test]
    fn pairs_match_the_workload_and_the_nearest_eager_run() {
        let mut early = run("early", "2026-11-22T03:00:00Z", "none", 1);
        let mut near = run("near", "2026-11-23T15:49:03Z", "none", 1);
        for b in [&mut early, &mut near] {
            b.capture.as_mut().unwrap().target_config["optimize"]["cache"] = "dynamic".into();
        }
        let compiled = run("compiled", "2026-11-23T15:52:06Z", "reduce-overhead", 1);
        let other_batch = run("b16", "2026-11-23T16:00:18Z", "reduce-overhead", 16);
        let all = [&early, &near, &compiled, &other_batch];
        assert_eq!(
            pairs(&all),
            vec![(1, 2)],
            "the batch-16 run has no eager twin"
        );
        assert_eq!(Change::Faster.of(Some(26.6), Some(1.62)), "16.4× faster");
        assert_eq!(Change::Faster.of(Some(22.7), Some(46.9)), "2.1× slower");
        assert_eq!(Change::Ratio.of(Some(1032.0), Some(4.0)), "÷258.0");
        assert_eq!(Change::Points.of(Some(6.5), Some(82.9)), "+76.4 points");
    }
}
