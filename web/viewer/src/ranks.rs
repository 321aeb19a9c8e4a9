//! Several ranks of a multi-rank run on one time axis: each rank is loaded as its own [`Run`]
//! (its `bundle.json` and `timeline.json`, one rank's files at a time) and [`merge`] lays
//! them side by side — every rank's lanes grouped under its name (`Rank 1 · Stream 7`), its
//! records shifted onto the common clock.
//!
//! The clock: where every rank's timeline records its clock's epoch (`t0_epoch_ns`: Nsight
//! Systems' session start, the PyTorch profiler's `baseTimeNanoseconds`), rank times are put
//! on that epoch, as the multi-rank ingest aligns them; otherwise the ranks' own `t0_ns` are
//! taken as one clock (true of one Nsight Systems report holding every rank) and
//! [`Merged::clock`] says so. The merged timeline starts at the earliest rank's start.
//!
//! Everything else in the viewer works on the merged [`Run`] unchanged: its tables are the
//! ranks' tables one after the other (kernel rows, stages, streams, launches, counters), its
//! columns the ranks' records merged in start order, so lanes, hit tests, search and range
//! statistics need no notion of rank beyond [`Run::ranks`].

use crate::lanes::{Lane, LaneKind};
use crate::model::{Counter, LoadError, RankPart, Run};
use llmprof_bundle::Timeline;

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
    let (starts, clock) = rank_starts(ranks);
    let base = starts.iter().copied().min().unwrap_or(0);
    let shift: Vec<u64> = starts.iter().map(|&s| (s - base) as u64).collect();
    let maps = PositionMaps::new(ranks, &shift);
    let timeline = merged_timeline(ranks, &shift, &maps, base);
    let mut run = Run {
        title: ranks[0].run.title.clone(),
        device: ranks[0].run.device.clone(),
        timeline,
        kernels: Vec::new(),
        stages: Vec::new(),
        range_parent: vec![None; maps.ranges_len],
        lanes: Vec::new(),
        counters: Vec::new(),
        counters_note: None,
        rank: None,
        ranks: Vec::new(),
    };
    let mut notes = Vec::new();
    for (p, r) in ranks.iter().enumerate() {
        append_rank(&mut run, r, p, shift[p], &maps);
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

/// Where each rank's records land in the merged columns: per rank, old position → new.
struct PositionMaps {
    kernels: Vec<Vec<u32>>,
    mem_ops: Vec<Vec<u32>>,
    ranges: Vec<Vec<u32>>,
    ranges_len: usize,
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

/// The ranks' timelines as one: columns merged by start, indexes into the per-rank tables
/// (kernel rows, stages, streams, launches, ranges) offset to the concatenated tables.
fn merged_timeline(ranks: &[RankRun], shift: &[u64], maps: &PositionMaps, base: i128) -> Timeline {
    let first = &ranks[0].run.timeline;
    let mut t = Timeline {
        schema_version: first.schema_version,
        run_id: first.run_id.clone(),
        t0_ns: i64::try_from(base).unwrap_or(first.t0_ns),
        end_ns: 0,
        t0_epoch_ns: ranks
            .iter()
            .all(|r| r.run.timeline.t0_epoch_ns.is_some())
            .then(|| i64::try_from(base).ok())
            .flatten(),
        ..Timeline::default()
    };
    let nk: usize = maps.kernels.iter().map(Vec::len).sum();
    let nm: usize = maps.mem_ops.iter().map(Vec::len).sum();
    let any = |f: fn(&Timeline) -> bool| ranks.iter().any(|r| f(&r.run.timeline));
    let k = &mut t.kernels;
    (k.start, k.dur, k.stream, k.kernel) = (vec![0; nk], vec![0; nk], vec![0; nk], vec![0; nk]);
    k.stage = vec![None; nk];
    let with = |has: bool| if has { vec![None; nk] } else { Vec::new() };
    k.launch = with(any(|t| !t.kernels.launch.is_empty()));
    k.range = with(any(|t| !t.kernels.range.is_empty()));
    k.graph = with(any(|t| !t.kernels.graph.is_empty()));
    k.graph_node = with(any(|t| !t.kernels.graph_node.is_empty()));
    let m = &mut t.mem_ops;
    (m.start, m.dur, m.stream, m.kernel) = (vec![0; nm], vec![0; nm], vec![0; nm], vec![0; nm]);
    (m.bytes, m.stage) = (vec![0; nm], vec![None; nm]);
    let nr = maps.ranges_len;
    let r = &mut t.ranges;
    (r.start, r.dur, r.stage, r.depth, r.tid) = (
        vec![0; nr],
        vec![0; nr],
        vec![0; nr],
        vec![0; nr],
        vec![0; nr],
    );
    let mut base_of = Bases::default();
    for (p, rank) in ranks.iter().enumerate() {
        let src = &rank.run.timeline;
        copy_rank_columns(&mut t, src, p, shift[p], maps, &base_of);
        t.end_ns = t.end_ns.max(src.end_ns.saturating_add(shift[p]));
        t.streams.extend(&src.streams);
        t.launches.extend(src.launches.iter().cloned());
        base_of.advance(&rank.run);
    }
    t
}

/// Offsets of one rank's rows in the concatenated tables.
#[derive(Debug, Default, Clone, Copy)]
struct Bases {
    kernel: u32,
    stage: u32,
    stream: u32,
    launch: u32,
    counter: usize,
}

impl Bases {
    fn advance(&mut self, run: &Run) {
        self.kernel += run.kernels.len() as u32;
        self.stage += run.stages.len() as u32;
        self.stream += run.timeline.streams.len() as u32;
        self.launch += run.timeline.launches.len() as u32;
        self.counter += run.counters.len();
    }
}

/// Rank `p`'s records (`src`) into their merged positions.
fn copy_rank_columns(
    t: &mut Timeline,
    src: &Timeline,
    p: usize,
    shift: u64,
    maps: &PositionMaps,
    b: &Bases,
) {
    let (km, mm, rm) = (&maps.kernels[p], &maps.mem_ops[p], &maps.ranges[p]);
    let plus = |v: Option<u32>, d: u32| v.map(|x| x + d);
    let range_of = |v: Option<u32>| v.and_then(|x| rm.get(x as usize).copied());
    let (k, s) = (&mut t.kernels, &src.kernels);
    place(
        &mut k.start,
        km,
        s.start.iter().map(|&x| x.saturating_add(shift)),
    );
    place(&mut k.dur, km, s.dur.iter().copied());
    place(&mut k.stream, km, s.stream.iter().map(|&x| x + b.stream));
    place(&mut k.kernel, km, s.kernel.iter().map(|&x| x + b.kernel));
    place(&mut k.stage, km, s.stage.iter().map(|&x| plus(x, b.stage)));
    if !s.launch.is_empty() {
        place(
            &mut k.launch,
            km,
            s.launch.iter().map(|&x| plus(x, b.launch)),
        );
    }
    if !s.range.is_empty() {
        place(&mut k.range, km, s.range.iter().map(|&x| range_of(x)));
    }
    if !s.graph.is_empty() {
        place(&mut k.graph, km, s.graph.iter().copied());
    }
    if !s.graph_node.is_empty() {
        place(&mut k.graph_node, km, s.graph_node.iter().copied());
    }
    let (m, s) = (&mut t.mem_ops, &src.mem_ops);
    place(
        &mut m.start,
        mm,
        s.start.iter().map(|&x| x.saturating_add(shift)),
    );
    place(&mut m.dur, mm, s.dur.iter().copied());
    place(&mut m.stream, mm, s.stream.iter().map(|&x| x + b.stream));
    place(&mut m.kernel, mm, s.kernel.iter().map(|&x| x + b.kernel));
    place(&mut m.bytes, mm, s.bytes.iter().copied());
    place(&mut m.stage, mm, s.stage.iter().map(|&x| plus(x, b.stage)));
    let (r, s) = (&mut t.ranges, &src.ranges);
    place(
        &mut r.start,
        rm,
        s.start.iter().map(|&x| x.saturating_add(shift)),
    );
    place(&mut r.dur, rm, s.dur.iter().copied());
    place(&mut r.stage, rm, s.stage.iter().map(|&x| x + b.stage));
    place(&mut r.depth, rm, s.depth.iter().copied());
    place(&mut r.tid, rm, s.tid.iter().copied());
}

/// Rank `p`'s tables, lanes and counters appended to the merged run.
fn append_rank(run: &mut Run, r: &RankRun, p: usize, shift: u64, maps: &PositionMaps) {
    let b = bases_before(run);
    let (km, mm, rm) = (&maps.kernels[p], &maps.mem_ops[p], &maps.ranges[p]);
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
        s.instances = moved(rm, &s.instances);
        s.color = stage_slot(&run.stages, &s.name);
        run.stages.push(s);
    }
    for (i, parent) in r.run.range_parent.iter().enumerate() {
        run.range_parent[rm[i] as usize] = parent.map(|q| rm[q as usize]);
    }
    let streams = b.stream..b.stream + r.run.timeline.streams.len() as u32;
    run.ranks.push(RankPart {
        rank: r.rank,
        streams: streams.clone(),
    });
    let tl = &run.timeline;
    for lane in &r.run.lanes {
        let label = format!("Rank {} · {}", r.rank, bare_label(&lane.label));
        let next = match lane.kind {
            LaneKind::Stages { depth } => {
                let items = moved(rm, &lane.items);
                Lane::new(
                    LaneKind::Stages { depth },
                    label,
                    items,
                    &tl.ranges.start,
                    &tl.ranges.dur,
                )
            }
            LaneKind::Stream(s) => {
                let items = moved(km, &lane.items);
                let kind = LaneKind::Stream(s + b.stream);
                Lane::new(kind, label, items, &tl.kernels.start, &tl.kernels.dur)
            }
            LaneKind::MemOps => {
                let items = moved(mm, &lane.items);
                Lane::new(
                    LaneKind::MemOps,
                    label,
                    items,
                    &tl.mem_ops.start,
                    &tl.mem_ops.dur,
                )
            }
            LaneKind::Counter(c) => Lane::counter(c + b.counter, label),
        };
        run.lanes.push(next);
    }
    run.counters.extend(r.run.counters.iter().map(|c| Counter {
        t: c.t.iter().map(|&x| x + shift as f64).collect(),
        ..c.clone()
    }));
}

/// The palette slot of stage `name` among the stages merged so far: that of the first stage
/// of the same name, else the next slot not taken.
fn stage_slot(stages: &[crate::model::StageInfo], name: &str) -> u32 {
    match stages.iter().find(|s| s.name == name) {
        Some(s) => s.color,
        None => stages.iter().map(|s| s.color + 1).max().unwrap_or(0),
    }
}

/// The table offsets of the next rank: what the merged run holds so far.
fn bases_before(run: &Run) -> Bases {
    Bases {
        kernel: run.kernels.len() as u32,
        stage: run.stages.len() as u32,
        stream: run.ranks.last().map_or(0, |p| p.streams.end),
        launch: 0,
        counter: run.counters.len(),
    }
}

/// A lane label without the rank prefix a single rank's stream lanes carry.
fn bare_label(label: &str) -> &str {
    match label.split_once(" · ") {
        Some((head, rest)) if head.starts_with("Rank ") => rest,
        _ => label,
    }
}
