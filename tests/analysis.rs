//! Analysis of the H200 fixture through the front door: MFU and MBU recomputed by hand, the
//! launch-bound finding with its evidence, and the consistency guard.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common::*;
use llmprof_bundle::{Bundle, StageRole};
use llmprof_ingest::{ingest, IngestRequest, WorkloadFlags};

/// The nsys fixture: two passes, warm-up (prefill + 2 decode steps) and measured (prefill +
/// 16 steps), 512-token prompt, batch 1, a plain forward that computes all 512 logits.
fn nsys_bundle(peak_tflops: Option<f64>) -> Bundle {
    let req = IngestRequest {
        nsys: Some(h200("nsys_export.sqlite.gz")),
        model_config: Some(h200("config.json")),
        workload: WorkloadFlags {
            batch_size: Some(1),
            prompt_tokens: Some(512),
            decode_steps: vec![2, 16],
            prefill_logits: Some(512),
            ..WorkloadFlags::default()
        },
        peak_tflops,
        peak_gbps: peak_tflops.map(|_| 4800.0),
        ..IngestRequest::default()
    };
    let mut b = ingest(&req, &mut |_| {}).unwrap().bundle;
    b.analysis = Some(llmprof_analysis::analyze(&b));
    b
}

// Qwen2.5-0.5B shape (config.json of the fixture).
const H: f64 = 896.0; // hidden
const L: f64 = 24.0; // layers
const NH: f64 = 14.0; // query heads
const NKV: f64 = 2.0; // KV heads
const D: f64 = 64.0; // head dim = 896 / 14
const FFN: f64 = 4864.0;
const V: f64 = 151936.0;

/// Convention (docs/metrics.md): 2 FLOPs per multiply-add; Q,O 4·h·H·d and K,V 4·h·H_kv·d per
/// token per layer; SwiGLU 6·h·I; biases, norms, rotary and softmax not counted.
fn per_token_linear() -> f64 {
    L * (4.0 * H * NH * D + 4.0 * H * NKV * D + 6.0 * H * FFN)
}
const LM_HEAD: f64 = 2.0 * H * V;

/// Prefill of 512 tokens, exact causal attention 4·H·d·s(s+1)/2 per layer, logits for all 512.
fn prefill_flops() -> f64 {
    let s = 512.0;
    s * per_token_linear() + L * 4.0 * NH * D * s * (s + 1.0) / 2.0 + s * LM_HEAD
}

/// One decode step attending `c` keys (the new token included).
fn decode_step_flops(c: f64) -> f64 {
    per_token_linear() + L * 4.0 * NH * D * c + LM_HEAD
}

/// Weights read once, bf16: every parameter but the input embedding table — Q, K, V, O and
/// the SwiGLU matrices, Qwen2's Q/K/V biases, the two RMSNorm weights per layer and the final
/// norm — plus the LM head.
fn weight_bytes() -> f64 {
    let matrices = H * NH * D + 2.0 * H * NKV * D + NH * D * H + 3.0 * H * FFN;
    let biases = NH * D + 2.0 * NKV * D;
    let norms = 2.0 * H;
    (L * (matrices + biases + norms) + H + V * H) * 2.0
}
/// KV cache bytes per token: 2·L·H_kv·d·2.
const KV: f64 = 2.0 * L * NKV * D * 2.0;

#[test]
fn flops_per_token_of_the_fixture_shape_by_hand() {
    // 715,653,120 FLOPs of linear layers per token, 272,269,312 for the LM head.
    assert_eq!(per_token_linear(), 715_653_120.0);
    assert_eq!(LM_HEAD, 272_269_312.0);
    assert_eq!(KV, 12_288.0);
    // 494,032,768 parameters without the input embedding (what `numel()` gives).
    assert_eq!(weight_bytes() / 2.0, 494_032_768.0);
}

