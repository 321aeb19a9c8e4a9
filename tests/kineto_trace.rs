//! The PyTorch profiler trace of the H200 workload, ingested on its own (timing source kineto)
//! and next to the nsys export (operators only).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::OnceLock;

use crate::common::*;
use llmprof_bundle::{Bundle, OpKind, StageKind, Timeline};
use llmprof_ingest::{ingest, IngestRequest, Step};

fn kineto_only() -> &'static (Bundle, Timeline) {
    &ingested().run
}

/// The H200 trace ingested alone, and the steps `ingest` reported.
struct Ingested {
    run: (Bundle, Timeline),
    /// `Reading` and `Assembling`, in order.
    steps: Vec<&'static str>,
    /// Each `Read` as its `(bytes, of)`.
    reads: Vec<(u64, Option<u64>)>,
}

fn ingested() -> &'static Ingested {
    static B: OnceLock<Ingested> = OnceLock::new();
    B.get_or_init(|| {
        let req = IngestRequest {
            kineto: Some(h200("kineto_trace.json.gz")),
            ..Default::default()
        };
        let (mut steps, mut reads) = (Vec::new(), Vec::new());
        let i = ingest(&req, &mut |step| match step {
            Step::Read { bytes, of } => reads.push((bytes, of)),
            Step::Reading { .. } => steps.push("reading"),
            Step::Assembling => steps.push("assembling"),
        })
        .expect("ingest");
        let run = (
            i.bundle,
            i.timeline
                .expect("timeline")
                .into_timeline()
                .expect("loads"),
        );
        Ingested { run, steps, reads }
    })
}

/// A long read says how far it has got: bytes of the inflated trace, rising to all of it, of
/// the size its gzip trailer states.
#[test]
fn reading_reports_its_progress_to_the_end() {
    let Ingested { steps, reads, .. } = ingested();
    assert_eq!(steps, &["reading", "assembling"]);
    let inflated = 180_232_411;
    assert!(reads.len() >= 10, "{} reports", reads.len());
    assert!(reads.windows(2).all(|w| w[0].0 <= w[1].0), "{reads:?}");
    assert!(reads.iter().all(|&(_, of)| of == Some(inflated)));
    assert_eq!(reads.last().map(|r| r.0), Some(inflated));
}

#[test]
fn annotations_become_stages_with_all_gpu_work() {
    let (b, _) = kineto_only();
    let names: Vec<&str> = b.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["prefill", "decode"]);
    assert!(b
        .stages
        .iter()
        .all(|s| s.kind == StageKind::Annotation && s.instances == 1));
    // Counted with python over the trace: 66,902 kernels and 154 memsets.
    assert_eq!(b.totals.kernels, 66_902);
    assert_eq!(b.totals.memsets, 154);
    // Every GPU op but two was launched inside prefill or decode: the workload's argmax after
    // prefill (a memset and a reduce_kernel) runs between the two annotations, as in nsys.
    let staged: u64 = b.stages.iter().map(|s| s.gpu_ops).sum();
    assert_eq!(staged, 66_902 + 154 - 2);
    assert_eq!(b.totals.unattributed_gpu_ops, 2);
}

/// The profiler's own `gpu_user_annotation` events span "first to last GPU activity correlated
/// with the annotation": our projected GPU span. Values from the trace:
/// prefill ts 4448858846026.094 dur 56754.232; decode ts 4448858903334.626 dur 2329512.95.
/// The profiler rounds the annotation from its internal timestamps, not from the printed
/// kernel times (prefill's first kernel prints as ...026.095), so ends may differ by 1 ns.
#[test]
fn projected_span_equals_gpu_user_annotation() {
    let (b, _) = kineto_only();
    let expect = [
        ("prefill", 4448858846026094i64, 56754232i64),
        ("decode", 4448858903334626, 2329512950),
    ];
    for (name, start, dur) in expect {
        let s = b.stages.iter().find(|s| s.name == name).unwrap();
        let i = &s.instance_list[0];
        let (gs, ge) = (i.gpu_start_ns.unwrap(), i.gpu_end_ns.unwrap());
        assert!((gs - start).abs() <= 1, "{name} start {gs} vs {start}");
        assert!(
            (ge - (start + dur)).abs() <= 1,
            "{name} end {ge} vs {}",
            start + dur
        );
    }
}

