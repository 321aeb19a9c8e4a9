//! The bundle built from the H200 Nsight Systems export must reproduce NVIDIA's own
//! `nsys stats` reports of that export exactly (fixtures `nsys_stats/*.csv`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashMap;
use std::sync::OnceLock;

use common::*;
use llmprof_bundle::{Bundle, Distribution, OpKind};
use llmprof_ingest::{ingest, IngestRequest};

fn bundle() -> &'static Bundle {
    static B: OnceLock<Bundle> = OnceLock::new();
    B.get_or_init(|| {
        let req = IngestRequest {
            nsys: Some(h200("nsys_export.sqlite.gz")),
            ..Default::default()
        };
        ingest(&req, &mut |_| {}).expect("ingest").bundle
    })
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
    let b = bundle();
    let rows = csv_rows(&h200("nsys_stats/nvtx_sum.csv"));
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
        assert_eq!(row["Style"], "PushPop");
    }
}

#[test]
fn stages_equal_nvtx_gpu_proj_sum() {
    let b = bundle();
    for row in csv_rows(&h200("nsys_stats/nvtx_gpu_proj_sum.csv")) {
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

#[test]
fn kernels_equal_cuda_gpu_kern_sum() {
    let b = bundle();
    let rows = csv_rows(&h200("nsys_stats/cuda_gpu_kern_sum.csv"));
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
    let b = bundle();
    let mut unattributed_kernels = 0.0;
    for row in csv_rows(&h200("nsys_stats/nvtx_kern_sum.csv")) {
        let name = row["Kernel Name"].as_str();
        let k = b
            .kernels
            .iter()
            .find(|k| k.name == name)
            .unwrap_or_else(|| panic!("no kernel {name}"));
        if row["NVTX Range"].is_empty() {
            unattributed_kernels += num(&row, "Kern Inst");
            continue;
        }
        let s = stage(b, &row["NVTX Range"]);
        let by = k
            .by_stage
            .iter()
            .find(|x| x.stage == s.id)
            .unwrap_or_else(|| panic!("{name} has no {} row", s.name));
        assert_eq!(
            by.calls as f64,
            num(&row, "Kern Inst"),
            "{name} in {}",
            s.name
        );
        assert_eq!(
            by.total_ns as f64,
            num(&row, "Total Time (ns)"),
            "{name} in {}",
            s.name
        );
    }
    let attributed: u64 = b.stages.iter().map(|s| s.kernels).sum();
    assert_eq!(
        b.totals.kernels as f64 - attributed as f64,
        unattributed_kernels,
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
