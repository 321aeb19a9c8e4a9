//! [`StreamedConverter`]: the converter for a source that gives its GPU ops in start order
//! with each op's launch call joined to it (an Nsight Systems export, sorted and joined by
//! SQLite). Each op goes through the fold and into the timeline's columns as it comes, and
//! the columns go to disk ([`llmprof_store::spill`]) as they are written, so no op, no launch
//! call and no timeline column is held: what it keeps per op is the durations of the kernel
//! rows (4 bytes each, for their medians).
//!
//! Its results are the batch converter's ([`TraceConverter::finish`]) for the same records,
//! but for which skipped record a diagnostic quotes: the first in time here, the first read
//! there.

use llmprof_bundle::{
    Launch, OpKind, OptU32, Timeline, TimelineCalls, TimelineKernels, TimelineMemOps,
    SCHEMA_VERSION,
};
use llmprof_store::spill::{
    Column, ColumnWriter, SpillDir, SpilledCalls, SpilledKernels, SpilledMemOps, SpilledTimeline,
};
use llmprof_store::RunTimeline;
use rustc_hash::FxHashMap as HashMap;

use super::range_index::RangeIndex;
use super::{span, Nesting, Plan, TraceConverter, TraceParts};
use crate::diagnostics::Diagnostics;
use crate::error::IngestError;
use crate::fold::{LaunchView, OpFold, OpView};
use crate::launches::CallTables;
use crate::ops::Op;
use crate::records::{GpuOpRecord, GraphRef, LaunchRecord};

/// The launch call of a streamed op.
#[derive(Debug, Clone, Copy)]
pub struct JoinedCall {
    /// The call's place among the calls that ran ops, by start: the order of
    /// [`StreamedConverter::handle_call`].
    pub pos: u32,
    pub start: i64,
    pub end: i64,
    /// The calling thread, as ranges name it.
    pub thread: u64,
    /// The call launched a CUDA graph.
    pub graph: bool,
}

/// See the module docs.
#[derive(Debug)]
pub struct StreamedConverter {
    conv: TraceConverter,
    plan: Plan,
    /// Per range: its place in the timeline's ranges (nesting order).
    range_pos: Vec<u32>,
    index: RangeIndex,
    fold: OpFold,
    spill: SpillDir,
    kernels: KernelColumns,
    mem_ops: MemOpColumns,
    calls: CallColumns,
    /// The launch configurations of the kernels, by first sight in start order.
    launches: Vec<Launch>,
    launch_ids: HashMap<Launch, u32>,
    any_graph_id: bool,
    launch_missing: u64,
    launch_missing_example: String,
    /// The first op's start and the last end.
    first_start: Option<i64>,
    last_end: Option<i64>,
}

/// The kernels' columns as they are written: starts absolute, streams as queue ids and
/// kernels as aggregation rows until the end.
#[derive(Debug)]
struct KernelColumns {
    start: ColumnWriter<i64>,
    dur: ColumnWriter<u64>,
    queue: ColumnWriter<u32>,
    row: ColumnWriter<u32>,
    stage: ColumnWriter<OptU32>,
    launch: ColumnWriter<OptU32>,
    range: ColumnWriter<OptU32>,
    graph: ColumnWriter<OptU32>,
    node: ColumnWriter<OptU32>,
    call: ColumnWriter<OptU32>,
}

/// The mem ops' columns, as [`KernelColumns`].
#[derive(Debug)]
struct MemOpColumns {
    start: ColumnWriter<i64>,
    dur: ColumnWriter<u64>,
    queue: ColumnWriter<u32>,
    row: ColumnWriter<u32>,
    bytes: ColumnWriter<u64>,
    stage: ColumnWriter<OptU32>,
    call: ColumnWriter<OptU32>,
}

/// The calls' columns, starts absolute until the end.
#[derive(Debug)]
struct CallColumns {
    start: ColumnWriter<i64>,
    dur: ColumnWriter<u64>,
    thread: ColumnWriter<u32>,
    correlation: ColumnWriter<i64>,
    name: ColumnWriter<OptU32>,
    tables: CallTables,
}