#[test]
fn timestamps_convert_to_exact_nanoseconds() {
    let (b, _) = kineto_only();
    // user_annotation prefill: ts 4448858842985.461 dur 59860.938.
    let p = &b.stages[0].instance_list[0];
    assert_eq!((p.start_ns, p.wall_ns), (4448858842985461, 59860938));
}

#[test]
fn mm_shows_its_gemm_time_through_external_id() {
    let (b, _) = kineto_only();
    let op = |n: &str| b.operators.iter().find(|o| o.name == n).unwrap();
    let mm = op("aten::mm");
    assert!(mm.device_ns > 0 && mm.device_self_ns == mm.device_ns);
    // aten::linear launches nothing itself; its children (addmm, matmul -> mm) do.
    let linear = op("aten::linear");
    assert_eq!(linear.device_self_ns, 0);
    assert!(linear.device_ns >= mm.device_ns);
    // Self columns add up to the device time of every GPU op that names an operator: all
    // 67,056 ops but one kernel launched before any operator (no External id).
    let self_sum: u64 = b.operators.iter().map(|o| o.device_self_ns).sum();
    let gpu_total = b.totals.kernel_ns + b.totals.memset_ns;
    assert!(self_sum <= gpu_total);
    let ops_sum: u64 = b.operators.iter().map(|o| o.gpu_ops).sum();
    assert_eq!(ops_sum, 66_902 + 154 - 1);
    // Per-stage rows partition the calls.
    for o in &b.operators {
        let staged: u64 = o.by_stage.iter().map(|s| s.calls).sum();
        assert!(staged <= o.calls, "{}", o.name);
        assert!(o.cpu_self_ns <= o.cpu_total_ns || o.calls > 0, "{}", o.name);
    }
}

#[test]
fn device_and_versions_from_the_trace_header() {
    let (b, _) = kineto_only();
    let d = b.device.as_ref().unwrap();
    assert_eq!((d.name.as_str(), d.sm_count), ("NVIDIA H200", Some(132)));
    assert_eq!(b.environment.cuda_runtime_version.as_deref(), Some("13.0"));
    assert_eq!(b.environment.cupti_version.as_deref(), Some("130001"));
}

#[test]
fn timeline_matches_totals() {
    let (b, t) = kineto_only();
    assert_eq!(t.kernels.start.len() as u64, b.totals.kernels);
    assert_eq!(t.mem_ops.start.len(), 154);
    assert_eq!(t.streams, vec![7]);
    assert!(t
        .kernels
        .kernel
        .iter()
        .all(|&k| b.kernels[k as usize].kind == OpKind::Kernel));
}

#[test]
fn with_nsys_the_trace_gives_operators_only() {
    let req = IngestRequest {
        nsys: Some(h200("nsys_export.sqlite.gz")),
        kineto: Some(h200("kineto_trace.json.gz")),
        ..Default::default()
    };
    let b = ingest(&req, &mut |_| {}).unwrap().bundle;
    assert_eq!(b.totals.kernels, 20_505, "kernels from nsys");
    assert!(!b.operators.is_empty());
    let mm = b.operators.iter().find(|o| o.name == "aten::mm").unwrap();
    // Operator stages resolve to the nsys stages of the same name.
    let decode = b.stages.iter().find(|s| s.name == "decode").unwrap();
    assert!(mm
        .by_stage
        .iter()
        .any(|s| s.stage == decode.id && s.device_ns > 0));
}

