//! Several ranks of a multi-rank run on one time axis: each rank is loaded as its own [`Run`]
//! (its `bundle.json` and `timeline.json`, one rank's files at a time) and [`merge`] lays
//! them side by side — every rank's lanes grouped under its name (`Rank 1 · Stream 7`), its
//! records shifted onto the common clock.
//!
//! The clock: where every rank's timeline records its clock's epoch (`t0_epoch_ns`: Nsight
//! Systems' session start, the PyTorch profiler's `baseTimeNanoseconds`), rank times are put
//! on that epoch, as the multi-rank ingest aligns them; otherwise the ranks' own `t0_ns` are
//! taken as one clock (true of one Nsight Systems report holding every rank) and
//! [`Merged::clock`] says so, as it says when one rank starts after another has ended. The
//! merged timeline starts at the earliest rank's start; its `t0_ns` is that moment on the
//! first rank's own clock.
//!
//! Everything else in the viewer works on the merged [`Run`] unchanged: its tables are the
//! ranks' tables one after the other (kernel rows, stages, streams, launches, counters), its
//! columns the ranks' records merged in start order, so lanes, hit tests, search and range
//! statistics need no notion of rank beyond [`Run::ranks`].

use crate::lanes::{Lane, LaneKind};
use crate::model::{Counter, LoadError, RankPart, Run, StageInfo};
use llmprof_bundle::{OptU32, Timeline};

/// One loaded rank.
#[derive(Debug, Clone)]
pub struct RankRun {
    pub rank: u32,
    pub run: Run,
}

/// The merged run and how its ranks were placed.
#[derive(Debug, Clone)]
pub struct Merged {
    pub run: Run,
    /// Per input rank: ns added to its times (its start on the merged axis).
    pub shift: Vec<u64>,
    /// How the clocks were aligned, in words.
    pub clock: String,
}

/// Lays `ranks` side by side on one time axis (see the module docs). Fails on no ranks or a
/// rank given twice.
pub fn merge(ranks: &[RankRun]) -> Result<Merged, LoadError> {
    if ranks.is_empty() {
        return Err(LoadError("no rank to show".into()));
    }
    for (i, r) in ranks.iter().enumerate() {
        if ranks[..i].iter().any(|o| o.rank == r.rank) {
            return Err(LoadError(format!("rank {} is loaded twice", r.rank)));
        }
    }
    let (starts, mut clock) = rank_starts(ranks);
    let base = starts.iter().copied().min().unwrap_or(0);
    let shift: Vec<u64> = starts
        .iter()
        .map(|&s| u64::try_from(s - base).unwrap_or(u64::MAX))
        .collect();
    if let Some(note) = apart(ranks, &shift) {
        clock = format!("{clock}; {note}");
    }
    let bases = Bases::of(ranks);
    let maps = PositionMaps::new(ranks, &shift);
    let timeline = merged_timeline(ranks, &shift, &maps, &bases);
    let mut run = Run {
        title: ranks[0].run.title.clone(),
        device: ranks[0].run.device.clone(),
        timeline,
        range_parent: vec![None; maps.ranges_len],
        ..Run::default()
    };
    let mut notes = Vec::new();
    for (p, r) in ranks.iter().enumerate() {
        append_rank(&mut run, r, (shift[p], &bases[p]), &maps.of(p));
        if let Some(n) = &r.run.counters_note {
            notes.push(format!("rank {}: {n}", r.rank));
        }
    }
    run.counters_note = (!notes.is_empty()).then(|| notes.join("; "));
    Ok(Merged { run, shift, clock })
}

/// Each rank's start on the common clock (ns), and how that clock was chosen.
fn rank_starts(ranks: &[RankRun]) -> (Vec<i128>, String) {
    let epochs: Option<Vec<i64>> = ranks.iter().map(|r| r.run.timeline.t0_epoch_ns).collect();
    match epochs {
        Some(e) => (
            e.into_iter().map(i128::from).collect(),
            "ranks aligned by their clocks' epochs (t0_epoch_ns)".into(),
        ),
        None => (
            ranks
                .iter()
                .map(|r| i128::from(r.run.timeline.t0_ns))
                .collect(),
            "a rank's timeline has no clock epoch: the ranks' source clocks are taken as one \
             (true of one Nsight Systems report of every rank)"
                .into(),
        ),
    }
}

