//! The Ranks and Communication sections: a multi-rank run's rank table and stage skew, and a
//! rank's collectives and communication/computation overlap per window.

use llmprof_bundle::{Bundle, CommWindow, RankSet};

use crate::fmt::{bytes, ms, ms_f, pct, thousands};
use crate::table::{Column, TableView};

/// One row per rank: its kernels, communication over the whole trace, idle by cause and clock
/// alignment.
pub(super) fn rank_table(b: &Bundle) -> TableView {
    let mut t = TableView::new(vec![
        Column::num("Rank"),
        Column::text("GPU").optional(),
        Column::num("Kernels"),
        Column::num("GPU busy (ms)"),
        Column::num("Comm (ms)"),
        Column::num("Exposed comm (ms)"),
        Column::num("Overlap (%)"),
        Column::num("Host idle (ms)").optional(),
        Column::num("Other idle (ms)").optional(),
        Column::num("Clock offset (ms)").optional(),
    ]);
    let Some(r) = &b.ranks else { return t };
    t = t.from_source(format!(
        "each rank's own trace (ranks/<rank>/), over its whole GPU span; clocks aligned to \
         rank 0 by {}",
        clock_basis(r)
    ));
    for e in &r.ranks {
        let overlap = overlap_pct(e.comm_ns, e.exposed_comm_ns);
        t.push_values(
            vec![
                e.rank.to_string(),
                e.device.clone().unwrap_or_default(),
                thousands(e.kernels),
                ms(e.gpu_busy_ns),
                ms(e.comm_ns),
                ms(e.exposed_comm_ns),
                overlap.map_or_else(|| "–".into(), pct),
                ms(e.host_idle_ns),
                ms(e.other_idle_ns),
                format!("{:.3}", e.clock_offset_ns as f64 / 1e6),
            ],
            vec![
                Some(e.rank as f64),
                None,
                Some(e.kernels as f64),
                Some(e.gpu_busy_ns as f64),
                Some(e.comm_ns as f64),
                Some(e.exposed_comm_ns as f64),
                overlap,
                Some(e.host_idle_ns as f64),
                Some(e.other_idle_ns as f64),
                Some(e.clock_offset_ns as f64),
            ],
        );
    }
    t
}

/// One row per rank of a capture: its own baseline, the nsys pass's overhead on it and its
/// GPU's energy — where the run's record is the group's.
pub(super) fn capture_table(b: &Bundle) -> TableView {
    let mut t = TableView::new(vec![
        Column::num("Rank"),
        Column::text("GPU").optional(),
        Column::num("Prefill (ms)"),
        Column::num("Decode (ms)"),
        Column::num("Prefill energy (J)"),
        Column::num("Decode energy (J)"),
        Column::num("Decode power (W)").optional(),
        Column::num("nsys overhead, decode (%)").optional(),
    ]);
    let Some(r) = &b.ranks else { return t };
    t = t.from_source(
        "each rank's own capture record (ranks/<rank>/bundle.json): medians of its unprofiled \
         baseline iterations, the nsys pass's decode median against it, and its GPU's NVML \
         energy per stage instance; the run's headline, overhead and energy are the group's \
         (each iteration as long as its slowest rank, energy summed over the GPUs)",
    );
    let opt = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or_else(|| "–".into(), f);
    for (e, c) in r
        .ranks
        .iter()
        .filter_map(|e| Some((e, e.capture.as_ref()?)))
    {
        let overhead = (c.overhead.iter())
            .find(|o| o.pass == "nsys" && o.stage == "decode")
            .map(|o| o.overhead_pct);
        let energy = |stage: &str| c.energy.iter().find(|s| s.stage == stage);
        let joules = |stage: &str| energy(stage).map(|s| s.energy_j);
        let watts = energy("decode").map(|s| s.mean_power_w);
        t.push_values(
            vec![
                e.rank.to_string(),
                short_uuid(c.gpu_uuid.as_deref()),
                opt(c.prefill_ns, &ms_f),
                opt(c.decode_ns, &ms_f),
                opt(joules("prefill"), &|v| format!("{v:.2}")),
                opt(joules("decode"), &|v| format!("{v:.2}")),
                opt(watts, &|v| format!("{v:.0}")),
                opt(overhead, &|v| format!("{v:+.1}")),
            ],
            vec![
                Some(e.rank as f64),
                None,
                c.prefill_ns,
                c.decode_ns,
                joules("prefill"),
                joules("decode"),
                watts,
                overhead,
            ],
        );
    }
    t
}

