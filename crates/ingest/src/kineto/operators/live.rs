//! The operator table walked while the trace is read.
//!
//! The walk itself needs only the calls and the annotations: each thread's stack, the self
//! times, the stages. Only the device times wait for the whole trace (a GPU op may come after
//! the call that launched it, and a call owns its External id's device time only if no later
//! call has that id). So the walk runs as the pieces come, in file order, and leaves each call's
//! device time to the end, keyed by its *context*: its name, its stage, whether it is the
//! outermost call of its name, and its parent's context. Calls of one context add their device
//! time to the same rows, so at the end ([`LiveWalk::finish`]) the device time of each
//! context and of the contexts under it goes into the rows in one pass over the contexts, not
//! the calls.
//!
//! It gives the table [`Walk::in_file_order`] gives, or nothing where that walk does not apply:
//! a thread's calls out of nesting order, or an annotation that comes after a call it
//! contains. The caller then builds the table the usual way ([`OperatorCalls::operators`]).

use rustc_hash::FxHashMap as HashMap;

use super::{
    get_varint, position_near, put_varint, span, Annotation, Call, CpuOp, DeviceTimes,
    NestingOrder, Pairs, PieceCalls, Table, TraceOperators,
};

/// The context of calls at the top of their thread's stack.
const ROOT: u32 = u32::MAX;

/// What a call's device time adds to: see the module docs. `stage` is the stage's name id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Context {
    parent: u32,
    name: u32,
    stage: Option<u32>,
    outermost: bool,
}

/// An open call on a thread's stack.
struct Frame {
    op: CpuOp,
    idx: u32,
    /// Wall time of the calls directly nested in it so far.
    child_cpu: u64,
    context: u32,
}

/// One thread's state.
#[derive(Default)]
struct Thread {
    stack: Vec<Frame>,
    /// Annotations not yet entered, by start then longest first (sorted when `sorted`).
    waiting: Vec<u32>,
    sorted: bool,
    open: Vec<u32>,
    /// The start of the last call visited.
    last_start: Option<i64>,
}

/// The walk so far; see the module docs.
#[derive(Default)]
pub struct LiveWalk {
    threads: Vec<Thread>,
    /// `(start, end, name)` of every annotation so far, by arrival.
    annotations: Vec<(i64, i64, u32)>,
    contexts: Vec<Context>,
    context_ids: HashMap<Context, u32>,
    /// The context of each call with an External id, in file order: a varint each, one
    /// allocation a piece (the ids are in the calls, read again at the end).
    owners: Vec<Box<[u8]>>,
    table: Table,
    order: NestingOrder,
    /// Calls visited: the next call's index in file order.
    next: u32,
    /// An annotation came after a call it contains, or there were too many calls to number.
    late: bool,
}

impl std::fmt::Debug for LiveWalk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveWalk")
            .field("calls", &self.next)
            .field("contexts", &self.contexts.len())
            .field("abandoned", &self.abandoned())
            .finish()
    }
}

impl LiveWalk {
    /// Takes the next piece's annotations and calls, in trace-wide ids.
    pub(in crate::kineto) fn take(
        &mut self,
        annotations: &[Annotation],
        calls: Option<&PieceCalls>,
    ) {
        if self.abandoned() {
            return;
        }
        for a in annotations {
            self.annotate(a);
        }
        let mut owners = Vec::new();
        for op in calls.into_iter().flat_map(PieceCalls::iter) {
            self.visit(op, &mut owners);
        }
        if !owners.is_empty() {
            self.owners.push(owners.into_boxed_slice());
        }
    }

    /// Whether the walk no longer gives the table: the caller builds it the usual way.
    fn abandoned(&self) -> bool {
        self.late || !self.order.holds()
    }

    fn annotate(&mut self, a: &Annotation) {
        let idx = u32::try_from(self.annotations.len()).unwrap_or(u32::MAX);
        self.annotations.push((a.start, a.end, a.name));
        let t = thread_at(&mut self.threads, a.thread);
        // The calls visited from its start on should have entered it.
        self.late |= t.last_start.is_some_and(|s| a.start <= s) || idx == u32::MAX;
        t.waiting.push(idx);
        t.sorted = false;
    }