#[test]
fn mfu_and_mbu_of_the_fixture_stages_recomputed_by_hand() {
    let b = nsys_bundle(None);
    let a = b.analysis.as_ref().unwrap();
    let peak = a.peak.as_ref().unwrap();
    assert_eq!(
        (peak.name.as_str(), peak.tflops, peak.gbps),
        ("H200 SXM", 989.0, 4800.0)
    );

    let prefill = b.stages.iter().find(|s| s.name == "prefill").unwrap();
    let pa = a.stages.iter().find(|s| s.name == "prefill").unwrap();
    assert_eq!(pa.role, StageRole::Prefill);
    let flops = 2.0 * prefill_flops(); // two instances
    let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * y.abs();
    assert!(
        close(pa.flops.unwrap(), flops),
        "{} vs {flops}",
        pa.flops.unwrap()
    );
    let wall = prefill.wall_ns as f64 * 1e-9; // 0.397911601 s (nvtx_sum)
    assert!(close(pa.mfu.unwrap(), flops / wall / 989e12));
    // "While busy" divides by the union of the stage's GPU activity, not its projected span
    // (0.392074354 s of nvtx_gpu_proj_sum, nearly the whole wall).
    let busy = prefill.gpu_busy_ns as f64 * 1e-9;
    assert!(
        busy < 0.5 * prefill.gpu_proj_ns as f64 * 1e-9,
        "{busy} s busy"
    );
    assert!(close(pa.mfu_busy.unwrap(), flops / busy / 989e12));
    let bytes = 2.0 * (weight_bytes() + 512.0 * KV);
    assert!(
        close(pa.bytes.unwrap(), bytes),
        "{} vs {bytes}",
        pa.bytes.unwrap()
    );
    assert!(close(pa.mbu.unwrap(), bytes / wall / 4800e9));

    let decode = b.stages.iter().find(|s| s.name == "decode").unwrap();
    let da = a.stages.iter().find(|s| s.name == "decode").unwrap();
    // Instance 1: 2 steps, instance 2: 16 steps; step j attends 512 + j keys.
    let steps = |n: u64| {
        (1..=n)
            .map(|j| decode_step_flops(512.0 + j as f64))
            .sum::<f64>()
    };
    let flops = steps(2) + steps(16);
    assert!(
        close(da.flops.unwrap(), flops),
        "{} vs {flops}",
        da.flops.unwrap()
    );
    let step_bytes = |n: u64| {
        (1..=n)
            .map(|j| weight_bytes() + (512.0 + j as f64) * KV)
            .sum::<f64>()
    };
    let bytes = step_bytes(2) + step_bytes(16);
    assert!(
        close(da.bytes.unwrap(), bytes),
        "{} vs {bytes}",
        da.bytes.unwrap()
    );
    let wall = decode.wall_ns as f64 * 1e-9;
    assert!(close(da.mbu.unwrap(), bytes / wall / 4800e9));
    assert!(close(da.mfu.unwrap(), flops / wall / 989e12));
    assert_eq!(da.bound, "latency/launch-bound", "GPU busy 3.2% < 50%");
    // TPOT per instance: wall / steps.
    let tpot = a.run.tpot.as_ref().unwrap();
    let i = &decode.instance_list;
    assert_eq!(
        tpot.min_ns.min(tpot.max_ns),
        (i[0].wall_ns / 2).min(i[1].wall_ns / 16)
    );
    assert_eq!(a.run.generated_tokens, Some(18));
    assert_eq!(a.run.decode_context, vec![[513, 514], [513, 528]]);
}

#[test]
fn decode_is_diagnosed_launch_bound_with_its_evidence() {
    let b = nsys_bundle(None);
    let a = b.analysis.as_ref().unwrap();
    let f = a
        .findings
        .iter()
        .find(|f| f.id == "launch_bound" && f.stage.as_deref() == Some("decode"))
        .expect("decode launch-bound finding");
    let ev = f.evidence.join("\n");
    // 38.3 ms of GPU activity in 1213.4 ms of decode (nvtx_sum), 18,576 launch calls running
    // 18,540 kernels in 18 steps: each call gives the GPU 2.1 µs of work and costs 7.6 µs.
    assert!(ev.contains("GPU busy 3.2% of the decode wall"), "{ev}");
    assert!(
        ev.contains(
            "per decode step (18 steps, --decode-steps flag): 1032 launch calls, 1030 kernels"
        ),
        "{ev}"
    );
    assert!(
        ev.contains("2.1 µs of GPU work per call, each call 7.6 µs on the CPU"),
        "{ev}"
    );
    assert!(
        f.recommendation.contains("CUDA graph"),
        "{}",
        f.recommendation
    );
    assert!(
        a.summary.contains("Decode is launch-bound"),
        "{}",
        a.summary
    );
    // The warm-up prefill (374 ms) against the measured one (24 ms).
    assert!(a.findings.iter().any(|f| f.id == "warmup_outlier"));
}

