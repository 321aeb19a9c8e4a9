//! Several ranks' bundles into one run: `llmprof ingest` with a trace per rank, and
//! `llmprof merge` of per-rank runs ingested elsewhere (a cluster's scheduler fans the
//! per-rank ingests out; only their bundles travel, never the raw traces).
//!
//! [`merge`] checks that the ranks belong together, aligns their clocks and builds the run's
//! top-level bundle: tables aggregated across ranks as [`AGGREGATION`] says, and a
//! [`RankSet`] with each rank's figures and the stage skew. The per-rank bundles themselves
//! (with their timelines) are written by the caller under `ranks/<rank>/`.

use std::collections::HashMap;

use llmprof_bundle::{
    Bundle, CommWindow, Communication, Diagnostic, Distribution, Kernel, KernelStage, Operator,
    OperatorStage, RankCapture, RankEntry, RankSet, Severity, Source, Stage, StageSkew, Totals,
};

/// How the top-level tables combine the ranks ([`RankSet::aggregation`]).
pub const AGGREGATION: &str = "stage instances of every rank pooled (times on rank 0's clock), \
    so a stage's count, median and interval are over all ranks' instances; kernel, operator, \
    communication and total counts and times summed over ranks, kernel minimum and maximum over all ranks, mean \
    and standard deviation pooled exactly, the median the median of the ranks' medians; \
    Nsight Compute rows from the rank that has them. Each rank's own tables and timeline are \
    in its directory, ranks/<rank>/";

/// One rank's bundle and what to call it in messages (its input files or run directory).
#[derive(Debug)]
pub struct RankInput {
    pub bundle: Bundle,
    pub origin: String,
}

/// Why ranks cannot be merged; each names the inputs that disagree.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("nothing to merge: give the traces or runs of at least two ranks")]
    TooFew,
    #[error(
        "{a} says rank {rank_a} of {world_a} but {b} says rank {rank_b} of {world_b}: \
         these traces come from different jobs"
    )]
    WorldSize {
        a: String,
        rank_a: u32,
        world_a: u32,
        b: String,
        rank_b: u32,
        world_b: u32,
    },
    #[error("{a} and {b} are both rank {rank}: give each rank once")]
    Duplicate { rank: u32, a: String, b: String },
    #[error("{origin} says rank {rank} but the world size is {world}")]
    RankOutOfRange {
        origin: String,
        rank: u32,
        world: u32,
    },
    #[error(
        "{a} and {b} disagree on process group `{group}` (ranks {ranks_a:?} vs {ranks_b:?}): \
         these traces come from different jobs"
    )]
    ProcessGroups {
        group: String,
        a: String,
        ranks_a: Vec<u32>,
        b: String,
        ranks_b: Vec<u32>,
    },
    #[error(
        "{origin} has no rank (its trace has no `distributedInfo`) while {other} has one: give \
         every rank's PyTorch profiler trace, or only traces without it (ranked in the order \
         given)"
    )]
    MixedRanking { origin: String, other: String },
}

/// Each input's rank and the world size: from the traces' `distributedInfo`, or, when no
/// input has it, the order given (`0..n`).
fn ranks_of(inputs: &[RankInput]) -> Result<(Vec<u32>, u32, bool), MergeError> {
    let with = inputs
        .iter()
        .position(|r| r.bundle.environment.distributed.is_some());
    let without = inputs
        .iter()
        .position(|r| r.bundle.environment.distributed.is_none());
    match (with, without) {
        (None, _) => Ok((
            (0..inputs.len() as u32).collect(),
            inputs.len() as u32,
            false,
        )),
        (Some(w), Some(o)) => Err(MergeError::MixedRanking {
            origin: inputs[o].origin.clone(),
            other: inputs[w].origin.clone(),
        }),
        (Some(_), None) => {
            let d = |i: usize| inputs[i].bundle.environment.distributed.as_ref();
            let first = d(0).map_or((0, 0), |d| (d.rank, d.world_size));
            let mut seen: HashMap<u32, usize> = HashMap::new();
            let mut ranks = Vec::with_capacity(inputs.len());
            for (i, input) in inputs.iter().enumerate() {
                let Some(di) = d(i) else { continue };
                if di.world_size != first.1 {
                    return Err(MergeError::WorldSize {
                        a: inputs[0].origin.clone(),
                        rank_a: first.0,
                        world_a: first.1,
                        b: input.origin.clone(),
                        rank_b: di.rank,
                        world_b: di.world_size,
                    });
                }
                if di.rank >= di.world_size {
                    return Err(MergeError::RankOutOfRange {
                        origin: input.origin.clone(),
                        rank: di.rank,
                        world: di.world_size,
                    });
                }
                if let Some(&j) = seen.get(&di.rank) {
                    return Err(MergeError::Duplicate {
                        rank: di.rank,
                        a: inputs[j].origin.clone(),
                        b: input.origin.clone(),
                    });
                }
                seen.insert(di.rank, i);
                ranks.push(di.rank);
            }
            check_process_groups(inputs)?;
            Ok((ranks, first.1, true))
        }
    }
}

