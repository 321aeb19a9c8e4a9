//! The per-op half of the converter's `finish`: every GPU op visited once, in start order,
//! with what the attribution says of it ([`OpView`]), into the sums the bundle's stages,
//! kernels, per-instance samples and totals are built from ([`Folded`]).
//!
//! Nothing here needs the ops kept: a source that can give its ops in start order with their
//! launch calls joined (an Nsight Systems export, through SQLite) feeds the fold as it reads,
//! and the converter's own `finish` feeds it from the ops it kept. Every sum is the same in any
//! order except the busy unions, which need start order.

use llmprof_bundle::{GraphTrace, OpKind, Totals};
use rustc_hash::FxHashMap as HashMap;

use crate::convert::span;
use crate::records::GraphRef;

/// One GPU op as the fold sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpView<'r> {
    pub start: i64,
    pub end: i64,
    pub kind: OpKind,
    /// The op's aggregation row.
    pub row: u32,
    /// Where in a CUDA graph the op ran: the source placed it in one, or its launch call
    /// launched one.
    pub graph: Option<GraphRef>,
    pub process: u64,
    pub correlation: Option<i64>,
    /// The launch call that ran the op, when the trace has it.
    pub launch: Option<LaunchView>,
    /// The range instances the op belongs to (those open on its launch's thread when the
    /// launch started), outermost first.
    pub ranges: &'r [u32],
}

/// A launch call as the fold sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LaunchView {
    /// The call's number, dense from 0: the same for every op it ran.
    pub key: usize,
    /// The call's own time (its end less its start).
    pub cost: u64,
}

/// What the fold knows of each range instance before it starts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RangeFacts {
    pub stage: u32,
    pub start: i64,
    pub end: i64,
    /// The range's stage gets per-instance kernel samples (`instance_kernels`).
    pub measured: bool,
}

/// A range instance's sums.
#[derive(Debug, Clone, Default)]
pub(crate) struct InstanceAcc {
    pub gpu_ops: u64,
    pub launches: u64,
    pub launch_ns: u64,
    pub graph_launches: u64,
    pub kernels: u64,
    pub graph_kernels: u64,
    pub kernel_ns: u64,
    pub gpu_start: Option<i64>,
    pub gpu_end: Option<i64>,
    pub busy: u64,
    pub graph_busy: u64,
    /// End of the last attributed GPU op, graph spans included.
    last_end: Option<i64>,
    /// The range's wall time, extended to `last_end` when its GPU work outlasts it.
    pub window_ns: u64,
}

/// Per (kernel row, stage): calls and total time.
pub(crate) type RowStage = HashMap<(u32, u32), (u64, u64)>;

/// What [`OpFold::finish`] returns.
#[derive(Debug)]
pub(crate) struct Folded {
    /// Per range instance.
    pub inst: Vec<InstanceAcc>,
    pub row_stage: RowStage,
    /// Per row, the durations of its ops.
    pub durations: Vec<Durations>,
    /// Per (range instance of a measured stage, kernel row): kernel time.
    pub samples: HashMap<(u32, u32), u64>,
    /// Everything but `streams`.
    pub totals: Totals,
}

/// The sums, op by op. See the module docs.
#[derive(Debug)]
pub(crate) struct OpFold {
    ranges: Vec<RangeFacts>,
    inst: Vec<InstanceAcc>,
    /// Per range: the union of its ops' intervals, and of its graph ops'.
    busy: Vec<(Union, Union)>,
    row_stage: RowStage,
    seen_stages: Vec<u32>,
    /// Launch calls counted in their ranges; those counted as a GPU op (they ran a kernel,
    /// memcpy or memset); those counted as graph launches.
    counted: BitSet,
    counted_op: BitSet,
    counted_graph: BitSet,
    /// `(process, correlation)` of graph ops whose launch call is not in the trace.
    unlaunched_graph_calls: Vec<(u64, i64)>,
    samples: HashMap<(u32, u32), u64>,
    durations: Vec<Durations>,
    totals: Totals,
    all_busy: Union,
    first_start: Option<i64>,
    last_end: Option<i64>,
    any_graph: bool,
}

