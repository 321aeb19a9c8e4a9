//! The Top Kernels, Top Operators, memory-operation and Nsight Compute tables.

use llmprof_bundle::{names, Bundle, Kernel, NcuKernel, OpKind};

use crate::fmt::{ms, opt, pct, thousands, us};
use crate::run::source_name;
use crate::table::{Column, TableView};

/// The `top` kernels by GPU time, with Nsight Compute's columns when ncu data exist, and the
/// number of kernels in all.
pub(super) fn kernels(b: &Bundle, top: usize) -> (TableView, usize) {
    let with_ncu = !b.ncu.is_empty();
    let mut columns = vec![
        Column::text("Kernel"),
        Column::text("Category"),
        Column::num("Calls"),
        Column::num("Total (ms)"),
        Column::num("Time (%)"),
        Column::num("Mean (µs)"),
        Column::num("Median (µs)"),
    ];
    if with_ncu {
        columns.extend(
            [
                "SM (%)",
                "Memory (%)",
                "DRAM (%)",
                "Occupancy ach/theo (%)",
                "Tensor pipe (%)",
            ]
            .map(|h| Column::num(h).optional()),
        );
    }
    let source = match b.timing_source {
        Some(s) => format!("{} kernel records; % of all kernel time", source_name(s)),
        None => "kernel records".into(),
    };
    let mut t = TableView::new(columns).from_source(if with_ncu {
        format!("{source}; SM to tensor pipe from Nsight Compute")
    } else {
        source
    });
    let mut ks: Vec<&Kernel> = b
        .kernels
        .iter()
        .filter(|k| k.kind == OpKind::Kernel)
        .collect();
    ks.sort_by(|x, y| y.total_ns.cmp(&x.total_ns).then(x.id.cmp(&y.id)));
    let total = ks.len();
    for k in ks.into_iter().take(top) {
        let mut row = vec![
            names::display_name(&k.name),
            k.category.as_str().to_string(),
            thousands(k.calls),
            ms(k.total_ns),
            pct(k.time_pct),
            us(k.mean_ns),
            us(k.median_ns),
        ];
        if with_ncu {
            let n = k.ncu.first().and_then(|&i| b.ncu.get(i as usize));
            row.extend(ncu_cells(n));
        }
        t.push(row);
    }
    (t, total)
}

/// SM, memory, DRAM, occupancy and tensor-pipe cells of one ncu result (`n/a` without one).
fn ncu_cells(n: Option<&NcuKernel>) -> [String; 5] {
    let f = |v: Option<f64>| opt(v, pct);
    [
        f(n.and_then(|n| n.sm_throughput_pct)),
        f(n.and_then(|n| n.memory_throughput_pct)),
        f(n.and_then(|n| n.dram_throughput_pct)),
        match n {
            Some(n) => format!(
                "{}/{}",
                f(n.achieved_occupancy_pct),
                f(n.theoretical_occupancy_pct)
            ),
            None => "n/a".into(),
        },
        f(n.and_then(|n| n.tensor_pipe_pct)),
    ]
}

/// The `top` operators in the bundle's order (by device time).
pub(super) fn operators(b: &Bundle, top: usize) -> TableView {
    let mut t = TableView::new(vec![
        Column::text("Operator"),
        Column::num("Calls"),
        Column::num("CPU total (ms)"),
        Column::num("CPU self (ms)"),
        Column::num("Device (ms)"),
        Column::num("Device self (ms)"),
        Column::num("Device mean (µs)").optional(),
    ])
    .from_source("PyTorch profiler operators; total = inclusive, self = exclusive");
    for o in b.operators.iter().take(top) {
        t.push(vec![
            o.name.clone(),
            thousands(o.calls),
            ms(o.cpu_total_ns),
            ms(o.cpu_self_ns),
            ms(o.device_ns),
            ms(o.device_self_ns),
            us(o.device_mean_ns),
        ]);
    }
    t
}

/// Memcpy and memset operations.
pub(super) fn memory_ops(b: &Bundle) -> TableView {
    let mut t = TableView::new(vec![
        Column::text("Operation"),
        Column::num("Count"),
        Column::num("Total (ms)"),
        Column::num("MB"),
        Column::num("Median (µs)"),
    ]);
    for k in b.kernels.iter().filter(|k| k.kind != OpKind::Kernel) {
        t.push(vec![
            k.name.clone(),
            thousands(k.calls),
            ms(k.total_ns),
            format!("{:.1}", k.bytes.unwrap_or(0) as f64 / 1e6),
            us(k.median_ns),
        ]);
    }
    t
}

/// The `top` Nsight Compute results by duration.
pub(super) fn ncu(b: &Bundle, top: usize) -> TableView {
    let mut t = TableView::new(vec![
        Column::text("Kernel"),
        Column::text("Range"),
        Column::num("Duration (µs)"),
        Column::num("SM (%)"),
        Column::num("Memory (%)"),
        Column::num("DRAM (%)"),
        Column::num("Occupancy ach/theo (%)"),
        Column::num("Tensor pipe (%)"),
    ])
    .from_source("Nsight Compute, one row per profiled launch");
    let mut rows: Vec<&NcuKernel> = b.ncu.iter().collect();
    rows.sort_by(|a, b| {
        b.duration_ns
            .unwrap_or(0.0)
            .total_cmp(&a.duration_ns.unwrap_or(0.0))
    });
    for n in rows.into_iter().take(top) {
        let name = n
            .kernel
            .and_then(|k| b.kernels.get(k as usize))
            .map(|k| names::display_name(&k.name))
            .unwrap_or_else(|| names::display_name(&n.name));
        let mut row = vec![
            name,
            n.nvtx_range.clone().unwrap_or_default(),
            opt(n.duration_ns, us),
        ];
        row.extend(ncu_cells(Some(n)));
        t.push(row);
    }
    t
}
