//! The converter shared by every trace format: feed it ranges, launch calls and GPU ops with
//! `handle_*`, then `finish()` attributes GPU ops to stages and aggregates the bundle's stages,
//! kernels, totals and timeline.
//!
//! Attribution is Nsight Systems' NVTX projection (`nsys stats -r nvtx_gpu_proj_sum`): a GPU
//! op belongs to every range instance, on the launching thread, inside which the CUDA API call
//! that launched it (joined on `(process, correlation)`) started. A range instance's projected
//! GPU time spans its first attributed op's start to its last attributed op's end.
//!
//! CUDA graphs: a graph launch is one API call whose GPU ops share its correlation id. GPU ops
//! are counted as `nvtx_gpu_proj_sum` counts them (distinct correlation ids of kernels,
//! memcpys and memsets), so a graph launch is one op; graph spans of graph-level traces
//! (`GpuOp::Graph`) count in busy time and graph launches but, as in nsys, not in the GPU ops
//! or the projected span.

use rustc_hash::FxHashMap as HashMap;
use std::borrow::Cow;

use llmprof_bundle::{
    is_library_range, is_warmup, Category, CategorySamples, Distribution, InstanceKernels, Kernel,
    KernelSamples, KernelStage, Launch, OpKind, OptU32, Severity, Stage, StageInstance, StageKind,
    Timeline, TimelineCalls, TimelineKernels, TimelineMemOps, TimelineRanges, Totals,
    SCHEMA_VERSION, TOP_KERNELS,
};

use crate::communication::Collectives;
use crate::diagnostics::Diagnostics;
use crate::error::IngestError;
use crate::fold::{Durations, Folded, InstanceAcc, LaunchView, OpFold, OpView, RangeFacts};
use crate::intern::Interner;
use crate::launched::LaunchedSet;
use crate::launches::{Caller, LaunchCall, Launches};
use crate::ops::{self, Op, Ops};
use crate::records::{GpuOp, GpuOpRecord, GraphRef, LaunchRecord, RangeRecord};
use llmprof_store::RunTimeline;

mod range_index;
mod streamed;

use range_index::RangeSets;

use llmprof_bundle::names;
pub use streamed::{JoinedCall, StreamedConverter};

/// A converter that has read its source, to be finished.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one per run, moved a few times
pub enum Conversion {
    /// It kept the ops: [`TraceConverter::finish_then`].
    Batch(TraceConverter),
    /// It folded the ops as they came: [`StreamedConverter::finish`].
    Streamed(StreamedConverter),
}

impl Conversion {
    pub fn finish(self, diags: &mut Diagnostics) -> Result<TraceParts, IngestError> {
        self.finish_then(diags, || {})
    }

    /// Finishes; `before_timeline` runs before the timeline's columns are built (at once for
    /// the streamed converter, which wrote them as it read). Only the streamed converter can
    /// fail: its columns are on disk.
    pub fn finish_then(
        self,
        diags: &mut Diagnostics,
        before_timeline: impl FnOnce(),
    ) -> Result<TraceParts, IngestError> {
        match self {
            Conversion::Batch(c) => Ok(c.finish_then(diags, before_timeline)),
            Conversion::Streamed(s) => {
                before_timeline();
                s.finish(diags)
            }
        }
    }
}

/// What [`TraceConverter::finish`] produces.
#[derive(Debug)]
pub struct TraceParts {
    pub stages: Vec<Stage>,
    pub kernels: Vec<Kernel>,
    /// Per-instance kernel time of the measured stages.
    pub instance_kernels: Vec<InstanceKernels>,
    pub totals: Totals,
    /// `run_id` is left empty; the run store fills it in.
    pub timeline: RunTimeline,
    /// Communication kernels by collective, process group and dtype.
    pub collectives: Vec<llmprof_bundle::Collective>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct StageKey {
    domain: u32,
    name: u32,
    kind: StageKind,
}

#[derive(Debug)]
struct RangeAcc {
    thread: u64,
    tid: u64,
    stage: u32,
    start: i64,
    end: i64,
    /// GPU work launched inside the range belongs to it (not so for a range ended on another
    /// thread, as Nsight Systems projects it).
    projects: bool,
}

#[derive(Debug)]
struct RowAcc {
    kind: OpKind,
    name: String,
    short_name: String,
    launches: HashMap<Launch, u64>,
    bytes: u64,
    graph_calls: u64,
    /// `names::category` says communication: computed once per name, not per op.
    communication: bool,
}

/// Builds stages, kernels, totals and the timeline from format-free records.
#[derive(Debug, Default)]
pub struct TraceConverter {
    strings: Interner,
    stage_keys: Vec<StageKey>,
    stage_ids: HashMap<StageKey, u32>,
    ranges: Vec<RangeAcc>,
    launches: Launches,
    /// The distinct calling threads of the launches, by first sight.
    callers: Vec<Caller>,
    caller_ids: HashMap<Caller, u32>,
    rows: Vec<RowAcc>,
    /// Row id by name, one map per [`OpKind`].
    row_ids: [HashMap<String, u32>; 4],
    ops: Ops,
    /// The distinct `(process, stream)` pairs of the ops, by first sight.
    queues: Vec<(u64, u64)>,
    queue_ids: HashMap<(u64, u64), u32>,
    /// The distinct launch configurations of the ops, by first sight.
    launch_configs: Vec<Launch>,
    launch_config_ids: HashMap<Launch, u32>,
    bad_ranges: u64,
    bad_range_example: Option<String>,
    bad_ops: u64,
    bad_op_example: Option<String>,
    /// The workload's stage names (`--stages`): ranges of other non-default domains are
    /// library ranges and get no per-instance kernel samples.
    stage_names: Vec<String>,
    collectives: Collectives,
    /// Set by [`TraceConverter::keep_only_launches_of_ops`]: the launch calls kept.
    launched: Option<LaunchedSet>,
}

impl TraceConverter {
    pub fn new() -> Self {
        Self::default()
    }

    /// The converter for a workload whose stages `names` names (the capture's `--stages`).
    pub fn with_stage_names(names: Vec<String>) -> Self {
        TraceConverter {
            stage_names: names,
            ..Self::default()
        }
    }

    /// One range instance. Ranges that end before they start are dropped (and reported).
    pub fn handle_range(&mut self, r: RangeRecord<'_>) {
        if r.end < r.start {
            self.bad_ranges += 1;
            self.bad_range_example.get_or_insert_with(|| {
                format!("range `{}` start {} end {}", r.name, r.start, r.end)
            });
            return;
        }
        let key = StageKey {
            domain: self.strings.intern(r.domain),
            name: self.strings.intern(r.name),
            kind: r.kind,
        };
        let next = self.stage_keys.len() as u32;
        let stage = *self.stage_ids.entry(key).or_insert(next);
        if stage == next {
            self.stage_keys.push(key);
        }
        self.ranges.push(RangeAcc {
            thread: r.thread,
            tid: r.tid,
            stage,
            start: r.start,
            end: r.end,
            projects: !r.ended_on_other_thread,
        });
    }

