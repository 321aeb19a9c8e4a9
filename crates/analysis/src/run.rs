//! Serving numbers of the run: TTFT, TPOT, tokens/s, model-level MFU. TTFT, TPOT and
//! tokens/s read only the measured instances ([`Stage::measured_instances`]): warm-up ones,
//! by name or by `--warmup-instances`, are left out, and the note says how.

use llmprof_bundle::{Bundle, Distribution, Peak, RunMetrics, Stage, StageAnalysis, StageRole};

pub fn metrics(bundle: &Bundle, stages: &[StageAnalysis], peak: Option<&Peak>) -> RunMetrics {
    let mut m = RunMetrics::default();
    let mut notes: Vec<String> = Vec::new();
    let of_role = |r: StageRole| {
        bundle
            .workload_stages()
            .find(|s| StageRole::of_name(&s.name) == r)
    };
    let prefill = of_role(StageRole::Prefill);
    if let Some(prefill) = prefill {
        let mut walls: Vec<u64> = prefill
            .measured_instances()
            .map(|(_, i)| i.wall_ns)
            .collect();
        if walls.is_empty() {
            notes.push(format!(
                "no TTFT: every {} instance is warm-up",
                prefill.name
            ));
        } else {
            m.ttft = Some(Distribution::from_samples(&mut walls));
        }
    }
    let decode = of_role(StageRole::Decode);
    if let Some(decode) = decode {
        if let Err(note) = decode_metrics(bundle, decode, &mut m) {
            notes.push(note.into());
        }
    }
    notes.extend(warmup_note(bundle, [prefill, decode].into_iter().flatten()));
    // Model-level MFU: stages with FLOPs, skipping those nested in another stage with FLOPs.
    let with_flops: Vec<&StageAnalysis> = stages.iter().filter(|s| s.flops.is_some()).collect();
    let has_flops = |id: u32| with_flops.iter().any(|s| s.stage == id);
    let mut flops = 0.0;
    let mut wall = 0u64;
    for s in &with_flops {
        let mut parent = bundle.stage(s.stage).and_then(|st| st.parent);
        let mut nested = false;
        while let Some(p) = parent {
            if has_flops(p) {
                nested = true;
                break;
            }
            parent = bundle.stage(p).and_then(|st| st.parent);
        }
        if !nested {
            flops += s.flops.unwrap_or(0.0);
            wall += bundle.stage(s.stage).map_or(0, |st| st.wall_ns);
        }
    }
    if let (Some(p), true) = (peak, wall > 0 && flops > 0.0) {
        let mfu = flops / (wall as f64 * 1e-9) / (p.tflops * 1e12);
        if mfu <= 1.0 {
            m.model_mfu = Some(mfu);
        }
    }
    if !notes.is_empty() {
        m.note = Some(notes.join("; "));
    }
    m
}

/// TPOT, the decode contexts, generated tokens and tokens/s over the measured decode
/// instances; the reason when the decode steps are unknown.
fn decode_metrics(bundle: &Bundle, decode: &Stage, m: &mut RunMetrics) -> Result<(), &'static str> {
    let w = bundle.workload.as_ref();
    let measured: Vec<(u64, u64)> = decode
        .measured_instances()
        .map(|(i, inst)| Some((inst.wall_ns, w?.steps_of_instance(i)?)))
        .collect::<Option<_>>()
        .filter(|v: &Vec<(u64, u64)>| v.iter().all(|&(_, s)| s > 0))
        .ok_or("TPOT and tokens/s need the decode steps: give --decode-steps")?;
    if measured.is_empty() {
        return Err("no TPOT: every decode instance is warm-up");
    }
    let mut tpot: Vec<u64> = measured.iter().map(|&(wall, s)| wall / s).collect();
    m.tpot = Some(Distribution::from_samples(&mut tpot));
    if let Some(ctx0) = w.and_then(|w| w.context_before_decode()) {
        m.decode_context = measured
            .iter()
            .map(|&(_, s)| [ctx0 + 1, ctx0 + s])
            .collect();
    }
    let batch = w.map_or(1, |w| w.batch());
    let generated = batch * measured.iter().map(|&(_, s)| s).sum::<u64>();
    m.generated_tokens = Some(generated);
    let wall: u64 = measured.iter().map(|&(wall, _)| wall).sum();
    if wall > 0 {
        m.decode_tokens_per_s = Some(generated as f64 / (wall as f64 * 1e-9));
    }
    Ok(())
}

/// What TTFT and TPOT left out as warm-up, when they left out instances of a stage named as
/// measured (`--warmup-instances`); for a run without a capture whose headline stages hold
/// several instances and no leading warm-up was given, that every instance counts.
fn warmup_note<'a>(bundle: &Bundle, headline: impl Iterator<Item = &'a Stage>) -> Option<String> {
    let headline: Vec<&Stage> = headline.collect();
    let left_out = |s: &&Stage| s.measured_instances().count() < s.instance_list.len();
    let rule = bundle.warmup.as_ref();
    if let (Some(w), true) = (rule, headline.iter().any(left_out)) {
        let counts: Vec<String> = headline
            .iter()
            .map(|s| {
                format!(
                    "{} {} of {}",
                    s.name,
                    s.measured_instances().count(),
                    s.instances
                )
            })
            .collect();
        return Some(format!(
            "TTFT and TPOT over the measured instances: {} ({})",
            counts.join(", "),
            w.describe()
        ));
    }
    let several = headline.iter().any(|s| s.instances > 1);
    (bundle.capture.is_none() && several).then(|| {
        "ingest-only run: TTFT and TPOT count every instance as measured (ranges named \
         warmup_* excepted); if the first ones are warm-up, give --warmup-instances N"
            .to_string()
    })
}