/// Every process group two ranks both describe must list the same ranks.
fn check_process_groups(inputs: &[RankInput]) -> Result<(), MergeError> {
    let mut groups: HashMap<&str, (&[u32], &str)> = HashMap::new();
    for input in inputs {
        let Some(d) = &input.bundle.environment.distributed else {
            continue;
        };
        for g in &d.process_groups {
            match groups.get(g.name.as_str()) {
                Some((ranks, origin)) if *ranks != g.ranks.as_slice() => {
                    return Err(MergeError::ProcessGroups {
                        group: g.name.clone(),
                        a: origin.to_string(),
                        ranks_a: ranks.to_vec(),
                        b: input.origin.clone(),
                        ranks_b: g.ranks.clone(),
                    })
                }
                Some(_) => {}
                None => {
                    groups.insert(&g.name, (&g.ranks, &input.origin));
                }
            }
        }
    }
    Ok(())
}

/// The epoch ns of a bundle's source clock zero, when its timeline records it.
fn clock_zero(b: &Bundle) -> Option<i64> {
    let t = b.timeline.as_ref()?;
    Some(t.t0_epoch_ns? - t.t0_ns?)
}

/// Merges ranks into the run's top-level bundle (its `ranks` filled, no timeline of its own);
/// the parallel degree is rank 0's `workload.parallel_degree`.
pub fn merge(mut inputs: Vec<RankInput>) -> Result<Bundle, MergeError> {
    if inputs.len() < 2 {
        return Err(MergeError::TooFew);
    }
    let (ranks, world, from_trace) = ranks_of(&inputs)?;
    let mut order: Vec<usize> = (0..inputs.len()).collect();
    order.sort_by_key(|&i| ranks[i]);
    let mut sorted: Vec<(u32, RankInput)> = Vec::with_capacity(inputs.len());
    let mut taken: Vec<Option<RankInput>> = inputs.drain(..).map(Some).collect();
    for i in order {
        if let Some(input) = taken[i].take() {
            sorted.push((ranks[i], input));
        }
    }
    let zero0 = clock_zero(&sorted[0].1.bundle);
    let mut out = sorted[0].1.bundle.clone();
    out.stages.clear();
    out.kernels.clear();
    out.operators.clear();
    out.instance_kernels.clear();
    out.diagnostics.clear();
    out.inputs.clear();
    out.ncu.clear();
    out.timeline = None;
    out.analysis = None;
    out.communication = None;
    out.totals = Default::default();

    let mut tables = Tables::default();
    let mut entries = Vec::with_capacity(sorted.len());
    for (rank, input) in &sorted {
        let b = &input.bundle;
        let (offset, clock_source) = match (clock_zero(b), zero0) {
            (Some(z), Some(z0)) => (z - z0, "the traces' clock epochs (PyTorch profiler `baseTimeNanoseconds`, Nsight Systems session start)".to_string()),
            _ => (0, "none: a trace records no clock epoch, timestamps are taken as they are".to_string()),
        };
        tables.add(b, offset);
        out.inputs.extend(b.inputs.iter().cloned());
        out.diagnostics
            .extend(b.diagnostics.iter().map(|d| Diagnostic {
                file: format!("rank {rank}: {}", d.file),
                ..d.clone()
            }));
        if out.ncu.is_empty() && !b.ncu.is_empty() {
            out.ncu = b.ncu.clone();
        }
        entries.push(rank_entry(*rank, input, offset, clock_source));
    }
    let present: Vec<u32> = sorted.iter().map(|(r, _)| *r).collect();
    let missing: Vec<u32> = (0..world).filter(|r| !present.contains(r)).collect();
    if !missing.is_empty() {
        out.diagnostics.push(missing_ranks(&missing, world));
    }
    if !from_trace {
        out.diagnostics.push(order_ranked(sorted.len()));
    }
    let skew = skew(&sorted);
    tables.finish(&mut out);
    pool_decode_steps(&mut out, &sorted);
    let degree = out
        .workload
        .as_ref()
        .and_then(|w| w.parallel_degree.clone());
    let (degree, degree_source) = degree
        .map(|d| (u32::try_from(d.value).unwrap_or(u32::MAX), d.source))
        .unzip();
    out.ranks = Some(RankSet {
        world_size: world,
        ranks: entries,
        missing,
        parallel_degree: degree,
        parallel_degree_source: degree_source,
        aggregation: AGGREGATION.to_string(),
        skew,
    });
    out.run_id = llmprof_store::run_id(&out);
    Ok(out)
}