    fn visit(&mut self, op: CpuOp, owners: &mut Vec<u8>) {
        self.order.see(&op);
        let idx = self.next;
        self.next = self.next.saturating_add(1);
        self.late |= idx == u32::MAX;
        if self.abandoned() {
            return;
        }
        let t = thread_at(&mut self.threads, op.thread());
        while t.stack.last().is_some_and(|f| f.op.end <= op.start) {
            if let Some(f) = t.stack.pop() {
                close(&mut self.table, &self.contexts, f);
            }
        }
        if let Some(parent) = t.stack.last_mut() {
            parent.child_cpu += span(op.start, op.end);
        }
        let context = Context {
            parent: t.stack.last().map_or(ROOT, |f| f.context),
            name: op.name,
            stage: innermost_annotation(t, &self.annotations, op.start)
                .map(|a| self.annotations[a as usize].2),
            outermost: !t.stack.iter().any(|f| f.op.name == op.name),
        };
        t.last_start = Some(op.start);
        let context = match self.context_ids.get(&context) {
            Some(&id) => id,
            None => {
                let id = self.contexts.len() as u32;
                self.contexts.push(context);
                self.context_ids.insert(context, id);
                id
            }
        };
        if op.external_id().is_some() {
            put_varint(owners, u64::from(context));
        }
        t.stack.push(Frame {
            op,
            idx,
            child_cpu: 0,
            context,
        });
    }

    /// The table, its device time added, or `None` where the walk does not give it. `calls`
    /// are the calls it walked, in file order.
    pub(in crate::kineto) fn finish(
        mut self,
        strings: &[String],
        calls: &[PieceCalls],
        device: &DeviceTimes,
        runtime_ext: &Pairs,
    ) -> Option<TraceOperators> {
        if self.abandoned() {
            return None;
        }
        for t in &mut self.threads {
            while let Some(f) = t.stack.pop() {
                close(&mut self.table, &self.contexts, f);
            }
        }
        self.add_device_time(calls, device, runtime_ext);
        Some(self.table.finish(strings))
    }

    /// Each context's own device time (of the ids its calls own) and the time of the contexts
    /// under it, into the rows its calls went to.
    fn add_device_time(&mut self, calls: &[PieceCalls], device: &DeviceTimes, runtime_ext: &Pairs) {
        let (sums, ops) = super::device_sums(device, runtime_ext);
        // The context of each id's last call in file order, as a map from id to call would have
        // it, without a list of the calls' ids sorted (16 bytes a call, a million a gigabyte).
        let mut owner = vec![ROOT; sums.len()];
        let exts = calls
            .iter()
            .flat_map(PieceCalls::iter)
            .filter_map(|o| o.external_id());
        let mut finger = 0;
        for (ext, context) in exts.zip(varints(&std::mem::take(&mut self.owners))) {
            if let Some(k) = position_near(&sums, ext, finger) {
                owner[k] = context as u32;
                finger = k;
            }
        }
        let n = self.contexts.len();
        let (mut own, mut gpu_ops) = (vec![0u64; n], vec![0u64; n]);
        for (k, &context) in owner.iter().enumerate().filter(|(_, &c)| c != ROOT) {
            own[context as usize] += sums[k].1;
            gpu_ops[context as usize] += u64::from(ops[k]);
        }
        // A context comes after its parent: sums from the leaves up.
        let mut total = own.clone();
        for c in (0..n).rev() {
            let parent = self.contexts[c].parent;
            if parent != ROOT {
                total[parent as usize] += total[c];
            }
        }
        for (c, context) in self.contexts.iter().enumerate() {
            let row = self.table.rows.entry(context.name).or_default();
            row.device_self += own[c];
            row.gpu_ops += gpu_ops[c];
            if context.outermost {
                row.device_total += total[c];
                if let Some(stage) = context.stage.and_then(|s| row.by_stage.get_mut(&s)) {
                    stage.device_ns += total[c];
                }
            }
        }
    }
}

/// The varints of `pieces`, in order.
fn varints(pieces: &[Box<[u8]>]) -> impl Iterator<Item = u64> + '_ {
    pieces.iter().flat_map(|bytes| {
        let mut at = 0;
        std::iter::from_fn(move || get_varint(bytes, &mut at))
    })
}

fn thread_at(threads: &mut Vec<Thread>, thread: u32) -> &mut Thread {
    let i = thread as usize;
    if i >= threads.len() {
        threads.resize_with(i + 1, Thread::default);
    }
    &mut threads[i]
}

/// A call closes: it goes into the table, less its device time (added at the end).
fn close(table: &mut Table, contexts: &[Context], f: Frame) {
    let dur = span(f.op.start, f.op.end);
    let context = contexts[f.context as usize];
    let call = Call {
        dur,
        self_cpu: dur.saturating_sub(f.child_cpu),
        device_self: 0,
        gpu_ops: 0,
        device_total: 0,
        outermost: context.outermost,
    };
    table.add(f.op.name, f.idx, context.stage, &call);
}

/// The innermost annotation on the thread containing `time`, its calls visited in increasing
/// time: those that have started enter, in order, and those that have ended leave.
fn innermost_annotation(t: &mut Thread, annotations: &[(i64, i64, u32)], time: i64) -> Option<u32> {
    if !t.sorted {
        // Last out first: by start, the longest first, then in arrival order, as the
        // whole-trace walk's list.
        t.waiting.sort_unstable_by_key(|&i| {
            let (start, end, _) = annotations[i as usize];
            std::cmp::Reverse((start, std::cmp::Reverse(end), i))
        });
        t.sorted = true;
    }
    while let Some(&a) = t.waiting.last() {
        if annotations[a as usize].0 > time {
            break;
        }
        t.open.push(a);
        t.waiting.pop();
    }
    t.open.retain(|&a| annotations[a as usize].1 > time);
    t.open.last().copied()
}

