//! An export read into the [`StreamedConverter`]: its GPU ops in start order, each with its
//! launch call, with nothing per op or per call held in memory. Exports have no indexes, and
//! SQLite's own sorts and joins of millions of rows take longer than the rest of the ingest,
//! so the tables are scanned once each in row order, and the sorting and the join are done
//! here, on disk, in bounded memory ([`ExternalSort`], [`llmprof_store::spill`]):
//!
//! 1. the op tables, read as the batch converter reads them: each op accepted into the
//!    converter's rows and written, with its reading order, to one of `P` partition files by
//!    `(process, correlationId)`, or, with no correlation id, straight to the final sort; the
//!    `(process, correlationId)` pairs seen are marked;
//! 2. the call tables: the calls of marked pairs go to a sort by start (then reading order):
//!    the order of the timeline's calls;
//! 3. that sort's output numbers the calls, goes into the converter's call columns, and is
//!    written to the call partition of its pair;
//! 4. partition by partition, the calls are held in a hash map and the ops joined to them,
//!    into the final sort, by start, end and reading order (the batch converter's order);
//! 5. the final sort's output goes into the converter.
//!
//! A `(process, correlationId)` that two calls share (the batch converter takes the last of
//! them) sends the export to the batch converter instead.

use std::collections::HashMap as StdHashMap;
use std::hash::{Hash, Hasher};
use std::io;
use std::path::Path;

use llmprof_bundle::OpKind;
use llmprof_store::spill::{Column, ColumnWriter, SpillDir, SpillValue};
use rustc_hash::{FxHashMap as HashMap, FxHasher};

use super::Export;
use crate::convert::{JoinedCall, StreamedConverter};
use crate::diagnostics::Diagnostics;
use crate::error::IngestError;
use crate::ops::Op;
use crate::records::{GraphRef, LaunchRecord};
use crate::sort::ExternalSort;

/// How much memory the reading may use, and so how much it writes to disk.
#[derive(Debug, Clone, Copy)]
pub(super) struct Budgets {
    /// Bytes a sort holds before it writes a run.
    pub sort: usize,
    /// Calls a partition holds, about (its hash map: about 64 bytes a call).
    pub calls_per_partition: usize,
    /// Bytes the correlation ids of one process may take as a bitset.
    pub marks: usize,
}

impl Budgets {
    /// The most partitions (each two open files).
    const MAX_PARTITIONS: usize = 64;

    /// A 64th of the export for a sort (one at a time), from 4 to 16 MB: about 50 runs, merged
    /// at once, up to a 1 GB export, and one more merge level from about 2 GB on; 4 MB a
    /// partition; and a 64th of the export (at least 8 MB) for the correlation ids.
    pub fn of_export(bytes: usize) -> Budgets {
        Budgets {
            sort: (bytes / 64).clamp(4 << 20, 16 << 20),
            calls_per_partition: 1 << 16,
            marks: (8 << 20usize).max(bytes / 64),
        }
    }

    fn partitions(&self, ops: usize) -> usize {
        (ops / self.calls_per_partition.max(1) + 1).min(Self::MAX_PARTITIONS)
    }
}