/// The pooled stages hold every rank's instances, rank after rank: the decode steps of each
/// instance are likewise every rank's list, in rank order — when every rank gives one per
/// instance (a single entry for all instances stays as it is).
fn pool_decode_steps(out: &mut Bundle, ranks: &[(u32, RankInput)]) {
    let lists: Option<Vec<&Vec<u64>>> = ranks
        .iter()
        .map(|(_, r)| {
            let w = r.bundle.workload.as_ref()?;
            w.decode_steps.as_ref().map(|d| &d.value)
        })
        .collect();
    let Some(lists) = lists.filter(|l| l.iter().all(|d| d.len() > 1)) else {
        return;
    };
    if let Some(d) = out.workload.as_mut().and_then(|w| w.decode_steps.as_mut()) {
        d.value = lists.into_iter().flatten().copied().collect();
        d.source = format!("{}, each rank's in rank order (instances pooled)", d.source);
    }
}

fn rank_entry(rank: u32, input: &RankInput, offset: i64, clock_source: String) -> RankEntry {
    let b = &input.bundle;
    let whole = b
        .communication
        .as_ref()
        .and_then(|c| c.windows.iter().find(|w| w.stage.is_none()));
    RankEntry {
        rank,
        dir: format!("ranks/{rank}"),
        inputs: b.inputs.iter().map(|i| i.path.clone()).collect(),
        device: b.device.as_ref().map(|d| d.name.clone()),
        clock_offset_ns: offset,
        clock_source,
        kernels: b.totals.kernels,
        kernel_ns: b.totals.kernel_ns,
        gpu_busy_ns: b.totals.gpu_busy_ns,
        comm_ns: whole.map_or(0, |w| w.comm_ns),
        exposed_comm_ns: whole.map_or(0, |w| w.exposed_comm_ns),
        host_idle_ns: whole.map_or(0, |w| w.host_ns),
        other_idle_ns: whole.map_or(0, |w| w.other_ns),
        collectives: b
            .communication
            .as_ref()
            .map(|c| c.collectives.clone())
            .unwrap_or_default(),
        capture: b.capture.as_ref().map(RankCapture::of),
    }
}

fn missing_ranks(missing: &[u32], world: u32) -> Diagnostic {
    let list: Vec<String> = missing.iter().map(u32::to_string).collect();
    Diagnostic {
        source: Source::Kineto,
        file: String::new(),
        code: "ranks.missing".into(),
        severity: Severity::Warning,
        message: format!(
            "ranks with no trace: {} of a world of {world}; the run's tables hold only the \
             ranks given",
            list.join(", ")
        ),
        count: missing.len() as u64,
        example: list.first().cloned().unwrap_or_default(),
    }
}

fn order_ranked(n: usize) -> Diagnostic {
    Diagnostic {
        source: Source::Kineto,
        file: String::new(),
        code: "ranks.from_order".into(),
        severity: Severity::Info,
        message: "no input names its rank (no `distributedInfo`): ranks are the order the \
                  inputs were given in"
            .into(),
        count: n as u64,
        example: String::new(),
    }
}