    /// One CUDA API call that may have launched GPU work, and the API function's name where
    /// the source gives it.
    pub fn handle_launch(&mut self, l: LaunchRecord, api: Option<&str>) {
        if (self.launched.as_ref()).is_some_and(|set| !set.contains(l.process, l.correlation)) {
            return;
        }
        let call = self.launch_call(l, api);
        self.launches.push(call);
    }

    /// `l` as the converter keeps it, its thread and API name interned.
    fn launch_call(&mut self, l: LaunchRecord, api: Option<&str>) -> LaunchCall {
        let key = (l.process, l.thread, l.tid);
        let (callers, ids) = (&mut self.callers, &mut self.caller_ids);
        let caller = *ids.entry(key).or_insert_with(|| {
            callers.push(key);
            callers.len() as u32 - 1
        });
        LaunchCall {
            start: l.start,
            end: l.end,
            correlation: l.correlation,
            caller,
            api: api.map(|a| self.strings.intern(a)),
            driver: l.driver,
            graph: l.graph,
        }
    }

    /// One kernel, memcpy, memset or whole-graph span.
    pub fn handle_gpu_op(&mut self, op: GpuOpRecord<'_>) {
        if let Some(op) = self.accept_op(op) {
            self.ops.push(op);
        }
    }

    /// `op` in the aggregation rows (its row, launch configuration, bytes and collective),
    /// as the converter keeps it; `None`, counted, when it ends before it starts.
    fn accept_op(&mut self, op: GpuOpRecord<'_>) -> Option<Op> {
        if op.end < op.start {
            self.bad_ops += 1;
            self.bad_op_example
                .get_or_insert_with(|| format!("{:?} start {} end {}", op.op, op.start, op.end));
            return None;
        }
        let (kind, name, launch, bytes): (OpKind, Cow<'_, str>, _, _) = match op.op {
            GpuOp::Kernel { name, launch, .. } => (OpKind::Kernel, name.into(), launch, 0),
            GpuOp::Memcpy { direction, bytes } => (
                OpKind::Memcpy,
                format!("[CUDA memcpy {direction}]").into(),
                None,
                bytes,
            ),
            GpuOp::Memset { bytes } => (OpKind::Memset, "[CUDA memset]".into(), None, bytes),
            GpuOp::Graph { graph } => (OpKind::Graph, graph_row_name(graph).into(), None, 0),
        };
        let graph = match op.op {
            GpuOp::Graph { graph } => Some(GraphRef {
                graph: Some(graph),
                node: None,
            }),
            _ => op.graph,
        };
        let row = self.row_of(kind, name, &op.op);
        let acc = &mut self.rows[row as usize];
        if let GpuOp::Kernel { name, comm, .. } = op.op {
            let by_name = acc.communication;
            self.collectives
                .add(name, comm, by_name, span(op.start, op.end));
        }
        acc.bytes += bytes;
        if let Some(l) = launch {
            *acc.launches.entry(l).or_default() += 1;
        }
        let launch = launch.map(|l| self.launch_config(l));
        let queue = self.queue(op.process, op.stream);
        Some(Op {
            start: op.start,
            end: op.end,
            correlation: op.correlation,
            row,
            queue,
            launch,
            bytes,
            kind,
            graph,
        })
    }

    /// From now on, keeps only the launch calls that ran one of the GPU ops handled so far. A
    /// source that reads every op before the launch calls (an Nsight Systems export) calls it
    /// in between, so that the millions of API calls that launch nothing are never kept; no
    /// output changes, since only a call that ran an op is ever looked up. An op handled
    /// after it would find its launch call only if another op already had the same id.
    pub fn keep_only_launches_of_ops(&mut self) {
        self.launched = Some(self.launched_set());
    }

    /// The `(process, correlation id)` pairs of the ops handled so far.
    fn launched_set(&self) -> LaunchedSet {
        LaunchedSet::of(|| {
            (0..self.ops.len()).filter_map(|i| Some((self.process(i), self.ops.correlation(i)?)))
        })
    }

    /// Drops the launch calls that ran none of the ops (for a source that read them before its
    /// ops, such as a PyTorch profiler trace, where most runtime calls launch nothing:
    /// synchronizations, event records). No output changes, since only a call that ran an op
    /// is ever looked up; the joins of `finish` get smaller.
    fn retain_launches_of_ops(&mut self) {
        let set = self.launched_set();
        let callers = &self.callers;
        (self.launches).retain(|caller, corr| set.contains(callers[caller as usize].0, corr));
    }

    /// Makes room for `n` more GPU ops (a source that knows its count says so up front).
    pub fn reserve_ops(&mut self, n: usize) {
        self.ops.reserve_exact(n);
    }

    /// The index of launch configuration `l` in `launch_configs`, added on first sight.
    fn launch_config(&mut self, l: Launch) -> u32 {
        let (configs, ids) = (&mut self.launch_configs, &mut self.launch_config_ids);
        *ids.entry(l).or_insert_with(|| {
            configs.push(l);
            configs.len() as u32 - 1
        })
    }

    /// The index of `(process, stream)` in `queues`, added on first sight.
    fn queue(&mut self, process: u64, stream: u64) -> u32 {
        let (queues, ids) = (&mut self.queues, &mut self.queue_ids);
        *ids.entry((process, stream)).or_insert_with(|| {
            queues.push((process, stream));
            queues.len() as u32 - 1
        })
    }

    /// The process of op `i`.
    fn process(&self, i: usize) -> u64 {
        self.queues[self.ops.queue[i] as usize].0
    }

    /// The aggregation row of a GPU op name, created on first sight.
    fn row_of(&mut self, kind: OpKind, name: Cow<'_, str>, op: &GpuOp<'_>) -> u32 {
        let ids = &mut self.row_ids[kind as usize];
        if let Some(&id) = ids.get(name.as_ref()) {
            return id;
        }
        let id = self.rows.len() as u32;
        let short_name = match *op {
            GpuOp::Kernel {
                short_name: Some(s),
                ..
            } => s.to_string(),
            GpuOp::Kernel { .. } => names::short_name(&name),
            GpuOp::Memcpy { direction, .. } => format!("memcpy {direction}"),
            GpuOp::Memset { .. } => "memset".to_string(),
            GpuOp::Graph { graph } => format!("graph {graph}"),
        };
        ids.insert(name.to_string(), id);
        let communication =
            kind == OpKind::Kernel && names::category(&name) == Category::Communication;
        self.rows.push(RowAcc {
            kind,
            name: name.into_owned(),
            short_name,
            launches: HashMap::default(),
            bytes: 0,
            graph_calls: 0,
            communication,
        });
        id
    }

    /// A converter for the same workload, with nothing handled yet.
    pub fn empty_like(&self) -> Self {
        Self::with_stage_names(self.stage_names.clone())
    }

    /// Whether any GPU op or range was fed.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.ranges.is_empty()
    }

    /// Attributes, aggregates and builds the timeline.
    pub fn finish(self, diags: &mut Diagnostics) -> TraceParts {
        self.finish_then(diags, || {})
    }

