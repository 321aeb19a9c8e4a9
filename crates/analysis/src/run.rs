//! Serving numbers of the run: TTFT, TPOT, tokens/s, model-level MFU.

use llmprof_bundle::{Bundle, Distribution, Peak, RunMetrics, StageAnalysis, StageRole};

pub fn metrics(bundle: &Bundle, stages: &[StageAnalysis], peak: Option<&Peak>) -> RunMetrics {
    let mut m = RunMetrics::default();
    let mut notes = Vec::new();
    let of_role = |r: StageRole| {
        bundle
            .workload_stages()
            .find(|s| StageRole::of_name(&s.name) == r)
    };
    if let Some(prefill) = of_role(StageRole::Prefill) {
        let mut walls: Vec<u64> = prefill.instance_list.iter().map(|i| i.wall_ns).collect();
        m.ttft = Some(Distribution::from_samples(&mut walls));
    }
    if let Some(decode) = of_role(StageRole::Decode) {
        let w = bundle.workload.as_ref();
        let steps: Option<Vec<u64>> = (0..decode.instance_list.len())
            .map(|i| w.and_then(|w| w.steps_of_instance(i)))
            .collect();
        match steps {
            Some(steps) if steps.iter().all(|&s| s > 0) => {
                let mut tpot: Vec<u64> = decode
                    .instance_list
                    .iter()
                    .zip(&steps)
                    .map(|(inst, &s)| inst.wall_ns / s)
                    .collect();
                m.tpot = Some(Distribution::from_samples(&mut tpot));
                if let Some(ctx0) = w.and_then(|w| w.context_before_decode()) {
                    m.decode_context = steps.iter().map(|&s| [ctx0 + 1, ctx0 + s]).collect();
                }
                let batch = w.map_or(1, |w| w.batch());
                let generated = batch * steps.iter().sum::<u64>();
                m.generated_tokens = Some(generated);
                if decode.wall_ns > 0 {
                    m.decode_tokens_per_s = Some(generated as f64 / (decode.wall_ns as f64 * 1e-9));
                }
            }
            _ => notes.push("TPOT and tokens/s need the decode steps: give --decode-steps"),
        }
    }
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