/// The PyTorch profiler's trace of the CUDA-graph decode (H100): kernels replayed from the
/// graph share the correlation id of `cudaGraphLaunch` and belong to the range that launch was
/// called in, with one GPU op per launch as Nsight Systems counts them.
#[test]
fn graph_replayed_kernels_belong_to_the_range_of_their_graph_launch() {
    let req = IngestRequest {
        kineto: Some(fixture("h100-cuda-graphs/kineto_trace.json.gz")),
        ..Default::default()
    };
    let i = ingest(&req, &mut |_| {}).expect("ingest");
    let b = &i.bundle;
    let decode = b.stages.iter().find(|s| s.name == "decode").unwrap();
    // One measured iteration: 16 steps, each one graph launch of 40 kernels, an input copy
    // and the argmax.
    assert_eq!(decode.instances, 1);
    assert_eq!((decode.graph_launches, decode.graph_kernels), (16, 640));
    assert_eq!(decode.kernels, 640 + 32);
    assert_eq!(decode.gpu_ops, 48, "a graph launch is one GPU op");
    assert_eq!(b.totals.graph_trace, Some(llmprof_bundle::GraphTrace::Node));
    assert_eq!(b.totals.graph_kernels, 640);
    // Every graph kernel in the trace is attributed to decode, the range its cudaGraphLaunch
    // was called in (the profiler window holds one prefill and one decode).
    assert_eq!(b.totals.graph_kernels, decode.graph_kernels);
    assert_eq!(b.totals.graph_launches, decode.graph_launches);
}

/// Multi-rank PyTorch-profiler traces from HTA's test data (`hta-multirank/`, MIT): each rank's
/// `distributedInfo` becomes `environment.distributed`, and every NCCL kernel of the trace
/// (NCCL 2.17's `ncclKernel_*` names) lands in the communication category with its calls and
/// time, counted here from the raw JSON.
#[test]
fn distributed_info_and_nccl_kernels_of_each_rank() {
    use flate2::read::GzDecoder;
    for (file, rank, world, groups) in [
        ("nccl_rank0_of_2.json.gz", 0, 2, 1),
        ("sampled_rank-0.json.gz", 0, 128, 0),
        ("sampled_rank-1.json.gz", 1, 128, 0),
    ] {
        let path = fixture(&format!("hta-multirank/{file}"));
        let req = IngestRequest {
            kineto: Some(path.clone()),
            ..Default::default()
        };
        let b = ingest(&req, &mut |_| {}).unwrap().bundle;
        let d = b.environment.distributed.as_ref().expect("distributedInfo");
        assert_eq!(
            (d.rank, d.world_size, d.process_groups.len()),
            (rank, world, groups)
        );
        assert_eq!(d.backend.as_deref(), Some("nccl"));
        let raw: serde_json::Value =
            serde_json::from_reader(GzDecoder::new(std::fs::File::open(&path).unwrap())).unwrap();
        let nccl: Vec<&serde_json::Value> = raw["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["cat"] == "kernel" && e["name"].as_str().unwrap().starts_with("nccl"))
            .collect();
        let comm: Vec<&llmprof_bundle::Kernel> = (b.kernels.iter())
            .filter(|k| k.category == llmprof_bundle::Category::Communication)
            .collect();
        assert!(!nccl.is_empty(), "{file} holds NCCL kernels");
        let calls: u64 = comm.iter().map(|k| k.calls).sum();
        assert_eq!(
            calls,
            nccl.len() as u64,
            "{file}: every NCCL kernel is communication"
        );
        let us: f64 = nccl.iter().map(|e| e["dur"].as_f64().unwrap()).sum();
        let ns: u64 = comm.iter().map(|k| k.total_ns).sum();
        assert!(
            (ns as f64 - us * 1e3).abs() < nccl.len() as f64,
            "{file}: {ns} ns vs {us} µs"
        );
    }
}