    /// [`Self::finish`], calling `before_timeline` before the timeline's columns, the
    /// largest allocation, are built: the caller can wait there for work it runs beside
    /// (the operator table) to finish and free its memory.
    pub fn finish_then(
        mut self,
        diags: &mut Diagnostics,
        before_timeline: impl FnOnce(),
    ) -> TraceParts {
        if self.launched.take().is_none() {
            self.retain_launches_of_ops();
        }
        self.report_skipped(diags);
        let nesting = Nesting::of(&self.ranges);
        let attribution = Attribution::of(&self);
        note_launch_missing(
            diags,
            attribution.launch_missing,
            attribution.launch_missing_example.clone(),
        );
        self.mark_graph_ops(&attribution);
        let order = self.start_order();
        let streams = self.streams();
        let plan = self.plan(nesting);
        let mut fold = OpFold::new(self.range_facts(&plan.measured));
        for &i in &order {
            fold.op(self.view(i as usize, &attribution));
        }
        let t = self.tables(&plan, fold.finish(), streams.len());
        before_timeline();
        let timeline =
            self.build_timeline(&plan.nesting, attribution, &t.row_to_id, &order, streams);
        TraceParts {
            stages: t.stages,
            kernels: t.kernels,
            instance_kernels: t.instance_kernels,
            totals: t.totals,
            timeline: RunTimeline::Built(timeline),
            collectives: std::mem::take(&mut self.collectives).finish(),
        }
    }

    /// The ranges' nesting and what follows from it.
    fn plan(&self, nesting: Nesting) -> Plan {
        let members = self.members(&nesting);
        let measured = self.measured_stages(&nesting, &members);
        Plan {
            nesting,
            members,
            measured,
        }
    }

    /// The bundle's tables from the fold's sums.
    fn tables(&self, plan: &Plan, folded: Folded, streams: usize) -> Tables {
        let stages = self.build_stages(&plan.nesting, &plan.members, &folded.inst);
        let mut row_stages: Vec<Vec<KernelStage>> = vec![Vec::new(); self.rows.len()];
        for ((row, stage), (calls, total_ns)) in folded.row_stage {
            row_stages[row as usize].push(KernelStage {
                stage,
                calls,
                total_ns,
            });
        }
        let (kernels, row_to_id) = self.build_kernels(row_stages, folded.durations);
        let instance_kernels = self.instance_kernels(
            &plan.measured,
            &plan.members,
            &folded.samples,
            &kernels,
            &row_to_id,
        );
        Tables {
            stages,
            kernels,
            row_to_id,
            instance_kernels,
            totals: Totals {
                streams: streams as u32,
                ..folded.totals
            },
        }
    }

    fn report_skipped(&self, diags: &mut Diagnostics) {
        if self.bad_ranges > 0 {
            let example = self.bad_range_example.clone().unwrap_or_default();
            diags.note_n(
                "range_ends_before_start",
                Severity::Warning,
                self.bad_ranges,
                || "ranges whose end precedes their start were skipped".into(),
                || example,
            );
        }
        if self.bad_ops > 0 {
            let example = self.bad_op_example.clone().unwrap_or_default();
            diags.note_n(
                "gpu_op_ends_before_start",
                Severity::Warning,
                self.bad_ops,
                || "GPU ops whose end precedes their start were skipped".into(),
                || example,
            );
        }
    }

    /// Marks every op a graph launch ran (its launch call is a graph launch, or the source
    /// placed it in a graph) and counts graph calls per row.
    fn mark_graph_ops(&mut self, attribution: &Attribution) {
        for i in 0..self.ops.len() {
            // The op's launch, as the attribution joined it, is a graph launch.
            let by_call = attribution
                .launch(i)
                .is_some_and(|l| self.launches.graph(l));
            if self.ops.graph(i).is_none() && by_call {
                self.ops.set_graph(
                    i,
                    Some(GraphRef {
                        graph: None,
                        node: None,
                    }),
                );
            }
            if self.ops.graph(i).is_some() {
                self.rows[self.ops.row[i] as usize].graph_calls += 1;
            }
        }
    }