impl Export<'_> {
    /// Reads the ops and their calls into `conv` (see the module docs); returns the device
    /// that ran most kernels, or `None` when two calls share an id.
    pub(super) fn read_streamed(
        &self,
        strings: &StdHashMap<i64, String>,
        conv: &mut StreamedConverter,
        spill: &Path,
        budgets: Budgets,
        diags: &mut Diagnostics,
    ) -> Result<Option<Option<i64>>, IngestError> {
        let dir = SpillDir::new(spill);
        let spilled = |source| IngestError::Spill {
            path: spill.to_path_buf(),
            source,
        };
        let ops = self.row_bound(super::KERNEL)
            + self.row_bound("CUPTI_ACTIVITY_KIND_MEMCPY")
            + self.row_bound("CUPTI_ACTIVITY_KIND_MEMSET");
        let mut parts = Partitions::new(&dir, budgets.partitions(ops), budgets.marks);
        let mut sorted: JoinedSort = ExternalSort::new(&dir, budgets.sort, Joined::key);
        let mut failed: io::Result<()> = Ok(());
        let mut seq = 0u64;
        let device = self.read_ops(
            strings,
            &mut |op| {
                let Some(op) = conv.accept(op) else { return };
                let process = conv.process_of(&op);
                let rec = OpRec { op, process, seq };
                seq += 1;
                let pushed = match op.correlation {
                    Some(c) => {
                        parts.add_op(process, c, rec);
                        Ok(())
                    }
                    None => sorted.push(Joined {
                        op: rec,
                        call: None,
                    }),
                };
                failed = std::mem::replace(&mut failed, Ok(())).and(pushed);
            },
            diags,
        )?;
        failed.map_err(spilled)?;
        let calls = self.sort_calls(strings, &parts, &dir, budgets.sort, conv)?;
        number_calls(calls.map_err(spilled)?, &mut parts, conv).map_err(spilled)?;
        if !parts.join(&mut sorted).map_err(spilled)? {
            return Ok(None);
        }
        sorted
            .for_each(|j| conv.handle_op(j.op.op, j.call))
            .map_err(spilled)?;
        Ok(Some(device))
    }

    /// The calls of the pairs the ops marked, sorted by start, then reading order; the
    /// export's error, or the sort's.
    fn sort_calls(
        &self,
        strings: &StdHashMap<i64, String>,
        parts: &Partitions,
        dir: &SpillDir,
        budget: usize,
        conv: &mut StreamedConverter,
    ) -> Result<io::Result<CallSort>, IngestError> {
        let mut calls = ExternalSort::new(dir, budget, CallRec::key as fn(&CallRec) -> _);
        let mut failed: io::Result<()> = Ok(());
        let mut seq = 0u64;
        let read = self.read_launches(strings, &mut |l, api| {
            if !parts.marked(l.process, l.correlation) {
                return;
            }
            let api = api.map(|a| conv.api_id(a));
            let pushed = calls.push(CallRec { call: l, api, seq });
            seq += 1;
            failed = std::mem::replace(&mut failed, Ok(())).and(pushed);
        });
        read?;
        Ok(failed.map(|()| calls))
    }
}

type CallSort = ExternalSort<CallRec, (i64, u64), fn(&CallRec) -> (i64, u64)>;
type JoinedSort = ExternalSort<Joined, (i64, i64, u64), fn(&Joined) -> (i64, i64, u64)>;

/// Numbers the calls in order into the converter's call columns and their partitions.
fn number_calls(
    calls: CallSort,
    parts: &mut Partitions,
    conv: &mut StreamedConverter,
) -> io::Result<()> {
    let mut pos = 0u32;
    calls.for_each(|c| {
        let l = c.call;
        parts.add_call(
            l.process,
            l.correlation,
            JoinedCall {
                pos,
                start: l.start,
                end: l.end,
                thread: l.thread,
                graph: l.graph,
            },
        );
        conv.handle_call(l, c.api);
        pos += 1;
    })
}

/// The ops and calls by `(process, correlationId)`, in `P` files each, and which pairs the ops
/// have.
struct Partitions {
    ops: Vec<ColumnWriter<OpRec>>,
    calls: Vec<ColumnWriter<CallPart>>,
    /// The `(process, correlationId)` pairs the ops have.
    marked: HashMap<u64, Marks>,
    /// Bytes the marks of one process may take as a bitset.
    mark_budget: usize,
}

impl Partitions {
    fn new(dir: &SpillDir, n: usize, mark_budget: usize) -> Self {
        Partitions {
            ops: (0..n).map(|_| dir.column()).collect(),
            calls: (0..n).map(|_| dir.column()).collect(),
            marked: HashMap::default(),
            mark_budget,
        }
    }

    fn index(&self, process: u64, corr: i64) -> usize {
        let mut h = FxHasher::default();
        (process, corr).hash(&mut h);
        (h.finish() % self.ops.len() as u64) as usize
    }

    fn add_op(&mut self, process: u64, corr: i64, rec: OpRec) {
        let i = self.index(process, corr);
        self.ops[i].push(rec);
        let budget = self.mark_budget;
        self.marked.entry(process).or_default().mark(corr, budget);
    }

    /// Whether an op has this pair.
    fn marked(&self, process: u64, corr: i64) -> bool {
        (self.marked.get(&process)).is_some_and(|m| m.has(corr))
    }

    fn add_call(&mut self, process: u64, corr: i64, call: JoinedCall) {
        let i = self.index(process, corr);
        self.calls[i].push(CallPart {
            process,
            corr,
            call,
        });
    }

