//! The baseline's device memory: the KV cache computed from the model config against the one
//! measured, and the batch headroom — how many more sequences fit at this context length and
//! what decode would reach with them if it stays bound where it is (an estimate).

use llmprof_bundle::{
    Bundle, Finding, Headroom, MemoryAnalysis, MemoryRecord, ModelSummary, RunMetrics,
    StageAnalysis, StageRole,
};
use llmprof_report::fmt::{bytes, thousands};

/// Share of the device's memory the headroom keeps free (allocator fragmentation, CUDA
/// context growth, other processes).
pub const MARGIN_FRACTION: f64 = 0.10;

/// `None` without the baseline's memory record.
pub fn analyze(
    bundle: &Bundle,
    model: Option<&ModelSummary>,
    stages: &[StageAnalysis],
    run: &RunMetrics,
) -> Option<MemoryAnalysis> {
    let m = &with_workload_tokens(bundle.capture.as_ref()?.memory.as_ref()?, bundle);
    // Under tensor parallelism each GPU holds its share of the KV heads; the record is one GPU's.
    let shards = (bundle.workload.as_ref())
        .and_then(|w| w.parallel_degree.as_ref())
        .map(|d| d.value)
        .filter(|&d| d > 1);
    let computed = match (model, m.kv_tokens, m.batch_size) {
        (Some(model), Some(t), Some(b)) => {
            Some(model.kv_bytes_per_token * t as f64 * b as f64 / shards.unwrap_or(1) as f64)
        }
        _ => None,
    };
    let diff = match (computed, m.kv_cache_bytes) {
        (Some(c), Some(k)) if c > 0.0 => Some((k as f64 - c) / c * 100.0),
        _ => None,
    };
    Some(MemoryAnalysis {
        kv_cache_computed_bytes: computed,
        kv_cache_diff_pct: diff,
        headroom: headroom(bundle, m, stages, run),
        kv_tokens: m.kv_tokens,
        kv_batch: m.batch_size,
        kv_shards: shards,
    })
}

/// The record, with the tokens the KV cache holds and the batch taken from the run's workload
/// (the context before decode plus the first decode instance's steps, and the batch) where a
/// `--cmd` workload's record has none — it reports bytes, not tokens. NVML's fallback record
/// has no KV cache, so nothing is taken for it.
fn with_workload_tokens(m: &MemoryRecord, bundle: &Bundle) -> MemoryRecord {
    let mut m = m.clone();
    let Some(w) = bundle.workload.as_ref().filter(|_| !m.nvml_used) else {
        return m;
    };
    if m.kv_tokens.is_none() {
        m.kv_tokens = w
            .context_before_decode()
            .map(|c| c + w.steps_of_instance(0).unwrap_or(0));
    }
    if m.batch_size.is_none() {
        m.batch_size = w.batch_size.as_ref().map(|b| b.value);
    }
    m
}

fn headroom(
    bundle: &Bundle,
    m: &MemoryRecord,
    stages: &[StageAnalysis],
    run: &RunMetrics,
) -> Option<Headroom> {
    // The stage with the highest peak (prefill's activations can outgrow the decode's).
    let top = m.stages.iter().max_by_key(|s| s.peak_allocated_bytes)?;
    let (free, total, at_rest) = (m.free_bytes?, m.total_bytes?, m.allocated_bytes?);
    let reserved = m.reserved_bytes.unwrap_or(at_rest);
    let batch = m.batch_size?.max(1);
    let per_seq = top.peak_allocated_bytes.saturating_sub(at_rest) as f64 / batch as f64;
    if per_seq <= 0.0 {
        return None;
    }
    let margin = MARGIN_FRACTION * total as f64;
    let available = free as f64 + reserved.saturating_sub(at_rest) as f64 - margin;
    // What the current batch needs each step is back in the allocator's cache between
    // iterations (reserved but unused), so `available` holds room for the whole batch: the
    // sequences that fit in all, less those running now.
    let fit = (available / per_seq).floor().max(0.0) as u64;
    let extra = fit.saturating_sub(batch);
    let a = stages.iter().find(|a| a.role == StageRole::Decode)?;
    let busy_cap = launch_cap(bundle, a, batch);
    let suggested = match busy_cap {
        Some(cap) => (batch + extra).min(cap.max(batch)),
        None => batch + extra,
    };
    let now = run.decode_tokens_per_s;
    let estimate = now.map(|t| estimate_tokens_per_s(t, batch, suggested, &a.bound));
    let arithmetic = format!(
        "({} free + {} reserved but unused − {} margin, 10% of {}) ÷ {} per sequence \
         ({} peak {} − {} allocated between iterations, ÷ batch {batch}) = {} sequence(s) \
         in all, {} more than the batch of {batch}, at {} tokens of context",
        bytes(free as f64),
        bytes(reserved.saturating_sub(at_rest) as f64),
        bytes(margin),
        bytes(total as f64),
        bytes(per_seq),
        top.stage,
        bytes(top.peak_allocated_bytes as f64),
        bytes(at_rest as f64),
        thousands(fit),
        thousands(extra),
        m.kv_tokens.map_or("?".into(), thousands),
    );
    Some(Headroom {
        bytes_per_sequence: per_seq,
        available_bytes: available,
        margin_bytes: margin,
        extra_sequences: extra,
        suggested_batch: suggested,
        batch,
        decode_tokens_per_s: now,
        estimated_tokens_per_s: estimate,
        bound: a.bound.clone(),
        arithmetic,
    })
}