#[cfg(test)]
mod tests {
    use super::super::{CallLog, OperatorCalls};
    use super::*;

    /// Real traces, read whole on one thread and in pieces with the walk on its own thread:
    /// the walk made while reading applies, and gives the table of the calls walked after.
    #[test]
    fn the_walk_while_reading_applies_to_real_traces_and_agrees() {
        use crate::chunked::Chunking;
        use crate::gunzip::Cores;
        use crate::kineto::read_chunked;
        let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/");
        let pieces = Chunking {
            window: 64 << 10,
            piece: 8 << 10,
            workers: 4,
            gunzip: Cores::Auto,
        };
        for f in [
            "h100-cuda-graphs/kineto_trace.json.gz",
            "h200-qwen2-0.5b/kineto_trace.json.gz",
            "hta-multirank/sampled_rank-1.json.gz",
        ] {
            let path = std::path::PathBuf::from(fixtures).join(f);
            for chunking in [Chunking::default(), pieces] {
                let mut diags =
                    crate::diagnostics::Diagnostics::new(llmprof_bundle::Source::Kineto, f);
                let calls = read_chunked(&path, None, &mut diags, chunking, &mut |_| {})
                    .unwrap()
                    .calls;
                let live = calls.live.as_ref().expect("a walk");
                assert!(!live.abandoned() && live.next > 100, "{f}: {live:?}");
                assert!(!calls.operators_checked().operators.is_empty(), "{f}");
            }
        }
    }

    /// `outer` [0, 100) holds `inner` [10, 20) and [30, 40), which ran 5 and 7 ns of GPU ops,
    /// inside the annotation `stage` [5, 35).
    fn calls() -> OperatorCalls {
        let mut log = CallLog::default();
        for (name, start, end, ext) in [(0, 0, 100, 1), (1, 10, 20, 2), (1, 30, 40, 3)] {
            log.push(0, name, start, end, Some(ext));
        }
        let mut device = DeviceTimes::default();
        device.push(Some(2), None, 5);
        device.push(None, Some(90), 7);
        let mut runtime_ext = Pairs::default();
        runtime_ext.push(90, 3);
        OperatorCalls {
            strings: vec!["outer".into(), "inner".into(), "stage".into()],
            calls: vec![PieceCalls {
                log,
                threads: vec![0],
                names: vec![0, 1],
            }],
            annotations: vec![Annotation {
                thread: 0,
                tid: 1,
                start: 5,
                end: 35,
                name: 2,
            }],
            device,
            runtime_ext,
            live: None,
        }
    }

    #[test]
    fn stages_and_device_time_come_out_as_the_walk_after_reading_gives_them() {
        let mut c = calls();
        let mut live = LiveWalk::default();
        live.take(&c.annotations, c.calls.first());
        c.live = Some(live);
        let table = c.operators_checked();
        let inner = table.operators.iter().find(|o| o.name == "inner").unwrap();
        // The first `inner` ran in the stage, the second (from 30, still inside it) too.
        assert_eq!((inner.device_ns, inner.by_stage.len()), (12, 1));
        assert_eq!(inner.by_stage[0].device_ns, 12);
        let outer = table.operators.iter().find(|o| o.name == "outer").unwrap();
        assert_eq!((outer.device_ns, outer.device_self_ns), (12, 0));
    }

    /// An annotation read after a call it contains, or calls out of nesting order: the walk
    /// gives nothing, and the table is the one the calls walked after give.
    #[test]
    fn a_late_annotation_or_calls_out_of_order_abandon_the_walk() {
        let c = calls();
        let mut late = LiveWalk::default();
        late.take(&[], c.calls.first());
        late.take(&c.annotations, None);
        assert!(late.abandoned());
        assert!(late
            .finish(&c.strings, &c.calls, &c.device, &c.runtime_ext)
            .is_none());

        let mut log = CallLog::default();
        for (name, start, end) in [(1, 10, 20), (0, 0, 100)] {
            log.push(0, name, start, end, None);
        }
        let reversed = PieceCalls {
            log,
            threads: vec![0],
            names: vec![0, 1],
        };
        let mut out_of_order = LiveWalk::default();
        out_of_order.take(&[], Some(&reversed));
        assert!(out_of_order.abandoned());

        let mut c = calls();
        let mut live = LiveWalk::default();
        live.take(&[], c.calls.first());
        live.take(&c.annotations, None);
        c.live = Some(live);
        let walked = calls().operators();
        assert_eq!(c.operators(), walked);
    }
}