#[test]
fn ncu_kernels_are_classified() {
    let req = IngestRequest {
        nsys: Some(h200("nsys_export.sqlite.gz")),
        ncu: vec![h200("ncu_decode_raw.csv")],
        ..IngestRequest::default()
    };
    let b = ingest(&req, &mut |_| {}).unwrap().bundle;
    let a = llmprof_analysis::analyze(&b);
    assert_eq!(a.kernels.len(), 30);
    // The first profiled decode kernel (indexSelectSmallIndex): SM 0.14%, memory 0.53% of peak.
    let k = &a.kernels[0];
    assert!(k.name.starts_with("indexSelectSmallIndex"), "{}", k.name);
    assert!(k.bound.starts_with("latency-bound"), "{}", k.bound);
    assert!(a.kernels.iter().all(|k| k.occupancy.is_some()));
}

#[test]
fn ratios_above_one_are_withheld_as_inconsistent() {
    // A peak of 0.001 TFLOP/s makes every MFU exceed 100%.
    let b = nsys_bundle(Some(0.001));
    let a = b.analysis.as_ref().unwrap();
    assert!(a.inconsistent.is_some());
    assert!(a.stages.iter().all(|s| s.mfu.is_none() && s.mbu.is_none()));
    assert_eq!(a.findings[0].id, "inconsistent");
}

#[test]
fn unknown_model_type_gives_na_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.json");
    std::fs::write(&cfg, r#"{"model_type": "bert", "hidden_size": 768}"#).unwrap();
    let req = IngestRequest {
        nsys: Some(h200("nsys_export.sqlite.gz")),
        model_config: Some(cfg),
        ..IngestRequest::default()
    };
    let b = ingest(&req, &mut |_| {}).unwrap().bundle;
    let a = llmprof_analysis::analyze(&b);
    assert_eq!(
        a.model_note.as_deref(),
        Some("FLOPs unknown for model_type bert; give counted FLOPs")
    );
    assert!(a
        .stages
        .iter()
        .all(|s| s.mfu.is_none() && s.flops.is_none()));
    assert!(a.summary.contains("MFU is n/a"), "{}", a.summary);
}

#[test]
fn kineto_shapes_give_the_token_counts() {
    let req = IngestRequest {
        kineto: Some(h200("kineto_trace.json.gz")),
        model_config: Some(h200("config.json")),
        ..IngestRequest::default()
    };
    let b = ingest(&req, &mut |_| {}).unwrap().bundle;
    let w = b.workload.as_ref().unwrap();
    assert_eq!(w.batch_size.as_ref().unwrap().value, 1);
    assert_eq!(w.prompt_tokens.as_ref().unwrap().value, 512);
    assert_eq!(w.decode_steps.as_ref().unwrap().value, vec![64]);
    assert_eq!(w.prefill_logits.as_ref().unwrap().value, 512);
    assert!(w
        .prompt_tokens
        .as_ref()
        .unwrap()
        .source
        .contains("inferred"));
}

