//! A run as the viewer holds it: the bundle's kernel and stage tables, the timeline's
//! columns, the lanes with their level-of-detail indexes, and the NVML counters placed on
//! the timeline's time axis.

use llmprof_bundle::{
    names, Bundle, Category, ChunkedTimeline, Launch, OpKind, Timeline, TimelineKernels,
};

use crate::chunks::Chunked;
use crate::lanes::{Lane, LaneKind};

/// Why a run cannot be shown.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadError(pub String);

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LoadError {}

/// One `kernels[]` row of the bundle, as tooltips show it.
#[derive(Debug, Clone)]
pub struct KernelInfo {
    pub name: String,
    pub display: String,
    pub kind: OpKind,
    pub category: Category,
    pub color: &'static str,
    /// Nsight Compute figures, formatted (`SM throughput 71.2%`), first result per kernel.
    pub ncu: Vec<String>,
    /// The rank whose row this is, in a run of several ranks laid side by side
    /// ([`crate::ranks::merge`]); `None` in a run of one.
    pub rank: Option<u32>,
}

/// One stage of the bundle.
#[derive(Debug, Clone)]
pub struct StageInfo {
    pub name: String,
    /// Range positions (in [`Timeline::ranges`]) of this stage's instances, by start.
    pub instances: Vec<u32>,
    /// Per instance (in `instance_list` order, the order of `instances`): whether it is
    /// warm-up, not measurement.
    pub warmup: Vec<bool>,
    /// Its colour's slot in the stage palette ([`crate::scene::stage_color`]): its index,
    /// and with several ranks side by side the slot of the first stage of the same name, so
    /// `decode` looks the same on every rank.
    pub color: u32,
}

/// An NVML series on the timeline's axis.
#[derive(Debug, Clone)]
pub struct Counter {
    pub name: &'static str,
    pub unit: &'static str,
    /// ns relative to the timeline's `t0` (negative before it).
    pub t: Vec<f64>,
    pub v: Vec<f64>,
    /// Top of the lane's scale.
    pub max: f64,
}

/// Everything the timeline draws, derived once at load.
#[derive(Debug, Clone, Default)]
pub struct Run {
    pub title: String,
    pub device: String,
    pub timeline: Timeline,
    pub kernels: Vec<KernelInfo>,
    pub stages: Vec<StageInfo>,
    /// Per range position: the position of the range directly enclosing it on its thread
    /// (the instance's own parent, whatever the stage's other instances sit in).
    pub range_parent: Vec<Option<u32>>,
    pub lanes: Vec<Lane>,
    pub counters: Vec<Counter>,
    /// Why the NVML lanes are absent, when the bundle has samples but they cannot be placed.
    pub counters_note: Option<String>,
    /// The rank of a multi-rank run this run is (the bundle's `environment.distributed`).
    pub rank: Option<u32>,
    /// The ranks laid side by side in this run ([`crate::ranks::merge`]), in lane order;
    /// empty in a run of one.
    pub ranks: Vec<RankPart>,
    /// A timeline too large to load whole: its chunks and overview; the kernel columns then
    /// hold the chunks [`Chunked::loaded`].
    pub chunked: Option<Chunked>,
}

/// One rank of a run of several: its number and its streams (indexes into the timeline's
/// `streams`), which tell its GPU ops from the others'.
#[derive(Debug, Clone, PartialEq)]
pub struct RankPart {
    pub rank: u32,
    pub streams: std::ops::Range<u32>,
}

/// What a lane item stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Kernel(u32),
    MemOp(u32),
    Range(u32),
}

impl Run {
    /// Parses `bundle.json` and `timeline.json` text and builds the lanes.
    pub fn from_json(bundle: &str, timeline: &str) -> Result<Run, LoadError> {
        let bundle = Bundle::from_json(bundle)
            .map_err(|e| LoadError(format!("bundle.json does not parse: {e}")))?;
        let timeline = Timeline::from_json(timeline)
            .map_err(|e| LoadError(format!("timeline.json does not parse: {e}")))?;
        Run::new(&bundle, timeline)
    }