    /// Joins each partition's ops to its calls into `out`; `false` when two calls share a
    /// pair.
    fn join(self, out: &mut JoinedSort) -> io::Result<bool> {
        for (ops, calls) in self.ops.into_iter().zip(self.calls) {
            let (ops, calls): (Column<OpRec>, Column<CallPart>) = (ops.finish()?, calls.finish()?);
            let mut by_pair: HashMap<(u64, i64), JoinedCall> = HashMap::default();
            by_pair.reserve(calls.len());
            let mut unique = true;
            calls.for_each(|c| unique &= by_pair.insert((c.process, c.corr), c.call).is_none())?;
            if !unique {
                return Ok(false);
            }
            let mut r = ops.reader()?;
            while let Some(op) = r.next_value()? {
                let key = (op.process, op.op.correlation.unwrap_or(0));
                let call = by_pair.get(&key).copied();
                out.push(Joined { op, call })?;
            }
        }
        Ok(true)
    }
}

/// Correlation ids, a bit each over the span they cover while that fits a budget (ids are
/// dense: CUPTI numbers the API calls), else a set of their 64-id words.
#[derive(Debug, Default)]
struct Marks {
    /// The first word's number, and the words from it.
    first: i64,
    words: std::collections::VecDeque<u64>,
    sparse: Option<HashMap<i64, u64>>,
}

impl Marks {
    fn mark(&mut self, corr: i64, budget: usize) {
        let (word, bit) = (corr.div_euclid(64), 1u64 << corr.rem_euclid(64));
        if let Some(set) = &mut self.sparse {
            *set.entry(word).or_default() |= bit;
            return;
        }
        if self.words.is_empty() {
            self.first = word;
        }
        let last = self.first + self.words.len() as i64 - 1;
        let (lo, hi) = (self.first.min(word), last.max(word));
        if (hi - lo + 1) as u64 > (budget / 8) as u64 {
            self.go_sparse();
            return self.mark(corr, budget);
        }
        for _ in word..self.first {
            self.words.push_front(0);
        }
        self.first = lo;
        let i = (word - lo) as usize;
        if self.words.len() <= i {
            self.words.resize(i + 1, 0);
        }
        self.words[i] |= bit;
    }

    fn go_sparse(&mut self) {
        let words = std::mem::take(&mut self.words);
        let first = self.first;
        let set = (words.into_iter().enumerate())
            .filter(|&(_, w)| w != 0)
            .map(|(i, w)| (first + i as i64, w))
            .collect();
        self.sparse = Some(set);
    }

    fn has(&self, corr: i64) -> bool {
        let (word, bit) = (corr.div_euclid(64), 1u64 << corr.rem_euclid(64));
        let w = match &self.sparse {
            Some(set) => set.get(&word).copied(),
            None => (word.checked_sub(self.first))
                .and_then(|i| usize::try_from(i).ok())
                .and_then(|i| self.words.get(i).copied()),
        };
        w.is_some_and(|w| w & bit != 0)
    }
}

/// An accepted op, its process and its reading order.
#[derive(Debug, Clone, Copy)]
struct OpRec {
    op: Op,
    process: u64,
    seq: u64,
}

/// An op and its call, sorted by start, end, reading order.
#[derive(Debug, Clone, Copy)]
struct Joined {
    op: OpRec,
    call: Option<JoinedCall>,
}

impl Joined {
    fn key(&self) -> (i64, i64, u64) {
        (self.op.op.start, self.op.op.end, self.op.seq)
    }
}

/// A call of a marked pair, sorted by start, then reading order.
#[derive(Debug, Clone, Copy)]
struct CallRec {
    call: LaunchRecord,
    api: Option<u32>,
    seq: u64,
}

impl CallRec {
    fn key(&self) -> (i64, u64) {
        (self.call.start, self.seq)
    }
}

/// A numbered call in its partition.
#[derive(Debug, Clone, Copy)]
struct CallPart {
    process: u64,
    corr: i64,
    call: JoinedCall,
}

/// Fixed-width little-endian fields, written in order.
struct Put<'a>(&'a mut Vec<u8>);

impl Put<'_> {
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn i64(&mut self, v: i64) -> &mut Self {
        self.u64(v as u64)
    }
}

/// Fields read back in the order [`Put`] wrote them.
struct Take<'a>(&'a [u8]);

impl Take<'_> {
    fn bytes<const N: usize>(&mut self) -> [u8; N] {
        let mut b = [0u8; N];
        b.copy_from_slice(&self.0[..N]);
        self.0 = &self.0[N..];
        b
    }
    fn u8(&mut self) -> u8 {
        self.bytes::<1>()[0]
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.bytes())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.bytes())
    }
    fn i64(&mut self) -> i64 {
        self.u64() as i64
    }
}

