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
    if let Some(sentence) = host_sentence(bundle, a) {
        out.push(sentence);
    }
    // A stage that keeps the GPU busy: say where its time goes (decode first).
    let busy = a
        .findings
        .iter()
        .filter(|f| f.id == "busy_kernels")
        .min_by_key(|f| !is_decode(f.stage.as_deref()));
    if let Some(f) = busy {
        out.push(format!("{}.", f.title));
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

fn is_decode(stage: Option<&str>) -> bool {
    stage.is_some_and(|s| StageRole::of_name(s) == StageRole::Decode)
}

/// The decode stage's launch- or host-bound finding (it matters most to serving), else the
/// first one (findings come in stage order), as a sentence built from the stage's launch facts.
fn host_sentence(bundle: &Bundle, a: &Analysis) -> Option<String> {
    let f = a
        .findings
        .iter()
        .filter(|f| f.id == "launch_bound" || f.id == "host_bound")
        .min_by_key(|f| !is_decode(f.stage.as_deref()))?;
    let stage = f.stage.as_deref()?;
    let s = bundle.stages.iter().find(|s| s.name == stage)?;
    let facts = a
        .stages
        .iter()
        .find(|x| x.stage == s.id)
        .and_then(|x| x.launch.as_ref());
    let kind = if f.id == "launch_bound" {
        "launch"
    } else {
        "host"
    };
    let mut sentence = format!(
        "{} is {kind}-bound: the GPU is busy {:.1}% of its wall",
        capitalize(stage),
        s.gpu_busy_pct
    );
    if let Some(l) = facts.and_then(|f| f.launches_per_step) {
        sentence.push_str(&format!(", with {l:.0} launch calls per step"));
        if let Some(g) = facts
            .and_then(|f| f.graph_launches_per_step)
            .filter(|&g| g > 0.0)
        {
            sentence.push_str(&format!(" ({g:.0} of them CUDA graph launches)"));
        }
    }
    let graphs = s.graph_launches > 0;
    match (f.id.as_str(), graphs) {
        ("launch_bound", false) => {
            if let (Some(w), Some(c)) = (
                facts.and_then(|f| f.gpu_ns_per_launch),
                facts.and_then(|f| f.launch_call_ns),
            ) {
                sentence.push_str(&format!(
                    "; each call gives the GPU {:.1} µs of work and costs {:.1} µs of CPU time",
                    w / 1e3,
                    c / 1e3
                ));
            }
            sentence.push_str("; CUDA graphs (or torch.compile) are the first fix.");
        }
        ("launch_bound", true) => {
            sentence.push_str("; the launches outside its CUDA graphs are the next fix.")
        }
        _ => sentence.push_str("; the idle time is host work between launches, not the launches."),
    }
    Some(sentence)
}

/// `decode` → `Decode`, for a stage name that starts a sentence.
pub(crate) fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}