    /// Parses `bundle.json` and a chunked timeline's head; no kernel is loaded yet.
    pub fn from_chunked_json(bundle: &str, head: &str) -> Result<Run, LoadError> {
        let bundle = Bundle::from_json(bundle)
            .map_err(|e| LoadError(format!("bundle.json does not parse: {e}")))?;
        let head: ChunkedTimeline = serde_json::from_str(head)
            .map_err(|e| LoadError(format!("the chunked timeline does not parse: {e}")))?;
        let chunked = Chunked::new(&head)?;
        let mut run = Run::new(&bundle, head.timeline)?;
        run.chunked = Some(chunked);
        run.lanes = run.build_all_lanes();
        Ok(run)
    }

    /// Replaces the kernel columns (a chunked timeline's newly loaded chunks) and rebuilds the
    /// lanes; on an error nothing changes.
    pub fn set_kernels(&mut self, kernels: TimelineKernels) -> Result<(), LoadError> {
        let old = std::mem::replace(&mut self.timeline.kernels, kernels);
        let checked = check_columns(&self.timeline)
            .and_then(|()| check_rows(&self.timeline, self.kernels.len() as u32));
        if let Err(e) = checked {
            self.timeline.kernels = old;
            return Err(e);
        }
        self.lanes = self.build_all_lanes();
        Ok(())
    }

    /// Makes the decoded chunks `want` the run's kernels; whether it did (not before every
    /// chunk of `want` is decoded). On an error nothing changes.
    pub fn load_chunks(&mut self, want: std::ops::Range<usize>) -> Result<bool, LoadError> {
        let Some(c) = self.chunked.as_mut() else {
            return Ok(false);
        };
        let Some((kernels, loading)) = c.assemble(want) else {
            return Ok(false);
        };
        self.set_kernels(kernels)?;
        if let Some(c) = self.chunked.as_mut() {
            c.commit(loading);
        }
        Ok(true)
    }

    /// The chunks when `[t0, t1]` holds kernels that are not loaded: the window is then
    /// drawn from the overview.
    pub fn overview_for(&self, t0: f64, t1: f64) -> Option<&Chunked> {
        self.chunked.as_ref().filter(|c| !c.covers(t0, t1))
    }

    /// The position in the whole timeline of kernel op `i` (of a chunked timeline, `i` is
    /// a position among the loaded kernels).
    pub fn global_kernel(&self, i: u32) -> u64 {
        self.chunked.as_ref().map_or(i as u64, |c| c.global(i))
    }

    /// Kernel op `global` of the whole timeline among the run's kernels, if it is loaded.
    pub fn local_kernel(&self, global: u64) -> Option<u32> {
        let n = self.timeline.kernels.start.len();
        match &self.chunked {
            Some(c) => c.local(global, n),
            None => u32::try_from(global).ok().filter(|&i| (i as usize) < n),
        }
    }

    /// Stage, stream, memcpy and counter lanes; a chunked timeline has a lane for each stream
    /// of its overview, loaded or not.
    fn build_all_lanes(&self) -> Vec<Lane> {
        let overview: Vec<bool> = self
            .chunked
            .as_ref()
            .map(|c| c.lanes.iter().map(Option::is_some).collect())
            .unwrap_or_default();
        let mut lanes = build_lanes(&self.timeline, self.rank, &overview);
        for (i, c) in self.counters.iter().enumerate() {
            lanes.push(Lane::counter(i, format!("{} ({})", c.name, c.unit)));
        }
        lanes
    }

