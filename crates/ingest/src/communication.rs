//! A rank's communication: collectives by type, process group and dtype (accumulated by the
//! converter as GPU ops arrive), and communication, computation and idle time per window
//! (computed from the finished timeline, once warm-up instances are known). Definitions in
//! `llmprof_bundle`'s `ranks.rs`.

use std::collections::HashMap;

use llmprof_bundle::{
    names, Bundle, Category, Collective, CommWindow, Communication, OpKind, OptU32, Timeline,
};

use crate::records::CommArgs;

/// [`Collective::source`] of rows from the PyTorch profiler's NCCL metadata.
pub const FROM_ARGS: &str = "kernel args";
/// [`Collective::source`] of rows from the kernel name's pattern.
pub const FROM_NAME: &str = "kernel name";

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    collective: String,
    process_group: Option<String>,
    group_size: Option<u32>,
    dtype: Option<String>,
    from_args: bool,
}

#[derive(Debug, Default)]
struct Acc {
    calls: u64,
    total_ns: u64,
    in_elements: Option<u64>,
}

/// Communication kernels grouped as the converter sees them.
#[derive(Debug, Default)]
pub(crate) struct Collectives {
    rows: HashMap<Key, Acc>,
}

impl Collectives {
    /// Counts a kernel if it is a communication kernel: by its NCCL metadata where the trace
    /// gives it, else by its name.
    /// Counts one kernel: by its NCCL args, else by its name when `communication_by_name`
    /// (`names::category`, which the caller computes once per name).
    pub(crate) fn add(
        &mut self,
        name: &str,
        comm: Option<CommArgs<'_>>,
        communication_by_name: bool,
        dur: u64,
    ) {
        let key = match comm {
            Some(c) => Key {
                collective: names::collective_of_arg(c.collective),
                process_group: c.process_group.map(str::to_string),
                group_size: c.group_size,
                dtype: c.dtype.map(str::to_string),
                from_args: true,
            },
            None if communication_by_name => Key {
                collective: names::collective(name).unwrap_or("unknown").to_string(),
                process_group: None,
                group_size: None,
                dtype: None,
                from_args: false,
            },
            None => return,
        };
        let acc = self.rows.entry(key).or_default();
        acc.calls += 1;
        acc.total_ns += dur;
        if let Some(n) = comm.and_then(|c| c.in_elements) {
            acc.in_elements = Some(acc.in_elements.unwrap_or(0).saturating_add(n));
        }
    }

    /// The rows, by total time (largest first), then collective, process group, group size,
    /// dtype and source.
    pub(crate) fn finish(self) -> Vec<Collective> {
        let mut out: Vec<Collective> = self
            .rows
            .into_iter()
            .map(|(k, a)| Collective {
                in_bytes: a
                    .in_elements
                    .zip(k.dtype.as_deref().and_then(dtype_bytes))
                    .map(|(n, b)| n.saturating_mul(b)),
                collective: k.collective,
                process_group: k.process_group,
                group_size: k.group_size,
                dtype: k.dtype,
                calls: a.calls,
                total_ns: a.total_ns,
                in_elements: a.in_elements,
                source: if k.from_args { FROM_ARGS } else { FROM_NAME }.to_string(),
            })
            .collect();
        // Every field of the key, so ties never fall to the map's (random) order.
        out.sort_by(|a, b| {
            let key = |c: &Collective| {
                (
                    std::cmp::Reverse(c.total_ns),
                    c.collective.clone(),
                    c.process_group.clone(),
                    c.group_size,
                    c.dtype.clone(),
                    c.source.clone(),
                )
            };
            key(a).cmp(&key(b))
        });
        out
    }
}

/// Bytes per element of a PyTorch dtype as its NCCL metadata names it (`Float`, `BFloat16`,
/// `c10::BFloat16`, `float`); `None` for one it does not know.
fn dtype_bytes(dtype: &str) -> Option<u64> {
    let d = dtype.rsplit("::").next()?.to_ascii_lowercase();
    Some(match d.as_str() {
        "double" | "float64" | "long" | "int64" | "complexfloat" => 8,
        "float" | "float32" | "int" | "int32" => 4,
        "half" | "float16" | "bfloat16" | "short" | "int16" => 2,
        "byte" | "char" | "bool" | "int8" | "uint8" | "signed char" | "unsigned char" => 1,
        _ if d.starts_with("float8") => 1,
        _ => return None,
    })
}