impl TraceConverter {
    /// The streamed converter, after every range was handled: from now on it takes ops in
    /// start order (then end, then input order) with their launch calls joined, and writes
    /// the timeline's columns into `spill`.
    pub fn into_streamed(self, spill: &std::path::Path) -> StreamedConverter {
        let plan = self.plan(Nesting::of(&self.ranges));
        let mut range_pos = vec![0u32; self.ranges.len()];
        for (pos, &r) in plan.nesting.order.iter().enumerate() {
            range_pos[r] = pos as u32;
        }
        let dir = SpillDir::new(spill);
        StreamedConverter {
            index: RangeIndex::of(&self.ranges),
            fold: OpFold::new(self.range_facts(&plan.measured)),
            plan,
            range_pos,
            conv: self,
            kernels: KernelColumns::new(&dir),
            mem_ops: MemOpColumns::new(&dir),
            calls: CallColumns::new(&dir),
            spill: dir,
            launches: Vec::new(),
            launch_ids: HashMap::default(),
            any_graph_id: false,
            launch_missing: 0,
            launch_missing_example: String::new(),
            first_start: None,
            last_end: None,
        }
    }
}

impl StreamedConverter {
    /// `op` in the aggregation rows, as [`Self::handle_op`] takes it; `None`, counted, when
    /// it ends before it starts. Ops can be accepted in any order.
    pub(crate) fn accept(&mut self, op: GpuOpRecord<'_>) -> Option<Op> {
        self.conv.accept_op(op)
    }

    /// The process that ran an accepted op.
    pub(crate) fn process_of(&self, op: &Op) -> u64 {
        self.conv.queues[op.queue as usize].0
    }

    /// The id of API function name `api`, for [`Self::handle_call`].
    pub(crate) fn api_id(&mut self, api: &str) -> u32 {
        self.conv.strings.intern(api)
    }

    /// The next accepted op in start order (then end, then input order), and its launch call
    /// where the trace has it.
    pub(crate) fn handle_op(&mut self, mut op: Op, call: Option<JoinedCall>) {
        if op.graph.is_none() && call.is_some_and(|c| c.graph) {
            op.graph = Some(GraphRef {
                graph: None,
                node: None,
            });
        }
        if op.graph.is_some() {
            self.conv.rows[op.row as usize].graph_calls += 1;
        }
        if let (None, Some(c)) = (call, op.correlation) {
            self.launch_missing += 1;
            if self.launch_missing_example.is_empty() {
                self.launch_missing_example = format!("correlation id {c} (op start {})", op.start);
            }
        }
        let ranges = call.map_or(&[][..], |c| self.index.open_at(c.thread, c.start));
        self.fold.op(OpView {
            start: op.start,
            end: op.end,
            kind: op.kind,
            row: op.row,
            graph: op.graph,
            process: self.conv.queues[op.queue as usize].0,
            correlation: op.correlation,
            launch: call.map(|c| LaunchView {
                key: c.pos as usize,
                cost: span(c.start, c.end),
            }),
            ranges,
        });
        let innermost = ranges.last().copied();
        let stage = OptU32::from(innermost.map(|r| self.conv.ranges[r as usize].stage));
        let call = OptU32::from(call.map(|c| c.pos));
        let dur = span(op.start, op.end);
        if matches!(op.kind, OpKind::Kernel | OpKind::Graph) {
            let launch = op.launch.map(|c| self.launch_id(c));
            let k = &mut self.kernels;
            k.start.push(op.start);
            k.dur.push(dur);
            k.queue.push(op.queue);
            k.row.push(op.row);
            k.stage.push(stage);
            k.range
                .push(OptU32::from(innermost.map(|r| self.range_pos[r as usize])));
            k.launch.push(OptU32::from(launch));
            k.graph.push(OptU32::from(op.graph.and_then(|g| g.graph)));
            k.node.push(OptU32::from(op.graph.and_then(|g| g.node)));
            k.call.push(call);
            self.any_graph_id |= op.graph.is_some_and(|g| g.graph.is_some());
        } else {
            let m = &mut self.mem_ops;
            m.start.push(op.start);
            m.dur.push(dur);
            m.queue.push(op.queue);
            m.row.push(op.row);
            m.bytes.push(op.bytes);
            m.stage.push(stage);
            m.call.push(call);
        }
        self.first_start = Some(self.first_start.map_or(op.start, |s| s.min(op.start)));
        self.last_end = Some(self.last_end.map_or(op.end, |e| e.max(op.end)));
    }