    /// Op `i` as the fold sees it.
    fn view<'a>(&self, i: usize, attribution: &'a Attribution) -> OpView<'a> {
        let ops = &self.ops;
        let launch = attribution.launch(i).map(|l| LaunchView {
            key: l,
            cost: span(self.launches.start[l], self.launches.end[l]),
        });
        OpView {
            start: ops.start[i],
            end: ops.end[i],
            kind: ops.kind[i],
            row: ops.row[i],
            graph: ops.graph(i),
            process: self.process(i),
            correlation: ops.correlation(i),
            launch,
            ranges: attribution.ranges_of(i),
        }
    }

    /// Per stage, whether it is measured ([`Self::is_measured`]).
    fn measured_stages(&self, nesting: &Nesting, members: &[Vec<usize>]) -> Vec<bool> {
        (0..self.stage_keys.len())
            .map(|id| self.is_measured(id, &members[id], nesting))
            .collect()
    }

    /// What the fold needs of each range instance.
    fn range_facts(&self, measured: &[bool]) -> Vec<RangeFacts> {
        (self.ranges.iter())
            .map(|r| RangeFacts {
                stage: r.stage,
                start: r.start,
                end: r.end,
                measured: measured[r.stage as usize],
            })
            .collect()
    }

    /// Per stage, its range instances in nesting order (the order of `instance_list`).
    fn members(&self, nesting: &Nesting) -> Vec<Vec<usize>> {
        let mut by_stage: Vec<Vec<usize>> = vec![Vec::new(); self.stage_keys.len()];
        for &r in &nesting.order {
            by_stage[self.ranges[r].stage as usize].push(r);
        }
        by_stage
    }

    fn build_stages(
        &self,
        nesting: &Nesting,
        by_stage: &[Vec<usize>],
        inst: &[InstanceAcc],
    ) -> Vec<Stage> {
        self.stage_keys
            .iter()
            .enumerate()
            .map(|(id, key)| {
                let members = &by_stage[id];
                let mut walls: Vec<u64> = members
                    .iter()
                    .map(|&r| span(self.ranges[r].start, self.ranges[r].end))
                    .collect();
                let wall = Distribution::from_samples(&mut walls);
                let (parent, parents) = self.parents_of(nesting, members);
                let depth = members.first().map_or(0, |&r| nesting.depth[r]);
                let instance_list: Vec<StageInstance> = members
                    .iter()
                    .map(|&r| {
                        let range = &self.ranges[r];
                        let a = &inst[r];
                        StageInstance {
                            start_ns: range.start,
                            end_ns: range.end,
                            wall_ns: span(range.start, range.end),
                            tid: range.tid,
                            gpu_ops: a.gpu_ops,
                            kernel_ns: a.kernel_ns,
                            gpu_start_ns: a.gpu_start,
                            gpu_end_ns: a.gpu_end,
                            gpu_busy_ns: a.busy,
                            warmup: false,
                        }
                    })
                    .collect();
                let sum = |f: &dyn Fn(&InstanceAcc) -> u64| -> u64 {
                    members.iter().map(|&r| f(&inst[r])).sum()
                };
                let gpu_busy_ns = sum(&|a| a.busy);
                Stage {
                    id: id as u32,
                    domain: self.strings.get(key.domain).to_string(),
                    name: self.strings.get(key.name).to_string(),
                    kind: key.kind,
                    parent,
                    parents,
                    depth,
                    instances: members.len() as u64,
                    wall_ns: wall.total_ns,
                    gpu_proj_ns: sum(&|a| match (a.gpu_start, a.gpu_end) {
                        (Some(s), Some(e)) => span(s, e),
                        _ => 0,
                    }),
                    gpu_ops: sum(&|a| a.gpu_ops),
                    kernel_ns: sum(&|a| a.kernel_ns),
                    kernels: sum(&|a| a.kernels),
                    launches: sum(&|a| a.launches),
                    launch_api_ns: sum(&|a| a.launch_ns),
                    gpu_busy_ns,
                    gpu_busy_pct: pct(gpu_busy_ns, sum(&|a| a.window_ns)),
                    graph_launches: sum(&|a| a.graph_launches),
                    graph_kernels: sum(&|a| a.graph_kernels),
                    graph_busy_ns: sum(&|a| a.graph_busy),
                    wall,
                    instance_list,
                }
            })
            .collect()
    }

    /// The stage enclosing every one of `members` (range indexes of one stage), or, when
    /// they sit in different places, `None` and each distinct enclosing stage (`None`: the
    /// top level) in order of first appearance.
    fn parents_of(&self, nesting: &Nesting, members: &[usize]) -> (Option<u32>, Vec<Option<u32>>) {
        let mut parents: Vec<Option<u32>> = Vec::new();
        for &r in members {
            let p = nesting.parent[r].map(|p| self.ranges[p as usize].stage);
            if !parents.contains(&p) {
                parents.push(p);
            }
        }
        match parents.as_slice() {
            [] => (None, parents),
            [one] => (*one, Vec::new()),
            _ => (None, parents),
        }
    }

    /// Kernel rows sorted like `cuda_gpu_kern_sum` (total time, descending); returns the rows
    /// and the map from accumulation order to final id.
    fn build_kernels(
        &self,
        row_stages: Vec<Vec<KernelStage>>,
        mut durations: Vec<Durations>,
    ) -> (Vec<Kernel>, Vec<u32>) {
        durations.resize_with(self.rows.len(), Durations::default);
        let mut kind_total: HashMap<OpKind, u64> = HashMap::default();
        let mut rows: Vec<(u32, Kernel)> = self
            .rows
            .iter()
            .zip(row_stages)
            .zip(durations)
            .enumerate()
            .map(|(i, ((acc, mut by_stage), durations))| {
                let d = Distribution::from_samples(&mut durations.into_vec());
                *kind_total.entry(acc.kind).or_default() += d.total_ns;
                let mut launches: Vec<(&Launch, &u64)> = acc.launches.iter().collect();
                launches.sort_by(|a, b| b.1.cmp(a.1).then_with(|| a.0.grid.cmp(&b.0.grid)));
                by_stage.sort_by_key(|s| s.stage);
                let category = match acc.kind {
                    OpKind::Kernel => names::category(&acc.name),
                    OpKind::Memcpy | OpKind::Memset => Category::MemcpyMemset,
                    OpKind::Graph => Category::CudaGraph,
                };
                let kernel = Kernel {
                    id: 0,
                    kind: acc.kind,
                    name: acc.name.clone(),
                    short_name: acc.short_name.clone(),
                    category,
                    calls: d.count,
                    total_ns: d.total_ns,
                    mean_ns: d.mean_ns,
                    median_ns: d.median_ns,
                    min_ns: d.min_ns,
                    max_ns: d.max_ns,
                    std_ns: d.std_ns,
                    time_pct: 0.0,
                    by_stage,
                    launch: launches.first().map(|(l, _)| **l),
                    launch_variants: launches.len() as u32,
                    bytes: matches!(acc.kind, OpKind::Memcpy | OpKind::Memset).then_some(acc.bytes),
                    graph_calls: acc.graph_calls,
                    ncu: Vec::new(),
                };
                (i as u32, kernel)
            })
            .collect();
        rows.sort_by(|a, b| {
            a.1.kind
                .cmp(&b.1.kind)
                .then(b.1.total_ns.cmp(&a.1.total_ns))
                .then_with(|| a.1.name.cmp(&b.1.name))
        });
        let mut row_to_id = vec![0u32; rows.len()];
        let kernels = rows
            .into_iter()
            .enumerate()
            .map(|(id, (acc_idx, mut k))| {
                row_to_id[acc_idx as usize] = id as u32;
                k.id = id as u32;
                k.time_pct = pct(k.total_ns, kind_total.get(&k.kind).copied().unwrap_or(0));
                k
            })
            .collect();
        (kernels, row_to_id)
    }

    /// Whether stage `id` is measured: its first instance is at the top level, and it is
    /// neither a warm-up nor a library range.
    fn is_measured(&self, id: usize, members: &[usize], nesting: &Nesting) -> bool {
        let key = self.stage_keys[id];
        let name = self.strings.get(key.name);
        members.first().is_some_and(|&r| nesting.depth[r] == 0)
            && !is_warmup(name)
            && !is_library_range(self.strings.get(key.domain), name, &self.stage_names)
    }

    /// Kernel time per instance of each measured stage, by category and for the run's top
    /// kernels (`kernels` rows of kind kernel with an id below [`TOP_KERNELS`]; kernel rows
    /// sort first, by total time), from the fold's per (instance, row) sums. Series that are 0
    /// in every instance are left out.
    fn instance_kernels(
        &self,
        measured: &[bool],
        by_stage: &[Vec<usize>],
        samples: &HashMap<(u32, u32), u64>,
        kernels: &[Kernel],
        row_to_id: &[u32],
    ) -> Vec<InstanceKernels> {
        let mut acc: Vec<Option<SampleAcc>> = vec![None; self.ranges.len()];
        for (&(r, row), &ns) in samples {
            let id = row_to_id[row as usize] as usize;
            let Some(k) = kernels.get(id) else { continue };
            let a = acc[r as usize].get_or_insert_with(SampleAcc::default);
            if let Some(c) = Category::ALL.iter().position(|&c| c == k.category) {
                a.category[c] += ns;
            }
            if id < TOP_KERNELS {
                a.top[id] += ns;
            }
        }
        (0..self.stage_keys.len())
            .filter(|&id| measured[id])
            .map(|id| stage_samples(id as u32, &by_stage[id], &acc))
            .collect()
    }

    /// Op indices by start, then end, then input order.
    fn start_order(&self) -> Vec<u32> {
        let mut order: Vec<u32> = (0..self.ops.len() as u32).collect();
        order.sort_unstable_by_key(|&i| {
            let i = i as usize;
            (self.ops.start[i], self.ops.end[i], i)
        });
        order
    }

    /// The distinct streams of the ops, sorted.
    fn streams(&self) -> Vec<u64> {
        let mut streams: Vec<u64> = self.queues.iter().map(|q| q.1).collect();
        streams.sort_unstable();
        streams.dedup();
        streams
    }

    /// The first start and the last end of every op and range (0, 0 when there is none).
    fn time_bounds(&self) -> (i64, i64) {
        let first = self.ops.start.iter().min().copied();
        let last = self.ops.end.iter().max().copied();
        self.bounds(first, last)
    }

    /// The first start and the last end of the ranges and of ops that start at `first` and
    /// end at `last`.
    fn bounds(&self, first: Option<i64>, last: Option<i64>) -> (i64, i64) {
        let t0 = (first.into_iter().chain(self.ranges.iter().map(|r| r.start)))
            .min()
            .unwrap_or(0);
        let end = (last.into_iter().chain(self.ranges.iter().map(|r| r.end)))
            .max()
            .unwrap_or(t0);
        (t0, end)
    }

    /// The range instances in nesting order, times relative to `t0`.
    fn timeline_ranges(&self, nesting: &Nesting, t0: i64) -> TimelineRanges {
        let mut ranges = TimelineRanges::default();
        for &r in &nesting.order {
            let range = &self.ranges[r];
            ranges.start.push(span(t0, range.start));
            ranges.dur.push(span(range.start, range.end));
            ranges.stage.push(range.stage);
            ranges.depth.push(nesting.depth[r]);
            ranges.tid.push(range.tid);
        }
        ranges
    }

    /// The timeline. Its columns are gathered from the ops' one at a time, in start order,
    /// and what no later column needs is dropped at once: the ops' correlation ids first, the
    /// launch records once their calls are built, the attribution once the calls and stages of
    /// the ops are, each of the ops' columns once turned into the timeline's. The peak is thus
    /// the ops plus a few columns, not the ops and the whole timeline.
    fn build_timeline(
        &mut self,
        nesting: &Nesting,
        attribution: Attribution,
        row_to_id: &[u32],
        order: &[u32],
        streams: Vec<u64>,
    ) -> Timeline {
        let (t0, end) = self.time_bounds();
        self.ops.correlation = Vec::new();
        let (mut calls, call_pos) = self.timeline_calls(&attribution, t0);
        let mut ops = std::mem::take(&mut self.ops);
        let n_kernels = (0..ops.len()).filter(|&i| ops.in_kernel_columns(i)).count();
        if !calls.is_empty() {
            (calls.kernel_call, calls.mem_op_call) = ops::split(&ops, order, n_kernels, |i| {
                OptU32::from(attribution.launch(i).map(|l| call_pos[l]))
            });
        }
        drop(call_pos);
        let mut kernels = TimelineKernels::default();
        let mut mem_ops = TimelineMemOps::default();
        // Range index -> its position in the timeline's ranges (written in nesting order).
        let mut range_pos = vec![0u32; self.ranges.len()];
        for (pos, &r) in nesting.order.iter().enumerate() {
            range_pos[r] = pos as u32;
        }
        (kernels.stage, mem_ops.stage) = ops::split(&ops, order, n_kernels, |i| {
            OptU32::from(
                attribution
                    .innermost(i)
                    .map(|r| self.ranges[r as usize].stage),
            )
        });
        kernels.range = ops::kernels_only(&ops, order, n_kernels, |i| {
            OptU32::from(attribution.innermost(i).map(|r| range_pos[r as usize]))
        });
        drop((attribution, range_pos));
        (kernels.dur, mem_ops.dur) = ops::split(&ops, order, n_kernels, |i| ops.dur(i));
        ops.end = Vec::new();
        (kernels.start, mem_ops.start) =
            ops::split(&ops, order, n_kernels, |i| span(t0, ops.start[i]));
        ops.start = Vec::new();
        let stream_idx = |s: u64| streams.binary_search(&s).unwrap_or(0) as u32;
        (kernels.stream, mem_ops.stream) = ops::split(&ops, order, n_kernels, |i| {
            stream_idx(self.queues[ops.queue[i] as usize].1)
        });
        ops.queue = Vec::new();
        (kernels.kernel, mem_ops.kernel) =
            ops::split(&ops, order, n_kernels, |i| row_to_id[ops.row[i] as usize]);
        ops.row = Vec::new();
        let mut launches: Vec<Launch> = Vec::new();
        let mut launch_ids: HashMap<Launch, u32> = HashMap::default();
        kernels.launch = ops::kernels_only(&ops, order, n_kernels, |i| {
            OptU32::from(ops.launch(i).map(|c| {
                let l = self.launch_configs[c as usize];
                *launch_ids.entry(l).or_insert_with(|| {
                    launches.push(l);
                    launches.len() as u32 - 1
                })
            }))
        });
        mem_ops.bytes = (order.iter().map(|&i| i as usize))
            .filter(|&i| !ops.in_kernel_columns(i))
            .map(|i| ops.bytes(i))
            .collect();
        if (0..ops.len()).any(|i| ops.graph(i).is_some_and(|g| g.graph.is_some())) {
            kernels.graph = ops::kernels_only(&ops, order, n_kernels, |i| {
                OptU32::from(ops.graph(i).and_then(|g| g.graph))
            });
            kernels.graph_node = ops::kernels_only(&ops, order, n_kernels, |i| {
                OptU32::from(ops.graph(i).and_then(|g| g.node))
            });
        }
        drop(ops);
        let ranges = self.timeline_ranges(nesting, t0);
        Timeline {
            schema_version: SCHEMA_VERSION,
            run_id: String::new(),
            t0_ns: t0,
            end_ns: span(t0, end),
            t0_epoch_ns: None,
            launches,
            streams,
            kernels,
            mem_ops,
            ranges,
            calls,
        }
    }

    /// The launch calls of the traced ops, sorted by start, and per launch record its
    /// position among them ([`NO_LAUNCH`] for those that ran no traced op). Takes the launch
    /// records: nothing after the timeline's calls needs them.
    fn timeline_calls(&mut self, attribution: &Attribution, t0: i64) -> (TimelineCalls, Vec<u32>) {
        // A graph launch's ops come together: one entry for the run of them.
        let mut last = None;
        let mut used: Vec<u32> = (0..self.ops.len())
            .filter_map(|i| attribution.launch(i).map(|l| l as u32))
            .filter(|&l| last.replace(l) != Some(l))
            .collect();
        let starts = &self.launches.start;
        used.sort_unstable_by_key(|&l| (starts[l as usize], l));
        used.dedup();
        let mut pos = vec![NO_LAUNCH; if used.is_empty() { 0 } else { starts.len() }];
        for (p, &l) in used.iter().enumerate() {
            pos[l as usize] = p as u32;
        }
        let launches = std::mem::take(&mut self.launches);
        let calls = launches.into_calls(&used, t0, &self.callers, &self.strings);
        (calls, pos)
    }
}