/// The rank's communication, or `None` when its trace ran no communication kernel.
pub fn of(
    bundle: &Bundle,
    timeline: &Timeline,
    collectives: Vec<Collective>,
) -> Option<Communication> {
    if collectives.is_empty() {
        return None;
    }
    let spans = Spans::of(bundle, timeline);
    let mut windows = vec![spans.window(None, "whole trace", &[spans.extent()])];
    for stage in bundle.workload_stages() {
        let w: Vec<(i64, i64)> = stage
            .measured_instances()
            .filter_map(|(_, i)| {
                Some((
                    i.gpu_start_ns? - timeline.t0_ns,
                    i.gpu_end_ns? - timeline.t0_ns,
                ))
            })
            .filter(|(s, e)| e > s)
            .collect();
        if !w.is_empty() {
            windows.push(spans.window(Some(stage.id), &stage.name, &w));
        }
    }
    Some(Communication {
        collectives,
        windows,
    })
}

/// A rank's GPU time as merged intervals (relative to the timeline's `t0_ns`): communication
/// kernels, computation kernels, and every op with, per interval, when the op that opened it
/// was launched.
struct Spans {
    comm: Vec<(i64, i64)>,
    compute: Vec<(i64, i64)>,
    /// Every op merged; `launched[i]`: the launch call's start of the op that opened `all[i]`.
    all: Vec<(i64, i64)>,
    launched: Vec<Option<i64>>,
}

impl Spans {
    fn of(bundle: &Bundle, timeline: &Timeline) -> Spans {
        let comm_row: Vec<bool> = bundle
            .kernels
            .iter()
            .map(|k| k.kind == OpKind::Kernel && k.category == Category::Communication)
            .collect();
        let k = &timeline.kernels;
        let calls = &timeline.calls;
        let call_start = |c: Option<&OptU32>| {
            c.and_then(|c| c.get())
                .and_then(|c| calls.start.get(c as usize).copied())
        };
        // The timeline's kernels come by start: their unions are merged as they come.
        let mut comm = Union::default();
        let mut compute = Union::default();
        let mut ops: Vec<(i64, i64, Option<i64>)> =
            Vec::with_capacity(k.start.len() + timeline.mem_ops.start.len());
        for i in 0..k.start.len() {
            let (s, e) = interval(k.start[i], k.dur[i]);
            let is_comm = comm_row.get(k.kernel[i] as usize).copied().unwrap_or(false);
            if is_comm { &mut comm } else { &mut compute }.add(s, e);
            ops.push((s, e, call_start(calls.kernel_call.get(i))));
        }
        let m = &timeline.mem_ops;
        for i in 0..m.start.len() {
            let (s, e) = interval(m.start[i], m.dur[i]);
            ops.push((s, e, call_start(calls.mem_op_call.get(i))));
        }
        ops.sort_unstable_by_key(|o| (o.0, o.1));
        let (all, launched) = merge_with_opener(&ops);
        drop(ops);
        Spans {
            comm: comm.finish(),
            compute: compute.finish(),
            all,
            launched,
        }
    }

    /// First op start to last op end.
    fn extent(&self) -> (i64, i64) {
        match (self.all.first(), self.all.last()) {
            (Some(f), Some(l)) => (f.0, l.1),
            _ => (0, 0),
        }
    }

    /// Communication, computation and idle time summed over `windows`.
    fn window(&self, stage: Option<u32>, name: &str, windows: &[(i64, i64)]) -> CommWindow {
        let mut w = CommWindow {
            stage,
            name: name.to_string(),
            instances: windows.len() as u64,
            ..CommWindow::default()
        };
        for &(ws, we) in windows {
            let comm = clip(&self.comm, ws, we);
            let compute = clip(&self.compute, ws, we);
            let all = clip(&self.all, ws, we);
            let both = intersection_len(comm, compute);
            let (host, idle) = self.gaps(ws, we);
            let comm_ns = total(comm);
            let compute_ns = total(compute);
            w.window_ns += span(ws, we);
            w.comm_ns += comm_ns;
            w.compute_ns += compute_ns;
            w.exposed_comm_ns += comm_ns - both;
            w.host_ns += host;
            // Busy with neither kind of kernel (memcpy, memset), or idle not for the host.
            let comm_or_compute = comm_ns + compute_ns - both;
            w.other_ns += (idle - host) + total(all).saturating_sub(comm_or_compute);
        }
        w.comm_wait_ns = w.exposed_comm_ns;
        w.overlap_pct = if w.comm_ns == 0 {
            0.0
        } else {
            (w.comm_ns - w.exposed_comm_ns) as f64 * 100.0 / w.comm_ns as f64
        };
        w
    }

    /// Idle time (no op on any stream) inside `[ws, we)`: how much of it waited for the host,
    /// and all of it. A gap waited for the host when the op that ends it was launched after
    /// the gap began; a gap the window cuts off at its end has no such op and is not host's.
    fn gaps(&self, ws: i64, we: i64) -> (u64, u64) {
        let first = self.all.partition_point(|&(_, e)| e <= ws);
        let mut host = 0;
        let mut idle = 0;
        let mut cursor = ws;
        for i in first..self.all.len() {
            let (s, e) = self.all[i];
            if s >= we {
                idle += span(cursor, we);
                return (host, idle);
            }
            if s > cursor {
                let gap = span(cursor, s);
                idle += gap;
                if self.launched[i].is_some_and(|l| l > cursor) {
                    host += gap;
                }
            }
            cursor = cursor.max(e);
            if cursor >= we {
                return (host, idle);
            }
        }
        idle += span(cursor, we);
        (host, idle)
    }
}