impl OpFold {
    pub fn new(ranges: Vec<RangeFacts>) -> Self {
        OpFold {
            inst: vec![InstanceAcc::default(); ranges.len()],
            busy: vec![(Union::default(), Union::default()); ranges.len()],
            ranges,
            row_stage: RowStage::default(),
            seen_stages: Vec::new(),
            counted: BitSet::default(),
            counted_op: BitSet::default(),
            counted_graph: BitSet::default(),
            unlaunched_graph_calls: Vec::new(),
            samples: HashMap::default(),
            durations: Vec::new(),
            totals: Totals::default(),
            all_busy: Union::default(),
            first_start: None,
            last_end: None,
            any_graph: false,
        }
    }

    /// Takes the next op; ops come in start order (then end).
    pub fn op(&mut self, op: OpView<'_>) {
        self.add_to_totals(&op);
        self.add_to_ranges(&op);
        self.add_launch(&op);
        let row = op.row as usize;
        if self.durations.len() <= row {
            self.durations.resize_with(row + 1, Durations::default);
        }
        self.durations[row].push(span(op.start, op.end));
    }

    /// The op in the run's totals.
    fn add_to_totals(&mut self, op: &OpView<'_>) {
        let t = &mut self.totals;
        let dur = span(op.start, op.end);
        let in_graph = op.graph.is_some();
        match op.kind {
            OpKind::Kernel => {
                t.kernels += 1;
                t.kernel_ns += dur;
                t.graph_kernels += u64::from(in_graph);
            }
            OpKind::Memcpy => {
                t.memcpys += 1;
                t.memcpy_ns += dur;
            }
            OpKind::Memset => {
                t.memsets += 1;
                t.memset_ns += dur;
            }
            OpKind::Graph => {
                t.graphs += 1;
                t.graph_ns += dur;
            }
        }
        self.any_graph |= in_graph;
        if let (true, Some(c), None) = (in_graph, op.correlation, op.launch) {
            self.unlaunched_graph_calls.push((op.process, c));
        }
        self.first_start = Some(self.first_start.map_or(op.start, |s| s.min(op.start)));
        self.last_end = Some(self.last_end.map_or(op.end, |e| e.max(op.end)));
        self.all_busy.add(op.start, op.end);
        t.unattributed_gpu_ops += u64::from(op.ranges.is_empty());
    }

    /// The op in each range instance it belongs to, and in each (row, stage) once.
    fn add_to_ranges(&mut self, op: &OpView<'_>) {
        let (start, end, kind) = (op.start, op.end, op.kind);
        let in_graph = op.graph.is_some();
        let dur = span(start, end);
        self.seen_stages.clear();
        for &r in op.ranges {
            let a = &mut self.inst[r as usize];
            if kind == OpKind::Kernel {
                a.kernel_ns += dur;
                a.kernels += 1;
                a.graph_kernels += u64::from(in_graph);
            }
            // Nsight Systems projects kernels, memcpys and memsets, not graph spans.
            if kind != OpKind::Graph {
                a.gpu_start = Some(a.gpu_start.map_or(start, |s: i64| s.min(start)));
                a.gpu_end = Some(a.gpu_end.map_or(end, |e: i64| e.max(end)));
            }
            a.last_end = Some(a.last_end.map_or(end, |e: i64| e.max(end)));
            let (all, graph) = &mut self.busy[r as usize];
            all.add(start, end);
            if in_graph {
                graph.add(start, end);
            }
            let facts = self.ranges[r as usize];
            if kind == OpKind::Kernel && facts.measured {
                *self.samples.entry((r, op.row)).or_default() += dur;
            }
            if !self.seen_stages.contains(&facts.stage) {
                self.seen_stages.push(facts.stage);
                let e = self.row_stage.entry((op.row, facts.stage)).or_default();
                e.0 += 1;
                e.1 += dur;
            }
        }
    }

    /// The op's launch call in its ranges, each count once per call however many ops it ran
    /// (a call's ops share its ranges): the call itself, as `nvtx_gpu_proj_sum`'s GPU op when
    /// it ran a kernel, memcpy or memset, and as a graph launch when it ran graph work.
    fn add_launch(&mut self, op: &OpView<'_>) {
        let Some(l) = op.launch else {
            return;
        };
        let ranges = op.ranges;
        if self.counted.insert(l.key) {
            for &r in ranges {
                let a = &mut self.inst[r as usize];
                a.launches += 1;
                a.launch_ns += l.cost;
            }
        }
        if op.kind != OpKind::Graph && self.counted_op.insert(l.key) {
            for &r in ranges {
                self.inst[r as usize].gpu_ops += 1;
            }
        }
        if op.graph.is_some() && self.counted_graph.insert(l.key) {
            self.totals.graph_launches += 1;
            for &r in ranges {
                self.inst[r as usize].graph_launches += 1;
            }
        }
    }