/// One range instance's kernel time per category ([`Category::ALL`] order) and per top kernel
/// (by kernel id).
#[derive(Debug, Clone, Default)]
struct SampleAcc {
    category: [u64; Category::ALL.len()],
    top: [u64; TOP_KERNELS],
}

/// The series of stage `stage` from its instances' accumulators, all-zero series left out.
fn stage_samples(stage: u32, members: &[usize], acc: &[Option<SampleAcc>]) -> InstanceKernels {
    let series = |f: &dyn Fn(&SampleAcc) -> u64| -> Option<Vec<u64>> {
        let ns: Vec<u64> = members
            .iter()
            .map(|&r| acc[r].as_ref().map_or(0, f))
            .collect();
        ns.iter().any(|&v| v > 0).then_some(ns)
    };
    InstanceKernels {
        stage,
        categories: Category::ALL
            .iter()
            .enumerate()
            .filter_map(|(i, &category)| {
                series(&|a| a.category[i]).map(|ns| CategorySamples { category, ns })
            })
            .collect(),
        kernels: (0..TOP_KERNELS)
            .filter_map(|i| {
                series(&|a| a.top[i]).map(|ns| KernelSamples {
                    kernel: i as u32,
                    ns,
                })
            })
            .collect(),
    }
}

/// Says how many GPU ops have no launch call in the trace.
fn note_launch_missing(diags: &mut Diagnostics, count: u64, example: String) {
    diags.note_n(
        "gpu_op_launch_not_recorded",
        Severity::Info,
        count,
        || {
            "GPU ops whose launching CUDA API call is not in the trace; they count in the \
             totals and the kernel table but in no stage"
                .into()
        },
        || example,
    );
}