/// Per top-level measured stage: each rank's median instance wall and communication time.
fn skew(ranks: &[(u32, RankInput)]) -> Vec<StageSkew> {
    let mut names: Vec<&str> = Vec::new();
    for (_, r) in ranks {
        for s in r.bundle.workload_stages().filter(|s| s.depth == 0) {
            if !names.contains(&s.name.as_str()) {
                names.push(&s.name);
            }
        }
    }
    names
        .into_iter()
        .filter_map(|name| {
            let per_rank: Vec<(Option<f64>, u64)> = ranks
                .iter()
                .map(|(_, r)| stage_on_rank(&r.bundle, name))
                .collect();
            let known: Vec<(u32, f64)> = ranks
                .iter()
                .zip(&per_rank)
                .filter_map(|((rank, _), (m, _))| m.map(|m| (*rank, m)))
                .collect();
            let slow = known.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
            let fast = known.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1))?;
            Some(StageSkew {
                stage: name.to_string(),
                median_ns: per_rank.iter().map(|p| p.0).collect(),
                comm_ns: per_rank.iter().map(|p| p.1).collect(),
                spread_pct: if fast.1 > 0.0 {
                    (slow.1 - fast.1) * 100.0 / fast.1
                } else {
                    0.0
                },
                slowest_rank: slow.0,
                fastest_rank: fast.0,
            })
        })
        .collect()
}

/// A rank's median measured wall of the top-level stage `name`, and its communication time.
fn stage_on_rank(b: &Bundle, name: &str) -> (Option<f64>, u64) {
    let Some(stage) = b.workload_stages().find(|s| s.depth == 0 && s.name == name) else {
        return (None, 0);
    };
    let mut walls: Vec<u64> = stage.measured_instances().map(|(_, i)| i.wall_ns).collect();
    let median = (!walls.is_empty()).then(|| Distribution::from_samples(&mut walls).median_ns);
    let comm = b
        .communication
        .as_ref()
        .and_then(|c| c.windows.iter().find(|w| w.stage == Some(stage.id)))
        .map_or(0, |w| w.comm_ns);
    (median, comm)
}

/// The top-level tables being pooled across ranks.
#[derive(Default)]
struct Tables {
    stage_ids: HashMap<(String, String, u32, Option<String>), u32>,
    stages: Vec<Stage>,
    kernel_ids: HashMap<(llmprof_bundle::OpKind, String), usize>,
    kernels: Vec<(Kernel, KernelPool)>,
    operator_ids: HashMap<String, usize>,
    operators: Vec<Operator>,
    totals: Totals,
    /// Communication windows by name, summed over ranks.
    windows: Vec<CommWindow>,
}

/// What pools a kernel row's mean and standard deviation exactly, and its median roughly.
#[derive(Default)]
struct KernelPool {
    sum_sq: f64,
    medians: Vec<u64>,
}

impl Tables {
    /// Adds one rank's tables, its times moved by `offset` onto rank 0's clock.
    fn add(&mut self, b: &Bundle, offset: i64) {
        let first_new = self.stages.len() as u32;
        let stage_map: Vec<u32> = b
            .stages
            .iter()
            .map(|s| self.add_stage(b, s, offset))
            .collect();
        let map = |id: u32| stage_map.get(id as usize).copied().unwrap_or(id);
        // Stages this rank added first take its parents, renumbered.
        for (s, &id) in b.stages.iter().zip(&stage_map) {
            if id >= first_new {
                let m = &mut self.stages[id as usize];
                m.parent = s.parent.map(map);
                m.parents = s.parents.iter().map(|p| p.map(map)).collect();
            }
        }
        self.totals(b);
        let windows = b.communication.as_ref().map_or(&[][..], |c| &c.windows[..]);
        for w in windows {
            self.add_window(w, &map);
        }
        for k in &b.kernels {
            self.add_kernel(k, &map);
        }
        for o in &b.operators {
            self.add_operator(o, &map);
        }
    }