const HAS_CORRELATION: u8 = 1;
const HAS_LAUNCH: u8 = 1 << 1;
const IN_GRAPH: u8 = 1 << 2;
const HAS_GRAPH_ID: u8 = 1 << 3;
const HAS_NODE: u8 = 1 << 4;
const HAS_CALL: u8 = 1 << 5;
const CALL_GRAPH: u8 = 1 << 6;
const DRIVER: u8 = 1 << 7;

fn kind_of(b: u8) -> OpKind {
    match b {
        0 => OpKind::Kernel,
        1 => OpKind::Memcpy,
        2 => OpKind::Memset,
        _ => OpKind::Graph,
    }
}

fn flag(on: bool, bit: u8) -> u8 {
    if on {
        bit
    } else {
        0
    }
}

impl OpRec {
    const BYTES: usize = 8 * 6 + 4 * 5 + 2;

    /// Writes the record; `extra` flags go with the op's.
    fn write(&self, out: &mut Vec<u8>, extra: u8) {
        let op = &self.op;
        let g = op.graph;
        let flags = flag(op.correlation.is_some(), HAS_CORRELATION)
            | flag(op.launch.is_some(), HAS_LAUNCH)
            | flag(g.is_some(), IN_GRAPH)
            | flag(g.is_some_and(|g| g.graph.is_some()), HAS_GRAPH_ID)
            | flag(g.is_some_and(|g| g.node.is_some()), HAS_NODE)
            | extra;
        Put(out)
            .i64(op.start)
            .i64(op.end)
            .i64(op.correlation.unwrap_or(0))
            .u64(op.bytes)
            .u64(self.process)
            .u64(self.seq)
            .u32(op.row)
            .u32(op.queue)
            .u32(op.launch.unwrap_or(0))
            .u32(g.and_then(|g| g.graph).unwrap_or(0))
            .u32(g.and_then(|g| g.node).unwrap_or(0))
            .u8(op.kind as u8)
            .u8(flags);
    }

    /// The record and its flags.
    fn read(t: &mut Take<'_>) -> (OpRec, u8) {
        let (start, end, corr, bytes) = (t.i64(), t.i64(), t.i64(), t.u64());
        let (process, seq) = (t.u64(), t.u64());
        let (row, queue, launch, graph, node) = (t.u32(), t.u32(), t.u32(), t.u32(), t.u32());
        let (kind, flags) = (kind_of(t.u8()), t.u8());
        let op = Op {
            start,
            end,
            correlation: (flags & HAS_CORRELATION != 0).then_some(corr),
            row,
            queue,
            launch: (flags & HAS_LAUNCH != 0).then_some(launch),
            bytes,
            kind,
            graph: (flags & IN_GRAPH != 0).then_some(GraphRef {
                graph: (flags & HAS_GRAPH_ID != 0).then_some(graph),
                node: (flags & HAS_NODE != 0).then_some(node),
            }),
        };
        (OpRec { op, process, seq }, flags)
    }
}

impl SpillValue for OpRec {
    const BYTES: usize = OpRec::BYTES;
    fn put(self, out: &mut Vec<u8>) {
        self.write(out, 0);
    }
    fn take(bytes: &[u8]) -> Self {
        OpRec::read(&mut Take(bytes)).0
    }
}

/// A call's fields after the op's.
const CALL_BYTES: usize = 4 + 8 * 3;

fn put_call(out: &mut Vec<u8>, c: &JoinedCall) {
    Put(out).u32(c.pos).i64(c.start).i64(c.end).u64(c.thread);
}

fn take_call(t: &mut Take<'_>, graph: bool) -> JoinedCall {
    JoinedCall {
        pos: t.u32(),
        start: t.i64(),
        end: t.i64(),
        thread: t.u64(),
        graph,
    }
}

impl SpillValue for Joined {
    const BYTES: usize = OpRec::BYTES + CALL_BYTES;
    fn put(self, out: &mut Vec<u8>) {
        let extra = match &self.call {
            Some(c) => HAS_CALL | flag(c.graph, CALL_GRAPH),
            None => 0,
        };
        self.op.write(out, extra);
        put_call(
            out,
            &self.call.unwrap_or(JoinedCall {
                pos: 0,
                start: 0,
                end: 0,
                thread: 0,
                graph: false,
            }),
        );
    }
    fn take(bytes: &[u8]) -> Self {
        let mut t = Take(bytes);
        let (op, flags) = OpRec::read(&mut t);
        let call = take_call(&mut t, flags & CALL_GRAPH != 0);
        Joined {
            op,
            call: (flags & HAS_CALL != 0).then_some(call),
        }
    }
}