    pub fn finish(mut self) -> Folded {
        for ((a, r), (all, graph)) in self.inst.iter_mut().zip(&self.ranges).zip(self.busy) {
            a.window_ns = span(r.start, a.last_end.map_or(r.end, |e| e.max(r.end)));
            a.busy = all.len();
            a.graph_busy = graph.len();
        }
        let mut t = self.totals;
        let mut unlaunched = self.unlaunched_graph_calls;
        unlaunched.sort_unstable();
        unlaunched.dedup();
        t.graph_launches += unlaunched.len() as u64;
        t.graph_trace = if t.graphs > 0 {
            Some(GraphTrace::Graph)
        } else if self.any_graph {
            Some(GraphTrace::Node)
        } else {
            None
        };
        if let (Some(f), Some(l)) = (self.first_start, self.last_end) {
            t.gpu_span_ns = span(f, l);
        }
        t.gpu_busy_ns = self.all_busy.len();
        Folded {
            inst: self.inst,
            row_stage: self.row_stage,
            durations: self.durations,
            samples: self.samples,
            totals: t,
        }
    }
}

/// One row's op durations, in 4 bytes each where they fit (kernels of more than 4.3 s are
/// rare) and blocks of [`Durations::BLOCK`], so that a row's storage is never more than a
/// block larger than its durations: millions of ops, whose durations the medians need.
#[derive(Debug, Default)]
pub(crate) struct Durations {
    blocks: Vec<Vec<u32>>,
    long: Vec<u64>,
}

impl Durations {
    const BLOCK: usize = 4096;

    fn push(&mut self, d: u64) {
        let Ok(d) = u32::try_from(d) else {
            self.long.push(d);
            return;
        };
        match self.blocks.last_mut() {
            Some(b) if b.len() < Self::BLOCK => b.push(d),
            _ => {
                let mut b = Vec::with_capacity(Self::BLOCK);
                b.push(d);
                self.blocks.push(b);
            }
        }
    }

    /// Every duration, in no particular order.
    pub fn into_vec(self) -> Vec<u64> {
        let short = self.blocks.iter().map(Vec::len).sum::<usize>();
        let mut out = Vec::with_capacity(short + self.long.len());
        for b in self.blocks {
            out.extend(b.into_iter().map(u64::from));
        }
        out.extend(self.long);
        out
    }
}

/// A set of small numbers, one bit each.
#[derive(Debug, Default)]
struct BitSet(Vec<u64>);

impl BitSet {
    /// Adds `i`; whether it was new.
    fn insert(&mut self, i: usize) -> bool {
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        if self.0.len() <= word {
            self.0.resize(word + 1, 0);
        }
        let new = self.0[word] & bit == 0;
        self.0[word] |= bit;
        new
    }
}

/// The total length of the union of `[start, end)` intervals fed in (start, end) order.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Union {
    closed: u64,
    /// The run of overlapping intervals still open to extension.
    open: Option<(i64, i64)>,
}

impl Union {
    pub fn add(&mut self, start: i64, end: i64) {
        self.open = match self.open {
            Some((s, e)) if start <= e => Some((s, e.max(end))),
            Some((s, e)) => {
                self.closed += span(s, e);
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }

    pub fn len(&self) -> u64 {
        self.closed + self.open.map_or(0, |(s, e)| span(s, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_merges_overlaps() {
        let mut u = Union::default();
        for (s, e) in [(0, 10), (5, 15), (20, 30), (30, 31)] {
            u.add(s, e);
        }
        assert_eq!(u.len(), 15 + 11);
    }

    #[test]
    fn durations_come_back_whole_past_a_block_and_past_u32() {
        let mut d = Durations::default();
        let want: Vec<u64> = (0..10_000u64)
            .chain([u64::from(u32::MAX) + 1, u64::MAX])
            .collect();
        for &v in &want {
            d.push(v);
        }
        let mut got = d.into_vec();
        got.sort_unstable();
        assert_eq!(got, want);
    }

    #[test]
    fn a_bit_is_new_once() {
        let mut b = BitSet::default();
        assert!(b.insert(1000));
        assert!(!b.insert(1000));
        assert!(b.insert(999));
    }
}