    fn add_stage(&mut self, b: &Bundle, s: &Stage, offset: i64) -> u32 {
        let parent_name = s.parent.and_then(|p| b.stage(p)).map(|p| p.name.clone());
        let key = (s.domain.clone(), s.name.clone(), s.depth, parent_name);
        let shift = |t: Option<i64>| t.map(|t| t.saturating_add(offset));
        let instances = s
            .instance_list
            .iter()
            .map(|i| llmprof_bundle::StageInstance {
                start_ns: i.start_ns.saturating_add(offset),
                end_ns: i.end_ns.saturating_add(offset),
                gpu_start_ns: shift(i.gpu_start_ns),
                gpu_end_ns: shift(i.gpu_end_ns),
                ..i.clone()
            });
        if let Some(&id) = self.stage_ids.get(&key) {
            let m = &mut self.stages[id as usize];
            m.instance_list.extend(instances);
            m.instances += s.instances;
            m.gpu_proj_ns += s.gpu_proj_ns;
            m.gpu_ops += s.gpu_ops;
            m.kernel_ns += s.kernel_ns;
            m.kernels += s.kernels;
            m.launches += s.launches;
            m.launch_api_ns += s.launch_api_ns;
            m.gpu_busy_ns += s.gpu_busy_ns;
            m.graph_launches += s.graph_launches;
            m.graph_kernels += s.graph_kernels;
            m.graph_busy_ns += s.graph_busy_ns;
            return id;
        }
        let id = self.stages.len() as u32;
        let mut m = s.clone();
        m.id = id;
        m.instance_list = instances.collect();
        self.stage_ids.insert(key, id);
        self.stages.push(m);
        id
    }

    /// Counts and times summed; the GPU span is the longest rank's.
    fn totals(&mut self, b: &Bundle) {
        let (t, s) = (&mut self.totals, &b.totals);
        t.kernels += s.kernels;
        t.kernel_ns += s.kernel_ns;
        t.memcpys += s.memcpys;
        t.memcpy_ns += s.memcpy_ns;
        t.memsets += s.memsets;
        t.memset_ns += s.memset_ns;
        t.gpu_span_ns = t.gpu_span_ns.max(s.gpu_span_ns);
        t.gpu_busy_ns += s.gpu_busy_ns;
        t.unattributed_gpu_ops += s.unattributed_gpu_ops;
        t.streams += s.streams;
        t.graphs += s.graphs;
        t.graph_ns += s.graph_ns;
        t.graph_kernels += s.graph_kernels;
        t.graph_launches += s.graph_launches;
        t.graph_trace = t.graph_trace.or(s.graph_trace);
    }

    fn add_window(&mut self, w: &CommWindow, map: &dyn Fn(u32) -> u32) {
        let stage = w.stage.map(map);
        let Some(m) = self
            .windows
            .iter_mut()
            .find(|m| m.stage == stage && m.name == w.name)
        else {
            self.windows.push(CommWindow { stage, ..w.clone() });
            return;
        };
        m.instances += w.instances;
        m.window_ns += w.window_ns;
        m.comm_ns += w.comm_ns;
        m.compute_ns += w.compute_ns;
        m.exposed_comm_ns += w.exposed_comm_ns;
        m.comm_wait_ns += w.comm_wait_ns;
        m.host_ns += w.host_ns;
        m.other_ns += w.other_ns;
        m.overlap_pct = if m.comm_ns == 0 {
            0.0
        } else {
            (m.comm_ns - m.exposed_comm_ns) as f64 * 100.0 / m.comm_ns as f64
        };
    }

    fn add_kernel(&mut self, k: &Kernel, map: &dyn Fn(u32) -> u32) {
        let key = (k.kind, k.name.clone());
        let sq = k.std_ns.powi(2) * k.calls.saturating_sub(1) as f64
            + k.mean_ns.powi(2) * k.calls as f64;
        let i = *self.kernel_ids.entry(key).or_insert_with(|| {
            let mut row = k.clone();
            row.calls = 0;
            row.total_ns = 0;
            row.min_ns = u64::MAX;
            row.max_ns = 0;
            row.by_stage.clear();
            row.ncu.clear();
            self.kernels.push((row, KernelPool::default()));
            self.kernels.len() - 1
        });
        let (row, pool) = &mut self.kernels[i];
        row.calls += k.calls;
        row.total_ns += k.total_ns;
        row.min_ns = row.min_ns.min(k.min_ns);
        row.max_ns = row.max_ns.max(k.max_ns);
        row.graph_calls += k.graph_calls;
        row.bytes = match (row.bytes, k.bytes) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        pool.sum_sq += sq;
        pool.medians.push(k.median_ns.round() as u64);
        for s in &k.by_stage {
            let stage = map(s.stage);
            match row.by_stage.iter_mut().find(|x| x.stage == stage) {
                Some(x) => {
                    x.calls += s.calls;
                    x.total_ns += s.total_ns;
                }
                None => row.by_stage.push(KernelStage { stage, ..*s }),
            }
        }
    }

