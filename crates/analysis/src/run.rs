//! Serving numbers of the run: TTFT, TPOT, tokens/s, stage wall and model-level MFU, from the
//! headline samples ([`llmprof_report::samples`]: the unprofiled baseline when the run has one), each
//! with its interval, and the warning when their spread rules out a ±10% claim.

use llmprof_bundle::{Bundle, Distribution, Measure, Peak, RunMetrics, StageAnalysis, StageWall};

use llmprof_report::samples::{measure, Samples};

/// The seed's reproducibility claim: a re-run lands within ±10%.
const REPRODUCIBLE_PCT: f64 = 10.0;

pub fn metrics(
    bundle: &Bundle,
    stages: &[StageAnalysis],
    peak: Option<&Peak>,
    h: &Samples,
) -> RunMetrics {
    let mut m = RunMetrics {
        basis: h.basis,
        source: Some(h.source.clone()),
        ..RunMetrics::default()
    };
    let distribution = |groups: &[Vec<f64>]| {
        let mut v: Vec<u64> = groups.iter().flatten().map(|&x| x.round() as u64).collect();
        (!v.is_empty()).then(|| Distribution::from_samples(&mut v))
    };
    m.ttft = distribution(&h.prefill);
    m.ttft_ns = measure(&h.prefill);
    for (stage, groups) in [("prefill", &h.prefill), ("decode", &h.decode)] {
        if let Some(wall_ns) = measure(groups) {
            m.stage_wall_ns.push(StageWall {
                stage: stage.into(),
                wall_ns,
            });
        }
    }
    let tpot = h.tpot();
    m.tpot = distribution(&tpot);
    m.tpot_ns = measure(&tpot);
    m.decode_throughput = measure(&h.decode_tokens_per_s());
    m.decode_tokens_per_s = m.decode_throughput.as_ref().map(|t| t.median);
    let mut notes: Vec<String> = h.note.iter().cloned().collect();
    if !h.decode.iter().all(Vec::is_empty) && m.tpot.is_none() {
        notes.push("TPOT and tokens/s need the decode steps: give --decode-steps".into());
    }
    m.note = (!notes.is_empty()).then(|| notes.join("; "));
    let steps: Vec<u64> = h.steps.iter().flatten().copied().collect();
    m.generated_tokens = (!steps.is_empty()).then(|| h.batch * steps.iter().sum::<u64>());
    if let Some(ctx0) = bundle
        .workload
        .as_ref()
        .and_then(|w| w.context_before_decode())
    {
        m.decode_context = steps.iter().map(|&s| [ctx0 + 1, ctx0 + s]).collect();
    }
    m.model_mfu = model_mfu(bundle, stages, peak, h);
    m.spread_warning = spread_warning(&m);
    m
}

/// FLOPs of the stages with FLOPs (skipping those nested in another stage with FLOPs) over
/// their summed wall, the same wall the stages' MFU divides by.
fn model_mfu(
    bundle: &Bundle,
    stages: &[StageAnalysis],
    peak: Option<&Peak>,
    h: &Samples,
) -> Option<f64> {
    let with_flops: Vec<&StageAnalysis> = stages.iter().filter(|s| s.flops.is_some()).collect();
    let has_flops = |id: u32| with_flops.iter().any(|s| s.stage == id);
    let nested = |id: u32| {
        let mut parent = bundle.stage(id).and_then(|st| st.parent);
        while let Some(p) = parent {
            if has_flops(p) {
                return true;
            }
            parent = bundle.stage(p).and_then(|st| st.parent);
        }
        false
    };
    let (mut flops, mut wall) = (0.0, 0.0);
    for s in with_flops.iter().filter(|s| !nested(s.stage)) {
        flops += s.flops.unwrap_or(0.0);
        wall += bundle
            .stage(s.stage)
            .map_or(0.0, |st| crate::throughput::wall_ns(st, h).0);
    }
    let p = peak?;
    let mfu = flops / (wall * 1e-9) / (p.tflops * 1e12);
    (wall > 0.0 && flops > 0.0 && mfu <= 1.0).then_some(mfu)
}

/// A line when a headline's interval is wider than ±10% of its median, its processes' medians
/// spread more than 10%, or it has too few samples for an interval: a re-run cannot then be
/// promised within ±10%.
fn spread_warning(m: &RunMetrics) -> Option<String> {
    let mut named: Vec<(String, &Measure)> = m
        .stage_wall_ns
        .iter()
        .map(|w| (format!("{} wall", w.stage), &w.wall_ns))
        .collect();
    if let Some(t) = &m.tpot_ns {
        named.push(("TPOT".into(), t));
    }
    let wide: Vec<String> = named
        .iter()
        .filter_map(|(name, x)| {
            let half =
                x.ci.map(|[lo, hi]| (x.median - lo).max(hi - x.median) / x.median * 100.0);
            let between = x.between_cv_pct.filter(|&b| b > REPRODUCIBLE_PCT);
            match (half, between) {
                (_, Some(b)) => Some(format!("{name}: processes' medians vary {b:.1}%")),
                (Some(h), None) if h > REPRODUCIBLE_PCT => Some(format!("{name}: 95% CI ±{h:.1}%")),
                (None, None) => Some(format!(
                    "{name}: {} samples, too few for a 95% interval (6 needed)",
                    x.n
                )),
                _ => None,
            }
        })
        .collect();
    (!wide.is_empty()).then(|| {
        format!(
            "spread too wide to claim ±{REPRODUCIBLE_PCT:.0}% reproducibility ({}); more \
             iterations and fresh processes (--repeats auto, a larger --repeats-cap) narrow an \
             interval, not the spread between processes a re-run can land anywhere in",
            wide.join("; ")
        )
    })
}
