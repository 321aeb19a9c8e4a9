//! `llmprof export RUN --format csv DIR`: the bundle's tables as CSV for spreadsheets —
//! `stages.csv`, `kernels.csv`, `mem_ops.csv`, `operators.csv`, `ncu.csv`. Where a column
//! means what an `nsys stats` report's column means, it has that report's header and number
//! format (integers in ns, means, medians and deviations with one decimal, `Time (%)` with one):
//! `stages.csv` starts with `nvtx_sum`'s columns, `kernels.csv` is `cuda_gpu_kern_sum`'s,
//! `mem_ops.csv` `cuda_gpu_mem_time_sum`'s; llmprof's own columns follow. Cells are text; the
//! caller quotes them.

use llmprof_bundle::{Bundle, Kernel, NcuKernel, OpKind, Stage, StageKind};

/// One CSV file: its name, header and rows of cells.
#[derive(Debug, Clone, PartialEq)]
pub struct CsvTable {
    pub file: &'static str,
    pub header: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
}

/// Every table of `b` (empty ones included, header only).
pub fn tables(b: &Bundle) -> Vec<CsvTable> {
    vec![stages(b), kernels(b), mem_ops(b), operators(b), ncu(b)]
}

/// A mean, median or deviation as `nsys stats` prints it: one decimal.
fn dec1(v: f64) -> String {
    format!("{v:.1}")
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

/// `nvtx_sum`'s columns (`Range` as `domain:name`, the default domain empty), then the
/// projection, GPU work and place of each stage.
fn stages(b: &Bundle) -> CsvTable {
    let total: u64 = b.stages.iter().map(|s| s.wall_ns).sum();
    let rows = b
        .stages
        .iter()
        .map(|s| {
            let mut row = vec![
                dec1(pct(s.wall_ns, total)),
                s.wall_ns.to_string(),
                s.instances.to_string(),
                dec1(s.wall.mean_ns),
                dec1(s.wall.median_ns),
                s.wall.min_ns.to_string(),
                s.wall.max_ns.to_string(),
                dec1(s.wall.std_ns),
                style(s).into(),
                format!("{}:{}", s.domain, s.name),
            ];
            row.extend(stage_extra(b, s));
            row
        })
        .collect();
    CsvTable {
        file: "stages.csv",
        header: vec![
            "Time (%)",
            "Total Time (ns)",
            "Instances",
            "Avg (ns)",
            "Med (ns)",
            "Min (ns)",
            "Max (ns)",
            "StdDev (ns)",
            "Style",
            "Range",
            "Total Proj Time (ns)",
            "Total GPU Ops",
            "Kernel Time (ns)",
            "GPU Busy (ns)",
            "GPU Busy (%)",
            "Launch Calls",
            "Depth",
            "Parent",
            "Library Range",
        ],
        rows,
    }
}

fn style(s: &Stage) -> &'static str {
    match s.kind {
        StageKind::PushPop => "PushPop",
        StageKind::StartEnd => "StartEnd",
        StageKind::Annotation => "Annotation",
    }
}

fn stage_extra(b: &Bundle, s: &Stage) -> Vec<String> {
    vec![
        s.gpu_proj_ns.to_string(),
        s.gpu_ops.to_string(),
        s.kernel_ns.to_string(),
        s.gpu_busy_ns.to_string(),
        dec1(s.gpu_busy_pct),
        s.launches.to_string(),
        s.depth.to_string(),
        opt(s.parent.and_then(|p| b.stage(p)).map(|p| p.name.clone())),
        b.is_library_range(s).to_string(),
    ]
}

fn pct(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 * 100.0 / total as f64
    }
}

/// The distribution columns `cuda_gpu_kern_sum` and `cuda_gpu_mem_time_sum` share.
fn distribution(k: &Kernel) -> [String; 8] {
    [
        dec1(k.time_pct),
        k.total_ns.to_string(),
        k.calls.to_string(),
        dec1(k.mean_ns),
        dec1(k.median_ns),
        k.min_ns.to_string(),
        k.max_ns.to_string(),
        dec1(k.std_ns),
    ]
}

const DISTRIBUTION: [&str; 8] = [
    "Time (%)",
    "Total Time (ns)",
    "Instances",
    "Avg (ns)",
    "Med (ns)",
    "Min (ns)",
    "Max (ns)",
    "StdDev (ns)",
];