    /// Builds the lanes of `timeline`, whose rows refer to `bundle`'s tables.
    pub fn new(bundle: &Bundle, timeline: Timeline) -> Result<Run, LoadError> {
        check_columns(&timeline)?;
        let kernels: Vec<KernelInfo> = bundle
            .kernels
            .iter()
            .map(|k| KernelInfo {
                name: k.name.clone(),
                display: names::display_name(&k.name),
                kind: k.kind,
                category: k.category,
                color: color_of(k.category),
                ncu: k
                    .ncu
                    .first()
                    .and_then(|&i| bundle.ncu.get(i as usize))
                    .map(ncu_lines)
                    .unwrap_or_default(),
                rank: None,
            })
            .collect();
        check_rows(&timeline, kernels.len() as u32)?;
        let mut stages: Vec<StageInfo> = bundle
            .stages
            .iter()
            .zip(0u32..)
            .map(|(s, color)| StageInfo {
                color,
                name: if s.domain.is_empty() {
                    s.name.clone()
                } else {
                    format!("{}:{}", s.domain, s.name)
                },
                instances: Vec::new(),
                warmup: s.instance_list.iter().map(|i| i.warmup).collect(),
            })
            .collect();
        for (pos, &s) in timeline.ranges.stage.iter().enumerate() {
            match stages.get_mut(s as usize) {
                Some(st) => st.instances.push(pos as u32),
                None => {
                    return Err(LoadError(format!(
                        "timeline.json refers to stage {s}, but bundle.json has {} stages",
                        bundle.stages.len()
                    )))
                }
            }
        }
        let range_parent = range_parents(&timeline);
        let rank = bundle.environment.distributed.as_ref().map(|d| d.rank);
        let (counters, counters_note) = counters(bundle, &timeline);
        let mut run = Run {
            title: bundle
                .label
                .clone()
                .or_else(|| bundle.model.as_ref().and_then(|m| m.model_type.clone()))
                .unwrap_or_else(|| bundle.run_id.clone()),
            device: bundle
                .device
                .as_ref()
                .map(|d| d.name.clone())
                .unwrap_or_default(),
            timeline,
            kernels,
            stages,
            range_parent,
            lanes: Vec::new(),
            counters,
            counters_note,
            rank,
            ranks: Vec::new(),
            chunked: None,
        };
        run.lanes = run.build_all_lanes();
        Ok(run)
    }

    /// The item at `pos` of `lane`.
    pub fn target(&self, lane: &Lane, pos: u32) -> Option<Target> {
        let g = *lane.items.get(pos as usize)?;
        Some(match lane.kind {
            LaneKind::Stages { .. } => Target::Range(g),
            LaneKind::Stream(_) => Target::Kernel(g),
            LaneKind::MemOps => Target::MemOp(g),
            LaneKind::Counter(_) => return None,
        })
    }

    /// Start and end (ns from t0) of a target.
    pub fn span_of(&self, t: Target) -> (u64, u64) {
        let (s, d) = match t {
            Target::Kernel(i) => col2(&self.timeline.kernels.start, &self.timeline.kernels.dur, i),
            Target::MemOp(i) => col2(&self.timeline.mem_ops.start, &self.timeline.mem_ops.dur, i),
            Target::Range(i) => col2(&self.timeline.ranges.start, &self.timeline.ranges.dur, i),
        };
        (s, s.saturating_add(d))
    }

    /// The stage instance (range position) kernel op `i` is attributed to: the innermost range
    /// open on the launching thread when the launch call started (Nsight Systems' projection).
    /// Older timelines lack that column; for them the instance enclosing the kernel's start is
    /// used when one does (exact for synchronous traces).
    pub fn stage_instance_of_kernel(&self, i: u32) -> Option<u32> {
        let k = &self.timeline.kernels;
        if k.range.len() == k.start.len() {
            return (k.range.get(i as usize)?.get())
                .filter(|&r| (r as usize) < self.timeline.ranges.start.len());
        }
        let stage = k.stage.get(i as usize)?.get()?;
        let t = *k.start.get(i as usize)?;
        let inst = &self.stages.get(stage as usize)?.instances;
        let r = &self.timeline.ranges;
        let p = inst.partition_point(|&pos| r.start[pos as usize] <= t);
        let pos = *inst.get(p.checked_sub(1)?)?;
        (r.start[pos as usize].saturating_add(r.dur[pos as usize]) >= t).then_some(pos)
    }

    /// Launch geometry of kernel op `i`, where the timeline has it.
    pub fn launch_of(&self, i: u32) -> Option<&Launch> {
        let l = self.timeline.kernels.launch.get(i as usize)?.get()?;
        self.timeline.launches.get(l as usize)
    }

    /// Whether the range at `pos` is a warm-up instance (as the bundle marks them).
    pub fn range_is_warmup(&self, pos: u32) -> bool {
        let Some(stage) = self.timeline.ranges.stage.get(pos as usize) else {
            return false;
        };
        let Some(st) = self.stages.get(*stage as usize) else {
            return false;
        };
        let k = st.instances.binary_search(&pos).ok();
        k.and_then(|k| st.warmup.get(k)).copied().unwrap_or(false)
    }

