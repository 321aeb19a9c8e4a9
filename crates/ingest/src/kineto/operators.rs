//! The operator table: `cpu_op` calls aggregated per name, with the device time of the GPU ops
//! they launched and the annotation (stage) they ran in.
//!
//! Memory is the constraint: a 1 GB trace holds over a million calls. Each call is kept as a
//! 32-byte [`CpuOp`], and the table is built in one walk over the calls in nesting order (by
//! thread, then start) with a stack of the open calls: a call's self time, inclusive device
//! time and stage are known when it closes, and go straight into its operator's row. Nothing
//! else is kept per call but its place in the walk (4 bytes).

use rustc_hash::FxHashMap as HashMap;

use llmprof_bundle::{Operator, OperatorStage};

use super::Annotation;
use crate::convert::span;

/// The trace's `cpu_op` calls and what their operator table needs: the annotations that
/// enclose them and the GPU ops they launched.
#[derive(Debug, Default)]
pub struct OperatorCalls {
    pub(super) strings: Vec<String>,
    pub(super) ops: Vec<CpuOp>,
    pub(super) annotations: Vec<Annotation>,
    pub(super) device: DeviceTimes,
    /// (correlation id, External id of the launching runtime call), in file order.
    pub(super) runtime_ext: Vec<(i64, i64)>,
}

/// The operator table of a trace.
#[derive(Debug, Default)]
pub struct TraceOperators {
    /// Heaviest on the device first; `by_stage[].stage` indexes `stage_names` until
    /// [`crate::resolve_operator_stages`] maps it to bundle stage ids.
    pub operators: Vec<Operator>,
    pub stage_names: Vec<String>,
}

/// One `cpu_op` call.
#[derive(Debug, Clone, Copy)]
pub(super) struct CpuOp {
    start: i64,
    end: i64,
    /// The call's External id; meaningful only when `thread` has [`HAS_EXT`] set.
    ext: i64,
    /// The thread id in the low 31 bits; [`HAS_EXT`] above.
    thread: u32,
    name: u32,
}

const HAS_EXT: u32 = 1 << 31;

impl CpuOp {
    /// A call on `thread` (ids past 2^31 - 1 saturate there, like the trace's thread ids).
    pub(super) fn new(thread: u32, name: u32, start: i64, end: i64, ext: Option<i64>) -> Self {
        CpuOp {
            start,
            end,
            ext: ext.unwrap_or(0),
            thread: thread.min(HAS_EXT - 1) | if ext.is_some() { HAS_EXT } else { 0 },
            name,
        }
    }

    pub(super) fn thread(&self) -> u32 {
        self.thread & !HAS_EXT
    }

    pub(super) fn name(&self) -> u32 {
        self.name
    }

    /// The same call with the trace-wide thread and name ids.
    pub(super) fn renumbered(self, thread: u32, name: u32) -> Self {
        let ext = (self.thread & HAS_EXT != 0).then_some(self.ext);
        CpuOp::new(thread, name, self.start, self.end, ext)
    }

    fn external_id(&self) -> Option<i64> {
        (self.thread & HAS_EXT != 0).then_some(self.ext)
    }
}

/// The device time of the trace's GPU ops, keyed by what names their launching call: the
/// External id where the op has one, otherwise its correlation id (resolved through the
/// runtime calls once the whole trace is read).
#[derive(Debug, Default)]
pub(super) struct DeviceTimes {
    by_ext: Vec<(i64, u64)>,
    by_correlation: Vec<(i64, u64)>,
}

impl DeviceTimes {
    /// A GPU op of `dur` ns; one with neither id can belong to no call and is not kept.
    pub(super) fn push(&mut self, ext: Option<i64>, correlation: Option<i64>, dur: u64) {
        match (ext, correlation) {
            (Some(e), _) => self.by_ext.push((e, dur)),
            (None, Some(c)) => self.by_correlation.push((c, dur)),
            (None, None) => {}
        }
    }

    pub(super) fn append(&mut self, other: DeviceTimes) {
        self.by_ext.extend(other.by_ext);
        self.by_correlation.extend(other.by_correlation);
    }
}

