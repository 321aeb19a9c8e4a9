//! The operator table: `cpu_op` calls aggregated per name, with the device time of the GPU ops
//! they launched and the annotation (stage) they ran in.
//!
//! Memory is the constraint: a 1 GB trace holds over a million calls. Each piece of the trace
//! keeps its calls varint-encoded ([`CallLog`], about 8 bytes a call), and the table is built
//! in one pass over them in file order with a stack of open calls per thread: a call's self
//! time, inclusive device time and stage are known when it closes, and go straight into its
//! operator's row. Profilers write each thread's calls by start, parents first; a trace that
//! does not is decoded into 32-byte [`CpuOp`]s and sorted first, with the same result.

mod live;

use rustc_hash::FxHashMap as HashMap;

use llmprof_bundle::{Operator, OperatorStage};

pub(super) use live::LiveWalk;

use super::Annotation;
use crate::convert::span;

/// The trace's `cpu_op` calls and what their operator table needs: the annotations that
/// enclose them and the GPU ops they launched.
#[derive(Debug, Default)]
pub struct OperatorCalls {
    pub(super) strings: Vec<String>,
    pub(super) calls: Vec<PieceCalls>,
    pub(super) annotations: Vec<Annotation>,
    pub(super) device: DeviceTimes,
    /// (correlation id, External id of the launching runtime call), in file order.
    pub(super) runtime_ext: Pairs,
    /// The table walked while the trace was read, its device time still to add.
    pub(super) live: Option<LiveWalk>,
}

/// The operator table of a trace.
#[derive(Debug, Default, PartialEq)]
pub struct TraceOperators {
    /// Heaviest on the device first; `by_stage[].stage` indexes `stage_names` until
    /// [`crate::resolve_operator_stages`] maps it to bundle stage ids.
    pub operators: Vec<Operator>,
    pub stage_names: Vec<String>,
}

/// One `cpu_op` call, decoded.
#[derive(Debug, Clone, Copy)]
struct CpuOp {
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
    fn new(thread: u32, name: u32, start: i64, end: i64, ext: Option<i64>) -> Self {
        CpuOp {
            start,
            end,
            ext: ext.unwrap_or(0),
            thread: thread.min(HAS_EXT - 1) | if ext.is_some() { HAS_EXT } else { 0 },
            name,
        }
    }

    fn thread(&self) -> u32 {
        self.thread & !HAS_EXT
    }

    fn external_id(&self) -> Option<i64> {
        (self.thread & HAS_EXT != 0).then_some(self.ext)
    }
}

/// One piece's calls, varint-encoded in file order with the piece's own thread and name ids:
/// the start as a delta from the previous call's, the duration, the thread id (with a bit
/// saying whether an External id follows), the name id, and the External id as a delta from
/// the previous one. Deltas wrap, so every `i64` round-trips exactly.
#[derive(Debug, Default)]
pub(super) struct CallLog {
    bytes: Vec<u8>,
    len: u32,
    prev_start: i64,
    prev_ext: i64,
}

impl CallLog {
    pub(super) fn push(&mut self, thread: u32, name: u32, start: i64, end: i64, ext: Option<i64>) {
        let thread = thread.min(HAS_EXT - 1);
        put_varint(&mut self.bytes, zigzag(start.wrapping_sub(self.prev_start)));
        put_varint(&mut self.bytes, end.wrapping_sub(start) as u64);
        put_varint(
            &mut self.bytes,
            u64::from(thread) << 1 | u64::from(ext.is_some()),
        );
        put_varint(&mut self.bytes, u64::from(name));
        if let Some(e) = ext {
            put_varint(&mut self.bytes, zigzag(e.wrapping_sub(self.prev_ext)));
            self.prev_ext = e;
        }
        self.prev_start = start;
        self.len = self.len.saturating_add(1);
    }

    pub(super) fn len(&self) -> u32 {
        self.len
    }

    /// Moves the bytes into an allocation of exactly their size made on this thread. Logs are
    /// written on the parsing workers and kept to the end: left in the workers' allocator
    /// arenas, they would pin those arenas' freed memory around them.
    pub(super) fn compact(&mut self) {
        self.bytes = self.bytes.as_slice().to_vec();
    }