/// A warning when a rank's records start after another rank's have all ended: ranks of one
/// job overlap in time, so their clocks or their files disagree.
fn apart(ranks: &[RankRun], shift: &[u64]) -> Option<String> {
    let end = |p: usize| shift[p].saturating_add(ranks[p].run.timeline.end_ns);
    let (late, early) = (0..ranks.len())
        .flat_map(|a| (0..ranks.len()).map(move |b| (a, b)))
        .find(|&(a, b)| shift[a] > end(b))?;
    Some(format!(
        "rank {} starts {:.3} s after rank {} ends: are they from one job?",
        ranks[late].rank,
        (shift[late] - end(early)) as f64 / 1e9,
        ranks[early].rank
    ))
}

/// Where each rank's records land in the merged columns: per rank, old position → new.
struct PositionMaps {
    kernels: Vec<Vec<u32>>,
    mem_ops: Vec<Vec<u32>>,
    ranges: Vec<Vec<u32>>,
    ranges_len: usize,
}

/// One rank's maps.
struct RankMaps<'a> {
    kernels: &'a [u32],
    mem_ops: &'a [u32],
    ranges: &'a [u32],
}

impl PositionMaps {
    fn new(ranks: &[RankRun], shift: &[u64]) -> PositionMaps {
        let tl = |p: usize| &ranks[p].run.timeline;
        let kernels = merge_order(ranks.len(), shift, |p| &tl(p).kernels.start);
        let mem_ops = merge_order(ranks.len(), shift, |p| &tl(p).mem_ops.start);
        let ranges = merge_order(ranks.len(), shift, |p| &tl(p).ranges.start);
        let ranges_len = ranges.iter().map(Vec::len).sum();
        PositionMaps {
            kernels,
            mem_ops,
            ranges,
            ranges_len,
        }
    }

    fn of(&self, p: usize) -> RankMaps<'_> {
        RankMaps {
            kernels: &self.kernels[p],
            mem_ops: &self.mem_ops[p],
            ranges: &self.ranges[p],
        }
    }
}

/// The merged position of every record of every rank, ordered by shifted start (ties: rank
/// order, then the rank's own order), so each rank's order is kept.
fn merge_order<'a>(n: usize, shift: &[u64], start: impl Fn(usize) -> &'a [u64]) -> Vec<Vec<u32>> {
    let mut all: Vec<(u64, u32, u32)> = Vec::new();
    for (p, &by) in shift.iter().enumerate().take(n) {
        all.extend(
            start(p)
                .iter()
                .enumerate()
                .map(|(i, &t)| (t.saturating_add(by), p as u32, i as u32)),
        );
    }
    all.sort_unstable();
    let mut maps: Vec<Vec<u32>> = (0..n).map(|p| vec![0; start(p).len()]).collect();
    for (new, &(_, p, i)) in all.iter().enumerate() {
        maps[p as usize][i as usize] = new as u32;
    }
    maps
}

/// Writes `value` at `map[i]` of `col` for every record `i` of one rank.
fn place<T: Copy>(col: &mut [T], map: &[u32], values: impl IntoIterator<Item = T>) {
    for (&to, v) in map.iter().zip(values) {
        col[to as usize] = v;
    }
}

/// One rank's rows in the concatenated tables: where they start, and how many the rank has
/// (an index of the rank's own past its table is no row of it, not one of the next rank's).
#[derive(Debug, Default, Clone, Copy)]
struct Bases {
    kernel: u32,
    stage: u32,
    stages: u32,
    stream: u32,
    launch: u32,
    launches: u32,
    counter: usize,
}

impl Bases {
    /// Every rank's, in order: the sums of the tables before it.
    fn of(ranks: &[RankRun]) -> Vec<Bases> {
        let mut next = Bases::default();
        ranks
            .iter()
            .map(|r| {
                let run = &r.run;
                let b = Bases {
                    stages: run.stages.len() as u32,
                    launches: run.timeline.launches.len() as u32,
                    ..next
                };
                next.kernel += run.kernels.len() as u32;
                next.stage += b.stages;
                next.stream += run.timeline.streams.len() as u32;
                next.launch += b.launches;
                next.counter += run.counters.len();
                b
            })
            .collect()
    }

    fn stage(&self, s: OptU32) -> OptU32 {
        (s.get().filter(|&x| x < self.stages).map(|x| x + self.stage)).into()
    }

    fn launch(&self, l: OptU32) -> OptU32 {
        (l.get()
            .filter(|&x| x < self.launches)
            .map(|x| x + self.launch))
        .into()
    }
}

