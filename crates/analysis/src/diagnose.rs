//! The diagnosis: rules over measured numbers only. Every finding carries the numbers it rests
//! on, where they came from, and a recommendation that fits the finding.

use llmprof_bundle::{
    Bundle, Category, Finding, HeadlineBasis, KernelAnalysis, LaunchFacts, OpKind, Peak, Stage,
    StageAnalysis, StageRole,
};

use llmprof_report::fmt::{ms_text as ms, thousands, us_text as us};

use crate::summary::capitalize;
use crate::throughput::BUSY_LAUNCH_BOUND_PCT;

/// A kernel shorter than this is dominated by fixed per-launch costs on the GPU side too.
const SHORT_KERNEL_NS: f64 = 10_000.0;

/// Longest kernel name an evidence sentence quotes (templated names run to megabytes); the
/// kernel tables keep the whole name.
const EVIDENCE_NAME_CHARS: usize = 240;

/// Every finding for the bundle, most important first.
pub fn findings(
    bundle: &Bundle,
    stages: &[StageAnalysis],
    kernels: &[KernelAnalysis],
    peak: Option<&Peak>,
    inconsistent: Option<&str>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let src = bundle.timing_source.map_or("trace", |s| s.as_str());
    if let Some(why) = inconsistent {
        out.push(Finding {
            id: "inconsistent".into(),
            stage: None,
            title: "MFU/MBU withheld: the run's numbers are inconsistent".into(),
            evidence: vec![why.to_string()],
            recommendation: "Give the token counts of this very run (--prompt-tokens, \
                             --decode-steps per instance, --batch-size) and check the peak row \
                             (--peak-tflops/--peak-gbps)."
                .into(),
        });
    }
    // Findings concern measured stages with a role: not warm-up, not library-internal ranges.
    let measured = |s: &&Stage| {
        !llmprof_bundle::is_warmup(&s.name) && StageRole::of_name(&s.name) != StageRole::Other
    };
    out.extend(compile_findings(bundle));
    for a in stages.iter().filter(|a| a.role != StageRole::Other) {
        if let Some(s) = bundle.stage(a.stage) {
            out.extend(launch_bound(bundle, s, a, src));
        }
    }
    for a in stages.iter().filter(|a| a.role != StageRole::Other) {
        if let Some(s) = bundle.stage(a.stage) {
            out.extend(busy_kernels(bundle, s, a, src));
        }
    }
    if let Some(f) = top_kernels(bundle, src) {
        out.push(f);
    }
    for a in stages {
        if let Some(s) = bundle.stage(a.stage) {
            if let Some(f) = roofline(s, a, peak) {
                out.push(f);
            }
        }
        if let Some(f) = flops_mismatch(a) {
            out.push(f);
        }
    }
    if let Some(f) = tensor_cores(bundle, kernels) {
        out.push(f);
    }
    if let Some(f) = vision_share(bundle, src) {
        out.push(f);
    }
    for stage in bundle.workload_stages().filter(measured) {
        if let Some(f) = warmup_outlier(stage, src) {
            out.push(f);
        }
    }
    if let Some(f) = throttling(bundle) {
        out.push(f);
    }
    out.extend(crate::communication::findings(bundle));
    if let Some(f) = utilization(bundle, src) {
        out.push(f);
    }
    out
}

/// Counted and analytic FLOPs of a stage disagree by more than 10 %: the counter missed or
/// added work (FlopCounterMode ignores the causal mask and cannot see some fused ops).
fn flops_mismatch(a: &StageAnalysis) -> Option<Finding> {
    let d = a.counted_vs_analytic_pct?;
    if d.abs() <= 10.0 {
        return None;
    }
    Some(Finding {
        id: "flops_mismatch".into(),
        stage: Some(a.name.clone()),
        title: format!(
            "Counted and analytic FLOPs of {} disagree by {d:+.0}%",
            a.name
        ),
        evidence: vec![format!(
            "counted {:.3e} FLOPs (workload metadata) vs analytic {:.3e} (model config)",
            a.counted_flops.unwrap_or(0.0),
            a.analytic_flops.unwrap_or(0.0)
        )],
        recommendation: "MFU uses the analytic count. A counted value far below it usually \
                         means the counter did not see some ops (e.g. grouped-GEMM MoE experts); \
                         far above, that it counted masked or padded work."
            .into(),
    })
}

/// The first instance of a stage far slower than the rest: one-time costs (CUDA context,
/// cuBLAS handles, autotuning, lazy module loading) inside the measured range.
/// Instances already marked as warm-up (`--warmup-instances`) are out of the measurement.
fn warmup_outlier(s: &Stage, src: &str) -> Option<Finding> {
    let (first, rest) = s.instance_list.split_first()?;
    if rest.is_empty() || first.warmup {
        return None;
    }
    let mut others: Vec<u64> = rest.iter().map(|i| i.wall_ns).collect();
    others.sort_unstable();
    let median = others[others.len() / 2].max(1);
    let ratio = first.wall_ns as f64 / median as f64;
    if ratio < 3.0 {
        return None;
    }
    Some(Finding {
        id: "warmup_outlier".into(),
        stage: Some(s.name.clone()),
        title: format!(
            "The first {} instance took {ratio:.0}× the others: warm-up is inside the measurement",
            s.name
        ),
        evidence: vec![
            format!(
                "instance 1: {} wall; the other {} instance(s): median {} ({src} NVTX ranges)",
                ms(first.wall_ns),
                rest.len(),
                ms(median)
            ),
            format!(
                "stage totals and means include the first instance ({} of {} total)",
                ms(first.wall_ns),
                ms(s.wall_ns)
            ),
        ],
        recommendation: "Run warm-up iterations outside the profiled ranges (or give them \
                         another range name) so one-time costs do not skew stage means; judge \
                         steady state from the later instances."
            .into(),
    })
}