impl OperatorCalls {
    /// Aggregates the calls per operator name; see the bundle docs for self vs inclusive
    /// columns.
    pub fn operators(self) -> TraceOperators {
        let OperatorCalls {
            strings,
            mut ops,
            annotations,
            device,
            runtime_ext,
        } = self;
        // The walk numbers calls with u32: past four billion calls (a trace of some 1.5 TB)
        // the rest are left out.
        ops.truncate(u32::MAX as usize);
        let device = DeviceTable::new(device, runtime_ext, &ops);
        let mut table = Table::default();
        walk(&ops, &annotations, &device, &mut table);
        table.finish(&strings)
    }
}

/// Device time per External id, and which call owns it: the last call in file order with
/// that id, as a map from id to call would have it.
struct DeviceTable {
    /// Sorted by `ext`.
    entries: Vec<DeviceEntry>,
}

struct DeviceEntry {
    ext: i64,
    dur: u64,
    ops: u64,
    owner: u32,
}

const NO_OWNER: u32 = u32::MAX;

impl DeviceTable {
    fn new(times: DeviceTimes, runtime_ext: Vec<(i64, i64)>, ops: &[CpuOp]) -> Self {
        let DeviceTimes {
            mut by_ext,
            by_correlation,
        } = times;
        if !by_correlation.is_empty() {
            let ext_of = last_per_key(runtime_ext);
            by_ext.extend(by_correlation.into_iter().filter_map(|(c, dur)| {
                let k = ext_of.binary_search_by_key(&c, |p| p.0).ok()?;
                Some((ext_of[k].1, dur))
            }));
        }
        by_ext.sort_unstable_by_key(|p| p.0);
        let mut entries: Vec<DeviceEntry> = Vec::new();
        for (ext, dur) in by_ext {
            match entries.last_mut() {
                Some(e) if e.ext == ext => {
                    e.dur += dur;
                    e.ops += 1;
                }
                _ => entries.push(DeviceEntry {
                    ext,
                    dur,
                    ops: 1,
                    owner: NO_OWNER,
                }),
            }
        }
        let mut table = DeviceTable { entries };
        for (i, op) in ops.iter().enumerate().rev() {
            if let Some(e) = op.external_id().and_then(|x| table.entry_mut(x)) {
                if e.owner == NO_OWNER {
                    e.owner = i as u32;
                }
            }
        }
        table
    }

    fn entry_mut(&mut self, ext: i64) -> Option<&mut DeviceEntry> {
        let k = self.entries.binary_search_by_key(&ext, |e| e.ext).ok()?;
        Some(&mut self.entries[k])
    }

    /// Device time and GPU ops call `i` launched itself.
    fn of(&self, i: u32, op: &CpuOp) -> (u64, u64) {
        let owned = op.external_id().and_then(|x| {
            let k = self.entries.binary_search_by_key(&x, |e| e.ext).ok()?;
            let e = &self.entries[k];
            (e.owner == i).then_some((e.dur, e.ops))
        });
        owned.unwrap_or((0, 0))
    }
}

/// `(key, value)` pairs sorted by key, only the last in the input's order kept per key.
fn last_per_key(mut pairs: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    // Stable: equal keys stay in input order, so the last of each run is the one to keep.
    pairs.sort_by_key(|p| p.0);
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(pairs.len());
    for p in pairs {
        match out.last_mut() {
            Some(last) if last.0 == p.0 => *last = p,
            _ => out.push(p),
        }
    }
    out
}

/// An open call on the walk's stack.
struct Frame {
    op: u32,
    /// Wall time of the calls directly nested in it so far.
    child_cpu: u64,
    /// Device time of the calls nested in it (at any depth) so far.
    nested_device: u64,
    /// No enclosing call has the same name.
    outermost: bool,
    /// The innermost annotation on the call's thread that contains its start.
    stage: Option<u32>,
}

