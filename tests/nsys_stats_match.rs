//! The bundle built from an Nsight Systems export must reproduce NVIDIA's own `nsys stats`
//! reports of that export exactly: the H200 eager capture (`h200-qwen2-0.5b/nsys_stats/`) and
//! the H100 CUDA-graph decode traced at graph level and at node level
//! (`h100-cuda-graphs/nsys_stats_{graph,node}/`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::common::*;
use llmprof_bundle::{Bundle, Distribution, OpKind, Timeline};
use llmprof_ingest::{ingest, IngestRequest};

fn ingest_nsys(path: std::path::PathBuf) -> Bundle {
    ingest_nsys_with_timeline(path).0
}

fn ingest_nsys_with_timeline(path: std::path::PathBuf) -> (Bundle, Timeline) {
    let req = IngestRequest {
        nsys: Some(path),
        ..Default::default()
    };
    let done = ingest(&req, &mut |_| {}).expect("ingest");
    (
        done.bundle,
        done.timeline
            .expect("a timeline")
            .into_timeline()
            .expect("loads"),
    )
}

fn bundle() -> &'static Bundle {
    static B: OnceLock<Bundle> = OnceLock::new();
    B.get_or_init(|| ingest_nsys(h200("nsys_export.sqlite.gz")))
}

/// The CUDA-graph decode at graph (`graph`) or node (`node`) level, with its stats directory.
fn graphs(level: &str) -> (&'static Bundle, std::path::PathBuf) {
    static G: OnceLock<Bundle> = OnceLock::new();
    static N: OnceLock<Bundle> = OnceLock::new();
    let cell = if level == "graph" { &G } else { &N };
    let b =
        cell.get_or_init(|| ingest_nsys(graphs_fixture(&format!("nsys_{level}_level.sqlite.gz"))));
    (b, graphs_fixture(&format!("nsys_stats_{level}")))
}

fn graphs_fixture(rel: &str) -> std::path::PathBuf {
    fixture(&format!("h100-cuda-graphs/{rel}"))
}

fn stage<'a>(b: &'a Bundle, range: &str) -> &'a llmprof_bundle::Stage {
    // nsys prints `domain:name`, `:name` for the default domain.
    let (domain, name) = range.split_once(':').expect("domain:name");
    b.stages
        .iter()
        .find(|s| s.domain == domain && s.name == name)
        .unwrap_or_else(|| panic!("no stage {range}"))
}

#[test]
fn stages_equal_nvtx_sum() {
    check_nvtx_sum(bundle(), &h200("nsys_stats"));
}

#[test]
fn stages_equal_nvtx_gpu_proj_sum() {
    check_nvtx_gpu_proj_sum(bundle(), &h200("nsys_stats"));
}

#[test]
fn kernels_equal_cuda_gpu_kern_sum() {
    check_cuda_gpu_kern_sum(bundle(), &h200("nsys_stats"));
}

#[test]
fn graph_level_export_equals_nsys_stats() {
    let (b, stats) = graphs("graph");
    check_nvtx_sum(b, &stats);
    check_nvtx_gpu_proj_sum(b, &stats);
    check_cuda_gpu_kern_sum(b, &stats);
}

#[test]
fn node_level_export_equals_nsys_stats() {
    let (b, stats) = graphs("node");
    check_nvtx_sum(b, &stats);
    check_nvtx_gpu_proj_sum(b, &stats);
    check_cuda_gpu_kern_sum(b, &stats);
}

/// A real model's compiled decode at node level: Qwen2.5-0.5B shape, 484 kernels per graph.
#[test]
fn compiled_qwen_node_level_export_equals_nsys_stats() {
    let b = ingest_nsys(graphs_fixture(
        "qwen2.5-0.5b-compiled/nsys_node_level.sqlite.gz",
    ));
    let stats = graphs_fixture("qwen2.5-0.5b-compiled/nsys_stats");
    check_nvtx_sum(&b, &stats);
    check_nvtx_gpu_proj_sum(&b, &stats);
    check_cuda_gpu_kern_sum(&b, &stats);
    check_instance_kernels(&b);
    let d = stage(&b, ":decode");
    // 3 instances x 64 steps, one graph launch per step: NVIDIA counts 4 GPU ops per step.
    assert_eq!(
        (d.gpu_ops, d.graph_launches, d.graph_kernels),
        (768, 192, 192 * 484)
    );
}

