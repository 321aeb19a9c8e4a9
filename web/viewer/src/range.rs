//! The kernels of a selected time range: a table by kernel name and the GPU busy % of the
//! range.
//!
//! A GPU op counts in the range if it overlaps it; its time counts only for the overlap, so
//! the totals of adjacent ranges add up to the totals of their union. GPU busy is the union of
//! all kernel, memcpy and memset intervals (every stream) over the range's length, as Nsight
//! Systems computes it; with several ranks side by side, each rank's union over its own
//! streams, summed, over the range's length times the number of GPUs (the mean GPU's busy).

use crate::model::Run;

#[derive(Debug, Clone, PartialEq)]
pub struct RangeRow {
    /// Index into `Run::kernels`.
    pub kernel: u32,
    pub calls: u64,
    /// Overlap with the range, summed.
    pub total_ns: u64,
    /// Whole durations of the same calls, summed (for the mean call duration).
    pub full_ns: u64,
}

impl RangeRow {
    /// Mean duration of the calls, whole (a call cut by the range's edge counts in full).
    pub fn mean_ns(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.full_ns as f64 / self.calls as f64
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RangeStats {
    pub t0: u64,
    pub t1: u64,
    /// By total time, longest first (then by kernel row).
    pub rows: Vec<RangeRow>,
    pub ops: u64,
    /// GPU busy time, summed over the GPUs.
    pub busy_ns: u64,
    /// The GPUs the range covers: 1, or the ranks side by side.
    pub gpus: u32,
}

impl RangeStats {
    /// Busy time over the range's length on every GPU: the mean GPU's busy %.
    pub fn busy_pct(&self) -> f64 {
        if self.t1 <= self.t0 {
            0.0
        } else {
            100.0 * self.busy_ns as f64 / ((self.t1 - self.t0) as f64 * self.gpus.max(1) as f64)
        }
    }
}

/// The ops of one column group overlapping `[a, b)`, as `(start, end, kernel row, stream)`.
fn overlapping<'a>(
    start: &'a [u64],
    dur: &'a [u64],
    kernel: &'a [u32],
    stream: &'a [u32],
    max_dur: u64,
    (a, b): (u64, u64),
) -> impl Iterator<Item = (u64, u64, u32, u32)> + 'a {
    let first = start.partition_point(|&s| s < a.saturating_sub(max_dur));
    (first..start.len())
        .take_while(move |&i| start[i] < b)
        .map(move |i| {
            let s = stream.get(i).copied().unwrap_or(0);
            (start[i], start[i].saturating_add(dur[i]), kernel[i], s)
        })
        .filter(move |&(s, e, _, _)| e > a && s < b)
}

/// The total length of the union of `intervals`.
fn union_ns(intervals: &mut [(u64, u64)]) -> u64 {
    intervals.sort_unstable();
    let mut busy = 0u64;
    let mut cur: Option<(u64, u64)> = None;
    for &(s, e) in intervals.iter() {
        cur = match cur {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                busy += ce - cs;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    if let Some((cs, ce)) = cur {
        busy += ce - cs;
    }
    busy
}

/// Statistics of `[a, b)` (ns from the timeline's start; swapped if reversed).
pub fn range_stats(run: &Run, a: u64, b: u64) -> RangeStats {
    let (a, b) = if a <= b { (a, b) } else { (b, a) };
    if a == b {
        return RangeStats {
            t0: a,
            t1: b,
            rows: Vec::new(),
            ops: 0,
            busy_ns: 0,
            gpus: 1,
        };
    }
    let k = &run.timeline.kernels;
    let m = &run.timeline.mem_ops;
    let max_k = k.dur.iter().copied().max().unwrap_or(0);
    let max_m = m.dur.iter().copied().max().unwrap_or(0);
    let mut rows: Vec<RangeRow> = Vec::new();
    let mut by_kernel: Vec<u32> = vec![u32::MAX; run.kernels.len()];
    // Per GPU (one, or each rank side by side): the ops' intervals within the range.
    let gpus = run.ranks.len().max(1);
    let gpu_of = |stream: u32| {
        run.ranks
            .iter()
            .position(|r| r.streams.contains(&stream))
            .unwrap_or(0)
    };
    let mut intervals: Vec<Vec<(u64, u64)>> = vec![Vec::new(); gpus];
    let mut ops = 0u64;
    let all = overlapping(&k.start, &k.dur, &k.kernel, &k.stream, max_k, (a, b)).chain(
        overlapping(&m.start, &m.dur, &m.kernel, &m.stream, max_m, (a, b)),
    );
    for (s0, e0, kr, stream) in all {
        let (s, e) = (s0.max(a), e0.min(b));
        ops += 1;
        intervals[gpu_of(stream)].push((s, e));
        let slot = match by_kernel.get(kr as usize) {
            Some(&u32::MAX) => {
                by_kernel[kr as usize] = rows.len() as u32;
                rows.push(RangeRow {
                    kernel: kr,
                    calls: 0,
                    total_ns: 0,
                    full_ns: 0,
                });
                rows.len() - 1
            }
            Some(&r) => r as usize,
            None => continue,
        };
        rows[slot].calls += 1;
        rows[slot].total_ns = rows[slot].total_ns.saturating_add(e - s);
        rows[slot].full_ns = rows[slot].full_ns.saturating_add(e0 - s0);
    }
    let busy = intervals.iter_mut().map(|i| union_ns(i)).sum();
    rows.sort_by(|x, y| y.total_ns.cmp(&x.total_ns).then(x.kernel.cmp(&y.kernel)));
    RangeStats {
        t0: a,
        t1: b,
        rows,
        ops,
        busy_ns: busy,
        gpus: gpus as u32,
    }
}