/// The ranks' timelines as one: columns merged by start, indexes into the per-rank tables
/// (kernel rows, stages, streams, launches, ranges) offset to the concatenated tables.
fn merged_timeline(
    ranks: &[RankRun],
    shift: &[u64],
    maps: &PositionMaps,
    bases: &[Bases],
) -> Timeline {
    let first = &ranks[0].run.timeline;
    // The merged start on the first rank's own clock, and its epoch where every rank has one.
    let back = i64::try_from(shift[0]).unwrap_or(i64::MAX);
    let mut t = Timeline {
        schema_version: first.schema_version,
        run_id: first.run_id.clone(),
        t0_ns: first.t0_ns.saturating_sub(back),
        end_ns: 0,
        t0_epoch_ns: ranks
            .iter()
            .all(|r| r.run.timeline.t0_epoch_ns.is_some())
            .then(|| first.t0_epoch_ns.map(|e| e.saturating_sub(back)))
            .flatten(),
        ..Timeline::default()
    };
    let nk: usize = maps.kernels.iter().map(Vec::len).sum();
    let nm: usize = maps.mem_ops.iter().map(Vec::len).sum();
    let any = |f: fn(&Timeline) -> bool| ranks.iter().any(|r| f(&r.run.timeline));
    let k = &mut t.kernels;
    (k.start, k.dur, k.stream, k.kernel) = (vec![0; nk], vec![0; nk], vec![0; nk], vec![0; nk]);
    k.stage = vec![OptU32::NONE; nk];
    let with = |has: bool| {
        if has {
            vec![OptU32::NONE; nk]
        } else {
            Vec::new()
        }
    };
    k.launch = with(any(|t| !t.kernels.launch.is_empty()));
    k.range = with(any(|t| !t.kernels.range.is_empty()));
    k.graph = with(any(|t| !t.kernels.graph.is_empty()));
    k.graph_node = with(any(|t| !t.kernels.graph_node.is_empty()));
    let m = &mut t.mem_ops;
    (m.start, m.dur, m.stream, m.kernel) = (vec![0; nm], vec![0; nm], vec![0; nm], vec![0; nm]);
    (m.bytes, m.stage) = (vec![0; nm], vec![OptU32::NONE; nm]);
    let nr = maps.ranges_len;
    let r = &mut t.ranges;
    (r.start, r.dur, r.stage, r.depth, r.tid) = (
        vec![0; nr],
        vec![0; nr],
        vec![0; nr],
        vec![0; nr],
        vec![0; nr],
    );
    for (p, rank) in ranks.iter().enumerate() {
        let src = &rank.run.timeline;
        let at = (shift[p], &bases[p]);
        copy_kernels(&mut t, &rank.run, at, &maps.of(p));
        copy_mem_ops_and_ranges(&mut t, src, at, &maps.of(p));
        t.end_ns = t.end_ns.max(src.end_ns.saturating_add(shift[p]));
        t.streams.extend(&src.streams);
        t.launches.extend(src.launches.iter().cloned());
    }
    t
}

/// One rank's kernel ops into their merged positions. Kernel rows and streams are in range
/// (the run was checked when it loaded); stage and launch indexes past the rank's own tables
/// become `null`.
fn copy_kernels(t: &mut Timeline, run: &Run, (shift, b): (u64, &Bases), maps: &RankMaps<'_>) {
    let (k, s, to) = (&mut t.kernels, &run.timeline.kernels, maps.kernels);
    let range_of =
        |v: Option<u32>| OptU32::from(v.and_then(|x| maps.ranges.get(x as usize).copied()));
    place(
        &mut k.start,
        to,
        s.start.iter().map(|&x| x.saturating_add(shift)),
    );
    place(&mut k.dur, to, s.dur.iter().copied());
    place(&mut k.stream, to, s.stream.iter().map(|&x| x + b.stream));
    place(&mut k.kernel, to, s.kernel.iter().map(|&x| x + b.kernel));
    place(&mut k.stage, to, s.stage.iter().map(|&x| b.stage(x)));
    if !s.launch.is_empty() {
        place(&mut k.launch, to, s.launch.iter().map(|&x| b.launch(x)));
    }
    if !s.range.is_empty() {
        place(&mut k.range, to, s.range.iter().map(|&x| range_of(x.get())));
    } else if !k.range.is_empty() {
        // Another rank has the column: this one's kernels get the instance enclosing their
        // start, as the viewer finds it for a timeline without the column.
        let found = (0..s.start.len() as u32).map(|i| range_of(run.stage_instance_of_kernel(i)));
        place(&mut k.range, to, found);
    }
    if !s.graph.is_empty() {
        place(&mut k.graph, to, s.graph.iter().copied());
    }
    if !s.graph_node.is_empty() {
        place(&mut k.graph_node, to, s.graph_node.iter().copied());
    }
}