/// Per-instance kernel samples of every measured stage add up to the stage's totals, per
/// kernel (its `by_stage` time) and per category (the `by_stage` time of its kernels), on the
/// H200 eager export and the H100 CUDA-graph exports at graph and node level.
#[test]
fn per_instance_kernel_samples_sum_to_the_stage_totals() {
    for b in [bundle(), graphs("graph").0, graphs("node").0] {
        check_instance_kernels(b);
    }
}

fn check_instance_kernels(b: &Bundle) {
    let measured: Vec<u32> = b
        .workload_stages()
        .filter(|s| s.depth == 0 && !llmprof_bundle::is_warmup(&s.name))
        .map(|s| s.id)
        .collect();
    let sampled: Vec<u32> = b.instance_kernels.iter().map(|s| s.stage).collect();
    assert!(!measured.is_empty());
    assert_eq!(
        sampled, measured,
        "{}: the measured stages are sampled",
        b.run_id
    );
    let in_stage = |k: &llmprof_bundle::Kernel, stage: u32| -> u64 {
        k.by_stage
            .iter()
            .filter(|x| x.stage == stage)
            .map(|x| x.total_ns)
            .sum()
    };
    for ik in &b.instance_kernels {
        let st = &b.stages[ik.stage as usize];
        let n = st.instance_list.len();
        for c in &ik.categories {
            assert_eq!(c.ns.len(), n);
            let total: u64 = b
                .kernels
                .iter()
                .filter(|k| k.kind == OpKind::Kernel && k.category == c.category)
                .map(|k| in_stage(k, ik.stage))
                .sum();
            assert_eq!(
                c.ns.iter().sum::<u64>(),
                total,
                "{} {:?}",
                st.name,
                c.category
            );
        }
        let all: u64 = ik.categories.iter().flat_map(|c| &c.ns).sum();
        assert_eq!(
            all, st.kernel_ns,
            "{}: categories sum to the kernel time",
            st.name
        );
        // Each instance's categories sum to its own kernel time.
        for (i, inst) in st.instance_list.iter().enumerate() {
            let sum: u64 = ik.categories.iter().map(|c| c.ns[i]).sum();
            assert_eq!(sum, inst.kernel_ns, "{} instance {i}", st.name);
        }
        // Every top kernel the stage ran has its series, summing to its by_stage time.
        let top: Vec<u32> = b
            .kernels
            .iter()
            .take(llmprof_bundle::TOP_KERNELS)
            .filter(|k| k.kind == OpKind::Kernel && in_stage(k, ik.stage) > 0)
            .map(|k| k.id)
            .collect();
        let series: Vec<u32> = ik.kernels.iter().map(|s| s.kernel).collect();
        assert_eq!(series, top, "{}", st.name);
        for s in &ik.kernels {
            let k = &b.kernels[s.kernel as usize];
            assert_eq!(s.ns.len(), n);
            assert_eq!(
                s.ns.iter().sum::<u64>(),
                in_stage(k, ik.stage),
                "{}",
                k.name
            );
        }
    }
}