fn interval(start: u64, dur: u64) -> (i64, i64) {
    let s = i64::try_from(start).unwrap_or(i64::MAX);
    (s, s.saturating_add(i64::try_from(dur).unwrap_or(i64::MAX)))
}

fn span(a: i64, b: i64) -> u64 {
    crate::convert::span(a, b)
}

/// The union of intervals, as disjoint sorted intervals. Intervals added in start order are
/// merged as they come; one added out of order (a timeline not sorted by start, as an old or
/// edited file may be) makes `finish` sort and merge everything again, so the result is the
/// same either way.
#[derive(Debug, Default)]
struct Union {
    merged: Vec<(i64, i64)>,
    /// Set once an interval came out of order: `merged` then holds them all, unmerged.
    unsorted: bool,
}

impl Union {
    fn add(&mut self, s: i64, e: i64) {
        if self.unsorted {
            self.merged.push((s, e));
            return;
        }
        match self.merged.last_mut() {
            Some(last) if s < last.0 => {
                self.unsorted = true;
                self.merged.push((s, e));
            }
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => self.merged.push((s, e)),
        }
    }

    fn finish(self) -> Vec<(i64, i64)> {
        if !self.unsorted {
            return self.merged;
        }
        merge(self.merged)
    }
}

/// Sorted, disjoint union of intervals.
fn merge(mut v: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    v.sort_unstable();
    let mut u = Union::default();
    for (s, e) in v {
        u.add(s, e);
    }
    u.merged
}

/// [`merge`] of ops sorted by start, keeping the launch time of the op that opens each
/// merged interval.
fn merge_with_opener(ops: &[(i64, i64, Option<i64>)]) -> (Vec<(i64, i64)>, Vec<Option<i64>>) {
    // Whether each op opens an interval: it starts after every op before it ended. Asked twice,
    // to allocate the result once at its size (millions of ops may merge into nearly as many).
    let opens = || {
        let mut end = i64::MIN;
        ops.iter().enumerate().map(move |(i, &(s, e, _))| {
            let opens = i == 0 || s > end;
            end = end.max(e);
            opens
        })
    };
    let n = opens().filter(|&o| o).count();
    let mut all: Vec<(i64, i64)> = Vec::with_capacity(n);
    let mut launched = Vec::with_capacity(n);
    for (&(s, e, l), opens) in ops.iter().zip(opens()) {
        match all.last_mut() {
            Some(last) if !opens => last.1 = last.1.max(e),
            _ => {
                all.push((s, e));
                launched.push(l);
            }
        }
    }
    (all, launched)
}

/// The parts of merged intervals inside a window, clipped as they are read (a window can
/// hold most of a trace's millions of intervals: they are not copied).
#[derive(Debug, Clone, Copy)]
struct Clipped<'a> {
    v: &'a [(i64, i64)],
    ws: i64,
    we: i64,
}

impl Clipped<'_> {
    fn len(&self) -> usize {
        self.v.len()
    }

    fn get(&self, i: usize) -> (i64, i64) {
        let (s, e) = self.v[i];
        (s.max(self.ws), e.min(self.we))
    }
}

/// The parts of merged intervals `v` inside `[ws, we)`.
fn clip(v: &[(i64, i64)], ws: i64, we: i64) -> Clipped<'_> {
    let first = v.partition_point(|&(_, e)| e <= ws);
    let len = v[first..].partition_point(|&(s, _)| s < we);
    Clipped {
        v: &v[first..first + len],
        ws,
        we,
    }
}

fn total(v: Clipped<'_>) -> u64 {
    (0..v.len())
        .map(|i| v.get(i))
        .map(|(s, e)| span(s, e))
        .sum()
}