/// The ranges' nesting, each stage's instances in nesting order, and which stages are
/// measured.
#[derive(Debug)]
struct Plan {
    nesting: Nesting,
    members: Vec<Vec<usize>>,
    measured: Vec<bool>,
}

/// The bundle's tables, and the map from aggregation row to kernel id.
struct Tables {
    stages: Vec<Stage>,
    kernels: Vec<Kernel>,
    row_to_id: Vec<u32>,
    instance_kernels: Vec<InstanceKernels>,
    totals: Totals,
}

/// Range order, nesting depth and enclosing range per thread.
#[derive(Debug)]
struct Nesting {
    /// Range indexes sorted by (start, longer first, thread).
    order: Vec<usize>,
    depth: Vec<u32>,
    parent: Vec<Option<u32>>,
}

impl Nesting {
    fn of(ranges: &[RangeAcc]) -> Nesting {
        let mut order: Vec<usize> = (0..ranges.len()).collect();
        order.sort_by_key(|&i| {
            (
                ranges[i].start,
                std::cmp::Reverse(ranges[i].end),
                ranges[i].thread,
            )
        });
        let mut depth = vec![0u32; ranges.len()];
        let mut parent = vec![None; ranges.len()];
        let mut stacks: HashMap<u64, Vec<usize>> = HashMap::default();
        for &i in &order {
            let r = &ranges[i];
            // The thread's open ranges, by start. A range nests in those that contain it
            // whole; start/end ranges can overlap without nesting, and then neither is the
            // other's parent (Nsight Systems' range level).
            let open = stacks.entry(r.thread).or_default();
            open.retain(|&o| ranges[o].end > r.start);
            let mut containing = open.iter().filter(|&&o| ranges[o].end >= r.end);
            depth[i] = containing.clone().count() as u32;
            parent[i] = containing.next_back().map(|&p| p as u32);
            open.push(i);
        }
        Nesting {
            order,
            depth,
            parent,
        }
    }
}

/// Which launch ran each GPU op, and which range instances each launch belongs to.
///
/// Kept small: a 1 GB trace has millions of ops and launches. Launches are found by binary
/// search in one sorted index rather than hash maps, and ranges are stored once per launch
/// (all the ops of a launch share them).
struct Attribution {
    /// Per op: the launch record with its `(process, correlation)` (the last in input order
    /// where several have it), or [`NO_LAUNCH`].
    launch_of_op: Vec<u32>,
    /// Per launch, the range instances open on its thread at its start, outermost first.
    ranges: OpenRanges,
    launch_missing: u64,
    launch_missing_example: String,
}

const NO_LAUNCH: u32 = u32::MAX;

impl Attribution {
    fn of(conv: &TraceConverter) -> Attribution {
        let (launches, callers) = (&conv.launches, &conv.callers);
        let ranges = launch_ranges(&conv.ranges, launches, callers);
        let process = |l: u32| callers[launches.caller[l as usize] as usize].0;
        let key = |l: u32| (process(l), launches.correlation[l as usize], l);
        // Launch indices by (process, correlation, index).
        let mut by_key: Vec<u32> = (0..launches.len() as u32).collect();
        by_key.sort_unstable_by_key(|&l| key(l));
        let mut launch_missing = 0;
        let mut launch_missing_example = String::new();
        let launch_of_op = (0..conv.ops.len())
            .map(|i| {
                let Some(corr) = conv.ops.correlation(i) else {
                    return NO_LAUNCH;
                };
                let p = conv.process(i);
                let end = by_key.partition_point(|&l| key(l) <= (p, corr, NO_LAUNCH));
                match end.checked_sub(1).map(|i| by_key[i]) {
                    Some(l) if key(l).0 == p && key(l).1 == corr => l,
                    _ => {
                        launch_missing += 1;
                        if launch_missing_example.is_empty() {
                            launch_missing_example =
                                format!("correlation id {corr} (op start {})", conv.ops.start[i]);
                        }
                        NO_LAUNCH
                    }
                }
            })
            .collect();
        Attribution {
            launch_of_op,
            ranges,
            launch_missing,
            launch_missing_example,
        }
    }

    /// The launch record that ran `op`, if the trace has it.
    fn launch(&self, op: usize) -> Option<usize> {
        let l = self.launch_of_op[op];
        (l != NO_LAUNCH).then_some(l as usize)
    }

    /// The range instances `op` belongs to, outermost first.
    fn ranges_of(&self, op: usize) -> &[u32] {
        let Some(l) = self.launch(op) else {
            return &[];
        };
        self.ranges.of(l)
    }

    fn innermost(&self, op: usize) -> Option<u32> {
        self.ranges_of(op).last().copied()
    }
}

/// Per launch, the range instances open on its thread at its start, outermost first. Launches
/// in a row on one thread mostly share one set: each distinct run of a set is stored once.
#[derive(Debug, Default)]
struct OpenRanges {
    /// Per launch, its set (an id in `sets`), or [`NO_SET`].
    set_of: Vec<u32>,
    sets: RangeSets,
}

const NO_SET: u32 = u32::MAX;

impl OpenRanges {
    fn of(&self, launch: usize) -> &[u32] {
        match self.set_of[launch] {
            NO_SET => &[],
            s => self.sets.get(s),
        }
    }

    /// Gives `launch` the set `active`.
    fn set(&mut self, launch: u32, active: &[u32]) {
        self.set_of[launch as usize] = self.sets.intern(active);
    }
}