#[test]
fn counted_flops_from_metadata_are_shown_beside_analytic() {
    let dir = tempfile::tempdir().unwrap();
    let meta = dir.path().join("metadata.json");
    let counted = prefill_flops() * 1.02;
    std::fs::write(
        &meta,
        format!(r#"{{"prompt_tokens": 512, "decode_steps": [2, 16], "prefill_logits": 512, "counted_flops": {{"prefill": {counted}}}}}"#),
    )
    .unwrap();
    let req = IngestRequest {
        nsys: Some(h200("nsys_export.sqlite.gz")),
        model_config: Some(h200("config.json")),
        metadata: Some(meta),
        ..IngestRequest::default()
    };
    let b = ingest(&req, &mut |_| {}).unwrap().bundle;
    let a = llmprof_analysis::analyze(&b);
    let p = a.stages.iter().find(|s| s.name == "prefill").unwrap();
    // Ratios use the analytic count (the work the model had to do); counted sits beside it.
    assert_eq!(p.flops_source.as_deref(), Some("analytic"));
    assert!((p.counted_vs_analytic_pct.unwrap() - 2.0).abs() < 1e-6);
    // 2% is within the counter's conventions: no mismatch finding.
    assert!(!a.findings.iter().any(|f| f.id == "flops_mismatch"));
}

/// A real H100 capture ran the workload at full clocks: in the passes that time it NVML saw only
/// the idle reason, and the deep run's calibrate pass — one large GEMM that reaches the software
/// power cap on purpose — is not a finding. The same samples marked with a software power cap
/// inside the nsys pass give an evidence line naming the pass, the share of samples and the
/// reason.
#[test]
fn throttling_is_found_only_where_nvml_saw_a_slowdown() {
    let run = fixture("sample-runs/20261122-040409-qwen2.5-0.5b-deep");
    let text = std::fs::read_to_string(run.join("bundle.json")).unwrap();
    let mut b = Bundle::from_json(&text).unwrap();
    let has = |b: &Bundle| {
        llmprof_analysis::analyze(b)
            .findings
            .into_iter()
            .find(|f| f.id == "throttling")
    };
    let workload_lines = |f: Option<llmprof_bundle::Finding>| -> Vec<String> {
        f.map(|f| f.evidence)
            .unwrap_or_default()
            .into_iter()
            .filter(|e| !e.starts_with("calibrate: "))
            .collect()
    };
    let calibrate = b
        .nvml
        .as_ref()
        .unwrap()
        .windows
        .iter()
        .find(|w| w.name == "calibrate")
        .cloned();
    assert!(calibrate.is_some(), "the deep run has a calibrate pass");
    assert!(
        has(&b).is_none(),
        "real capture: no slowdown in a pass that times the workload, calibrate not counted"
    );

    let nvml = b.nvml.as_mut().unwrap();
    let w = nvml
        .windows
        .iter()
        .find(|w| w.name == "nsys")
        .unwrap()
        .clone();
    let inside: Vec<usize> = (0..nvml.t_ns.len())
        .filter(|&i| (w.start_ns..=w.end_ns).contains(&nvml.t_ns[i]))
        .collect();
    assert!(inside.len() > 10);
    for &i in &inside[..10] {
        nvml.throttle_reasons[i] |= 0x4;
    }
    let lines = workload_lines(has(&b));
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert!(line.starts_with("nsys: 10 of "), "{line}");
    assert!(line.contains("software power cap"), "{line}");
}

/// The CUDA-graph decode fixture (H100, tests/fixtures/h100-cuda-graphs) at one trace level,
/// analysed.
fn graph_fixture(level: &str) -> Bundle {
    let dir = fixture("h100-cuda-graphs");
    let req = IngestRequest {
        nsys: Some(dir.join(format!("nsys_{level}_level.sqlite.gz"))),
        model_config: Some(dir.join("config.json")),
        workload: WorkloadFlags {
            batch_size: Some(1),
            prompt_tokens: Some(64),
            decode_steps: vec![16, 16],
            prefill_logits: Some(1),
            ..WorkloadFlags::default()
        },
        ..IngestRequest::default()
    };
    let mut b = ingest(&req, &mut |_| {}).unwrap().bundle;
    b.analysis = Some(llmprof_analysis::analyze(&b));
    b
}

fn finding<'a>(
    b: &'a Bundle,
    id: &str,
    stage: Option<&str>,
) -> Option<&'a llmprof_bundle::Finding> {
    b.analysis
        .as_ref()
        .unwrap()
        .findings
        .iter()
        .find(|f| f.id == id && (stage.is_none() || f.stage.as_deref() == stage))
}