/// The GPU idles while the host works. Judged from host launch calls, where a CUDA graph
/// launch is one call however many kernels it ran, and from busy time, which includes the
/// graphs' GPU time at either trace level: launch-bound when each call gives the GPU less work
/// than a short kernel (or less than the call itself costs), host-bound otherwise.
fn launch_bound(bundle: &Bundle, s: &Stage, a: &StageAnalysis, src: &str) -> Option<Finding> {
    // A stage of a few milliseconds in all (a projector's three kernels) is not worth a finding.
    const MIN_WALL_NS: u64 = 5_000_000;
    let f = a.launch.as_ref()?;
    if s.gpu_busy_pct >= BUSY_LAUNCH_BOUND_PCT || s.wall_ns < MIN_WALL_NS {
        return None;
    }
    let (work, call) = (f.gpu_ns_per_launch?, f.launch_call_ns?);
    let launch_bound = work < SHORT_KERNEL_NS || call >= work;
    let mut evidence = vec![
        format!(
            "GPU busy {:.1}% of the {} wall: {} of GPU activity in {} ({src}: union of \
             attributed GPU ops, CUDA graphs included / NVTX range time)",
            s.gpu_busy_pct,
            s.name,
            ms(s.gpu_busy_ns),
            ms(s.wall_ns)
        ),
        format!(
            "{} host launch calls ({} CUDA graph launches, one call each): {} of GPU work per \
             call, each call {} on the CPU ({src} CUDA API trace)",
            thousands(s.launches),
            thousands(s.graph_launches),
            us(work),
            us(call)
        ),
    ];
    let steps_source = bundle
        .workload
        .as_ref()
        .and_then(|w| w.decode_steps.as_ref())
        .map_or("workload", |d| d.source.as_str());
    evidence.extend(per_step_evidence(f, steps_source));
    let graphs = s.graph_launches > 0;
    let decode = a.role == StageRole::Decode;
    let (id, title, recommendation) = if launch_bound {
        let rec = match (graphs, decode) {
            (false, true) => "Capture the decode step in a CUDA graph so one launch replays all \
                its kernels: torch.compile(mode=\"reduce-overhead\") with a static KV cache \
                (llmprof capture --set optimize.compile=reduce-overhead --set \
                optimize.cache=static). torch.compile also fuses the many small elementwise \
                kernels. Until then, more sequences per batch add GPU work at almost no extra \
                launch cost."
                .to_string(),
            (false, false) => "The host cannot issue work fast enough: fuse small kernels \
                (torch.compile), capture the stage in a CUDA graph, and avoid host \
                synchronizations inside it."
                .to_string(),
            (true, _) => format!(
                "{} of the {} launch calls are outside CUDA graphs and each gives the GPU little \
                 work: capture them in the graph too (input copies, sampling), or batch more \
                 sequences so each launch carries more work.",
                thousands(s.launches - s.graph_launches),
                thousands(s.launches)
            ),
        };
        (
            "launch_bound",
            format!(
                "{} is launch-bound: the GPU is busy only {:.1}% of the time",
                capitalize(&s.name),
                s.gpu_busy_pct
            ),
            rec,
        )
    } else {
        let rec = if graphs {
            "The kernels already replay as CUDA graphs and each launch gives the GPU enough work: \
             the idle time is host work between launches (Python, sampling, copying inputs into \
             the graph's buffers). Batch more sequences per step so each replay does more work, \
             move sampling into the compiled step, or replay several steps per graph."
        } else {
            "Each launch gives the GPU enough work: the gaps are host work between launches \
             (Python, data preparation, synchronizations). Profile the host side (nsys with CPU \
             sampling, py-spy) to find it."
        };
        (
            "host_bound",
            format!(
                "{} is host-bound: the GPU is busy only {:.1}% of the time",
                capitalize(&s.name),
                s.gpu_busy_pct
            ),
            rec.to_string(),
        )
    };
    Some(Finding {
        id: id.into(),
        stage: Some(s.name.clone()),
        title,
        evidence,
        recommendation,
    })
}