/// `cuda_gpu_kern_sum`'s columns (CUDA graph spans of graph-level traces included, their kind
/// saying so), then the kernel's category, short name, kind and CUDA graph calls.
fn kernels(b: &Bundle) -> CsvTable {
    let rows = (b.kernels.iter())
        .filter(|k| matches!(k.kind, OpKind::Kernel | OpKind::Graph))
        .map(|k| {
            let mut row = distribution(k).to_vec();
            row.extend([
                k.name.clone(),
                k.category.as_str().to_string(),
                k.short_name.clone(),
                kind(k.kind).into(),
                k.graph_calls.to_string(),
            ]);
            row
        })
        .collect();
    let mut header = DISTRIBUTION.to_vec();
    header.extend(["Name", "Category", "Short Name", "Kind", "Graph Calls"]);
    CsvTable {
        file: "kernels.csv",
        header,
        rows,
    }
}

fn kind(k: OpKind) -> &'static str {
    match k {
        OpKind::Kernel => "kernel",
        OpKind::Memcpy => "memcpy",
        OpKind::Memset => "memset",
        OpKind::Graph => "graph",
    }
}

/// `cuda_gpu_mem_time_sum`'s columns (`Operation` is the row's name), then its bytes.
/// `Time (%)` is the share of all memcpy and memset time, as that report computes it.
fn mem_ops(b: &Bundle) -> CsvTable {
    let mem = |k: &&Kernel| matches!(k.kind, OpKind::Memcpy | OpKind::Memset);
    let total: u64 = b.kernels.iter().filter(mem).map(|k| k.total_ns).sum();
    let rows = (b.kernels.iter())
        .filter(mem)
        .map(|k| {
            let mut row = distribution(k).to_vec();
            row[0] = dec1(pct(k.total_ns, total));
            row.extend([k.name.clone(), opt(k.bytes)]);
            row
        })
        .collect();
    let mut header = DISTRIBUTION.to_vec();
    header[2] = "Count"; // cuda_gpu_mem_time_sum's name for the instances
    header.extend(["Operation", "Bytes"]);
    CsvTable {
        file: "mem_ops.csv",
        header,
        rows,
    }
}

/// The PyTorch profiler's operators: calls, inclusive and self host and device time.
fn operators(b: &Bundle) -> CsvTable {
    let rows = b
        .operators
        .iter()
        .map(|o| {
            vec![
                o.name.clone(),
                o.calls.to_string(),
                o.cpu_total_ns.to_string(),
                o.cpu_self_ns.to_string(),
                o.device_ns.to_string(),
                o.device_self_ns.to_string(),
                o.gpu_ops.to_string(),
                dec1(o.cpu_mean_ns),
                dec1(o.device_mean_ns),
            ]
        })
        .collect();
    CsvTable {
        file: "operators.csv",
        header: vec![
            "Name",
            "Calls",
            "CPU Total (ns)",
            "CPU Self (ns)",
            "Device Total (ns)",
            "Device Self (ns)",
            "GPU Ops",
            "CPU Avg (ns)",
            "Device Avg (ns)",
        ],
        rows,
    }
}

/// One row per Nsight Compute result, in base units (ns, %, bytes).
fn ncu(b: &Bundle) -> CsvTable {
    let rows = b.ncu.iter().map(ncu_row).collect();
    CsvTable {
        file: "ncu.csv",
        header: vec![
            "ID",
            "Kernel Name",
            "Duration (ns)",
            "SM Throughput (%)",
            "Memory Throughput (%)",
            "DRAM Throughput (%)",
            "Achieved Occupancy (%)",
            "Theoretical Occupancy (%)",
            "Tensor Pipe (%)",
            "L2 Hit Rate (%)",
            "DRAM Read (bytes)",
            "DRAM Write (bytes)",
            "Registers Per Thread",
            "Grid Size",
            "Block Size",
            "NVTX Range",
            "Stream",
            "File",
        ],
        rows,
    }
}

fn ncu_row(n: &NcuKernel) -> Vec<String> {
    let dim = |d: Option<[u32; 3]>| d.map_or(String::new(), |[x, y, z]| format!("({x}, {y}, {z})"));
    vec![
        n.id.to_string(),
        n.name.clone(),
        opt(n.duration_ns),
        opt(n.sm_throughput_pct),
        opt(n.memory_throughput_pct),
        opt(n.dram_throughput_pct),
        opt(n.achieved_occupancy_pct),
        opt(n.theoretical_occupancy_pct),
        opt(n.tensor_pipe_pct),
        opt(n.l2_hit_pct),
        opt(n.dram_bytes_read),
        opt(n.dram_bytes_write),
        opt(n.registers_per_thread),
        dim(n.grid),
        dim(n.block),
        opt(n.nvtx_range.clone()),
        opt(n.stream),
        n.file.clone(),
    ]
}