    /// The timeline's id of launch configuration `c` (an index into the converter's), by
    /// first sight.
    fn launch_id(&mut self, c: u32) -> u32 {
        let l = self.conv.launch_configs[c as usize];
        let (launches, ids) = (&mut self.launches, &mut self.launch_ids);
        *ids.entry(l).or_insert_with(|| {
            launches.push(l);
            launches.len() as u32 - 1
        })
    }

    /// The next of the launch calls that ran ops, in start order (then input order): call
    /// `pos` of [`JoinedCall`] is the `pos`-th handled.
    pub(crate) fn handle_call(&mut self, l: LaunchRecord, api: Option<u32>) {
        let c = &mut self.calls;
        c.start.push(l.start);
        c.dur.push(span(l.start, l.end));
        let thread = c.tables.thread(l.tid);
        c.thread.push(thread);
        c.correlation.push(l.correlation);
        let name = c.tables.name(api, l.driver, &self.conv.strings);
        c.name.push(name);
    }

    /// Aggregates what the ops added up to, and finishes the timeline's columns on disk.
    pub fn finish(self, diags: &mut Diagnostics) -> Result<TraceParts, IngestError> {
        let spill_path = self.spill.path().to_path_buf();
        self.finish_columns(diags)
            .map_err(|source| IngestError::Spill {
                path: spill_path,
                source,
            })
    }

    fn finish_columns(self, diags: &mut Diagnostics) -> std::io::Result<TraceParts> {
        let StreamedConverter {
            mut conv,
            plan,
            fold,
            spill,
            kernels,
            mem_ops,
            calls,
            launches,
            any_graph_id,
            launch_missing,
            launch_missing_example,
            first_start,
            last_end,
            ..
        } = self;
        conv.report_skipped(diags);
        super::note_launch_missing(diags, launch_missing, launch_missing_example);
        let streams = conv.streams();
        let t = conv.tables(&plan, fold.finish(), streams.len());
        let (t0, end) = conv.bounds(first_start, last_end);
        let stream_of: Vec<u32> = (conv.queues.iter())
            .map(|q| streams.binary_search(&q.1).unwrap_or(0) as u32)
            .collect();
        let ids = Ids {
            t0,
            row_to_id: &t.row_to_id,
            stream_of: &stream_of,
            spill: &spill,
        };
        // Each group's columns are rewritten with their final values on a thread of its own.
        let has_calls = !calls.start.is_empty();
        let (calls, kernels, mem_ops) = std::thread::scope(|s| {
            let calls = s.spawn(|| calls.finish(&ids));
            let kernels = s.spawn(|| kernels.finish(&ids, any_graph_id, has_calls));
            let mem_ops = mem_ops.finish(&ids, has_calls);
            (joined(calls), joined(kernels), mem_ops)
        });
        let (calls, (kernels, kernel_call), (mem_ops, mem_op_call)) = (calls?, kernels?, mem_ops?);
        let head = Timeline {
            schema_version: SCHEMA_VERSION,
            run_id: String::new(),
            t0_ns: t0,
            end_ns: span(t0, end),
            t0_epoch_ns: None,
            launches,
            streams,
            kernels: TimelineKernels::default(),
            mem_ops: TimelineMemOps::default(),
            ranges: conv.timeline_ranges(&plan.nesting, t0),
            calls: TimelineCalls::default(),
        };
        let timeline = SpilledTimeline {
            head,
            kernels,
            mem_ops,
            calls: SpilledCalls {
                kernel_call,
                mem_op_call,
                ..calls
            },
        };
        Ok(TraceParts {
            stages: t.stages,
            kernels: t.kernels,
            instance_kernels: t.instance_kernels,
            totals: t.totals,
            timeline: RunTimeline::Spilled(Box::new(timeline)),
            collectives: std::mem::take(&mut conv.collectives).finish(),
        })
    }
}