/// Launch calls, graph launches and kernels per decode step (steps from `steps_source`), and
/// kernels per graph.
fn per_step_evidence(f: &LaunchFacts, steps_source: &str) -> Vec<String> {
    // 1032 launch calls, 1.5 graph launches.
    let count = |x: f64| {
        if x >= 100.0 {
            format!("{x:.0}")
        } else {
            format!("{x:.1}")
        }
    };
    let mut out = Vec::new();
    if let (Some(steps), Some(l)) = (f.steps, f.launches_per_step) {
        let mut line = format!(
            "per decode step ({steps} steps, {steps_source}): {} launch calls",
            count(l)
        );
        if let Some(g) = f.graph_launches_per_step.filter(|&g| g > 0.0) {
            line.push_str(&format!(", {} of them CUDA graph launches", count(g)));
        }
        if let Some(k) = f.kernels_per_step {
            line.push_str(&format!(", {k:.0} kernels"));
        }
        out.push(line);
    }
    if let Some(k) = f.kernels_per_graph {
        out.push(format!(
            "{k:.0} kernels per graph launch; {:.1}% of the stage's GPU time is inside graphs",
            f.graph_share_pct.unwrap_or(0.0)
        ));
    } else if let Some(share) = f.graph_share_pct {
        out.push(format!(
            "{share:.1}% of the stage's GPU time is inside CUDA graphs (traced whole: their \
             kernels are not known one by one)"
        ));
    }
    out
}