/// Per launch, the range instances open on its thread at its start. A range ended on another
/// thread owns no GPU work.
fn launch_ranges(ranges: &[RangeAcc], launches: &Launches, callers: &[Caller]) -> OpenRanges {
    let thread = |l: u32| callers[launches.caller[l as usize] as usize].1;
    // Ranges per thread, by start, longest first.
    let mut thread_ranges: HashMap<u64, Vec<u32>> = HashMap::default();
    for (i, r) in ranges.iter().enumerate().filter(|(_, r)| r.projects) {
        thread_ranges.entry(r.thread).or_default().push(i as u32);
    }
    for list in thread_ranges.values_mut() {
        list.sort_by_key(|&i| {
            (
                ranges[i as usize].start,
                std::cmp::Reverse(ranges[i as usize].end),
            )
        });
    }
    // Launches on threads that have ranges, by thread and start.
    let mut order: Vec<u32> = (0..launches.len() as u32)
        .filter(|&l| thread_ranges.contains_key(&thread(l)))
        .collect();
    order.sort_unstable_by_key(|&l| (thread(l), launches.start[l as usize], l));
    let mut open = OpenRanges {
        set_of: vec![NO_SET; launches.len()],
        ..OpenRanges::default()
    };
    let mut active: Vec<u32> = Vec::new();
    for group in order.chunk_by(|&a, &b| thread(a) == thread(b)) {
        let rs = &thread_ranges[&thread(group[0])];
        let mut next = 0;
        active.clear();
        for &li in group {
            let start = launches.start[li as usize];
            while next < rs.len() && ranges[rs[next] as usize].start <= start {
                active.push(rs[next]);
                next += 1;
            }
            active.retain(|&r| ranges[r as usize].end > start);
            if !active.is_empty() {
                open.set(li, &active);
            }
        }
    }
    open
}

/// The `kernels[]` name of a graph traced whole.
fn graph_row_name(graph: u32) -> String {
    format!("CUDA graph {graph}")
}