/// At graph level the old rule saw 6% of decode's GPU time (the kernels outside the graph) and
/// called it launch-bound; busy time now includes the graph spans, and the launch facts count
/// one call per graph launch. Both levels agree on the facts the trace can give.
#[test]
fn graph_decode_is_judged_from_launch_calls_with_graph_time_included() {
    let g = graph_fixture("graph");
    let n = graph_fixture("node");
    let facts = |b: &Bundle| {
        let a = b.analysis.as_ref().unwrap();
        a.stages
            .iter()
            .find(|s| s.name == "decode")
            .unwrap()
            .launch
            .clone()
            .unwrap()
    };
    let (fg, fnode) = (facts(&g), facts(&n));
    for f in [&fg, &fnode] {
        assert_eq!(f.steps, Some(32));
        assert_eq!(f.launches_per_step, Some(3.0));
        assert_eq!(f.graph_launches_per_step, Some(1.0));
        assert!(f.graph_share_pct.unwrap() > 90.0, "{f:?}");
    }
    assert_eq!(
        fg.kernels_per_graph, None,
        "graph level: kernels inside graphs unknown"
    );
    assert_eq!(fg.kernels_per_step, None);
    assert_eq!(fnode.kernels_per_graph, Some(40.0));
    assert_eq!(fnode.kernels_per_step, Some(42.0));
    // Graph level: each call gives the GPU 29 µs of work, more than the 22.8 µs call costs:
    // host-bound, not launch-bound. The finding says the kernels already replay as graphs.
    let f = finding(&g, "host_bound", Some("decode")).expect("host-bound decode");
    assert!(
        f.evidence
            .join("\n")
            .contains("32 CUDA graph launches, one call each"),
        "{:?}",
        f.evidence
    );
    assert!(f.recommendation.contains("already replay as CUDA graphs"));
    assert!(finding(&g, "launch_bound", Some("decode")).is_none());
    // The graph traced whole leads the top GPU time instead of the 6% outside it.
    let top = finding(&g, "top_kernels", None).unwrap();
    assert!(
        top.title
            .starts_with("Top GPU time: CUDA graph 4 (cuda graph"),
        "{}",
        top.title
    );
    // Node level: nsys's node tracing makes each cudaGraphLaunch cost 65 µs on the CPU, more
    // than the 27 µs of work it gives: launch-bound, with the launches outside graphs named.
    let f = finding(&n, "launch_bound", Some("decode")).expect("launch-bound decode");
    assert!(f
        .recommendation
        .contains("64 of the 96 launch calls are outside CUDA graphs"));
    assert!(f
        .evidence
        .join("\n")
        .contains("40 kernels per graph launch"));
}

/// A committed sample run, as `llmprof analyze` left it.
fn sample(id: &str) -> Bundle {
    let text = std::fs::read_to_string(fixture(&format!("sample-runs/{id}/bundle.json"))).unwrap();
    let b = Bundle::from_json(&text).unwrap();
    // The stored analysis is what this build computes from the stored measurements.
    assert_eq!(
        b.analysis.as_ref().map(|a| &a.findings),
        Some(&llmprof_analysis::analyze(&b).findings),
        "{id}: re-run `llmprof analyze` on the sample run"
    );
    b
}

/// The H100 eager/compiled pair of qwen2.5-0.5b: the findings move from launches to kernels.
#[test]
fn compiled_decode_moves_the_findings_from_launches_to_kernels() {
    let eager = sample("20261123-154903-qwen2.5-0.5b-standard");
    let compiled = sample("20261123-155206-qwen2.5-0.5b-deep-reduce-overhead");
    assert!(finding(&eager, "launch_bound", Some("decode")).is_some());
    assert!(finding(&eager, "busy_kernels", Some("decode")).is_none());
    assert!(finding(&compiled, "launch_bound", Some("decode")).is_none());
    let f = finding(&compiled, "busy_kernels", Some("decode")).expect("busy decode");
    assert!(f.title.contains("gemm leads"), "{}", f.title);
    let ev = f.evidence.join("\n");
    assert!(
        ev.contains("Nsight Compute on"),
        "GEMM efficiency from ncu: {ev}"
    );
    assert!(ev.contains("to fuse next: elementwise kernels"), "{ev}");
    // The roofline's memory-bound branch, with the GPU busy.
    let m = finding(&compiled, "memory_bound", Some("decode")).expect("memory-bound decode");
    assert!(
        m.evidence.iter().any(|e| e.contains("GPU busy 82.9%")),
        "{:?}",
        m.evidence
    );
    let a = compiled.analysis.as_ref().unwrap();
    let d = a.stages.iter().find(|s| s.name == "decode").unwrap();
    assert_eq!(d.bound, "memory-bound");
    let f = d.launch.as_ref().unwrap();
    assert_eq!(
        (f.launches_per_step, f.graph_launches_per_step),
        (Some(4.0), Some(1.0))
    );
    assert_eq!(f.kernels_per_graph, Some(484.0));
    let c = &compiled.capture.as_ref().unwrap().compile;
    assert!(c.len() == 4 && c.iter().all(|r| r.status == "ok" && r.capture_s.is_some()));
}