/// A stage that keeps the GPU busy: its time is in the kernels now. Names the category that
/// leads, how well its GEMMs use the memory system (analytic bytes over busy time, and
/// Nsight Compute where it profiled them), and which kernels to fuse next.
fn busy_kernels(bundle: &Bundle, s: &Stage, a: &StageAnalysis, src: &str) -> Option<Finding> {
    if s.gpu_busy_pct < BUSY_LAUNCH_BOUND_PCT || s.kernels == 0 {
        return None;
    }
    let mix = stage_mix(bundle, s.id);
    let total: u64 = mix.iter().map(|c| c.1).sum();
    let (lead, lead_ns, _) = *mix.first()?;
    let pct = |ns: u64| ns as f64 * 100.0 / total.max(1) as f64;
    let mut evidence = vec![
        format!(
            "GPU busy {:.1}% of the {} wall ({src}; CUDA graphs included)",
            s.gpu_busy_pct, s.name
        ),
        format!(
            "kernel time by category: {} ({src} kernel table, this stage)",
            mix.iter()
                .take(5)
                .map(|(c, ns, _)| format!("{} {:.0}% ({})", c.as_str(), pct(*ns), ms(*ns)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ];
    evidence.extend(gemm_efficiency(bundle, s, a, &mix));
    let fuse = fuse_next(bundle, s, a, &mix, total);
    evidence.extend(fuse.iter().map(|f| f.0.clone()));
    let memory_bound = a.bound == "memory-bound";
    let recommendation = match lead {
        Category::Gemm if memory_bound => "GEMMs dominate a memory-bound stage: every weight \
            byte is read once per step whatever the batch, so batch more sequences per step, \
            quantize the weights (fp8/int8/int4), or use speculative decoding."
            .to_string(),
        Category::Gemm => "GEMMs dominate: check their efficiency in Nsight Compute \
            (--mode deep), use fp8 where accuracy allows, and avoid padded shapes."
            .to_string(),
        Category::Attention => "Attention dominates: use a fused kernel for this phase (flash \
            or paged attention for decode) and a KV cache layout it reads contiguously."
            .to_string(),
        _ => format!(
            "{} kernels lead: fuse them into their neighbours (torch.compile, fused \
             norm/rotary/SwiGLU kernels).",
            lead.as_str()
        ),
    };
    let recommendation = match fuse {
        Some((_, next)) if next != lead => {
            format!("{recommendation} Then fuse the {} kernels.", next.as_str())
        }
        _ => recommendation,
    };
    Some(Finding {
        id: "busy_kernels".into(),
        stage: Some(s.name.clone()),
        title: format!(
            "{} keeps the GPU busy ({:.1}%): {} leads its kernel time with {:.0}%",
            capitalize(&s.name),
            s.gpu_busy_pct,
            lead.as_str(),
            pct(lead_ns)
        ),
        evidence,
        recommendation,
    })
}

/// Kernel time and calls per category inside one stage, largest first.
fn stage_mix(bundle: &Bundle, stage: u32) -> Vec<(Category, u64, u64)> {
    let mut mix: Vec<(Category, u64, u64)> = Vec::new();
    for k in bundle.kernels.iter().filter(|k| k.kind == OpKind::Kernel) {
        let Some(by) = k.by_stage.iter().find(|b| b.stage == stage) else {
            continue;
        };
        match mix.iter_mut().find(|m| m.0 == k.category) {
            Some(m) => {
                m.1 += by.total_ns;
                m.2 += by.calls;
            }
            None => mix.push((k.category, by.total_ns, by.calls)),
        }
    }
    mix.sort_by_key(|m| std::cmp::Reverse(m.1));
    mix
}

/// GEMM share, the stage's bandwidth while busy, and Nsight Compute's view of its GEMMs.
fn gemm_efficiency(
    bundle: &Bundle,
    s: &Stage,
    a: &StageAnalysis,
    mix: &[(Category, u64, u64)],
) -> Vec<String> {
    let Some(&(_, gemm_ns, gemm_calls)) = mix.iter().find(|m| m.0 == Category::Gemm) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let (Some(g), Some(m)) = (
        a.bytes.map(|b| b / (s.gpu_proj_ns.max(1) as f64)),
        a.mbu_busy,
    ) {
        out.push(format!(
            "while the GPU is busy the stage moves {:.0} GB/s = {:.1}% of peak bandwidth \
             (analytic bytes over the stage's GPU busy time); its GEMMs take {} in {} calls",
            g,
            m * 100.0,
            ms(gemm_ns),
            thousands(gemm_calls)
        ));
    }
    let ncu: Vec<&llmprof_bundle::NcuKernel> = bundle
        .ncu
        .iter()
        .filter(|n| {
            n.kernel
                .and_then(|k| bundle.kernels.get(k as usize))
                .is_some_and(|k| k.category == Category::Gemm)
        })
        .collect();
    let median = |v: Vec<f64>| -> Option<f64> {
        let mut v = v;
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    let dram = median(ncu.iter().filter_map(|n| n.dram_throughput_pct).collect());
    let sm = median(ncu.iter().filter_map(|n| n.sm_throughput_pct).collect());
    if let (Some(d), Some(sm)) = (dram, sm) {
        out.push(format!(
            "Nsight Compute on {} GEMM launches: median DRAM throughput {d:.0}% and SM \
             throughput {sm:.0}% of peak",
            ncu.len()
        ));
    }
    out
}

/// The non-GEMM category to fuse next (elementwise, reduction/norm), with its largest kernels
/// in the stage; `None` when those take under 10% of the stage's kernel time.
fn fuse_next(
    bundle: &Bundle,
    s: &Stage,
    a: &StageAnalysis,
    mix: &[(Category, u64, u64)],
    total: u64,
) -> Option<(String, Category)> {
    let &(cat, ns, calls) = mix
        .iter()
        .find(|m| matches!(m.0, Category::Elementwise | Category::ReductionNorm))?;
    if (ns as f64) < 0.1 * total as f64 {
        return None;
    }
    let mut top: Vec<(&str, u64, u64)> = bundle
        .kernels
        .iter()
        .filter(|k| k.kind == OpKind::Kernel && k.category == cat)
        .filter_map(|k| {
            let by = k.by_stage.iter().find(|b| b.stage == s.id)?;
            Some((k.short_name.as_str(), by.total_ns, by.calls))
        })
        .collect();
    top.sort_by_key(|t| std::cmp::Reverse(t.1));
    let per_step = a
        .launch
        .as_ref()
        .and_then(|f| f.steps)
        .map(|st| format!(", {:.0} per step", calls as f64 / st as f64))
        .unwrap_or_default();
    let names: Vec<String> = top
        .iter()
        .take(3)
        .map(|(n, t, c)| {
            format!(
                "{} ({}, {} calls)",
                llmprof_bundle::names::display_name_short(n, 60),
                ms(*t),
                thousands(*c)
            )
        })
        .collect();
    Some((
        format!(
            "to fuse next: {} kernels, {:.0}% of the stage's kernel time in {} calls{per_step}; \
             largest {}",
            cat.as_str(),
            ns as f64 * 100.0 / total.max(1) as f64,
            thousands(calls),
            names.join(", ")
        ),
        cat,
    ))
}

/// What the capture's compile records say: a pass whose decode step could not be compiled
/// (it measured the eager step), or a compiled step that ran without CUDA graphs.
fn compile_findings(bundle: &Bundle) -> Vec<Finding> {
    let Some(c) = bundle.capture.as_ref() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let failed: Vec<&llmprof_bundle::CompileRecord> =
        c.compile.iter().filter(|r| r.status == "failed").collect();
    if let Some(first) = failed.first() {
        out.push(Finding {
            id: "compile_failed".into(),
            stage: Some("decode".into()),
            title: format!(
                "torch.compile(mode=\"{}\") of the decode step failed: the run measured the \
                 eager step",
                first.mode
            ),
            evidence: failed
                .iter()
                .filter_map(|r| {
                    Some(format!(
                        "{} pass: {} (capture record)",
                        r.pass,
                        r.failure()?
                    ))
                })
                .collect(),
            recommendation: "The numbers of this run are eager numbers. Fix or exclude the part \
                that fails (a data-dependent shape, a Python side effect), or try \
                optimize.compile=default, which tolerates fewer graph constraints."
                .into(),
        });
    }
    let skipped: Vec<String> = c
        .compile
        .iter()
        .flat_map(|r| {
            r.cudagraphs_skipped
                .iter()
                .map(move |m| format!("{} pass: {m}", r.pass))
        })
        .collect();
    if !skipped.is_empty() {
        out.push(Finding {
            id: "cuda_graphs_skipped".into(),
            stage: Some("decode".into()),
            title: "The compiled decode step ran without CUDA graphs".into(),
            evidence: skipped,
            recommendation: "Inductor skipped CUDA graphs for the reason given: remove it (CPU \
                tensors, dynamic shapes: use optimize.cache=static) to get one graph launch per \
                step."
                .into(),
        });
    }
    out
}

/// The three kernels that take the most GPU time. Graphs traced whole (graph-level traces)
/// compete as one row each: their kernels are unknown, but their time is not.
fn top_kernels(bundle: &Bundle, src: &str) -> Option<Finding> {
    let mut kernels: Vec<_> = bundle
        .kernels
        .iter()
        .filter(|k| matches!(k.kind, OpKind::Kernel | OpKind::Graph))
        .collect();
    if kernels.is_empty() {
        return None;
    }
    kernels.sort_by_key(|k| std::cmp::Reverse(k.total_ns));
    let total: u64 = kernels.iter().map(|k| k.total_ns).sum();
    let share = |ns: u64| ns as f64 * 100.0 / total.max(1) as f64;
    let what = if kernels.iter().any(|k| k.kind == OpKind::Graph) {
        "of kernel and CUDA graph time"
    } else {
        "of kernel time"
    };
    let top: Vec<_> = kernels.iter().take(3).collect();
    let evidence = top
        .iter()
        .map(|k| {
            format!(
                "{} ({}): {:.1}% {what}, {} in {} calls of {} mean ({src})",
                llmprof_bundle::names::display_name_short(&k.name, EVIDENCE_NAME_CHARS),
                k.category.as_str(),
                share(k.total_ns),
                ms(k.total_ns),
                thousands(k.calls),
                us(k.mean_ns)
            )
        })
        .collect();
    let mut by_cat: Vec<(Category, u64)> = Vec::new();
    for k in &kernels {
        match by_cat.iter_mut().find(|(c, _)| *c == k.category) {
            Some(e) => e.1 += k.total_ns,
            None => by_cat.push((k.category, k.total_ns)),
        }
    }
    by_cat.sort_by_key(|c| std::cmp::Reverse(c.1));
    let (cat, cat_ns) = by_cat[0];
    let recommendation = match cat {
        Category::Gemm => "GEMMs lead: check they run on tensor cores in bf16/fp16, and that \
                           shapes are not tiny (batch decode requests to grow M)."
            .to_string(),
        Category::Attention => "Attention leads: use a fused kernel (SDPA with the flash or \
                                cuDNN backend, FlashAttention, paged attention for decode)."
            .to_string(),
        Category::Elementwise | Category::ReductionNorm => format!(
            "{} kernels lead ({:.0}% of kernel time): fuse them (torch.compile, fused \
             RMSNorm/rotary/SwiGLU kernels).",
            cat.as_str(),
            cat_ns as f64 * 100.0 / total.max(1) as f64
        ),
        Category::MoeRouting => "MoE routing leads: use a fused MoE kernel (grouped GEMM with \
                                 fused top-k and permutation)."
            .to_string(),
        Category::Communication => "Communication leads: overlap collectives with compute or \
                                    reduce tensor parallelism."
            .to_string(),
        Category::CudaGraph => "CUDA graphs traced whole lead: their kernels are not known one \
                                by one; profile with `nsys --cuda-graph-trace=node` (llmprof \
                                capture's default) to see which kernels inside them cost most."
            .to_string(),
        Category::MemcpyMemset | Category::Other => {
            "Inspect the leading kernels in the timeline.".to_string()
        }
    };
    Some(Finding {
        id: "top_kernels".into(),
        stage: None,
        title: format!(
            "Top GPU time: {} ({}, {:.1}% {what}); by category, {} leads with {:.0}%",
            llmprof_bundle::names::display_name_short(&top[0].name, 80),
            top[0].category.as_str(),
            share(top[0].total_ns),
            cat.as_str(),
            share(cat_ns)
        ),
        evidence,
        recommendation,
    })
}

/// Memory- or compute-bound stages, from arithmetic intensity against the ridge point.
fn roofline(s: &Stage, a: &StageAnalysis, peak: Option<&Peak>) -> Option<Finding> {
    let p = peak?;
    let intensity = a.intensity?;
    if a.bound != "memory-bound" && a.bound != "compute-bound" {
        return None;
    }
    let ridge = p.tflops * 1e12 / (p.gbps * 1e9);
    let mut evidence = vec![format!(
        "arithmetic intensity {intensity:.1} FLOP/byte vs the {} ridge {ridge:.0} FLOP/byte \
         ({} TFLOP/s / {} GB/s)",
        p.name, p.tflops, p.gbps
    )];
    if let (Some(t), Some(m)) = (a.tflops, a.mfu) {
        evidence.push(format!(
            "{t:.1} TFLOP/s achieved = MFU {:.1}% ({} FLOPs over {:.1} ms wall)",
            m * 100.0,
            a.flops_source.as_deref().unwrap_or(""),
            s.wall_ns as f64 / 1e6
        ));
    }
    if let (Some(g), Some(m)) = (a.gbps, a.mbu) {
        evidence.push(format!("{g:.0} GB/s achieved = MBU {:.1}%", m * 100.0));
    }
    evidence.push(format!("GPU busy {:.1}% of the stage", s.gpu_busy_pct));
    let (title, recommendation) = if a.bound == "memory-bound" {
        (
            format!("{} is memory-bound", capitalize(&s.name)),
            if a.role == StageRole::Decode {
                "Decode reads every weight per step: batch more sequences per step, quantize \
                 weights (fp8/int8/int4) and the KV cache, or use speculative decoding."
            } else {
                "Raise arithmetic intensity: larger batches or fused kernels that keep data in \
                 on-chip memory."
            },
        )
    } else {
        (
            format!("{} is compute-bound", capitalize(&s.name)),
            "Compute-bound is the right regime: gains come from lower precision (fp8 tensor \
             cores), better GEMM tiles, and skipping padded work.",
        )
    };
    Some(Finding {
        id: if a.bound == "memory-bound" {
            "memory_bound"
        } else {
            "compute_bound"
        }
        .into(),
        stage: Some(s.name.clone()),
        title,
        evidence,
        recommendation: recommendation.into(),
    })
}

/// GEMMs dominate but a good share of GEMM time runs off the tensor cores: FP32 SIMT GEMMs
/// (by name) or GEMMs whose ncu tensor pipe is idle (< 1 %). A low but non-zero tensor pipe on
/// a small decode GEMM means latency, not unused tensor cores, and does not count.
fn tensor_cores(bundle: &Bundle, kernels: &[KernelAnalysis]) -> Option<Finding> {
    const IDLE_PIPE_PCT: f64 = 1.0;
    let total: u64 = bundle
        .kernels
        .iter()
        .filter(|k| k.kind == OpKind::Kernel)
        .map(|k| k.total_ns)
        .sum();
    let gemm_ns: u64 = bundle
        .kernels
        .iter()
        .filter(|k| k.category == Category::Gemm)
        .map(|k| k.total_ns)
        .sum();
    if total == 0 || (gemm_ns as f64) < 0.3 * total as f64 {
        return None;
    }
    let mut idle: Vec<(u32, String)> = Vec::new();
    for k in bundle
        .kernels
        .iter()
        .filter(|k| k.category == Category::Gemm)
    {
        if fp32_cuda_core_gemm(&k.name) {
            idle.push((k.id, "FP32 GEMM on the CUDA cores, by name".into()));
        } else if let Some(t) = kernels.iter().find_map(|ka| {
            let row = bundle.ncu.get(ka.ncu as usize)?;
            (row.kernel == Some(k.id)).then_some(row.tensor_pipe_pct)?
        }) {
            if t < IDLE_PIPE_PCT {
                idle.push((k.id, format!("tensor pipe {t:.1}% (ncu)")));
            }
        }
    }
    let idle_ns: u64 = idle
        .iter()
        .filter_map(|(id, _)| bundle.kernels.get(*id as usize))
        .map(|k| k.total_ns)
        .sum();
    let share = idle_ns as f64 / gemm_ns.max(1) as f64;
    if share < 0.2 {
        return None;
    }
    let mut evidence = vec![
        format!(
            "GEMMs take {:.0}% of kernel time",
            gemm_ns as f64 * 100.0 / total as f64
        ),
        format!(
            "{:.0}% of GEMM time runs without tensor cores",
            share * 100.0
        ),
    ];
    evidence.extend(idle.iter().take(3).filter_map(|(id, why)| {
        let k = bundle.kernels.get(*id as usize)?;
        Some(format!(
            "{}: {why}, {:.1}% of kernel time",
            llmprof_bundle::names::display_name_short(&k.name, EVIDENCE_NAME_CHARS),
            k.time_pct
        ))
    }));
    Some(Finding {
        id: "tensor_cores_unused".into(),
        stage: None,
        title: "GEMMs dominate but tensor cores sit idle".into(),
        evidence,
        recommendation: "Run the model in bf16/fp16 (or allow TF32 with \
                         torch.backends.cuda.matmul.allow_tf32 = True) so GEMMs use tensor \
                         cores; cast the fp32 pieces (e.g. rotary embeddings) deliberately."
            .into(),
    })
}

/// A GEMM whose name says it multiplies on the CUDA cores in FP32, not on tensor cores:
/// CUTLASS SIMT kernels (`cutlass_80_simt_sgemm_*`), `sgemm`, cuBLAS's `*_ffma_*` kernels
/// (FP32 fused multiply-add; tensor-core kernels say `hmma`/`gmma`/`tf32`), and float gemv /
/// small-N kernels (`gemmSN_TN_kernel<float, ...>`).
fn fp32_cuda_core_gemm(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("simt")
        || n.contains("sgemm")
        || n.contains("_ffma")
        || ((n.contains("gemmsn") || n.contains("gemv")) && n.contains("<float,"))
}

/// For OCR / vision-language runs: how much of prefill the vision side takes.
fn vision_share(bundle: &Bundle, src: &str) -> Option<Finding> {
    let vision: Vec<&Stage> = bundle
        .stages
        .iter()
        .filter(|s| StageRole::of_name(&s.name) == StageRole::Vision)
        .collect();
    let prefill = bundle
        .stages
        .iter()
        .find(|s| StageRole::of_name(&s.name) == StageRole::Prefill)?;
    if vision.is_empty() || prefill.wall_ns == 0 {
        return None;
    }
    // Only top-level vision stages, so sub-stages are not counted twice.
    let top: Vec<&&Stage> = vision
        .iter()
        .filter(|s| {
            s.parent
                .and_then(|p| bundle.stage(p))
                .is_none_or(|p| StageRole::of_name(&p.name) != StageRole::Vision)
        })
        .collect();
    // Per instance, on the wall MFU uses: the baseline's GPU time of a sub-stage (CUDA events)
    // against its prefill median, or the trace's projected GPU time against its prefill range —
    // never a sub-stage range's wall, which closes when the host has enqueued the work.
    let headline = llmprof_report::samples::Samples::of(bundle);
    let per_instance = |s: &Stage| {
        let (ns, basis) = crate::throughput::wall_ns(s, &headline);
        (ns / s.instances.max(1) as f64, basis)
    };
    let times: Vec<(f64, HeadlineBasis)> = top.iter().map(|s| per_instance(s)).collect();
    let basis = match times.iter().all(|t| t.1 == HeadlineBasis::Baseline) {
        true => HeadlineBasis::Baseline,
        false => HeadlineBasis::Trace,
    };
    let prefill_ns = match basis {
        HeadlineBasis::Baseline => per_instance(prefill).0,
        HeadlineBasis::Trace => prefill.wall_ns as f64 / prefill.instances.max(1) as f64,
    };
    let times: Vec<(f64, HeadlineBasis)> = match basis {
        HeadlineBasis::Baseline => times,
        // Some sub-stage lacks GPU timings of the baseline: the trace's for all of them.
        HeadlineBasis::Trace => top
            .iter()
            .map(|s| (s.gpu_proj_ns as f64 / s.instances.max(1) as f64, basis))
            .collect(),
    };
    if prefill_ns <= 0.0 {
        return None;
    }
    let vision_ns: f64 = times.iter().map(|t| t.0).sum();
    let share = vision_ns * 100.0 / prefill_ns;
    let source = match basis {
        HeadlineBasis::Baseline => "the unprofiled baseline: CUDA events per sub-stage, the host \
                                   time of prefill"
            .to_string(),
        HeadlineBasis::Trace => {
            format!("{src}: projected GPU time per sub-stage, NVTX range of prefill")
        }
    };
    let mut evidence = vec![format!(
        "vision stages {} of {} prefill, per instance ({source})",
        ms(vision_ns.round() as u64),
        ms(prefill_ns.round() as u64)
    )];
    for s in &vision {
        evidence.push(format!(
            "{}: {}",
            s.name,
            ms(per_instance(s).0.round() as u64)
        ));
    }
    Some(Finding {
        id: "vision_share".into(),
        stage: Some(prefill.name.clone()),
        title: format!("Vision takes {share:.0}% of prefill"),
        evidence,
        recommendation: if share >= 50.0 {
            "The vision encoder dominates time to first token: use a smaller image resolution \
             mode, batch images, or fuse the encoder's attention (SDPA/flash)."
        } else {
            "The language model dominates prefill; vision is not the first thing to optimize."
        }
        .into(),
    })
}

/// NVML clocks-event reasons that lower the SM clock below what the workload asked for
/// (`nvmlClocksEventReason*` in nvml.h). Idle (0x1), application clocks (0x2), sync boost
/// (0x10) and display clocks (0x100) are not slowdowns and are left out.
const SLOWDOWN_REASONS: [(u64, &str); 5] = [
    (0x4, "software power cap"),
    (0x8, "hardware slowdown"),
    (0x20, "software thermal slowdown"),
    (0x40, "hardware thermal slowdown"),
    (0x80, "hardware power brake"),
];

/// The GPU lowered its clocks (power or thermal) during a pass that times the workload: its
/// timings understate the card. One evidence line per pass window that saw at least one slowed
/// sample (the calibrate pass excluded).
fn throttling(bundle: &Bundle) -> Option<Finding> {
    let nvml = bundle.nvml.as_ref()?;
    let mask: u64 = SLOWDOWN_REASONS.iter().map(|(bit, _)| bit).sum();
    let n = nvml
        .t_ns
        .len()
        .min(nvml.throttle_reasons.len())
        .min(nvml.sm_clock_mhz.len());
    let mut evidence = Vec::new();
    // The calibrate pass runs one GEMM at full power on purpose; reaching the power cap there
    // does not slow the workload's passes, so it is not a finding about them.
    for w in nvml.windows.iter().filter(|w| w.name != "calibrate") {
        let inside: Vec<usize> = (0..n)
            .filter(|&i| (w.start_ns..=w.end_ns).contains(&nvml.t_ns[i]))
            .collect();
        let slowed: Vec<usize> = inside
            .iter()
            .copied()
            .filter(|&i| nvml.throttle_reasons[i] & mask != 0)
            .collect();
        if slowed.is_empty() {
            continue;
        }
        let seen = slowed
            .iter()
            .fold(0u64, |acc, &i| acc | nvml.throttle_reasons[i]);
        let reasons: Vec<&str> = SLOWDOWN_REASONS
            .iter()
            .filter(|(bit, _)| seen & bit != 0)
            .map(|(_, name)| *name)
            .collect();
        let slow_min = slowed.iter().map(|&i| nvml.sm_clock_mhz[i]).min();
        let pass_max = inside.iter().map(|&i| nvml.sm_clock_mhz[i]).max();
        let (slow_min, pass_max) = (slow_min.unwrap_or(0), pass_max.unwrap_or(0));
        evidence.push(format!(
            "{}: {} of {} NVML samples ({:.1}%) slowed by {}; SM clock down to {slow_min} MHz \
             (highest in the pass {pass_max} MHz, {} ms sampling)",
            w.name,
            slowed.len(),
            inside.len(),
            100.0 * slowed.len() as f64 / inside.len() as f64,
            reasons.join(", "),
            nvml.interval_ms
        ));
    }
    if evidence.is_empty() {
        return None;
    }
    Some(Finding {
        id: "throttling".into(),
        stage: None,
        title: "The GPU lowered its clocks during the capture".into(),
        evidence,
        recommendation: "Timings from slowed passes understate this GPU: check the power limit \
                         and cooling (nvidia-smi -q -d PERFORMANCE), then capture again and \
                         compare before acting on kernel times."
            .into(),
    })
}

/// GPU busy share of every stage, in one place.
fn utilization(bundle: &Bundle, src: &str) -> Option<Finding> {
    if bundle.stages.is_empty() {
        return None;
    }
    let evidence = bundle
        .workload_stages()
        .filter(|s| !llmprof_bundle::is_warmup(&s.name))
        .map(|s| {
            // The share is over the stage's window: its wall, extended where GPU work outlasts
            // the range; say so when that makes it differ from busy / wall.
            let of_wall = s.gpu_busy_ns as f64 * 100.0 / s.wall_ns.max(1) as f64;
            let extended = if of_wall > s.gpu_busy_pct + 0.05 {
                " extended to the end of the GPU work that outlasted it"
            } else {
                ""
            };
            format!(
                "{}: GPU busy {:.1}% ({} of {} wall{extended}, {} instance(s), {src})",
                s.name,
                s.gpu_busy_pct,
                ms(s.gpu_busy_ns),
                ms(s.wall_ns),
                s.instances
            )
        })
        .collect();
    Some(Finding {
        id: "gpu_busy".into(),
        stage: None,
        title: "GPU busy share per stage".into(),
        evidence,
        recommendation: format!(
            "Stages below {BUSY_LAUNCH_BOUND_PCT:.0}% busy are bound by the host, not the GPU: \
             fix launches before kernels."
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmprof_bundle::{Distribution, StageInstance, StageKind};

    fn stage(id: u32, name: &str, parent: Option<u32>, wall_ns: u64) -> Stage {
        Stage {
            id,
            domain: String::new(),
            name: name.into(),
            kind: StageKind::PushPop,
            parent,
            parents: Vec::new(),
            depth: parent.map_or(0, |_| 1),
            instances: 1,
            wall_ns,
            wall: Distribution::from_samples(&mut [wall_ns]),
            gpu_proj_ns: wall_ns,
            gpu_ops: 10,
            kernel_ns: wall_ns,
            kernels: 10,
            launches: 10,
            launch_api_ns: 1000,
            gpu_busy_ns: wall_ns,
            gpu_busy_pct: 100.0,
            graph_launches: 0,
            graph_kernels: 0,
            graph_busy_ns: 0,
            instance_list: vec![StageInstance {
                start_ns: 0,
                end_ns: wall_ns as i64,
                wall_ns,
                tid: 1,
                gpu_ops: 10,
                kernel_ns: wall_ns,
                gpu_start_ns: Some(0),
                gpu_end_ns: Some(wall_ns as i64),
                gpu_busy_ns: wall_ns,
                warmup: false,
            }],
        }
    }

    #[test]
    fn vision_share_of_an_ocr_prefill() {
        // DeepSeek-OCR style nesting: prefill > vision > {sam, vision_encoder, projector}.
        let mut b = Bundle::new("ocr");
        b.stages = vec![
            stage(0, "prefill", None, 100_000_000),
            stage(1, "vision", Some(0), 60_000_000),
            stage(2, "sam", Some(1), 40_000_000),
            stage(3, "vision_encoder", Some(1), 15_000_000),
            stage(4, "projector", Some(1), 1_000_000),
        ];
        let f = vision_share(&b, "nsys").unwrap();
        assert_eq!(f.title, "Vision takes 60% of prefill");
        assert!(
            f.evidence[0].contains("60.0 ms of 100.0 ms"),
            "{:?}",
            f.evidence
        );
        assert!(f.recommendation.contains("vision encoder dominates"));
    }

    #[test]
    fn busy_stages_are_not_launch_bound() {
        let mut b = Bundle::new("x");
        b.stages = vec![stage(0, "decode", None, 10_000_000)];
        let a = crate::throughput::stages(
            &b,
            Err("no model"),
            None,
            &llmprof_report::samples::Samples::of(&b),
        );
        assert!(launch_bound(&b, &b.stages[0], &a[0], "nsys").is_none());
    }

    #[test]
    fn fp32_gemms_on_cuda_cores_by_name() {
        // Names from the H100 fp32 capture (cuBLAS ffma, CUTLASS SIMT, float gemv) and bf16
        // tensor-core kernels that must not match.
        for name in [
            "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel_trmm",
            "void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>(cutlass_80_simt_sgemm_64x64_8x5_tn_align1::Params)",
            "void gemmSN_TN_kernel<float, 128, 16, 2, 4, 8, 9, false, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>>(cublasGemmSmallNParams<float const, float, float>)",
        ] {
            assert!(fp32_cuda_core_gemm(name), "{name}");
        }
        for name in [
            "nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT",
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
            "std::enable_if<!T7, void>::type internal::gemvx::kernel<int, int, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, (bool)0>(T13)",
        ] {
            assert!(!fp32_cuda_core_gemm(name), "{name}");
        }
    }
}
