//! The GPU ops the converter keeps, one column per field: a 1 GB trace holds millions. The
//! timeline's columns are gathered from these in start order one at a time, and each column
//! here is freed once the last timeline column that needs it is built (`convert.rs`,
//! `build_timeline`), so the ops and the timeline's op columns are never held whole side by
//! side.

use llmprof_bundle::OpKind;

use crate::records::GraphRef;

/// One op as [`Ops::push`] takes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Op {
    pub start: i64,
    pub end: i64,
    pub correlation: Option<i64>,
    pub row: u32,
    pub queue: u32,
    /// A kernel's launch configuration (index into the converter's configurations).
    pub launch: Option<u32>,
    /// A memcpy's or memset's bytes.
    pub bytes: u64,
    pub kind: OpKind,
    pub graph: Option<GraphRef>,
}

const HAS_CORRELATION: u8 = 1;
const HAS_LAUNCH: u8 = 1 << 1;
const IN_GRAPH: u8 = 1 << 2;
const HAS_GRAPH_ID: u8 = 1 << 3;
const HAS_NODE: u8 = 1 << 4;

/// The ops, by input order: 38 bytes an op (46 in a trace with graph ids or nodes), optional
/// fields flagged in `flags` rather than wrapped in `Option`s.
#[derive(Debug, Default)]
pub(crate) struct Ops {
    pub start: Vec<i64>,
    pub end: Vec<i64>,
    /// 0 where the op has none.
    pub correlation: Vec<i64>,
    /// Index into the converter's aggregation rows.
    pub row: Vec<u32>,
    /// Index into the converter's queues: the op's process and stream.
    pub queue: Vec<u32>,
    /// A kernel's launch configuration; a memcpy's or memset's index into `bytes`.
    pub launch: Vec<u32>,
    /// The graph the source placed the op in, and its node there: each column only as long as
    /// the last op that has one (empty in a trace without graphs).
    pub graph: Vec<u32>,
    pub node: Vec<u32>,
    /// Kept to the end: it says which timeline columns (kernels' or mem ops') an op goes to.
    pub kind: Vec<OpKind>,
    pub flags: Vec<u8>,
    /// The bytes of each memcpy and memset, in input order.
    pub bytes: Vec<u64>,
}

impl Ops {
    pub fn len(&self) -> usize {
        self.kind.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kind.is_empty()
    }

    /// Makes room for exactly `n` more ops (the byte column grows as memcpys come).
    pub fn reserve_exact(&mut self, n: usize) {
        self.start.reserve_exact(n);
        self.end.reserve_exact(n);
        self.correlation.reserve_exact(n);
        self.row.reserve_exact(n);
        self.queue.reserve_exact(n);
        self.launch.reserve_exact(n);
        self.kind.reserve_exact(n);
        self.flags.reserve_exact(n);
    }

    pub fn push(&mut self, op: Op) {
        let launch = if matches!(op.kind, OpKind::Memcpy | OpKind::Memset) {
            self.bytes.push(op.bytes);
            self.bytes.len() as u32 - 1
        } else {
            op.launch.unwrap_or(0)
        };
        let flags = if op.correlation.is_some() {
            HAS_CORRELATION
        } else {
            0
        } | if op.launch.is_some() { HAS_LAUNCH } else { 0 };
        self.start.push(op.start);
        self.end.push(op.end);
        self.correlation.push(op.correlation.unwrap_or(0));
        self.row.push(op.row);
        self.queue.push(op.queue);
        self.launch.push(launch);
        self.kind.push(op.kind);
        self.flags.push(flags);
        self.set_graph(self.kind.len() - 1, op.graph);
    }

    pub fn correlation(&self, i: usize) -> Option<i64> {
        (self.flags[i] & HAS_CORRELATION != 0).then_some(self.correlation[i])
    }

    /// A kernel's launch configuration, where the source gave one.
    pub fn launch(&self, i: usize) -> Option<u32> {
        (self.flags[i] & HAS_LAUNCH != 0).then_some(self.launch[i])
    }

    /// A memcpy's or memset's bytes; 0 for other ops.
    pub fn bytes(&self, i: usize) -> u64 {
        match self.kind[i] {
            OpKind::Memcpy | OpKind::Memset => self.bytes[self.launch[i] as usize],
            OpKind::Kernel | OpKind::Graph => 0,
        }
    }

    pub fn dur(&self, i: usize) -> u64 {
        crate::convert::span(self.start[i], self.end[i])
    }

    pub fn graph(&self, i: usize) -> Option<GraphRef> {
        let flags = self.flags[i];
        (flags & IN_GRAPH != 0).then_some(GraphRef {
            graph: (flags & HAS_GRAPH_ID != 0).then(|| self.graph[i]),
            node: (flags & HAS_NODE != 0).then(|| self.node[i]),
        })
    }