/// Graph level: the 16 graph launches per decode instance are busy time and graph launches,
/// not kernels; node level: the same launches ran 40 kernels each. NVIDIA's GPU-op count and
/// the kernel count are both kept.
#[test]
fn graph_launches_and_kernels_at_both_levels() {
    let (g, _) = graphs("graph");
    let (n, _) = graphs("node");
    let decode = |b: &'static Bundle| stage(b, ":decode");
    let (gd, nd) = (decode(g), decode(n));
    assert_eq!((gd.instances, nd.instances), (2, 2));
    // 16 steps x 2 instances, one graph launch per step, at either level.
    assert_eq!((gd.graph_launches, nd.graph_launches), (32, 32));
    // Graph level: only the 2 eager kernels per step are kernels; node level adds 40 per graph.
    assert_eq!((gd.kernels, gd.graph_kernels), (64, 0));
    assert_eq!((nd.kernels, nd.graph_kernels), (64 + 32 * 40, 32 * 40));
    // nvtx_gpu_proj_sum's GPU ops: 32 per instance at graph level, 48 at node level.
    assert_eq!((gd.gpu_ops, nd.gpu_ops), (64, 96));
    // Over 90% of decode's GPU time is inside the graph at either level; this tiny model
    // still leaves the GPU idle most of the step (each replay is ~83 µs of a ~0.5 ms step).
    for s in [gd, nd] {
        let share = s.graph_busy_ns as f64 / s.gpu_busy_ns as f64;
        assert!(share > 0.9, "graph share {share}");
        assert!(s.gpu_busy_pct < 20.0, "busy {:.1}%", s.gpu_busy_pct);
    }
    // Graph spans are busy time at graph level: without them decode would be 6% busy.
    assert_eq!(gd.gpu_busy_ns, 2_782_708);
    assert_eq!(gd.graph_busy_ns, 2_616_242);
    assert_eq!(
        g.totals.graph_trace,
        Some(llmprof_bundle::GraphTrace::Graph)
    );
    assert_eq!(n.totals.graph_trace, Some(llmprof_bundle::GraphTrace::Node));
    assert_eq!((g.totals.graphs, g.totals.graph_launches), (50, 50));
    assert_eq!(
        (n.totals.graph_kernels, n.totals.graph_launches),
        (2000, 50)
    );
    // One `CUDA graph 4` row at graph level; node-level kernels name the same captured graph.
    let row = g.kernels.iter().find(|k| k.kind == OpKind::Graph).unwrap();
    assert_eq!((row.name.as_str(), row.calls), ("CUDA graph 4", 50));
    assert!(g
        .diagnostics
        .iter()
        .any(|d| d.code == "nsys.graphs_traced_whole" && d.count == 50));
    let t = ingest(
        &IngestRequest {
            nsys: Some(graphs_fixture("nsys_node_level.sqlite.gz")),
            ..Default::default()
        },
        &mut |_| {},
    )
    .unwrap()
    .timeline
    .unwrap()
    .into_timeline()
    .unwrap();
    let in_graph4 = t.kernels.graph.iter().filter(|g| **g == Some(4)).count();
    assert_eq!(in_graph4, 2000);
    let mut nodes: Vec<u32> = t
        .kernels
        .graph_node
        .iter()
        .filter_map(|n| n.get())
        .collect();
    nodes.sort_unstable();
    nodes.dedup();
    assert_eq!(nodes, (0..40).collect::<Vec<u32>>(), "40 nodes per graph");
}

fn check_nvtx_sum(b: &Bundle, stats: &std::path::Path) {
    let rows = csv_rows(&stats.join("nvtx_sum.csv"));
    assert_eq!(rows.len(), b.stages.len());
    for row in rows {
        let s = stage(b, &row["Range"]);
        assert_eq!(s.instances as f64, num(&row, "Instances"), "{}", s.name);
        assert_eq!(s.wall_ns as f64, num(&row, "Total Time (ns)"), "{}", s.name);
        assert_eq!(s.wall.min_ns as f64, num(&row, "Min (ns)"));
        assert_eq!(s.wall.max_ns as f64, num(&row, "Max (ns)"));
        assert_1dp(s.wall.mean_ns, num(&row, "Avg (ns)"), "avg");
        assert_1dp(s.wall.median_ns, num(&row, "Med (ns)"), "median");
        assert_1dp(s.wall.std_ns, num(&row, "StdDev (ns)"), "std");
        let style = match s.kind {
            llmprof_bundle::StageKind::StartEnd => "StartEnd",
            _ => "PushPop",
        };
        assert_eq!(row["Style"], style, "{}", s.name);
    }
}

fn check_nvtx_gpu_proj_sum(b: &Bundle, stats: &std::path::Path) {
    let rows = csv_rows(&stats.join("nvtx_gpu_proj_sum.csv"));
    // nsys prints only ranges that GPU work was projected onto: the others have none here.
    for s in &b.stages {
        let listed = rows
            .iter()
            .any(|r| r["Range"] == format!("{}:{}", s.domain, s.name));
        assert!(
            listed || s.gpu_ops == 0,
            "{}: GPU ops nsys did not project",
            s.name
        );
    }
    for row in rows {
        let s = stage(b, &row["Range"]);
        assert_eq!(
            s.gpu_proj_ns as f64,
            num(&row, "Total Proj Time (ns)"),
            "{}",
            s.name
        );
        assert_eq!(s.wall_ns as f64, num(&row, "Total Range Time (ns)"));
        assert_eq!(s.instances as f64, num(&row, "Range Instances"));
        assert_eq!(s.gpu_ops as f64, num(&row, "Total GPU Ops"), "{}", s.name);
        let mut proj: Vec<u64> = s
            .instance_list
            .iter()
            .map(|i| (i.gpu_end_ns.unwrap() - i.gpu_start_ns.unwrap()) as u64)
            .collect();
        let d = Distribution::from_samples(&mut proj);
        assert_eq!(d.min_ns as f64, num(&row, "Proj Min (ns)"));
        assert_eq!(d.max_ns as f64, num(&row, "Proj Max (ns)"));
        assert_1dp(d.mean_ns, num(&row, "Proj Avg (ns)"), "proj avg");
        assert_1dp(d.median_ns, num(&row, "Proj Med (ns)"), "proj median");
        assert_1dp(d.std_ns, num(&row, "Proj StdDev (ns)"), "proj std");
        assert_eq!(s.depth as f64, num(&row, "Avg Range Lvl"));
    }
}