/// One rank's memcpys, memsets and ranges into their merged positions.
fn copy_mem_ops_and_ranges(
    t: &mut Timeline,
    src: &Timeline,
    (shift, b): (u64, &Bases),
    maps: &RankMaps<'_>,
) {
    let (m, s, to) = (&mut t.mem_ops, &src.mem_ops, maps.mem_ops);
    place(
        &mut m.start,
        to,
        s.start.iter().map(|&x| x.saturating_add(shift)),
    );
    place(&mut m.dur, to, s.dur.iter().copied());
    place(&mut m.stream, to, s.stream.iter().map(|&x| x + b.stream));
    place(&mut m.kernel, to, s.kernel.iter().map(|&x| x + b.kernel));
    place(&mut m.bytes, to, s.bytes.iter().copied());
    place(&mut m.stage, to, s.stage.iter().map(|&x| b.stage(x)));
    // A range's stage was checked when the run loaded.
    let (r, s, to) = (&mut t.ranges, &src.ranges, maps.ranges);
    place(
        &mut r.start,
        to,
        s.start.iter().map(|&x| x.saturating_add(shift)),
    );
    place(&mut r.dur, to, s.dur.iter().copied());
    place(&mut r.stage, to, s.stage.iter().map(|&x| x + b.stage));
    place(&mut r.depth, to, s.depth.iter().copied());
    place(&mut r.tid, to, s.tid.iter().copied());
}

/// One rank's tables, lanes and counters appended to the merged run.
fn append_rank(run: &mut Run, r: &RankRun, (shift, b): (u64, &Bases), maps: &RankMaps<'_>) {
    let moved = |map: &[u32], items: &[u32]| -> Vec<u32> {
        items.iter().map(|&i| map[i as usize]).collect()
    };
    run.kernels
        .extend(r.run.kernels.iter().cloned().map(|mut k| {
            k.rank = Some(r.rank);
            k
        }));
    for stage in &r.run.stages {
        let mut s = stage.clone();
        s.instances = moved(maps.ranges, &s.instances);
        s.color = stage_slot(&run.stages, &s.name);
        run.stages.push(s);
    }
    for (i, parent) in r.run.range_parent.iter().enumerate() {
        run.range_parent[maps.ranges[i] as usize] = parent.map(|q| maps.ranges[q as usize]);
    }
    run.ranks.push(RankPart {
        rank: r.rank,
        streams: b.stream..b.stream + r.run.timeline.streams.len() as u32,
    });
    let tl = &run.timeline;
    for lane in &r.run.lanes {
        let label = format!("Rank {} · {}", r.rank, bare_label(&lane.label));
        let (items, (start, dur)) = match lane.kind {
            LaneKind::Stages { .. } => (maps.ranges, (&tl.ranges.start, &tl.ranges.dur)),
            LaneKind::Stream(_) => (maps.kernels, (&tl.kernels.start, &tl.kernels.dur)),
            LaneKind::MemOps => (maps.mem_ops, (&tl.mem_ops.start, &tl.mem_ops.dur)),
            LaneKind::Counter(c) => {
                run.lanes.push(Lane::counter(c + b.counter, label));
                continue;
            }
        };
        let kind = match lane.kind {
            LaneKind::Stream(s) => LaneKind::Stream(s + b.stream),
            other => other,
        };
        let items = moved(items, &lane.items);
        run.lanes.push(Lane::new(kind, label, items, start, dur));
    }
    run.counters.extend(r.run.counters.iter().map(|c| Counter {
        t: c.t.iter().map(|&x| x + shift as f64).collect(),
        ..c.clone()
    }));
}

/// The palette slot of stage `name` among the stages merged so far: that of the first stage
/// of the same name, else the next slot not taken.
fn stage_slot(stages: &[StageInfo], name: &str) -> u32 {
    match stages.iter().find(|s| s.name == name) {
        Some(s) => s.color,
        None => stages.iter().map(|s| s.color + 1).max().unwrap_or(0),
    }
}

/// A lane label without the rank prefix a single rank's stream lanes carry.
fn bare_label(label: &str) -> &str {
    match label.split_once(" · ") {
        Some((head, rest)) if head.starts_with("Rank ") => rest,
        _ => label,
    }
}