/// What a scoped thread returned (its panic goes on).
fn joined<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> T {
    h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
}

/// What turns the columns as written into the timeline's: times from `t0`, kernel ids,
/// stream indexes.
struct Ids<'a> {
    t0: i64,
    row_to_id: &'a [u32],
    stream_of: &'a [u32],
    spill: &'a SpillDir,
}

impl Ids<'_> {
    fn starts(&self, c: ColumnWriter<i64>) -> std::io::Result<Column<u64>> {
        let t0 = self.t0;
        c.finish()?.map(self.spill, |s| span(t0, s))
    }

    fn kernels(&self, c: ColumnWriter<u32>) -> std::io::Result<Column<u32>> {
        c.finish()?.map(self.spill, |r| self.row_to_id[r as usize])
    }

    fn streams(&self, c: ColumnWriter<u32>) -> std::io::Result<Column<u32>> {
        c.finish()?.map(self.spill, |q| self.stream_of[q as usize])
    }

    /// The op's call column, or an empty one where the run has no calls.
    fn calls(&self, c: ColumnWriter<OptU32>, has_calls: bool) -> std::io::Result<Column<OptU32>> {
        match has_calls {
            true => c.finish(),
            false => self.spill.column().finish(),
        }
    }
}

impl KernelColumns {
    fn new(dir: &SpillDir) -> Self {
        KernelColumns {
            start: dir.column(),
            dur: dir.column(),
            queue: dir.column(),
            row: dir.column(),
            stage: dir.column(),
            launch: dir.column(),
            range: dir.column(),
            graph: dir.column(),
            node: dir.column(),
            call: dir.column(),
        }
    }

    fn finish(
        self,
        ids: &Ids<'_>,
        any_graph_id: bool,
        has_calls: bool,
    ) -> std::io::Result<(SpilledKernels, Column<OptU32>)> {
        let graph = match any_graph_id {
            true => Some((self.graph.finish()?, self.node.finish()?)),
            false => None,
        };
        let kernels = SpilledKernels {
            start: ids.starts(self.start)?,
            dur: self.dur.finish()?,
            stream: ids.streams(self.queue)?,
            kernel: ids.kernels(self.row)?,
            stage: self.stage.finish()?,
            launch: self.launch.finish()?,
            range: self.range.finish()?,
            graph,
        };
        Ok((kernels, ids.calls(self.call, has_calls)?))
    }
}

impl MemOpColumns {
    fn new(dir: &SpillDir) -> Self {
        MemOpColumns {
            start: dir.column(),
            dur: dir.column(),
            queue: dir.column(),
            row: dir.column(),
            bytes: dir.column(),
            stage: dir.column(),
            call: dir.column(),
        }
    }

    fn finish(
        self,
        ids: &Ids<'_>,
        has_calls: bool,
    ) -> std::io::Result<(SpilledMemOps, Column<OptU32>)> {
        let mem_ops = SpilledMemOps {
            start: ids.starts(self.start)?,
            dur: self.dur.finish()?,
            stream: ids.streams(self.queue)?,
            kernel: ids.kernels(self.row)?,
            bytes: self.bytes.finish()?,
            stage: self.stage.finish()?,
        };
        Ok((mem_ops, ids.calls(self.call, has_calls)?))
    }
}

impl CallColumns {
    fn new(dir: &SpillDir) -> Self {
        CallColumns {
            start: dir.column(),
            dur: dir.column(),
            thread: dir.column(),
            correlation: dir.column(),
            name: dir.column(),
            tables: CallTables::default(),
        }
    }

    /// The call columns, but for the ops' (empty here).
    fn finish(self, ids: &Ids<'_>) -> std::io::Result<SpilledCalls> {
        let t0 = ids.t0;
        Ok(SpilledCalls {
            start: self.start.finish()?.map(ids.spill, |s| s - t0)?,
            dur: self.dur.finish()?,
            thread: self.thread.finish()?,
            correlation: self.correlation.finish()?,
            name: self.name.finish()?,
            threads: self.tables.threads,
            names: self.tables.names,
            driver: self.tables.driver,
            kernel_call: ids.spill.column().finish()?,
            mem_op_call: ids.spill.column().finish()?,
        })
    }
}