    /// The calls, in the piece's ids.
    fn iter(&self) -> impl Iterator<Item = CpuOp> + '_ {
        let mut at = 0;
        let (mut start, mut ext) = (0i64, 0i64);
        let bytes = &self.bytes[..];
        (0..self.len).map_while(move |_| {
            start = start.wrapping_add(unzigzag(get_varint(bytes, &mut at)?));
            let end = start.wrapping_add(get_varint(bytes, &mut at)? as i64);
            let thread = get_varint(bytes, &mut at)?;
            let name = get_varint(bytes, &mut at)? as u32;
            let has_ext = thread & 1 == 1;
            if has_ext {
                ext = ext.wrapping_add(unzigzag(get_varint(bytes, &mut at)?));
            }
            let thread = (thread >> 1) as u32;
            Some(CpuOp::new(thread, name, start, end, has_ext.then_some(ext)))
        })
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    (v >> 1) as i64 ^ -((v & 1) as i64)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// A piece's calls and the trace-wide ids of its thread and name ids.
#[derive(Debug)]
pub(super) struct PieceCalls {
    pub(super) log: CallLog,
    pub(super) threads: Vec<u32>,
    pub(super) names: Vec<u32>,
}

impl PieceCalls {
    /// The piece's calls in trace-wide ids.
    fn iter(&self) -> impl Iterator<Item = CpuOp> + '_ {
        self.log.iter().map(|o| {
            let thread = self.threads.get(o.thread() as usize).copied().unwrap_or(0);
            let name = self.names.get(o.name as usize).copied().unwrap_or(0);
            CpuOp::new(thread, name, o.start, o.end, o.external_id())
        })
    }
}

/// Every call of the trace with its index (file order), in trace-wide ids; at most
/// `u32::MAX` of them (a trace of some 1.5 TB would have more: the rest are left out).
fn each_call(calls: &[PieceCalls]) -> impl Iterator<Item = (u32, CpuOp)> + '_ {
    (0..u32::MAX).zip(calls.iter().flat_map(PieceCalls::iter))
}

/// [`each_call`], each piece freed once its calls are read.
fn into_calls(calls: Vec<PieceCalls>) -> impl Iterator<Item = (u32, CpuOp)> {
    let ops = calls.into_iter().flat_map(|p| p.iter().collect::<Vec<_>>());
    (0..u32::MAX).zip(ops)
}

/// Whether every thread's calls, in file order, are in nesting order: by start, and the
/// longer first where two start together.
#[derive(Default)]
struct NestingOrder {
    /// By thread id (the trace numbers threads densely from 0): the last call seen.
    last: Vec<Option<(i64, i64)>>,
    broken: bool,
}

impl NestingOrder {
    fn see(&mut self, op: &CpuOp) {
        let thread = op.thread() as usize;
        if thread >= self.last.len() {
            self.last.resize(thread + 1, None);
        }
        if let Some((s, e)) = self.last[thread] {
            self.broken |= op.start < s || (op.start == s && op.end > e);
        }
        self.last[thread] = Some((op.start, op.end));
    }

    fn holds(&self) -> bool {
        !self.broken
    }
}

/// `(i64, i64)` pairs, varint-encoded as wrapping deltas from the previous pair (exact for
/// any values; 2 to 6 bytes a pair where ids and durations grow slowly, against 16).
#[derive(Debug, Default, Clone)]
struct PairLog {
    bytes: Vec<u8>,
    len: usize,
    prev: (i64, i64),
}

impl PairLog {
    fn push(&mut self, a: i64, b: i64) {
        put_varint(&mut self.bytes, zigzag(a.wrapping_sub(self.prev.0)));
        put_varint(&mut self.bytes, zigzag(b.wrapping_sub(self.prev.1)));
        self.prev = (a, b);
        self.len += 1;
    }

    fn iter(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        let mut at = 0;
        let mut prev = (0i64, 0i64);
        (0..self.len).map_while(move |_| {
            prev.0 = prev
                .0
                .wrapping_add(unzigzag(get_varint(&self.bytes, &mut at)?));
            prev.1 = prev
                .1
                .wrapping_add(unzigzag(get_varint(&self.bytes, &mut at)?));
            Some(prev)
        })
    }
}

/// A trace's pairs, one [`PairLog`] per piece, in file order.
#[derive(Debug, Default, Clone)]
pub(super) struct Pairs {
    pieces: Vec<PairLog>,
}