/// Visits the calls by thread, start, longest first (then file order): a call contains those
/// that start before it ends. Each call goes into `table` when it closes.
fn walk(ops: &[CpuOp], annotations: &[Annotation], device: &DeviceTable, table: &mut Table) {
    let mut order: Vec<u32> = (0..ops.len() as u32).collect();
    order.sort_unstable_by_key(|&i| {
        let o = &ops[i as usize];
        (o.thread(), o.start, std::cmp::Reverse(o.end), i)
    });
    let mut stages = StageCursor::new(annotations);
    let mut stack: Vec<Frame> = Vec::new();
    let mut current_thread = None;
    // A call closes when popped: it goes into the table, its device time to its parent's.
    let close = |f: Frame, stack: &mut Vec<Frame>, table: &mut Table| {
        let op = &ops[f.op as usize];
        let (device_self, gpu_ops) = device.of(f.op, op);
        let dur = span(op.start, op.end);
        let call = Call {
            dur,
            self_cpu: dur.saturating_sub(f.child_cpu),
            device_self,
            gpu_ops,
            device_total: device_self + f.nested_device,
            outermost: f.outermost,
        };
        if let Some(parent) = stack.last_mut() {
            parent.nested_device += call.device_total;
        }
        table.add(
            op.name,
            f.op,
            f.stage.map(|a| annotations[a as usize].name),
            &call,
        );
    };
    for i in order {
        let op = &ops[i as usize];
        if current_thread != Some(op.thread()) {
            while let Some(f) = stack.pop() {
                close(f, &mut stack, table);
            }
            current_thread = Some(op.thread());
            stages.enter(op.thread());
        }
        while stack
            .last()
            .is_some_and(|f| ops[f.op as usize].end <= op.start)
        {
            if let Some(f) = stack.pop() {
                close(f, &mut stack, table);
            }
        }
        if let Some(parent) = stack.last_mut() {
            parent.child_cpu += span(op.start, op.end);
        }
        let outermost = !stack.iter().any(|f| ops[f.op as usize].name == op.name);
        stack.push(Frame {
            op: i,
            child_cpu: 0,
            nested_device: 0,
            outermost,
            stage: stages.innermost_at(op.start),
        });
    }
    while let Some(f) = stack.pop() {
        close(f, &mut stack, table);
    }
}

/// The annotations open at a moving point on one thread at a time, the point visited in
/// increasing time order.
struct StageCursor<'a> {
    annotations: &'a [Annotation],
    /// Annotation indices per thread, by start then longest first.
    by_thread: HashMap<u32, Vec<u32>>,
    thread: Option<u32>,
    next: usize,
    active: Vec<u32>,
}

impl<'a> StageCursor<'a> {
    fn new(annotations: &'a [Annotation]) -> Self {
        let mut by_thread: HashMap<u32, Vec<u32>> = HashMap::default();
        for (i, a) in annotations.iter().enumerate() {
            by_thread.entry(a.thread).or_default().push(i as u32);
        }
        for list in by_thread.values_mut() {
            list.sort_by_key(|&i| {
                let a = &annotations[i as usize];
                (a.start, std::cmp::Reverse(a.end))
            });
        }
        StageCursor {
            annotations,
            by_thread,
            thread: None,
            next: 0,
            active: Vec::new(),
        }
    }

    fn enter(&mut self, thread: u32) {
        self.thread = Some(thread);
        self.next = 0;
        self.active.clear();
    }

    /// The innermost annotation containing `t` on the current thread.
    fn innermost_at(&mut self, t: i64) -> Option<u32> {
        let list = self.by_thread.get(&self.thread?)?;
        let anns = self.annotations;
        while self.next < list.len() && anns[list[self.next] as usize].start <= t {
            self.active.push(list[self.next]);
            self.next += 1;
        }
        self.active.retain(|&a| anns[a as usize].end > t);
        self.active.last().copied()
    }
}

/// One operator call's contribution to its row.
struct Call {
    /// Wall time of the call.
    dur: u64,
    /// Wall time minus that of the calls directly nested in it.
    self_cpu: u64,
    /// Device time of the GPU ops the call launched itself.
    device_self: u64,
    /// GPU ops the call launched itself.
    gpu_ops: u64,
    /// Device time of the call and of every call nested in it.
    device_total: u64,
    /// No enclosing call has the same name.
    outermost: bool,
}