fn check_cuda_gpu_kern_sum(b: &Bundle, stats: &std::path::Path) {
    let rows = csv_rows(&stats.join("cuda_gpu_kern_sum.csv"));
    let kernels: HashMap<&str, &llmprof_bundle::Kernel> = b
        .kernels
        .iter()
        .filter(|k| k.kind == OpKind::Kernel)
        .map(|k| (k.name.as_str(), k))
        .collect();
    assert_eq!(
        rows.len(),
        kernels.len(),
        "one row per distinct demangled name"
    );
    for row in rows {
        let name = row["Name"].as_str();
        let k = kernels
            .get(name)
            .unwrap_or_else(|| panic!("kernel missing or renamed: {name}"));
        assert_eq!(k.calls as f64, num(&row, "Instances"), "{name}");
        assert_eq!(k.total_ns as f64, num(&row, "Total Time (ns)"), "{name}");
        assert_eq!(k.min_ns as f64, num(&row, "Min (ns)"), "{name}");
        assert_eq!(k.max_ns as f64, num(&row, "Max (ns)"), "{name}");
        assert_1dp(k.mean_ns, num(&row, "Avg (ns)"), name);
        assert_1dp(k.median_ns, num(&row, "Med (ns)"), name);
        assert_1dp(k.std_ns, num(&row, "StdDev (ns)"), name);
        assert_1dp(k.time_pct, num(&row, "Time (%)"), name);
    }
    // Same order as nsys: descending total time.
    let ours: Vec<u64> = b
        .kernels
        .iter()
        .filter(|k| k.kind == OpKind::Kernel)
        .map(|k| k.total_ns)
        .collect();
    assert!(ours.windows(2).all(|w| w[0] >= w[1]));
}

#[test]
fn memory_ops_equal_cuda_gpu_mem_time_sum() {
    let b = bundle();
    for row in csv_rows(&h200("nsys_stats/cuda_gpu_mem_time_sum.csv")) {
        let k = b
            .kernels
            .iter()
            .find(|k| k.kind != OpKind::Kernel && k.name == row["Operation"])
            .unwrap_or_else(|| panic!("no row {}", row["Operation"]));
        assert_eq!(k.calls as f64, num(&row, "Count"));
        assert_eq!(k.total_ns as f64, num(&row, "Total Time (ns)"));
        assert_eq!(k.min_ns as f64, num(&row, "Min (ns)"));
        assert_eq!(k.max_ns as f64, num(&row, "Max (ns)"));
        assert_1dp(k.median_ns, num(&row, "Med (ns)"), "median");
        assert_1dp(k.std_ns, num(&row, "StdDev (ns)"), "std");
    }
}

#[test]
fn per_stage_kernel_breakdown_equals_nvtx_kern_sum() {
    let (b, t) = ingest_nsys_with_timeline(h200("nsys_export.sqlite.gz"));
    check_nvtx_kern_sum(&b, &t, &h200("nsys_stats"));
}

/// `nvtx_kern_sum` prints a row per (range, thread, kernel): summed over threads, each is the
/// kernel's row in that stage; rows without a range are the kernels outside every range.
fn check_nvtx_kern_sum(b: &Bundle, timeline: &Timeline, stats: &std::path::Path) {
    let mut expected: HashMap<(String, String), (f64, f64)> = HashMap::new();
    let mut unattributed_kernels = 0.0;
    for row in csv_rows(&stats.join("nvtx_kern_sum.csv")) {
        if row["NVTX Range"].is_empty() {
            unattributed_kernels += num(&row, "Kern Inst");
            continue;
        }
        let e = expected
            .entry((row["NVTX Range"].clone(), row["Kernel Name"].clone()))
            .or_default();
        e.0 += num(&row, "Kern Inst");
        e.1 += num(&row, "Total Time (ns)");
    }
    for ((range, name), (calls, total)) in &expected {
        let k = b
            .kernels
            .iter()
            .find(|k| &k.name == name)
            .unwrap_or_else(|| panic!("no kernel {name}"));
        let s = stage(b, range);
        let by = k
            .by_stage
            .iter()
            .find(|x| x.stage == s.id)
            .unwrap_or_else(|| panic!("{name} has no {} row", s.name));
        assert_eq!(
            (by.calls as f64, by.total_ns as f64),
            (*calls, *total),
            "{name} in {}",
            s.name
        );
    }
    let kernels = b.kernels.iter().filter(|k| k.kind == OpKind::Kernel);
    let rows: usize = kernels.map(|k| k.by_stage.len()).sum();
    assert_eq!(rows, expected.len(), "no (stage, kernel) row nsys lacks");
    let outside = timeline
        .kernels
        .range
        .iter()
        .filter(|r| r.is_none())
        .count();
    assert_eq!(
        outside as f64, unattributed_kernels,
        "kernels outside every range"
    );
}

