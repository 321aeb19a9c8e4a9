//! Per-stage FLOPs and bytes (analytic from the model, or counted by the workload), achieved
//! TFLOP/s and GB/s, MFU/MBU against the peak, and the roofline position.

use llmprof_bundle::{Bundle, HeadlineBasis, Peak, Stage, StageAnalysis, StageRole, Workload};

use llmprof_report::samples::Samples;

use crate::model::Model;

/// Below this share of the wall the GPU mostly waits for the host: the stage is latency/launch
/// bound whatever its arithmetic intensity.
pub const BUSY_LAUNCH_BOUND_PCT: f64 = 50.0;

/// Analytic FLOPs and bytes of one stage (totals over its instances), or why there are none.
struct Work {
    flops: Option<f64>,
    bytes: Option<f64>,
    note: Option<String>,
}

impl Work {
    fn none(note: impl Into<String>) -> Work {
        Work {
            flops: None,
            bytes: None,
            note: Some(note.into()),
        }
    }
}

fn analytic(stage: &Stage, role: StageRole, model: &Model, w: Option<&Workload>) -> Work {
    let Some(w) = w else {
        return Work::none(
            "no token counts: give --prompt-tokens/--decode-steps (or a metadata.json)",
        );
    };
    let batch = w.batch() as f64;
    match role {
        StageRole::Prefill => {
            let Some(tokens) = w.context_before_decode() else {
                return Work::none("prompt length unknown: give --prompt-tokens");
            };
            let logits = w.prefill_logits.as_ref().map_or(1, |l| l.value).min(tokens);
            let mut per = batch * model.prefill_flops(tokens, logits);
            let bytes = model.prefill_bytes(w.batch(), tokens);
            // With image tokens the vision tower runs inside prefill (one image per sequence):
            // the prefill range includes its work.
            let images = w.image_tokens.as_ref().is_some_and(|t| t.value > 0);
            let mut note = None;
            if let (true, Some(parts)) = (images, model.vision_flops()) {
                per += batch * parts.iter().map(|&(_, f)| f).sum::<f64>();
                note = Some(
                    "prefill FLOPs include the vision tower (one image per sequence); bytes \
                     count the language model only"
                        .to_string(),
                );
            }
            let n = stage.instances as f64;
            Work {
                flops: Some(per * n),
                bytes: Some(bytes * n),
                note,
            }
        }
        StageRole::Decode => {
            let Some(ctx0) = w.context_before_decode() else {
                return Work::none("prompt length unknown: give --prompt-tokens");
            };
            let mut flops = 0.0;
            let mut bytes = 0.0;
            for i in 0..stage.instance_list.len() {
                let Some(steps) = w.steps_of_instance(i) else {
                    return Work::none(format!(
                        "decode steps unknown for instance {} of {}: give --decode-steps with one \
                         entry per instance",
                        i + 1,
                        stage.instances
                    ));
                };
                for j in 1..=steps {
                    flops += batch * model.decode_step_flops(ctx0 + j);
                    bytes += model.decode_step_bytes(w.batch(), ctx0 + j);
                }
            }
            Work {
                flops: Some(flops),
                bytes: Some(bytes),
                note: None,
            }
        }
        StageRole::Vision => {
            let Some(parts) = model.vision_flops() else {
                return Work::none("no vision tower in the model config");
            };
            let lname = stage.name.to_ascii_lowercase();
            let matched: Vec<f64> = parts
                .iter()
                .filter(|(part, _)| lname.contains(part) || part.contains(lname.as_str()))
                .map(|&(_, f)| f)
                .collect();
            let per_image: f64 = if matched.is_empty() {
                // A stage covering the whole vision side.
                if lname.contains("vision") && !lname.contains("encoder") {
                    parts.iter().map(|&(_, f)| f).sum()
                } else {
                    return Work::none(format!(
                        "no vision FLOPs model for sub-stage `{}`",
                        stage.name
                    ));
                }
            } else {
                matched.iter().sum()
            };
            Work {
                flops: Some(per_image * batch * stage.instances as f64),
                bytes: None,
                note: Some("vision bytes are not modelled; MBU n/a".into()),
            }
        }
        StageRole::Other => Work::none(format!(
            "no FLOPs model for stage `{}` (name it prefill, decode or a vision sub-stage)",
            stage.name
        )),
    }
}

/// The wall time the over-wall ratios of `stage` divide by, over all its instances, ns: the
/// headline's median per instance × instances for a top-level stage the unprofiled baseline
/// timed, else the traced range's wall. A vision sub-stage's range closes when the host has
/// enqueued its work, so its time is the baseline's GPU time (CUDA events) or, without one,
/// the trace's projected GPU time — never the range's wall.
pub fn wall_ns(stage: &Stage, headline: &Samples) -> (f64, HeadlineBasis) {
    let role = StageRole::of_name(&stage.name);
    let n = stage.instances as f64;
    if role == StageRole::Vision {
        return match headline.sub_stage(&stage.name) {
            Some(per_instance) => (per_instance * n, HeadlineBasis::Baseline),
            None => (stage.gpu_proj_ns as f64, HeadlineBasis::Trace),
        };
    }
    let baseline = (headline.basis == HeadlineBasis::Baseline && stage.parent.is_none())
        .then(|| headline.wall_of(role))
        .flatten()
        .and_then(|groups| llmprof_report::samples::measure(groups));
    match baseline {
        Some(m) => (m.median * n, HeadlineBasis::Baseline),
        None => (stage.wall_ns as f64, HeadlineBasis::Trace),
    }
}