/// `GPU-6eac016f` of `GPU-6eac016f-b72d-…`: enough to tell a host's GPUs apart.
fn short_uuid(uuid: Option<&str>) -> String {
    let u = uuid.unwrap_or_default();
    match u.match_indices('-').nth(1) {
        Some((i, _)) => u[..i].to_string(),
        None => u.to_string(),
    }
}

fn clock_basis(r: &RankSet) -> String {
    r.ranks
        .iter()
        .find(|e| e.rank != r.ranks[0].rank)
        .map_or_else(|| "nothing (one rank)".into(), |e| e.clock_source.clone())
}

fn overlap_pct(comm: u64, exposed: u64) -> Option<f64> {
    (comm > 0).then(|| (comm - exposed.min(comm)) as f64 * 100.0 / comm as f64)
}

/// Per top-level stage: the fastest and slowest rank's median wall and the spread.
pub(super) fn skew_table(b: &Bundle) -> TableView {
    let mut t = TableView::new(vec![
        Column::text("Stage"),
        Column::num("Ranks"),
        Column::num("Fastest (ms)"),
        Column::num("Slowest (ms)"),
        Column::num("Spread (%)"),
        Column::text("Straggler"),
        Column::num("Straggler comm (ms)").optional(),
    ]);
    let Some(r) = &b.ranks else { return t };
    t = t.from_source(
        "per rank, the median wall of the stage's measured instances on that rank; spread = \
         (slowest − fastest) / fastest",
    );
    for s in &r.skew {
        let known: Vec<f64> = s.median_ns.iter().flatten().copied().collect();
        let (Some(fast), Some(slow)) = (
            known.iter().copied().reduce(f64::min),
            known.iter().copied().reduce(f64::max),
        ) else {
            continue;
        };
        let slow_comm = r
            .ranks
            .iter()
            .position(|e| e.rank == s.slowest_rank)
            .and_then(|i| s.comm_ns.get(i).copied())
            .unwrap_or(0);
        t.push_values(
            vec![
                s.stage.clone(),
                known.len().to_string(),
                ms_f(fast),
                ms_f(slow),
                pct(s.spread_pct),
                format!("rank {}", s.slowest_rank),
                ms(slow_comm),
            ],
            vec![
                None,
                Some(known.len() as f64),
                Some(fast),
                Some(slow),
                Some(s.spread_pct),
                Some(s.slowest_rank as f64),
                Some(slow_comm as f64),
            ],
        );
    }
    t
}

/// Communication, computation and idle per window of one rank (the whole trace, then each
/// measured stage).
pub(super) fn comm_windows(b: &Bundle) -> TableView {
    let mut t = TableView::new(vec![
        Column::text("Window"),
        Column::num("Instances"),
        Column::num("Window (ms)"),
        Column::num("Comm (ms)"),
        Column::num("Exposed (ms)"),
        Column::num("Overlap (%)"),
        Column::num("Compute (ms)"),
        Column::num("Idle: comm wait (ms)").optional(),
        Column::num("Idle: host (ms)").optional(),
        Column::num("Idle: other (ms)").optional(),
    ]);
    let Some(c) = &b.communication else { return t };
    t = t.from_source(
        "the rank's GPU ops on every stream: comm = NCCL and other communication kernels, \
         compute = every other kernel; exposed = comm with no compute beside it; idle = no \
         compute kernel, by cause",
    );
    for w in c
        .windows
        .iter()
        .filter(|w| w.stage.is_none() || w.comm_ns > 0)
    {
        push_window(&mut t, w);
    }
    t
}

