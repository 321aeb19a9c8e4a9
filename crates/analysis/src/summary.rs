//! The narrative summary: a few sentences written from the findings and the computed numbers,
//! never from template filler — a sentence appears only when its numbers exist.

use llmprof_bundle::{Analysis, Bundle, StageRole};

pub fn write(bundle: &Bundle, a: &Analysis) -> String {
    let mut out: Vec<String> = Vec::new();
    let device = bundle.device.as_ref().map(|d| d.name.as_str());
    let model = bundle.model.as_ref().and_then(|m| m.model_type.as_deref());
    match (model, device) {
        (Some(m), Some(d)) => out.push(format!("{m} on {d}.")),
        (None, Some(d)) => out.push(format!("Run on {d}.")),
        _ => {}
    }
    // The decode stage's launch-bound finding matters most to serving; else the first one.
    let launch = a
        .findings
        .iter()
        .filter(|f| f.id == "launch_bound")
        .max_by_key(|f| {
            f.stage
                .as_deref()
                .is_some_and(|s| StageRole::of_name(s) == StageRole::Decode)
        });
    if let Some(f) = launch {
        let stage = f.stage.as_deref().unwrap_or("a stage");
        let per_step = f
            .evidence
            .iter()
            .find(|e| e.contains("kernels per decode step"))
            .and_then(|e| e.split(" kernels per").next());
        let launch = f
            .evidence
            .iter()
            .find(|e| e.starts_with("mean launch call"))
            .and_then(|e| e.split(" on the CPU").next())
            .map(|e| e.trim_start_matches("mean launch call "));
        let s = bundle.stages.iter().find(|s| s.name == stage);
        let mut sentence = format!(
            "{} is launch-bound: the GPU is busy {:.1}% of its wall",
            capitalize(stage),
            s.map_or(0.0, |s| s.gpu_busy_pct)
        );
        if let Some(n) = per_step {
            sentence.push_str(&format!(", running {n} kernels per step"));
        }
        if let (Some(s), Some(l)) = (s, launch) {
            if s.kernels > 0 {
                sentence.push_str(&format!(
                    "; kernels average {:.1} µs while each launch costs {l} of CPU time",
                    s.kernel_ns as f64 / s.kernels as f64 / 1e3
                ));
            }
        }
        sentence.push_str("; CUDA graphs (or torch.compile) are the first fix.");
        out.push(sentence);
    }
    if let Some(f) = a.findings.iter().find(|f| f.id == "top_kernels") {
        out.push(format!(
            "{}.",
            f.title
                .replace("Top GPU time:", "The largest GPU consumer is")
        ));
    }
    let role = |r: StageRole| a.stages.iter().find(|s| s.role == r);
    if let Some(p) = role(StageRole::Prefill) {
        if let (Some(mfu), Some(t)) = (p.mfu, p.tflops) {
            out.push(format!(
                "Prefill reaches {t:.1} TFLOP/s, MFU {:.1}%{}.",
                mfu * 100.0,
                p.mfu_busy
                    .map(|b| format!(" ({:.1}% while the GPU is busy)", b * 100.0))
                    .unwrap_or_default()
            ));
        }
    }
    if let Some(d) = role(StageRole::Decode) {
        if let (Some(mbu), Some(g)) = (d.mbu, d.gbps) {
            out.push(format!(
                "Decode moves {g:.0} GB/s, MBU {:.1}%{}.",
                mbu * 100.0,
                a.run
                    .decode_tokens_per_s
                    .map(|t| format!(" at {t:.0} tokens/s"))
                    .unwrap_or_default()
            ));
        }
    }
    if let Some(f) = a.findings.iter().find(|f| f.id == "warmup_outlier") {
        out.push(format!("{}.", f.title));
    }
    if let Some(f) = a.findings.iter().find(|f| f.id == "vision_share") {
        out.push(format!("{}.", f.title));
    }
    if let Some(f) = a.findings.iter().find(|f| f.id == "tensor_cores_unused") {
        out.push(format!("{}.", f.title));
    }
    if let Some(why) = &a.inconsistent {
        out.push(format!("MFU/MBU are withheld: {why}."));
    } else if a.stages.iter().all(|s| s.mfu.is_none()) {
        let why = a
            .model_note
            .clone()
            .or_else(|| a.peak_note.clone())
            .or_else(|| a.stages.iter().find_map(|s| s.note.clone()));
        if let Some(why) = why {
            out.push(format!("MFU is n/a: {why}."));
        }
    }
    out.join(" ")
}

/// `decode` → `Decode`, for a stage name that starts a sentence.
pub(crate) fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}