    /// Display name of the stage a range position belongs to.
    pub fn range_name(&self, pos: u32) -> &str {
        self.timeline
            .ranges
            .stage
            .get(pos as usize)
            .and_then(|&s| self.stages.get(s as usize))
            .map_or("?", |s| s.name.as_str())
    }
}

/// The range directly enclosing each range position: the last range before it on the same
/// thread one level up (ranges are in nesting order, outer before inner).
fn range_parents(t: &Timeline) -> Vec<Option<u32>> {
    let r = &t.ranges;
    let mut open: std::collections::HashMap<(u64, u32), u32> = std::collections::HashMap::new();
    (0..r.start.len())
        .map(|i| {
            let (tid, depth) = (r.tid[i], r.depth[i]);
            open.insert((tid, depth), i as u32);
            let up = depth.checked_sub(1)?;
            open.get(&(tid, up)).copied()
        })
        .collect()
}

fn col2(a: &[u64], b: &[u64], i: u32) -> (u64, u64) {
    (
        a.get(i as usize).copied().unwrap_or(0),
        b.get(i as usize).copied().unwrap_or(0),
    )
}

/// The one category palette (charts, site legend, viewer).
pub fn color_of(c: Category) -> &'static str {
    llmprof_report::palette::category(c)
}

/// Every kernel and memcpy row points into the bundle's `n_kernels` rows.
fn check_rows(t: &Timeline, n_kernels: u32) -> Result<(), LoadError> {
    match t
        .kernels
        .kernel
        .iter()
        .chain(&t.mem_ops.kernel)
        .find(|&&k| k >= n_kernels)
    {
        Some(bad) => Err(LoadError(format!(
            "timeline.json refers to kernel row {bad}, but bundle.json has {n_kernels} rows \
             (the two files are from different runs?)"
        ))),
        None => Ok(()),
    }
}

fn check_columns(t: &Timeline) -> Result<(), LoadError> {
    let k = &t.kernels;
    let n = k.start.len();
    let launch_ok =
        (k.launch.is_empty() || k.launch.len() == n) && (k.range.is_empty() || k.range.len() == n);
    let graph_ok = (k.graph.is_empty() || k.graph.len() == n)
        && (k.graph_node.is_empty() || k.graph_node.len() == n);
    if k.dur.len() != n
        || k.stream.len() != n
        || k.kernel.len() != n
        || k.stage.len() != n
        || !launch_ok
        || !graph_ok
    {
        return Err(LoadError(
            "timeline.json: the kernel columns have different lengths".into(),
        ));
    }
    let m = &t.mem_ops;
    let n = m.start.len();
    if m.dur.len() != n || m.stream.len() != n || m.kernel.len() != n || m.stage.len() != n {
        return Err(LoadError(
            "timeline.json: the memcpy/memset columns have different lengths".into(),
        ));
    }
    let r = &t.ranges;
    let n = r.start.len();
    if r.dur.len() != n || r.stage.len() != n || r.depth.len() != n || r.tid.len() != n {
        return Err(LoadError(
            "timeline.json: the range columns have different lengths".into(),
        ));
    }
    if k.stream
        .iter()
        .chain(&m.stream)
        .any(|&s| s as usize >= t.streams.len())
    {
        return Err(LoadError(
            "timeline.json: a stream column points past `streams`".into(),
        ));
    }
    let sorted = |s: &[u64]| s.windows(2).all(|w| w[0] <= w[1]);
    if !sorted(&k.start) || !sorted(&m.start) || !sorted(&r.start) {
        return Err(LoadError(
            "timeline.json: records are not sorted by start".into(),
        ));
    }
    Ok(())
}