impl Pairs {
    pub(super) fn push(&mut self, a: i64, b: i64) {
        if self.pieces.is_empty() {
            self.pieces.push(PairLog::default());
        }
        if let Some(log) = self.pieces.last_mut() {
            log.push(a, b);
        }
    }

    /// Appends another piece's pairs (kept as they are: deltas restart per piece).
    pub(super) fn append(&mut self, other: Pairs) {
        for mut log in other.pieces.into_iter().filter(|l| l.len > 0) {
            // As in `CallLog::compact`.
            log.bytes = log.bytes.as_slice().to_vec();
            self.pieces.push(log);
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.pieces.iter().all(|l| l.len == 0)
    }

    fn iter(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.pieces.iter().flat_map(PairLog::iter)
    }
}

/// The device time of the trace's GPU ops, keyed by what names their launching call: the
/// External id where the op has one, otherwise its correlation id (resolved through the
/// runtime calls once the whole trace is read). Durations are stored as `i64` bits.
#[derive(Debug, Default, Clone)]
pub(super) struct DeviceTimes {
    by_ext: Pairs,
    by_correlation: Pairs,
}

impl DeviceTimes {
    /// A GPU op of `dur` ns; one with neither id can belong to no call and is not kept.
    pub(super) fn push(&mut self, ext: Option<i64>, correlation: Option<i64>, dur: u64) {
        match (ext, correlation) {
            (Some(e), _) => self.by_ext.push(e, dur as i64),
            (None, Some(c)) => self.by_correlation.push(c, dur as i64),
            (None, None) => {}
        }
    }

    /// Whether every GPU op came with its External id.
    pub(super) fn by_correlation_is_empty(&self) -> bool {
        self.by_correlation.is_empty()
    }

    pub(super) fn append(&mut self, other: DeviceTimes) {
        self.by_ext.append(other.by_ext);
        self.by_correlation.append(other.by_correlation);
    }
}

impl OperatorCalls {
    /// Aggregates the calls per operator name; see the bundle docs for self vs inclusive
    /// columns. The walk made while the trace was read gives the table where it applies;
    /// otherwise the calls are walked now.
    pub fn operators(mut self) -> TraceOperators {
        if let Some(live) = self.live.take() {
            if let Some(table) =
                live.finish(&self.strings, &self.calls, &self.device, &self.runtime_ext)
            {
                return table;
            }
        }
        self.walked()
    }

    /// The table from the calls kept, walked now.
    fn walked(self) -> TraceOperators {
        let OperatorCalls {
            strings,
            calls,
            annotations,
            device,
            runtime_ext,
            live: _,
        } = self;
        let mut order = NestingOrder::default();
        let all = each_call(&calls).inspect(|(_, op)| order.see(op));
        let device = DeviceTable::new(&device, &runtime_ext, all);
        let walk = Walk::new(&annotations, &device);
        let table = if order.holds() {
            walk.in_file_order(into_calls(calls))
        } else {
            let ops: Vec<CpuOp> = into_calls(calls).map(|(_, op)| op).collect();
            walk.sorted(&ops)
        };
        table.finish(&strings)
    }