/// The rows being filled, by operator name id.
#[derive(Default)]
struct Table {
    rows: HashMap<u32, OpAgg>,
    /// Per stage name id, the first call (in file order) that ran in it: stage ids follow
    /// that order.
    stage_first_call: HashMap<u32, u32>,
}

/// An operator's row while its calls are added; `by_stage` is keyed by stage name id.
#[derive(Debug, Default, Clone)]
struct OpAgg {
    calls: u64,
    cpu_total: u64,
    cpu_self: u64,
    device_total: u64,
    device_self: u64,
    gpu_ops: u64,
    by_stage: HashMap<u32, OperatorStage>,
}

impl Table {
    /// Adds call `op` of operator `name`, run in the stage named `stage`.
    fn add(&mut self, name: u32, op: u32, stage: Option<u32>, c: &Call) {
        let a = self.rows.entry(name).or_default();
        a.add(c);
        if let Some(stage) = stage {
            a.add_to_stage(stage, c);
            let first = self.stage_first_call.entry(stage).or_insert(op);
            *first = (*first).min(op);
        }
    }

    /// The operators, heaviest on the device first, and the names their `by_stage` ids index.
    fn finish(self, strings: &[String]) -> TraceOperators {
        let mut stages: Vec<(u32, u32)> = self.stage_first_call.into_iter().collect();
        stages.sort_unstable_by_key(|&(name, first)| (first, name));
        let stage_id: HashMap<u32, u32> = stages
            .iter()
            .enumerate()
            .map(|(sid, &(name, _))| (name, sid as u32))
            .collect();
        let mut operators: Vec<Operator> = self
            .rows
            .into_iter()
            .map(|(name, a)| a.into_operator(strings[name as usize].clone(), &stage_id))
            .collect();
        operators.sort_by(|a, b| {
            b.device_ns
                .cmp(&a.device_ns)
                .then(b.cpu_total_ns.cmp(&a.cpu_total_ns))
                .then_with(|| a.name.cmp(&b.name))
        });
        TraceOperators {
            operators,
            stage_names: stages
                .into_iter()
                .map(|(name, _)| strings[name as usize].clone())
                .collect(),
        }
    }
}

impl OpAgg {
    /// Adds a call: self columns always, inclusive ones only for the outermost call of a name
    /// (so recursion is not counted twice).
    fn add(&mut self, c: &Call) {
        self.calls += 1;
        self.cpu_self += c.self_cpu;
        self.device_self += c.device_self;
        self.gpu_ops += c.gpu_ops;
        if c.outermost {
            self.cpu_total += c.dur;
            self.device_total += c.device_total;
        }
    }

    /// Adds a call to the operator's row of the stage named `stage`.
    fn add_to_stage(&mut self, stage: u32, c: &Call) {
        let s = self.by_stage.entry(stage).or_insert(OperatorStage {
            stage,
            calls: 0,
            cpu_total_ns: 0,
            cpu_self_ns: 0,
            device_ns: 0,
        });
        s.calls += 1;
        s.cpu_self_ns += c.self_cpu;
        if c.outermost {
            s.cpu_total_ns += c.dur;
            s.device_ns += c.device_total;
        }
    }

    /// The operator's row, its stages numbered by `stage_id` and in that order.
    fn into_operator(self, name: String, stage_id: &HashMap<u32, u32>) -> Operator {
        let mut by_stage: Vec<OperatorStage> = self
            .by_stage
            .into_values()
            .map(|s| OperatorStage {
                stage: stage_id[&s.stage],
                ..s
            })
            .collect();
        by_stage.sort_by_key(|s| s.stage);
        Operator {
            name,
            calls: self.calls,
            cpu_total_ns: self.cpu_total,
            cpu_self_ns: self.cpu_self,
            device_ns: self.device_total,
            device_self_ns: self.device_self,
            gpu_ops: self.gpu_ops,
            cpu_mean_ns: self.cpu_total as f64 / self.calls.max(1) as f64,
            device_mean_ns: self.device_total as f64 / self.calls.max(1) as f64,
            by_stage,
        }
    }
}