/// The timeline's lanes; a rank's stream lanes say whose they are (`Rank 1 · Stream 7`).
fn build_lanes(t: &Timeline, rank: Option<u32>, keep: &[bool]) -> Vec<Lane> {
    let prefix = rank.map_or_else(String::new, |r| format!("Rank {r} · "));
    let mut lanes = Vec::new();
    let r = &t.ranges;
    let max_depth = r.depth.iter().copied().max();
    if let Some(max_depth) = max_depth {
        // Deeper ranges than 16 levels are not drawn (the lane list would outgrow the page).
        for depth in 0..=max_depth.min(15) {
            let items: Vec<u32> = (0..r.start.len() as u32)
                .filter(|&i| r.depth[i as usize] == depth)
                .collect();
            lanes.push(Lane::new(
                LaneKind::Stages { depth },
                if depth == 0 {
                    "Stages".to_string()
                } else {
                    format!("Stages · {depth}")
                },
                items,
                &r.start,
                &r.dur,
            ));
        }
    }
    let k = &t.kernels;
    let mut by_stream: Vec<Vec<u32>> = vec![Vec::new(); t.streams.len()];
    for (i, &st) in k.stream.iter().enumerate() {
        by_stream[st as usize].push(i as u32);
    }
    for (si, (stream, items)) in t.streams.iter().zip(by_stream).enumerate() {
        if items.is_empty() && !keep.get(si).copied().unwrap_or(false) {
            continue;
        }
        lanes.push(Lane::new(
            LaneKind::Stream(si as u32),
            format!("{prefix}Stream {stream}"),
            items,
            &k.start,
            &k.dur,
        ));
    }
    let m = &t.mem_ops;
    if !m.start.is_empty() {
        lanes.push(Lane::new(
            LaneKind::MemOps,
            "Memcpy/memset".to_string(),
            (0..m.start.len() as u32).collect(),
            &m.start,
            &m.dur,
        ));
    }
    lanes
}

fn counters(bundle: &Bundle, t: &Timeline) -> (Vec<Counter>, Option<String>) {
    let Some(nv) = &bundle.nvml else {
        return (Vec::new(), None);
    };
    let Some(zero) = t.t0_epoch_ns else {
        return (
            Vec::new(),
            Some(
                "NVML samples are not shown: this timeline was written before llmprof recorded \
                 the trace clock's epoch (t0_epoch_ns); ingesting the trace again adds it"
                    .into(),
            ),
        );
    };
    // Samples a little outside the timeline frame the edges of the profiled pass.
    let lo = -(nv.interval_ms as f64) * 1e6 * 2.0;
    let hi = t.end_ns as f64 - lo;
    let keep: Vec<usize> = (0..nv.t_ns.len())
        .filter(|&i| {
            let x = (nv.t_ns[i] as i128 - zero as i128) as f64;
            x >= lo && x <= hi
        })
        .collect();
    if keep.is_empty() {
        return (
            Vec::new(),
            Some("NVML samples do not overlap this timeline (sampled during other passes)".into()),
        );
    }
    let times: Vec<f64> = keep
        .iter()
        .map(|&i| (nv.t_ns[i] as i128 - zero as i128) as f64)
        .collect();
    let series =
        |name: &'static str, unit: &'static str, col: &[u32], scale: f64, floor_max: f64| {
            if col.len() != nv.t_ns.len() {
                return None;
            }
            // Power's failed reads are gaps (no reading), left out of the line.
            let present = |&(_, &i): &(usize, &usize)| name != "Power" || nv.has_power(i);
            let (t, v): (Vec<f64>, Vec<f64>) = keep
                .iter()
                .enumerate()
                .filter(present)
                .map(|(k, &i)| (times[k], col[i] as f64 * scale))
                .unzip();
            let max = v.iter().copied().fold(floor_max, f64::max);
            Some(Counter {
                name,
                unit,
                t,
                v,
                max,
            })
        };
    let mut out = Vec::new();
    out.extend(series("Power", "W", &nv.power_mw, 1e-3, 1.0));
    out.extend(series("SM clock", "MHz", &nv.sm_clock_mhz, 1.0, 1.0));
    out.extend(series("GPU util", "%", &nv.gpu_util_pct, 1.0, 100.0));
    (out, None)
}

fn ncu_lines(n: &llmprof_bundle::NcuKernel) -> Vec<String> {
    let mut out = Vec::new();
    let mut pct = |label: &str, v: Option<f64>| {
        if let Some(v) = v {
            out.push(format!("{label} {v:.1}%"));
        }
    };
    pct("ncu SM throughput", n.sm_throughput_pct);
    pct("ncu DRAM throughput", n.dram_throughput_pct);
    pct("ncu achieved occupancy", n.achieved_occupancy_pct);
    pct("ncu tensor pipe", n.tensor_pipe_pct);
    out
}