    /// The table both ways, asserted equal where the walk made while reading applies (for
    /// tests and the `kineto` fuzz target).
    #[doc(hidden)]
    pub fn operators_checked(mut self) -> TraceOperators {
        let live = self
            .live
            .take()
            .and_then(|l| l.finish(&self.strings, &self.calls, &self.device, &self.runtime_ext));
        let walked = self.walked();
        if let Some(live) = live {
            assert_eq!(live, walked, "the walk made while reading differs");
        }
        walked
    }
}

/// Device time per External id, and which call owns it: the last call in file order with
/// that id, as a map from id to call would have it.
struct DeviceTable {
    /// `(External id, device time)`, sorted by id.
    sums: Vec<(i64, u64)>,
    /// Per entry of `sums`: GPU ops, and the owning call ([`NO_OWNER`] for none).
    ops: Vec<u32>,
    owner: Vec<u32>,
    /// The last entry found ([`position_near`]).
    finger: std::cell::Cell<usize>,
}

const NO_OWNER: u32 = u32::MAX;

/// Consecutive GPU ops of one External id: their device time and count.
#[derive(Debug, Clone, Copy)]
struct Run {
    ext: i64,
    dur: u64,
    ops: u32,
}

impl Run {
    fn add(&mut self, dur: u64, ops: u32) {
        self.dur += dur;
        self.ops = self.ops.saturating_add(ops);
    }
}

/// How many runs of one key `pairs` holds.
fn count_runs(pairs: impl Iterator<Item = (i64, i64)>) -> usize {
    let mut last = None;
    pairs.filter(|&(k, _)| last.replace(k) != Some(k)).count()
}

/// Device time and GPU ops per External id, sorted by id. Runs of one id (a CUDA graph's
/// kernels share their launch's) are summed as they come, so a graph replay's thousands of
/// kernels take one entry, not one each.
fn device_sums(times: &DeviceTimes, runtime_ext: &Pairs) -> (Vec<(i64, u64)>, Vec<u32>) {
    let ext_of = if times.by_correlation.is_empty() {
        Vec::new()
    } else {
        last_per_key(runtime_ext.iter().collect())
    };
    let pairs = || {
        let by_correlation = times.by_correlation.iter().filter_map(|(c, d)| {
            let k = ext_of.binary_search_by_key(&c, |p| p.0).ok()?;
            Some((ext_of[k].1, d))
        });
        times.by_ext.iter().chain(by_correlation)
    };
    let mut runs: Vec<Run> = Vec::with_capacity(count_runs(pairs()));
    for (ext, dur) in pairs() {
        match runs.last_mut() {
            Some(r) if r.ext == ext => r.add(dur as u64, 1),
            _ => runs.push(Run {
                ext,
                dur: dur as u64,
                ops: 1,
            }),
        }
    }
    runs.sort_unstable_by_key(|r| r.ext);
    // One entry per id, summed in place.
    let mut kept = 0;
    for i in 0..runs.len() {
        let run = runs[i];
        if kept > 0 && runs[kept - 1].ext == run.ext {
            runs[kept - 1].add(run.dur, run.ops);
        } else {
            runs[kept] = run;
            kept += 1;
        }
    }
    runs.truncate(kept);
    (
        runs.iter().map(|r| (r.ext, r.dur)).collect(),
        runs.iter().map(|r| r.ops).collect(),
    )
}

impl DeviceTable {
    fn new(
        times: &DeviceTimes,
        runtime_ext: &Pairs,
        calls: impl Iterator<Item = (u32, CpuOp)>,
    ) -> Self {
        let (sums, ops) = device_sums(times, runtime_ext);
        let mut table = DeviceTable {
            owner: vec![NO_OWNER; sums.len()],
            sums,
            ops,
            finger: Default::default(),
        };
        for (i, op) in calls {
            if let Some(k) = op.external_id().and_then(|x| table.position(x)) {
                table.owner[k] = i;
            }
        }
        table
    }

    fn position(&self, ext: i64) -> Option<usize> {
        let k = position_near(&self.sums, ext, self.finger.get())?;
        self.finger.set(k);
        Some(k)
    }

