//! Token counts, counted FLOPs and device ceilings: from flags, the workload's metadata file,
//! or the trace's operator shapes, in that order of precedence, each value keeping its source.

use llmprof_bundle::{Bundle, Calibration, CountedFlops, RunMetadata, Sourced, Workload};

use crate::kineto::InferredWorkload;
use crate::{IngestRequest, WorkloadFlags};

const INFERRED: &str = "inferred from aten::embedding / LM-head aten::linear Input Dims in the \
                        PyTorch profiler trace";

/// Token counts read from the trace's shapes, each marked with that source.
pub(crate) fn from_inferred(i: &InferredWorkload) -> Workload {
    let s = |v| Sourced::new(v, INFERRED);
    Workload {
        batch_size: i.batch_size.map(s),
        prompt_tokens: i.prompt_tokens.map(s),
        image_tokens: None,
        decode_steps: i.decode_steps.clone().map(|v| Sourced::new(v, INFERRED)),
        prefill_logits: i.prefill_logits.map(s),
        parallel_degree: None,
    }
}

/// Fills `bundle.workload`, `counted_flops` and `calibration`: flags win over metadata, which
/// wins over `base` (inferred counts, or what the bundle held before).
pub(crate) fn assemble(
    bundle: &mut Bundle,
    req: &IngestRequest,
    metadata: Option<&(String, RunMetadata)>,
    base: Workload,
) {
    let meta = metadata.map(|(_, m)| m);
    let meta_src = metadata.map(|(p, _)| format!("metadata `{p}`"));
    bundle.workload = workload(&req.workload, meta, &meta_src, base);
    if let (Some(m), Some(src)) = (meta, &meta_src) {
        merge_counted_flops(&mut bundle.counted_flops, m, src);
    }
    bundle.calibration = calibration(req, meta, &meta_src, bundle.calibration.take());
}

/// A value from its flag, else from the metadata (marked with `meta_src`), else `base`.
fn pick<T: Clone>(
    flag: Option<T>,
    flag_name: &str,
    meta: Option<T>,
    meta_src: &Option<String>,
    base: Option<Sourced<T>>,
) -> Option<Sourced<T>> {
    if let Some(v) = flag {
        return Some(Sourced::new(v, format!("{flag_name} flag")));
    }
    if let (Some(v), Some(src)) = (meta, meta_src) {
        return Some(Sourced::new(v, src.clone()));
    }
    base
}

/// The token counts, each picked from its flag, the metadata or `base`; `None` when none is
/// known.
fn workload(
    flags: &WorkloadFlags,
    meta: Option<&RunMetadata>,
    meta_src: &Option<String>,
    base: Workload,
) -> Option<Workload> {
    let w = Workload {
        batch_size: pick(
            flags.batch_size,
            "--batch-size",
            meta.and_then(|m| m.batch_size),
            meta_src,
            base.batch_size,
        ),
        prompt_tokens: pick(
            flags.prompt_tokens,
            "--prompt-tokens",
            meta.and_then(|m| m.prompt_tokens),
            meta_src,
            base.prompt_tokens,
        ),
        image_tokens: pick(
            flags.image_tokens,
            "--image-tokens",
            meta.and_then(|m| m.image_tokens),
            meta_src,
            base.image_tokens,
        ),
        decode_steps: pick(
            (!flags.decode_steps.is_empty()).then(|| flags.decode_steps.clone()),
            "--decode-steps",
            meta.and_then(|m| m.decode_steps.clone()),
            meta_src,
            base.decode_steps,
        ),
        prefill_logits: pick(
            flags.prefill_logits,
            "--prefill-logits",
            meta.and_then(|m| m.prefill_logits),
            meta_src,
            base.prefill_logits,
        ),
        parallel_degree: pick(
            flags.parallel_degree,
            "--parallel-degree",
            meta.and_then(|m| m.parallel_degree),
            meta_src,
            base.parallel_degree,
        ),
    };
    (w != Workload::default()).then_some(w)
}

/// Adds the metadata's counted FLOPs (finite, non-negative ones), replacing earlier ones stage
/// by stage; `src` names the metadata file.
fn merge_counted_flops(counted: &mut Vec<CountedFlops>, m: &RunMetadata, src: &str) {
    let source = m
        .counted_flops_source
        .clone()
        .unwrap_or_else(|| "torch.utils.flop_counter.FlopCounterMode".into());
    let new: Vec<CountedFlops> = m
        .counted_flops
        .iter()
        .filter(|(_, f)| f.is_finite() && **f >= 0.0)
        .map(|(stage, &flops)| CountedFlops {
            stage: stage.clone(),
            flops_per_instance: flops,
            source: format!("{source} ({src})"),
        })
        .collect();
    counted.retain(|c| !new.iter().any(|n| n.stage == c.stage));
    counted.extend(new);
}

/// Peaks and measured ceilings: each positive value from its flag, else from the metadata (its
/// source recorded), else what `old` held; `None` when nothing is known.
fn calibration(
    req: &IngestRequest,
    meta: Option<&RunMetadata>,
    meta_src: &Option<String>,
    old: Option<Calibration>,
) -> Option<Calibration> {
    let mut c = old.unwrap_or_default();
    let old = c.clone();
    let mut set = |field: &str, flag: Option<f64>, flag_name: &str, meta_v: Option<f64>| {
        let positive = |v: &f64| v.is_finite() && *v > 0.0;
        if let Some(v) = flag.filter(positive) {
            c.sources.insert(field.into(), format!("{flag_name} flag"));
            return Some(v);
        }
        if let (Some(v), Some(src)) = (meta_v.filter(positive), meta_src) {
            c.sources.insert(field.into(), src.clone());
            return Some(v);
        }
        None
    };
    let keep = |new: Option<f64>, old: Option<f64>| new.or(old);
    let peak_tflops = set(
        "peak_tflops",
        req.peak_tflops,
        "--peak-tflops",
        meta.and_then(|m| m.peak_tflops),
    );
    let peak_gbps = set(
        "peak_gbps",
        req.peak_gbps,
        "--peak-gbps",
        meta.and_then(|m| m.peak_gbps),
    );
    let measured_tflops = set(
        "measured_tflops",
        None,
        "",
        meta.and_then(|m| m.measured_tflops),
    );
    let measured_gbps = set(
        "measured_gbps",
        None,
        "",
        meta.and_then(|m| m.measured_gbps),
    );
    c.peak_tflops = keep(peak_tflops, old.peak_tflops);
    c.peak_gbps = keep(peak_gbps, old.peak_gbps);
    c.measured_tflops = keep(measured_tflops, old.measured_tflops);
    c.measured_gbps = keep(measured_gbps, old.measured_gbps);
    (c != Calibration::default()).then_some(c)
}