/// For a launch-bound decode: the batch at which the GPU's busy time per step would fill the
/// step if GPU work grew in proportion to the batch (batch × wall ÷ busy), the most a batch can
/// gain before the decode stops being launch-bound.
fn launch_cap(bundle: &Bundle, a: &StageAnalysis, batch: u64) -> Option<u64> {
    if a.bound != "latency/launch-bound" {
        return None;
    }
    let s = bundle.stage(a.stage)?;
    (s.gpu_busy_ns > 0).then(|| (batch as f64 * s.wall_ns as f64 / s.gpu_busy_ns as f64) as u64)
}

/// Decode tokens/s at `to` sequences from `now` at `from`, if the decode stays bound where it
/// is: launch-bound steps take as long at any batch (tokens/s grows with the batch);
/// compute-bound ones grow with it (tokens/s stays); memory-bound ones are taken to read the
/// same bytes per step, an optimistic bound since the KV cache read grows too.
fn estimate_tokens_per_s(now: f64, from: u64, to: u64, bound: &str) -> f64 {
    match bound {
        "compute-bound" => now,
        _ => now * to as f64 / from as f64,
    }
}

/// The decode's launch-bound and memory-bound recommendations say how far the batch can grow.
pub fn quote_headroom(findings: &mut [Finding], a: &Option<MemoryAnalysis>) {
    let Some(h) = a.as_ref().and_then(|a| a.headroom.as_ref()) else {
        return;
    };
    let decode =
        |f: &Finding| f.stage.as_deref().map(StageRole::of_name) == Some(StageRole::Decode);
    for f in findings
        .iter_mut()
        .filter(|f| matches!(f.id.as_str(), "launch_bound" | "memory_bound") && decode(f))
    {
        f.recommendation.push_str(&format!(
            " Device memory allows {} more sequence(s) at this context length: batch {} is the \
             batch_headroom finding's suggestion.",
            thousands(h.extra_sequences),
            h.suggested_batch
        ));
    }
}

/// The headroom finding, where more sequences fit.
pub fn finding(a: &MemoryAnalysis) -> Option<Finding> {
    let h = a.headroom.as_ref()?;
    if h.extra_sequences == 0 {
        return None;
    }
    let mut evidence = vec![h.arithmetic.clone()];
    if let (Some(now), Some(est)) = (h.decode_tokens_per_s, h.estimated_tokens_per_s) {
        evidence.push(format!(
            "estimate: decode {} tokens/s at batch {} → about {} tokens/s at batch {} if decode \
             stays {} (an estimate, not a measurement; capture at that batch to check)",
            thousands(now.round() as u64),
            h.batch,
            thousands(est.round() as u64),
            h.suggested_batch,
            h.bound
        ));
    }
    Some(Finding {
        id: "batch_headroom".into(),
        stage: Some("decode".into()),
        title: format!(
            "{} more sequence(s) fit in device memory at this context length",
            thousands(h.extra_sequences)
        ),
        evidence,
        recommendation: format!(
            "Raise the batch to {} (inputs.batch_size / --set inputs.batch_size={}) and capture \
             again: the measured decode tokens/s then checks the estimate.",
            h.suggested_batch, h.suggested_batch
        ),
    })
}