    /// Device time and GPU ops call `i` launched itself.
    fn of(&self, i: u32, op: &CpuOp) -> (u64, u64) {
        let owned = op.external_id().and_then(|x| {
            let k = self.position(x)?;
            (self.owner[k] == i).then_some((self.sums[k].1, u64::from(self.ops[k])))
        });
        owned.unwrap_or((0, 0))
    }
}

/// Where `ext` is in `sums` (sorted by id), looked for first at `finger` and just after it:
/// calls come roughly in External id order, so the next lookup is usually the last one's entry
/// or the next.
fn position_near(sums: &[(i64, u64)], ext: i64, finger: usize) -> Option<usize> {
    let near = (finger..sums.len().min(finger + 2)).find(|&k| sums[k].0 == ext);
    match near {
        Some(k) => Some(k),
        None => sums.binary_search_by_key(&ext, |e| e.0).ok(),
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

/// An open call on a thread's stack.
struct Frame {
    op: CpuOp,
    idx: u32,
    /// Wall time of the calls directly nested in it so far.
    child_cpu: u64,
    /// Device time of the calls nested in it (at any depth) so far.
    nested_device: u64,
    /// No enclosing call has the same name.
    outermost: bool,
    /// The innermost annotation on the call's thread that contains its start.
    stage: Option<u32>,
}

/// Visits calls thread by thread in nesting order — by start, longest first, then file
/// order: a call contains those that start before it ends — and puts each call into the
/// table when it closes.
struct Walk<'a> {
    annotations: &'a [Annotation],
    /// Annotation indices per thread, by start then longest first.
    annotations_by_thread: HashMap<u32, Vec<u32>>,
    device: &'a DeviceTable,
}

/// One thread's state in a [`Walk`].
#[derive(Default)]
struct ThreadWalk {
    stack: Vec<Frame>,
    /// The thread's annotations entered so far, and those still open.
    next_annotation: usize,
    open_annotations: Vec<u32>,
}

impl<'a> Walk<'a> {
    fn new(annotations: &'a [Annotation], device: &'a DeviceTable) -> Self {
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
        Walk {
            annotations,
            annotations_by_thread: by_thread,
            device,
        }
    }

    /// The table from calls whose threads are each in nesting order ([`NestingOrder`]), as
    /// they come.
    fn in_file_order(&self, ops: impl Iterator<Item = (u32, CpuOp)>) -> Table {
        let mut table = Table::default();
        // By thread id: the trace numbers threads densely from 0.
        let mut threads: Vec<ThreadWalk> = Vec::new();
        for (idx, op) in ops {
            let thread = op.thread() as usize;
            if thread >= threads.len() {
                threads.resize_with(thread + 1, ThreadWalk::default);
            }
            self.visit(&mut threads[thread], op, idx, &mut table);
        }
        for t in &mut threads {
            self.close_all(t, &mut table);
        }
        table
    }

    /// The table from calls in any order: sorted into nesting order first.
    fn sorted(&self, ops: &[CpuOp]) -> Table {
        let mut order: Vec<u32> = (0..ops.len() as u32).collect();
        order.sort_unstable_by_key(|&i| {
            let o = &ops[i as usize];
            (o.thread(), o.start, std::cmp::Reverse(o.end), i)
        });
        let mut table = Table::default();
        for run in order.chunk_by(|&a, &b| ops[a as usize].thread() == ops[b as usize].thread()) {
            let mut t = ThreadWalk::default();
            for &i in run {
                self.visit(&mut t, ops[i as usize], i, &mut table);
            }
            self.close_all(&mut t, &mut table);
        }
        table
    }

    /// Call `idx` on thread `t`: the calls that ended before it close, it opens.
    fn visit(&self, t: &mut ThreadWalk, op: CpuOp, idx: u32, table: &mut Table) {
        while t.stack.last().is_some_and(|f| f.op.end <= op.start) {
            if let Some(f) = t.stack.pop() {
                self.close(f, &mut t.stack, table);
            }
        }
        if let Some(parent) = t.stack.last_mut() {
            parent.child_cpu += span(op.start, op.end);
        }
        let outermost = !t.stack.iter().any(|f| f.op.name == op.name);
        let stage = self.innermost_annotation(t, op.thread(), op.start);
        t.stack.push(Frame {
            op,
            idx,
            child_cpu: 0,
            nested_device: 0,
            outermost,
            stage,
        });
    }

    fn close_all(&self, t: &mut ThreadWalk, table: &mut Table) {
        while let Some(f) = t.stack.pop() {
            self.close(f, &mut t.stack, table);
        }
    }

    /// A call closes: it goes into the table, its device time to its parent's.
    fn close(&self, f: Frame, stack: &mut [Frame], table: &mut Table) {
        let (device_self, gpu_ops) = self.device.of(f.idx, &f.op);
        let dur = span(f.op.start, f.op.end);
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
        let stage = f.stage.map(|a| self.annotations[a as usize].name);
        table.add(f.op.name, f.idx, stage, &call);
    }

    /// The innermost annotation on `thread` containing `time`, the thread's calls visited in
    /// increasing time.
    fn innermost_annotation(&self, t: &mut ThreadWalk, thread: u32, time: i64) -> Option<u32> {
        let list = self.annotations_by_thread.get(&thread)?;
        let anns = self.annotations;
        while t.next_annotation < list.len() && anns[list[t.next_annotation] as usize].start <= time
        {
            t.open_annotations.push(list[t.next_annotation]);
            t.next_annotation += 1;
        }
        t.open_annotations.retain(|&a| anns[a as usize].end > time);
        t.open_annotations.last().copied()
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

#[cfg(test)]
mod tests {
    use super::*;

    impl OperatorCalls {
        /// The table from the file-order walk (`None` when the calls are out of order) and
        /// from the sorted one.
        fn both_ways(&self) -> (Option<TraceOperators>, TraceOperators) {
            let device = DeviceTable::new(&self.device, &self.runtime_ext, each_call(&self.calls));
            let walk = Walk::new(&self.annotations, &device);
            let mut order = NestingOrder::default();
            each_call(&self.calls).for_each(|(_, op)| order.see(&op));
            let streamed = order
                .holds()
                .then(|| walk.in_file_order(each_call(&self.calls)));
            let ops: Vec<CpuOp> = each_call(&self.calls).map(|(_, op)| op).collect();
            let sorted = walk.sorted(&ops);
            (
                streamed.map(|t| t.finish(&self.strings)),
                sorted.finish(&self.strings),
            )
        }
    }

    #[test]
    fn call_log_round_trips_any_values() {
        let calls = [
            (0, 0, 0, 0, None),
            (3, 7, i64::MAX, i64::MIN, Some(i64::MIN)),
            (HAS_EXT - 1, u32::MAX, i64::MIN, i64::MAX, Some(i64::MAX)),
            (1, 2, -5, -3, Some(0)),
            (1, 2, 10, 10, Some(-1)),
        ];
        let mut log = CallLog::default();
        for &(t, n, s, e, x) in &calls {
            log.push(t, n, s, e, x);
        }
        let back: Vec<_> = log
            .iter()
            .map(|o| (o.thread(), o.name, o.start, o.end, o.external_id()))
            .collect();
        assert_eq!(back, calls);
    }

    /// Real traces take the file-order walk, and sorting their calls first changes nothing.
    #[test]
    fn file_order_and_sorted_walks_agree_on_real_traces() {
        let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/");
        for f in [
            "h100-cuda-graphs/kineto_trace.json.gz",
            "h200-qwen2-0.5b/kineto_trace.json.gz",
            "hta-multirank/sampled_rank-1.json.gz",
        ] {
            let path = std::path::PathBuf::from(fixtures).join(f);
            let mut diags = crate::diagnostics::Diagnostics::new(llmprof_bundle::Source::Kineto, f);
            let calls = super::super::read(&path, None, &mut diags, &mut |_| {})
                .unwrap()
                .calls;
            let (streamed, sorted) = calls.both_ways();
            let streamed = streamed.unwrap_or_else(|| panic!("{f}: calls out of nesting order"));
            assert!(!sorted.operators.is_empty(), "{f}");
            assert_eq!(format!("{streamed:?}"), format!("{sorted:?}"), "{f}");
        }
    }

    /// Calls written children first (out of nesting order) are sorted: the table is the one
    /// of the calls in order.
    #[test]
    fn calls_out_of_nesting_order_are_sorted_first() {
        let calls = |order: &[usize]| {
            // outer [0, 100) holds inner [10, 20) and [30, 40), which ran 5 and 7 ns of GPU ops.
            let rows = [(0, 0, 100, 1), (1, 10, 20, 2), (1, 30, 40, 3)];
            let mut log = CallLog::default();
            for &i in order {
                let (name, start, end, ext) = rows[i];
                log.push(0, name, start, end, Some(ext));
            }
            let mut device = DeviceTimes::default();
            device.push(Some(2), None, 5);
            device.push(None, Some(90), 7);
            OperatorCalls {
                strings: vec!["outer".into(), "inner".into()],
                calls: vec![PieceCalls {
                    log,
                    threads: vec![0],
                    names: vec![0, 1],
                }],
                annotations: Vec::new(),
                device,
                runtime_ext: {
                    let mut p = Pairs::default();
                    p.push(90, 3);
                    p
                },
                live: None,
            }
        };
        let (streamed, in_order) = calls(&[0, 1, 2]).both_ways();
        assert_eq!(format!("{:?}", streamed.unwrap()), format!("{in_order:?}"));
        let (streamed, reversed) = calls(&[2, 1, 0]).both_ways();
        assert!(streamed.is_none());
        assert_eq!(format!("{reversed:?}"), format!("{in_order:?}"));
        let row = |name: &str| {
            let o = in_order.operators.iter().find(|o| o.name == name).unwrap();
            (
                o.calls,
                o.cpu_total_ns,
                o.cpu_self_ns,
                o.device_ns,
                o.device_self_ns,
                o.gpu_ops,
            )
        };
        assert_eq!(row("outer"), (1, 100, 80, 12, 0, 0));
        assert_eq!(row("inner"), (2, 20, 20, 12, 12, 2));
    }
}