/// `end - start` in ns, 0 when negative, without overflow for any pair of i64 timestamps.
pub(crate) fn span(start: i64, end: i64) -> u64 {
    (end as i128 - start as i128).clamp(0, u64::MAX as i128) as u64
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use llmprof_bundle::Source;

    fn range(thread: u64, name: &str, start: i64, end: i64) -> RangeRecord<'_> {
        RangeRecord {
            ended_on_other_thread: false,
            thread,
            tid: thread,
            domain: "",
            name,
            kind: StageKind::PushPop,
            start,
            end,
        }
    }

    fn kernel(corr: i64, start: i64, end: i64) -> GpuOpRecord<'static> {
        GpuOpRecord {
            process: 1,
            correlation: Some(corr),
            stream: 7,
            start,
            end,
            op: GpuOp::Kernel {
                name: "void k<(int)1>(int)",
                short_name: None,
                launch: None,
                comm: None,
            },
            graph: None,
        }
    }

    fn launch(thread: u64, start: i64, correlation: i64, graph: bool) -> LaunchRecord {
        LaunchRecord {
            process: 1,
            thread,
            tid: thread,
            driver: false,
            start,
            end: start + 1,
            correlation,
            graph,
        }
    }

    #[test]
    fn attributes_by_launch_start_and_projects_gpu_span() {
        let mut c = TraceConverter::new();
        c.handle_range(range(10, "outer", 0, 100));
        c.handle_range(range(10, "inner", 10, 20));
        // Launched inside `inner`; runs long after both ranges ended.
        c.handle_launch(
            LaunchRecord {
                process: 1,
                thread: 10,
                tid: 10,
                driver: false,
                start: 15,
                end: 16,
                correlation: 1,
                graph: false,
            },
            None,
        );
        c.handle_gpu_op(kernel(1, 500, 510));
        // Launched inside `outer` only.
        c.handle_launch(
            LaunchRecord {
                process: 1,
                thread: 10,
                tid: 10,
                driver: false,
                start: 50,
                end: 52,
                correlation: 2,
                graph: false,
            },
            None,
        );
        c.handle_gpu_op(kernel(2, 520, 540));
        // Launched on another thread: attributed to nothing.
        c.handle_launch(
            LaunchRecord {
                process: 1,
                thread: 11,
                tid: 11,
                driver: false,
                start: 50,
                end: 51,
                correlation: 3,
                graph: false,
            },
            None,
        );
        c.handle_gpu_op(kernel(3, 600, 601));
        let mut d = Diagnostics::new(Source::Nsys, "x");
        let p = c.finish(&mut d);
        let outer = &p.stages[0];
        let inner = &p.stages[1];
        assert_eq!(
            (outer.gpu_ops, outer.gpu_proj_ns, outer.kernel_ns),
            (2, 40, 30)
        );
        assert_eq!(outer.gpu_busy_ns, 30);
        assert_eq!((inner.gpu_ops, inner.gpu_proj_ns), (1, 10));
        assert_eq!((inner.parent, inner.depth), (Some(0), 1));
        // Launch API cost: both launches inside `outer` (1 + 2 ns), one inside `inner`.
        assert_eq!((outer.launches, outer.launch_api_ns), (2, 3));
        assert_eq!((inner.launches, inner.launch_api_ns), (1, 1));
        assert_eq!(p.totals.unattributed_gpu_ops, 1);
        assert_eq!(
            p.timeline.load().unwrap().kernels.stage,
            vec![Some(1), Some(0), None]
        );
        assert_eq!(p.kernels[0].by_stage.len(), 2);
        assert!(d.is_empty());
    }

    /// Per-instance kernel samples: measured stages only (top level, not warm-up, not a
    /// library range unless the workload named it), one value per instance, by category and
    /// per kernel, summing to the stage's totals.
    #[test]
    fn measured_stages_get_per_instance_kernel_time() {
        let feed = |c: &mut TraceConverter| {
            c.handle_range(range(10, "warmup_decode", 0, 100));
            c.handle_range(range(10, "decode", 200, 300));
            c.handle_range(range(10, "step", 210, 220));
            c.handle_range(range(10, "decode", 400, 500));
            c.handle_range(RangeRecord {
                domain: "CCCL",
                ..range(10, "scan", 600, 700)
            });
            let gemm = |corr, start, end| GpuOpRecord {
                op: GpuOp::Kernel {
                    name: "void gemm_kernel<(int)1>(int)",
                    short_name: None,
                    launch: None,
                    comm: None,
                },
                ..kernel(corr, start, end)
            };
            // warm-up, decode #1 (inside `step` too), decode #2, decode #2, the CCCL range.
            for (corr, at) in [(1, 10), (2, 215), (3, 410), (4, 420), (5, 610)] {
                c.handle_launch(launch(10, at, corr, false), None);
            }
            c.handle_gpu_op(gemm(1, 1000, 1100));
            c.handle_gpu_op(kernel(2, 1200, 1230));
            c.handle_gpu_op(gemm(3, 1300, 1340));
            c.handle_gpu_op(kernel(4, 1400, 1405));
            c.handle_gpu_op(kernel(5, 1500, 1507));
        };
        let mut c = TraceConverter::new();
        feed(&mut c);
        let p = c.finish(&mut Diagnostics::new(Source::Nsys, "x"));
        assert_eq!(p.instance_kernels.len(), 1, "{:?}", p.instance_kernels);
        let ik = &p.instance_kernels[0];
        let decode = &p.stages[ik.stage as usize];
        assert_eq!((decode.name.as_str(), decode.instances), ("decode", 2));
        let cats: Vec<(Category, &[u64])> = ik
            .categories
            .iter()
            .map(|s| (s.category, &s.ns[..]))
            .collect();
        assert_eq!(
            cats,
            vec![
                (Category::Gemm, &[0, 40][..]),
                (Category::Other, &[30, 5][..])
            ]
        );
        for s in &ik.kernels {
            let k = &p.kernels[s.kernel as usize];
            let by_stage = k.by_stage.iter().find(|b| b.stage == ik.stage).unwrap();
            assert_eq!(s.ns.iter().sum::<u64>(), by_stage.total_ns, "{}", k.name);
        }
        assert_eq!(ik.kernels.len(), 2);
        let sum: u64 = ik.categories.iter().flat_map(|s| &s.ns).sum();
        assert_eq!(sum, decode.kernel_ns);
        // Named by the capture's --stages, the CCCL range is a stage of the workload.
        let mut c = TraceConverter::with_stage_names(vec!["CCCL:scan".into()]);
        feed(&mut c);
        let p = c.finish(&mut Diagnostics::new(Source::Nsys, "x"));
        let names: Vec<&str> = p
            .instance_kernels
            .iter()
            .map(|s| p.stages[s.stage as usize].name.as_str())
            .collect();
        assert_eq!(names, vec!["decode", "scan"]);
    }

    /// One decode range: a plain kernel (correlation 1) and a graph launch (correlation 2)
    /// whose three kernels share its correlation id, as nsys records them at node level.
    /// A library range inside a warm-up prefill, a prefill and a decode, and once at the top
    /// level: no single parent, each place listed once in order; a range always inside
    /// `decode` keeps it as its parent, whichever thread it ran on.
    #[test]
    fn a_range_in_different_parents_is_not_nested_under_the_first() {
        let mut c = TraceConverter::new();
        for (name, start, end) in [
            ("warmup_prefill", 0, 100),
            ("scan", 10, 20),
            ("prefill", 200, 300),
            ("scan", 210, 220),
            ("scan", 230, 240),
            ("scan", 350, 360),
            ("decode", 400, 500),
            ("scan", 410, 420),
            ("step", 430, 440),
        ] {
            c.handle_range(range(10, name, start, end));
        }
        c.handle_range(range(11, "decode", 400, 500));
        c.handle_range(range(11, "step", 410, 420));
        let p = c.finish(&mut Diagnostics::new(Source::Nsys, "x"));
        let id = |n: &str| p.stages.iter().find(|s| s.name == n).unwrap().id;
        let scan = &p.stages[id("scan") as usize];
        assert_eq!(scan.parent, None);
        let want = [
            Some(id("warmup_prefill")),
            Some(id("prefill")),
            None,
            Some(id("decode")),
        ];
        assert_eq!(scan.parents, want);
        assert!(scan.has_mixed_parents());
        assert_eq!((scan.instances, scan.depth), (5, 1));
        let step = &p.stages[id("step") as usize];
        assert_eq!((step.parent, step.parents.len()), (Some(id("decode")), 0));
        assert!(p.stages[id("prefill") as usize].parents.is_empty());
    }

    #[test]
    fn node_level_graph_launch_is_one_gpu_op_and_keeps_its_kernels() {
        let mut c = TraceConverter::new();
        c.handle_range(range(10, "decode", 0, 100));
        c.handle_launch(launch(10, 10, 1, false), None);
        c.handle_launch(launch(10, 20, 2, true), None);
        c.handle_gpu_op(kernel(1, 200, 210));
        for (i, start) in [300, 320, 340].into_iter().enumerate() {
            let mut k = kernel(2, start, start + 10);
            k.graph = Some(GraphRef {
                graph: Some(4),
                node: Some(i as u32),
            });
            c.handle_gpu_op(k);
        }
        let mut d = Diagnostics::new(Source::Nsys, "x");
        let p = c.finish(&mut d);
        let s = &p.stages[0];
        assert_eq!((s.gpu_ops, s.kernels, s.graph_kernels), (2, 4, 3));
        assert_eq!((s.launches, s.graph_launches), (2, 1));
        assert_eq!(
            (s.gpu_busy_ns, s.graph_busy_ns, s.gpu_proj_ns),
            (40, 30, 150)
        );
        assert_eq!(p.totals.graph_trace, Some(llmprof_bundle::GraphTrace::Node));
        assert_eq!((p.totals.graph_kernels, p.totals.graph_launches), (3, 1));
        assert_eq!(p.kernels[0].graph_calls, 3);
        assert_eq!(
            p.timeline.load().unwrap().kernels.graph,
            vec![None, Some(4), Some(4), Some(4)]
        );
        assert_eq!(
            p.timeline.load().unwrap().kernels.graph_node,
            vec![None, Some(0), Some(1), Some(2)]
        );
    }

    /// Graph level: the launch is one span; like `nvtx_gpu_proj_sum`, it is no GPU op and not
    /// in the projection, but it is busy time, a graph launch, and a timeline row.
    #[test]
    fn graph_level_span_counts_in_busy_not_in_nvidia_gpu_ops() {
        let mut c = TraceConverter::new();
        c.handle_range(range(10, "decode", 0, 100));
        c.handle_launch(launch(10, 10, 1, false), None);
        c.handle_launch(launch(10, 20, 2, true), None);
        c.handle_gpu_op(kernel(1, 200, 210));
        c.handle_gpu_op(GpuOpRecord {
            process: 1,
            correlation: Some(2),
            stream: 7,
            start: 300,
            end: 400,
            op: GpuOp::Graph { graph: 4 },
            graph: None,
        });
        let mut d = Diagnostics::new(Source::Nsys, "x");
        let p = c.finish(&mut d);
        let s = &p.stages[0];
        assert_eq!((s.gpu_ops, s.kernels, s.graph_launches), (1, 1, 1));
        assert_eq!(
            (s.gpu_proj_ns, s.gpu_busy_ns, s.graph_busy_ns),
            (10, 110, 100)
        );
        assert_eq!(
            p.totals.graph_trace,
            Some(llmprof_bundle::GraphTrace::Graph)
        );
        assert_eq!(
            (p.totals.graphs, p.totals.graph_ns, p.totals.kernels),
            (1, 100, 1)
        );
        let g = p.kernels.iter().find(|k| k.kind == OpKind::Graph).unwrap();
        assert_eq!(
            (g.name.as_str(), g.category),
            ("CUDA graph 4", Category::CudaGraph)
        );
        assert_eq!(p.timeline.load().unwrap().kernels.kernel.len(), 2);
    }

    /// A range closed before the GPU ran what it launched (PyTorch's `## Call CompiledFxGraph
    /// ##` annotation around one graph replay): busy time is measured over the range's window
    /// extended to its GPU work, so it is never above 100%.
    #[test]
    fn busy_share_of_a_range_that_closes_before_its_gpu_work() {
        let mut c = TraceConverter::new();
        c.handle_range(range(10, "call", 0, 100));
        c.handle_launch(launch(10, 10, 1, true), None);
        c.handle_gpu_op(kernel(1, 150, 250));
        let mut d = Diagnostics::new(Source::Kineto, "x");
        let p = c.finish(&mut d);
        let s = &p.stages[0];
        assert_eq!((s.wall_ns, s.gpu_busy_ns), (100, 100));
        assert_eq!(
            s.gpu_busy_pct, 40.0,
            "100 ns busy in a 250 ns window, not 100% of 100 ns"
        );
    }
}