fn push_window(t: &mut TableView, w: &CommWindow) {
    let overlap = overlap_pct(w.comm_ns, w.exposed_comm_ns);
    t.push_values(
        vec![
            w.name.clone(),
            thousands(w.instances),
            ms(w.window_ns),
            ms(w.comm_ns),
            ms(w.exposed_comm_ns),
            overlap.map_or_else(|| "–".into(), pct),
            ms(w.compute_ns),
            ms(w.comm_wait_ns),
            ms(w.host_ns),
            ms(w.other_ns),
        ],
        vec![
            None,
            Some(w.instances as f64),
            Some(w.window_ns as f64),
            Some(w.comm_ns as f64),
            Some(w.exposed_comm_ns as f64),
            overlap,
            Some(w.compute_ns as f64),
            Some(w.comm_wait_ns as f64),
            Some(w.host_ns as f64),
            Some(w.other_ns as f64),
        ],
    );
}

/// Collectives: of the rank (a single-rank bundle), or of every rank (a multi-rank run).
pub(super) fn collectives(b: &Bundle) -> TableView {
    let mut t = TableView::new(vec![
        Column::num("Rank"),
        Column::text("Collective"),
        Column::text("Group").optional(),
        Column::text("dtype").optional(),
        Column::num("Calls"),
        Column::num("Total (ms)"),
        Column::num("Mean (µs)"),
        Column::num("Message").optional(),
        Column::text("From").optional(),
    ]);
    let per_rank: Vec<(Option<u32>, &[llmprof_bundle::Collective])> =
        match (&b.ranks, &b.communication) {
            (Some(r), _) => r
                .ranks
                .iter()
                .map(|e| (Some(e.rank), &e.collectives[..]))
                .collect(),
            (None, Some(c)) => vec![(
                b.environment.distributed.as_ref().map(|d| d.rank),
                &c.collectives[..],
            )],
            (None, None) => return t,
        };
    t = t.from_source(
        "communication kernels by collective, process group and dtype: the PyTorch profiler's \
         NCCL metadata on each kernel (kernel args), else the kernel name's pattern",
    );
    for (rank, rows) in per_rank {
        for c in rows {
            let mean = c.total_ns as f64 / c.calls.max(1) as f64;
            let group = match (&c.process_group, c.group_size) {
                (Some(g), Some(n)) => format!("{g} ({n} ranks)"),
                (Some(g), None) => g.clone(),
                (None, Some(n)) => format!("{n} ranks"),
                (None, None) => String::new(),
            };
            let message = c
                .in_bytes
                .map(|v| bytes(v as f64))
                .or_else(|| c.in_elements.map(|n| format!("{} elements", thousands(n))));
            t.push_values(
                vec![
                    rank.map_or_else(String::new, |r| r.to_string()),
                    c.collective.clone(),
                    group,
                    c.dtype.clone().unwrap_or_default(),
                    thousands(c.calls),
                    ms(c.total_ns),
                    format!("{:.2}", mean / 1e3),
                    message.unwrap_or_default(),
                    c.source.clone(),
                ],
                vec![
                    rank.map(f64::from),
                    None,
                    None,
                    None,
                    Some(c.calls as f64),
                    Some(c.total_ns as f64),
                    Some(mean),
                    c.in_bytes.map(|v| v as f64),
                    None,
                ],
            );
        }
    }
    t
}

/// The Ranks section's one-line note: which ranks, what is missing, how tables combine them.
pub(super) fn ranks_note(b: &Bundle) -> Option<String> {
    let r = b.ranks.as_ref()?;
    let list: Vec<String> = r.ranks.iter().map(|e| e.rank.to_string()).collect();
    let mut s = format!(
        "{} of a world of {} ranks: {}.",
        r.ranks.len(),
        r.world_size,
        list.join(", ")
    );
    if !r.missing.is_empty() {
        s.push_str(&format!(" Missing: {} rank(s).", r.missing.len()));
    }
    s.push_str(&format!(
        " The tables below are the ranks pooled: {}.",
        r.aggregation
    ));
    Some(s)
}