#[test]
fn device_and_environment_come_from_the_export() {
    let b = bundle();
    let d = b.device.as_ref().expect("device");
    assert_eq!(d.name, "NVIDIA H200");
    assert_eq!(d.sm_count, Some(132));
    assert_eq!(d.memory_bytes, Some(150_109_880_320));
    assert_eq!(d.memory_bandwidth_bytes_per_s, Some(4_814_304_000_000));
    assert_eq!(d.compute_capability.as_deref(), Some("9.0"));
    let e = &b.environment;
    assert_eq!(e.driver_version.as_deref(), Some("580.159.04"));
    assert_eq!(e.cuda_driver_version.as_deref(), Some("13.0"));
    assert_eq!(e.nsys_export_schema.as_deref(), Some("3.20.3"));
    assert_eq!(e.os.as_deref(), Some("Ubuntu 24.04.3 LTS"));
    assert!(e
        .tools
        .iter()
        .any(|t| t.name == "Nsight Systems" && t.version == "2025.3.2.0"));
    assert_eq!(b.captured_at.as_deref(), Some("2026-11-21T23:56:36Z"));
}

#[test]
fn timeline_holds_every_gpu_op_and_range() {
    let b = bundle();
    let req = IngestRequest {
        nsys: Some(h200("nsys_export.sqlite.gz")),
        ..Default::default()
    };
    let t = ingest(&req, &mut |_| {}).unwrap().timeline.unwrap();
    let t = t.into_timeline().unwrap();
    assert_eq!(t.kernels.start.len() as u64, b.totals.kernels);
    assert_eq!(
        t.mem_ops.start.len() as u64,
        b.totals.memcpys + b.totals.memsets
    );
    assert_eq!(t.ranges.start.len(), 4);
    assert!(
        t.kernels.start.windows(2).all(|w| w[0] <= w[1]),
        "sorted by start"
    );
    let kernel_sum: u64 = t.kernels.dur.iter().sum();
    assert_eq!(kernel_sum, b.totals.kernel_ns);
    // Every kernel row id resolves to a kernel row.
    assert!(t
        .kernels
        .kernel
        .iter()
        .all(|&k| b.kernels[k as usize].kind == OpKind::Kernel));
    let staged = t.kernels.stage.iter().filter(|s| s.is_some()).count() as u64;
    assert_eq!(staged, b.stages.iter().map(|s| s.kernels).sum::<u64>());
}

/// NVTX edge cases on an H100 (`h100-nvtx-edges/`): ranges on two threads at once, start/end
/// ranges that overlap without nesting, a start/end range ended on another thread, and kernels
/// that run after their range closed. NVIDIA's `nsys stats` of the same export is the oracle,
/// in both directions: every row it prints is matched, and the bundle has no extra ones.
#[test]
fn nvtx_edge_cases_equal_nsys_stats() {
    let (b, t) = ingest_nsys_with_timeline(fixture("h100-nvtx-edges/nsys_export.sqlite.gz"));
    let stats = fixture("h100-nvtx-edges/nsys_stats");
    check_nvtx_sum(&b, &stats);
    check_nvtx_gpu_proj_sum(&b, &stats);
    check_cuda_gpu_kern_sum(&b, &stats);
    check_nvtx_kern_sum(&b, &t, &stats);
    let cross = stage(&b, ":cross_thread");
    let overlap_b = stage(&b, ":overlap_b");
    assert_eq!(
        (cross.instances, cross.gpu_ops),
        (3, 0),
        "wall kept, no projection"
    );
    assert_eq!(
        (overlap_b.parent, overlap_b.depth),
        (None, 0),
        "overlaps, not nested"
    );
}