    pub fn set_graph(&mut self, i: usize, g: Option<GraphRef>) {
        let flags = &mut self.flags[i];
        *flags &= !(IN_GRAPH | HAS_GRAPH_ID | HAS_NODE);
        let Some(g) = g else { return };
        *flags |= IN_GRAPH;
        if let Some(id) = g.graph {
            *flags |= HAS_GRAPH_ID;
            set_at(&mut self.graph, i, id);
        }
        if let Some(node) = g.node {
            *flags |= HAS_NODE;
            set_at(&mut self.node, i, node);
        }
    }

    /// Whether op `i` is a row of the timeline's kernels (a kernel or a graph span), not of
    /// its mem ops.
    pub fn in_kernel_columns(&self, i: usize) -> bool {
        matches!(self.kind[i], OpKind::Kernel | OpKind::Graph)
    }
}

/// `col[i] = v`, growing `col` with zeros up to `i` first.
fn set_at(col: &mut Vec<u32>, i: usize, v: u32) {
    if col.len() <= i {
        col.resize(i + 1, 0);
    }
    col[i] = v;
}

/// Per op in `order`, `f` of it, split into the timeline's kernel column and mem op column
/// (each of exactly its length).
pub(crate) fn split<T>(
    ops: &Ops,
    order: &[u32],
    kernels: usize,
    mut f: impl FnMut(usize) -> T,
) -> (Vec<T>, Vec<T>) {
    let mut k = Vec::with_capacity(kernels);
    let mut m = Vec::with_capacity(order.len() - kernels);
    for &i in order {
        let i = i as usize;
        if ops.in_kernel_columns(i) {
            k.push(f(i));
        } else {
            m.push(f(i));
        }
    }
    (k, m)
}

/// [`split`]'s kernel column alone.
pub(crate) fn kernels_only<T>(
    ops: &Ops,
    order: &[u32],
    kernels: usize,
    mut f: impl FnMut(usize) -> T,
) -> Vec<T> {
    let mut k = Vec::with_capacity(kernels);
    for &i in order {
        if ops.in_kernel_columns(i as usize) {
            k.push(f(i as usize));
        }
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(kind: OpKind, correlation: Option<i64>, launch: Option<u32>, bytes: u64) -> Op {
        Op {
            start: 10,
            end: 15,
            correlation,
            row: 3,
            queue: 1,
            launch,
            bytes,
            kind,
            graph: None,
        }
    }

    #[test]
    fn optional_fields_come_back_as_pushed() {
        let mut ops = Ops::default();
        ops.push(op(OpKind::Kernel, Some(-4), Some(7), 0));
        ops.push(op(OpKind::Memcpy, None, None, 1 << 40));
        ops.push(op(OpKind::Kernel, None, None, 0));
        ops.push(op(OpKind::Memset, Some(9), None, 64));
        assert_eq!(ops.len(), 4);
        let corr: Vec<_> = (0..4).map(|i| ops.correlation(i)).collect();
        assert_eq!(corr, [Some(-4), None, None, Some(9)]);
        let launch: Vec<_> = (0..4).map(|i| ops.launch(i)).collect();
        assert_eq!(launch, [Some(7), None, None, None]);
        let bytes: Vec<_> = (0..4).map(|i| ops.bytes(i)).collect();
        assert_eq!(bytes, [0, 1 << 40, 0, 64]);
        assert_eq!(ops.dur(0), 5);

        let g = GraphRef {
            graph: Some(2),
            node: None,
        };
        // No op has a graph id or node yet: those columns take no room.
        assert!(ops.graph.is_empty() && ops.node.is_empty());
        ops.set_graph(2, Some(g));
        assert_eq!(ops.graph(2), Some(g));
        assert_eq!((ops.graph.len(), ops.node.len()), (3, 0));
        assert_eq!(ops.graph(1), None);
        let in_graph = GraphRef {
            graph: None,
            node: Some(5),
        };
        ops.set_graph(0, Some(in_graph));
        assert_eq!((ops.graph(0), ops.node.len()), (Some(in_graph), 1));
        ops.set_graph(2, None);
        assert_eq!(ops.graph(2), None);

        let order = [3, 2, 1, 0];
        let (k, m) = split(&ops, &order, 2, |i| i);
        assert_eq!((k, m), (vec![2, 0], vec![3, 1]));
        assert_eq!(kernels_only(&ops, &order, 2, |i| i), [2, 0]);

        ops.push(Op {
            graph: Some(GraphRef {
                graph: Some(8),
                node: Some(1),
            }),
            ..op(OpKind::Kernel, None, None, 0)
        });
        assert_eq!(ops.graph(4).and_then(|g| g.node), Some(1));
        assert_eq!((ops.graph.len(), ops.node.len()), (5, 5));
    }
}