/// Throughput and utilization of every stage.
pub fn stages(
    bundle: &Bundle,
    model: Result<&Model, &str>,
    peak: Option<&Peak>,
    headline: &Samples,
) -> Vec<StageAnalysis> {
    bundle
        .workload_stages()
        .filter(|s| !llmprof_bundle::is_warmup(&s.name))
        .map(|stage| {
            let role = StageRole::of_name(&stage.name);
            let work = match model {
                Ok(m) => analytic(stage, role, m, bundle.workload.as_ref()),
                Err(why) => Work::none(why),
            };
            let counted = bundle
                .counted_flops
                .iter()
                .find(|c| c.stage == stage.name)
                .map(|c| c.flops_per_instance * stage.instances as f64);
            let (flops, flops_source) = match (work.flops, counted) {
                (Some(a), _) => (Some(a), Some("analytic".to_string())),
                (None, Some(c)) => (Some(c), Some("counted".to_string())),
                (None, None) => (None, None),
            };
            let diff = match (counted, work.flops) {
                (Some(c), Some(a)) if a > 0.0 => Some((c - a) / a * 100.0),
                _ => None,
            };
            let (wall_ns, wall_basis) = wall_ns(stage, headline);
            let wall_s = wall_ns * 1e-9;
            // While busy: over the union of the stage's GPU activity, not its projected span
            // (which is nearly the whole wall of a launch-bound stage).
            let busy_s = stage.gpu_busy_ns as f64 * 1e-9;
            let rate = |x: Option<f64>, secs: f64, unit: f64| {
                x.filter(|_| secs > 0.0).map(|v| v / secs / unit)
            };
            let tflops = rate(flops, wall_s, 1e12);
            let gbps = rate(work.bytes, wall_s, 1e9);
            let ratio = |v: Option<f64>, peak: Option<f64>| match (v, peak) {
                (Some(v), Some(p)) if p > 0.0 => Some(v / p),
                _ => None,
            };
            let p_t = peak.map(|p| p.tflops);
            let p_g = peak.map(|p| p.gbps);
            let intensity = match (flops, work.bytes) {
                (Some(f), Some(b)) if b > 0.0 => Some(f / b),
                _ => None,
            };
            let bound = if stage.gpu_busy_pct < BUSY_LAUNCH_BOUND_PCT && stage.wall_ns > 0 {
                "latency/launch-bound"
            } else {
                match (intensity, peak) {
                    (Some(i), Some(p)) if p.gbps > 0.0 => {
                        let ridge = p.tflops * 1e12 / (p.gbps * 1e9);
                        if i >= ridge {
                            "compute-bound"
                        } else {
                            "memory-bound"
                        }
                    }
                    _ => "unknown",
                }
            };
            StageAnalysis {
                stage: stage.id,
                name: stage.name.clone(),
                role,
                wall_basis,
                flops,
                flops_source,
                analytic_flops: work.flops,
                counted_flops: counted,
                counted_vs_analytic_pct: diff,
                bytes: work.bytes,
                tflops,
                mfu: ratio(tflops, p_t),
                mfu_busy: ratio(rate(flops, busy_s, 1e12), p_t),
                mfu_vs_measured: ratio(tflops, peak.and_then(|p| p.measured_tflops)),
                gbps,
                mbu: ratio(gbps, p_g),
                mbu_busy: ratio(rate(work.bytes, busy_s, 1e9), p_g),
                mbu_vs_measured: ratio(gbps, peak.and_then(|p| p.measured_gbps)),
                intensity,
                bound: bound.to_string(),
                note: work.note,
                launch: crate::launches::facts(bundle, stage, role),
            }
        })
        .collect()
}

/// Withholds ratios above 1 (more than the hardware can do): returns what was inconsistent.
pub fn guard(stages: &mut [StageAnalysis]) -> Option<String> {
    let mut problems = Vec::new();
    for s in stages.iter_mut() {
        let over: Vec<String> = [
            ("MFU", s.mfu),
            ("MFU while busy", s.mfu_busy),
            ("MBU", s.mbu),
            ("MBU while busy", s.mbu_busy),
        ]
        .iter()
        .filter_map(|(n, v)| {
            v.filter(|v| *v > 1.0)
                .map(|v| format!("{n} {:.0}%", v * 100.0))
        })
        .collect();
        if over.is_empty() {
            continue;
        }
        problems.push(format!("{}: {}", s.name, over.join(", ")));
        s.mfu = None;
        s.mfu_busy = None;
        s.mbu = None;
        s.mbu_busy = None;
        s.mfu_vs_measured = None;
        s.mbu_vs_measured = None;
        s.note = Some(
            "ratios withheld: above 100% of the peak, so token counts or the peak are wrong".into(),
        );
    }
    (!problems.is_empty()).then(|| {
        format!(
            "ratios above 100% of the peak ({}): the token counts or the peak do not describe \
             this run; check --prompt-tokens/--decode-steps/--batch-size and the peak row",
            problems.join("; ")
        )
    })
}