/// Length of the intersection of two sorted, disjoint interval lists.
fn intersection_len(a: Clipped<'_>, b: Clipped<'_>) -> u64 {
    let (mut i, mut j, mut sum) = (0, 0, 0u64);
    while i < a.len() && j < b.len() {
        let (ai, bj) = (a.get(i), b.get(j));
        let (s, e) = (ai.0.max(bj.0), ai.1.min(bj.1));
        if e > s {
            sum += span(s, e);
        }
        if ai.1 < bj.1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_union_fed_in_any_order_is_the_sorted_merge() {
        // Touching, nested, overlapping and disjoint intervals, zero-length ones too.
        let sorted = [
            (0, 5),
            (2, 3),
            (5, 9),
            (7, 20),
            (20, 20),
            (30, 31),
            (31, 40),
            (50, 60),
        ];
        let want = merge(sorted.to_vec());
        assert_eq!(want, [(0, 20), (30, 40), (50, 60)]);
        let mut orders = vec![sorted.to_vec()];
        let mut reversed = sorted.to_vec();
        reversed.reverse();
        orders.push(reversed);
        let mut swapped = sorted.to_vec();
        swapped.swap(2, 6);
        orders.push(swapped);
        for order in orders {
            let mut u = Union::default();
            for (s, e) in order.iter().copied() {
                u.add(s, e);
            }
            assert_eq!(u.finish(), want, "{order:?}");
        }
    }

    /// Found by the `kineto` fuzz target (the whole and piecewise reads disagreed): two
    /// broadcasts tied on time, collective, group and dtype, apart only in group size, came
    /// out in the hash map's random order. Every key field now orders the rows.
    #[test]
    fn collectives_tied_on_time_come_out_in_one_order() {
        let comm = |group_size| CommArgs {
            collective: "broadcast",
            in_elements: Some(53),
            dtype: Some("Long"),
            group_size,
            process_group: Some("0"),
        };
        let mut first = None;
        for round in 0..8 {
            let mut c = Collectives::default();
            let sizes = if round % 2 == 0 {
                [Some(2), None]
            } else {
                [None, Some(2)]
            };
            for size in sizes {
                c.add("ncclKernel_Broadcast", Some(comm(size)), true, 7904);
            }
            c.add("ncclKernel_AllReduce_x", None, true, 7904);
            let rows: Vec<_> = c
                .finish()
                .into_iter()
                .map(|r| (r.group_size, r.source))
                .collect();
            assert_eq!(rows.len(), 3);
            assert_eq!(
                *first.get_or_insert_with(|| rows.clone()),
                rows,
                "round {round}"
            );
        }
    }

    /// A window worked by hand (times in ns, one rank, two streams):
    ///
    /// ```text
    /// t:        0    10   20   30   40   50   60   70   80   90  100
    /// compute:  [=========)              [====)
    /// comm:          [==============)                   [=========)
    /// memcpy:                                   [====)
    /// launches: k0@-5, c0@2, k1@45 (after the gap 35..50 began), m0@40, c1@75 (gap 65..80)
    /// ```
    ///
    /// Window [0, 100): compute 20+10 = 30; comm 25+20 = 45, of which 10..20 (10) overlaps
    /// compute: exposed 35, overlap 10/45. Idle (nothing runs): 35..50 (15, ended by k1
    /// launched at 45 > 35: host) and 65..80 (15, ended by c1 launched at 75 > 65: host).
    /// The memcpy runs 55..65, beside k1 until 60: 60..65 (5) is other.
    /// 100 − 30 = 70 = comm wait 35 + host 30 + other 5.
    #[test]
    fn overlap_and_idle_of_a_window_by_hand() {
        let s = Spans {
            comm: vec![(10, 35), (80, 100)],
            compute: vec![(0, 20), (50, 60)],
            all: vec![(0, 35), (50, 65), (80, 100)],
            launched: vec![Some(-5), Some(45), Some(75)],
        };
        let w = s.window(None, "whole trace", &[(0, 100)]);
        assert_eq!((w.comm_ns, w.compute_ns, w.exposed_comm_ns), (45, 30, 35));
        assert_eq!((w.comm_wait_ns, w.host_ns, w.other_ns), (35, 30, 5));
        assert_eq!(
            w.window_ns - w.compute_ns,
            w.comm_wait_ns + w.host_ns + w.other_ns
        );
        assert!((w.overlap_pct - 1000.0 / 45.0).abs() < 1e-9);
        // A gap whose op was launched before it began is not the host's; a window's cut
        // edge is idle but not the host's.
        let early = Spans {
            launched: vec![Some(-5), Some(30), Some(60)],
            ..s
        };
        let w = early.window(Some(3), "decode", &[(0, 100), (30, 55)]);
        assert_eq!(w.instances, 2);
        assert_eq!(w.host_ns, 0);
        assert_eq!(w.window_ns, 125);
        // Second window [30, 55): comm 30..35, compute 50..55, idle 35..50.
        assert_eq!(w.comm_ns, 45 + 5);
        assert_eq!(w.other_ns, 5 + 30 + 15);
    }

    #[test]
    fn dtype_sizes() {
        assert_eq!(dtype_bytes("Float"), Some(4));
        assert_eq!(dtype_bytes("c10::BFloat16"), Some(2));
        assert_eq!(dtype_bytes("Float8_e4m3fn"), Some(1));
        assert_eq!(dtype_bytes("Quux"), None);
    }
}