/// The fp32, batch-16 compiled run: prefill is compute-bound against the fp32 peak (the
/// target's dtype, not the config's default), and its GEMMs run on the CUDA cores.
#[test]
fn fp32_batch_run_reaches_compute_bound_and_tensor_cores_unused() {
    let b = sample("20261123-160018-qwen2.5-0.5b-light-reduce-overhead");
    let a = b.analysis.as_ref().unwrap();
    let p = a.peak.as_ref().unwrap();
    assert_eq!((p.dtype.as_str(), p.tflops), ("fp32", 67.0));
    let prefill = a.stages.iter().find(|s| s.name == "prefill").unwrap();
    assert_eq!(prefill.bound, "compute-bound");
    assert!(finding(&b, "compute_bound", Some("prefill")).is_some());
    let t = finding(&b, "tensor_cores_unused", None).expect("tensor cores idle");
    assert!(
        t.evidence
            .iter()
            .any(|e| e.contains("FP32 GEMM on the CUDA cores, by name")),
        "{:?}",
        t.evidence
    );
}

/// CUDA 13's CCCL library emits NVTX ranges in its own domain (`CCCL:cub::DeviceScan::…`):
/// they stay in the bundle but are no stage, no MFU row, no comparison row; `show` and the run
/// page list them as library ranges with their GPU time.
#[test]
fn library_ranges_are_kept_but_are_not_stages() {
    let id = "20261122-040129-qwen3-moe-small-standard";
    let b = sample(id);
    let scan = b
        .stages
        .iter()
        .find(|s| s.domain == "CCCL")
        .expect("the sample has CCCL ranges");
    assert!(b.is_library_range(scan));
    assert!(scan.instances > 1000 && scan.gpu_proj_ns > 0);
    let a = b.analysis.as_ref().unwrap();
    assert!(a.stages.iter().all(|s| s.stage != scan.id), "no MFU row");
    let report = llmprof_report::RunReport::of(&b, 10);
    let library = "CCCL:cub::DeviceScan::InclusiveScan";
    assert!(report.library.rows.iter().any(|r| r[0] == library));
    assert!(report.stages.rows.iter().all(|r| !r[0].contains("cub::")));
    let o = llmprof([
        "show".as_ref(),
        fixture(&format!("sample-runs/{id}")).as_os_str(),
    ]);
    let shown = String::from_utf8_lossy(&o.stdout);
    let (stages, rest) = shown
        .split_once("Library ranges")
        .expect("a library section");
    assert!(!stages.contains("cub::"), "{stages}");
    assert!(rest.contains("cub::DeviceScan::InclusiveScan"), "{rest}");
}

/// A range in a non-default domain is a stage when the capture named it (`--stages prefill`
/// or `--stages mydomain:prefill`).
#[test]
fn a_named_domain_is_a_stage() {
    let mut b = Bundle::new("named");
    let mut stage = sample("20261122-040129-qwen3-moe-small-standard").stages[0].clone();
    stage.domain = "mydomain".into();
    b.stages.push(stage.clone());
    assert!(b.is_library_range(&stage));
    for named in [stage.name.clone(), format!("mydomain:{}", stage.name)] {
        b.capture = Some(llmprof_bundle::Capture {
            stage_names: vec![named],
            ..Default::default()
        });
        assert!(!b.is_library_range(&stage));
    }
    stage.domain = String::new();
    assert!(!b.is_library_range(&stage));
}

/// Warm-up ranges fold into one row on top of the stage table; the ranges themselves (and those
/// nested in them) are listed apart.
#[test]
fn warmup_ranges_fold_into_one_row() {
    let b = sample("20261122-035856-deepseek-ocr2-standard");
    let report = llmprof_report::RunReport::of(&b, 10);
    let rows: Vec<&str> = report.stages.rows.iter().map(|r| r[0].as_str()).collect();
    assert_eq!(rows[0], "warm-up (2 ranges)", "{rows:?}");
    assert!(rows[1..].iter().all(|r| !r.contains("warmup")), "{rows:?}");
    let top: Vec<_> = b
        .stages
        .iter()
        .filter(|s| s.depth == 0 && llmprof_bundle::is_warmup(&s.name))
        .collect();
    let wall: u64 = top.iter().map(|s| s.wall_ns).sum();
    assert_eq!(report.stages.rows[0][2], llmprof_report::fmt::ms(wall));
    let warm: Vec<&str> = report.warmup.rows.iter().map(|r| r[0].as_str()).collect();
    assert!(warm.iter().any(|r| r.ends_with("warmup_sam")), "{warm:?}");
    assert!(warm.len() >= top.len());
}