impl SpillValue for CallRec {
    const BYTES: usize = 8 * 6 + 4 + 4 + 1;
    fn put(self, out: &mut Vec<u8>) {
        let l = &self.call;
        let flags =
            flag(l.driver, DRIVER) | flag(l.graph, CALL_GRAPH) | flag(self.api.is_some(), HAS_CALL);
        Put(out)
            .i64(l.start)
            .i64(l.end)
            .u64(l.process)
            .u64(l.thread)
            .i64(l.correlation)
            .u64(self.seq)
            .u32(u32::try_from(l.tid).unwrap_or(u32::MAX))
            .u32(self.api.unwrap_or(0))
            .u8(flags);
    }
    fn take(bytes: &[u8]) -> Self {
        let mut t = Take(bytes);
        let (start, end, process, thread, correlation, seq) =
            (t.i64(), t.i64(), t.u64(), t.u64(), t.i64(), t.u64());
        let (tid, api, flags) = (t.u32(), t.u32(), t.u8());
        CallRec {
            call: LaunchRecord {
                process,
                thread,
                tid: u64::from(tid),
                driver: flags & DRIVER != 0,
                start,
                end,
                correlation,
                graph: flags & CALL_GRAPH != 0,
            },
            api: (flags & HAS_CALL != 0).then_some(api),
            seq,
        }
    }
}

impl SpillValue for CallPart {
    const BYTES: usize = 8 * 2 + CALL_BYTES + 1;
    fn put(self, out: &mut Vec<u8>) {
        Put(out).u64(self.process).i64(self.corr);
        put_call(out, &self.call);
        Put(out).u8(flag(self.call.graph, CALL_GRAPH));
    }
    fn take(bytes: &[u8]) -> Self {
        let mut t = Take(bytes);
        let (process, corr) = (t.u64(), t.i64());
        let mut call = take_call(&mut t, false);
        call.graph = t.u8() & CALL_GRAPH != 0;
        CallPart {
            process,
            corr,
            call,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip<T: SpillValue + std::fmt::Debug>(v: T) -> T {
        let mut b = Vec::new();
        v.put(&mut b);
        assert_eq!(b.len(), T::BYTES, "{v:?}");
        T::take(&b)
    }

    #[test]
    fn marks_hold_what_was_marked_dense_or_sparse() {
        for budget in [1 << 20, 16] {
            let mut m = Marks::default();
            let ids = [500i64, 3, -70, 501, 10_000];
            for &c in &ids {
                m.mark(c, budget);
            }
            for c in -200..11_000 {
                assert_eq!(m.has(c), ids.contains(&c), "id {c} budget {budget}");
            }
            assert_eq!(m.sparse.is_some(), budget == 16);
        }
    }

    #[test]
    fn records_come_back_as_written() {
        let call = JoinedCall {
            pos: 7,
            start: -3,
            end: i64::MAX,
            thread: u64::MAX - 1,
            graph: true,
        };
        for (corr, launch, graph) in [
            (None, None, None),
            (
                Some(-5),
                Some(3),
                Some(GraphRef {
                    graph: Some(2),
                    node: None,
                }),
            ),
            (
                Some(i64::MAX),
                None,
                Some(GraphRef {
                    graph: None,
                    node: Some(9),
                }),
            ),
        ] {
            let op = OpRec {
                op: Op {
                    start: i64::MIN,
                    end: 12,
                    correlation: corr,
                    row: 4,
                    queue: 5,
                    launch,
                    bytes: 1 << 40,
                    kind: OpKind::Memset,
                    graph,
                },
                process: 1 << 56,
                seq: 99,
            };
            let back = roundtrip(op);
            assert_eq!(format!("{back:?}"), format!("{op:?}"));
            for call in [None, Some(call)] {
                let j = roundtrip(Joined { op, call });
                assert_eq!(format!("{j:?}"), format!("{:?}", Joined { op, call }));
            }
        }
        let c = CallRec {
            call: LaunchRecord {
                process: 1 << 56,
                thread: (1 << 56) | 7,
                tid: 7,
                driver: true,
                start: 5,
                end: 4,
                correlation: -1,
                graph: true,
            },
            api: Some(3),
            seq: 1,
        };
        assert_eq!(format!("{:?}", roundtrip(c)), format!("{c:?}"));
        let p = CallPart {
            process: 3,
            corr: 4,
            call,
        };
        assert_eq!(format!("{:?}", roundtrip(p)), format!("{p:?}"));
    }
}