    fn add_operator(&mut self, o: &Operator, map: &dyn Fn(u32) -> u32) {
        let i = *self.operator_ids.entry(o.name.clone()).or_insert_with(|| {
            self.operators.push(Operator {
                name: o.name.clone(),
                ..Operator::default()
            });
            self.operators.len() - 1
        });
        let m = &mut self.operators[i];
        m.calls += o.calls;
        m.cpu_total_ns += o.cpu_total_ns;
        m.cpu_self_ns += o.cpu_self_ns;
        m.device_ns += o.device_ns;
        m.device_self_ns += o.device_self_ns;
        m.gpu_ops += o.gpu_ops;
        for s in &o.by_stage {
            let stage = map(s.stage);
            match m.by_stage.iter_mut().find(|x| x.stage == stage) {
                Some(x) => {
                    x.calls += s.calls;
                    x.cpu_total_ns += s.cpu_total_ns;
                    x.cpu_self_ns += s.cpu_self_ns;
                    x.device_ns += s.device_ns;
                }
                None => m.by_stage.push(OperatorStage { stage, ..*s }),
            }
        }
    }

    /// The pooled tables into `out`, with the derived columns computed from the sums.
    fn finish(mut self, out: &mut Bundle) {
        for s in &mut self.stages {
            s.instance_list.sort_by_key(|i| i.start_ns);
            let mut walls: Vec<u64> = s.instance_list.iter().map(|i| i.wall_ns).collect();
            s.wall = Distribution::from_samples(&mut walls);
            s.wall_ns = s.wall.total_ns;
            let window: u64 = s
                .instance_list
                .iter()
                .map(|i| match (i.gpu_start_ns, i.gpu_end_ns) {
                    (Some(a), Some(b)) => crate::convert::span(a, b),
                    _ => 0,
                })
                .sum();
            s.gpu_busy_pct = if window == 0 {
                0.0
            } else {
                s.gpu_busy_ns as f64 * 100.0 / window as f64
            };
        }
        // Each row's share of its kind's time, as the converter (and `nsys stats`) computes it.
        let mut kind_ns: HashMap<llmprof_bundle::OpKind, u64> = HashMap::new();
        for (k, _) in &self.kernels {
            *kind_ns.entry(k.kind).or_default() += k.total_ns;
        }
        out.kernels = self
            .kernels
            .into_iter()
            .enumerate()
            .map(|(id, (mut k, mut pool))| {
                let n = k.calls as f64;
                k.id = id as u32;
                k.mean_ns = if k.calls == 0 {
                    0.0
                } else {
                    k.total_ns as f64 / n
                };
                k.std_ns = if k.calls < 2 {
                    0.0
                } else {
                    ((pool.sum_sq - n * k.mean_ns.powi(2)) / (n - 1.0))
                        .max(0.0)
                        .sqrt()
                };
                k.median_ns = Distribution::from_samples(&mut pool.medians).median_ns;
                let kind_total = kind_ns.get(&k.kind).copied().unwrap_or(0);
                k.time_pct = if kind_total == 0 {
                    0.0
                } else {
                    k.total_ns as f64 * 100.0 / kind_total as f64
                };
                if k.min_ns == u64::MAX {
                    k.min_ns = 0;
                }
                k
            })
            .collect();
        for o in &mut self.operators {
            let n = o.calls.max(1) as f64;
            o.cpu_mean_ns = o.cpu_total_ns as f64 / n;
            o.device_mean_ns = o.device_ns as f64 / n;
        }
        out.operators = self.operators;
        out.stages = self.stages;
        out.totals = self.totals;
        if !self.windows.is_empty() {
            out.communication = Some(Communication {
                collectives: Vec::new(),
                windows: self.windows,
            });
        }
        crate::ncu::join_ncu(&mut out.kernels, &mut out.ncu);
    }
}