/// The baseline's memory on the H100 (dense and OCR-2 targets): the KV cache the driver measured
/// equals the one computed from the model config, and the headroom is the stated arithmetic of
/// the recorded bytes, recomputed here from `capture.memory` alone.
#[test]
fn memory_record_kv_cache_and_headroom_of_the_sample_runs() {
    for run in [
        "20261123-214632-qwen2.5-0.5b-light",
        "20261123-214828-qwen2.5-0.5b-light",
        "20261123-215011-deepseek-ocr2-light",
    ] {
        let b = llmprof_store::read_bundle(&fixture(&format!("sample-runs/{run}"))).unwrap();
        let m = b
            .capture
            .as_ref()
            .unwrap()
            .memory
            .clone()
            .expect("a memory record");
        let a = llmprof_analysis::analyze(&b);
        let mem = a.memory.as_ref().unwrap();
        let kv = m.kv_cache_bytes.unwrap() as f64;
        let computed = mem.kv_cache_computed_bytes.unwrap();
        assert_eq!(
            kv, computed,
            "{run}: measured KV = 2·L·H_kv·d·bytes × tokens × batch"
        );
        let h = mem.headroom.as_ref().unwrap();
        let top = m
            .stages
            .iter()
            .map(|s| s.peak_allocated_bytes)
            .max()
            .unwrap();
        let at_rest = m.allocated_bytes.unwrap();
        let batch = m.batch_size.unwrap();
        let per_seq = (top - at_rest) as f64 / batch as f64;
        let margin = 0.1 * m.total_bytes.unwrap() as f64;
        let avail =
            m.free_bytes.unwrap() as f64 + (m.reserved_bytes.unwrap() - at_rest) as f64 - margin;
        assert_eq!(h.bytes_per_sequence, per_seq, "{run}");
        // The batch running now is inside that room (its working memory is back in the
        // allocator's cache between iterations): the extra sequences are the rest.
        assert_eq!(
            h.extra_sequences,
            (avail / per_seq).floor() as u64 - batch,
            "{run}"
        );
        assert!(h.suggested_batch > batch && h.suggested_batch <= batch + h.extra_sequences);
        // The finding quotes it, and the decode's launch-bound recommendation points to it.
        let f = a
            .findings
            .iter()
            .find(|f| f.id == "batch_headroom")
            .unwrap();
        assert!(f.evidence[0].contains("÷ batch"), "{:?}", f.evidence);
        let launch = a
            .findings
            .iter()
            .find(|f| f.id == "launch_bound" && f.stage.as_deref() == Some("decode"))
            .unwrap();
        assert!(launch.recommendation.contains("Device memory allows"));
    }
}

/// The OCR-2 headroom prediction checked on the H100: batch 1's analysis and the capture at
/// its suggested batch 20 (`tests/fixtures/h100-headroom-check/`) agree on how many sequences
/// the device holds, and decode at batch 20 reached at least the launch-bound estimate.
#[test]
fn headroom_prediction_holds_at_the_suggested_batch() {
    use std::io::Read;
    let one =
        llmprof_store::read_bundle(&fixture("sample-runs/20261123-215011-deepseek-ocr2-light"))
            .unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(
        std::fs::File::open(fixture(
            "h100-headroom-check/20261124-001126-deepseek-ocr2-light-batch20.bundle.json.gz",
        ))
        .unwrap(),
    )
    .read_to_string(&mut text)
    .unwrap();
    let twenty = llmprof_bundle::Bundle::from_json(&text).unwrap();
    let h = |b: &llmprof_bundle::Bundle| {
        let a = llmprof_analysis::analyze(b);
        let h = a.memory.unwrap().headroom.unwrap();
        (
            h.batch,
            h.extra_sequences,
            h.suggested_batch,
            h.estimated_tokens_per_s,
            a.run.decode_tokens_per_s,
        )
    };
    let (b1, extra1, suggested, estimate, _) = h(&one);
    let (b20, extra20, _, _, measured) = h(&twenty);
    assert_eq!((b1, suggested, b20), (1, 20, 20));
    let (fit1, fit20) = (b1 + extra1, b20 + extra20);
    assert!(
        fit1.abs_diff(fit20) * 20 <= fit1,
        "sequences that fit: {fit1} from batch 1, {fit20} from batch 20"
    );
    let (estimate, measured) = (estimate.unwrap(), measured.unwrap());
    assert!(
        measured >= estimate,
        "batch 20 decode: measured {measured:.1} tok/s, estimated {estimate:.1}"
    );
}
