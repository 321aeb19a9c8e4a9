//! Warm-up instances: which stage instances ran before the measurement, how they were chosen,
//! and [`Stage::measured_instances`], the one way every consumer (TTFT, TPOT, diffs) reads
//! the instances that count.
//!
//! An instance is warm-up when
//!
//! * its range is named as one ([`is_warmup`]: `warmup_prefill`, as llmprof's driver names
//!   them), or
//! * it is one of the first `leading` instances of a top-level stage (`llmprof ingest
//!   --warmup-instances N`, or `llmprof analyze --warmup-instances N` on an existing run): a
//!   workload that warms up under the same range name as it measures, or
//! * it lies inside such an instance on the same thread (the `sam` inside a warm-up prefill).

use serde::{Deserialize, Serialize};

use crate::{is_warmup, Bundle, Stage, StageInstance};

/// How the warm-up instances of a bundle (`stages[].instance_list[].warmup`) were chosen.
/// `None` in bundles written before this field; those mark none, and
/// [`Stage::measured_instances`] leaves out only stages named as warm-up.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WarmupInstances {
    /// Leading instances of each top-level stage taken as warm-up; 0 when only range names
    /// mark warm-up.
    #[serde(default)]
    pub leading: u64,
    /// Where `leading` came from, e.g. `--warmup-instances flag of llmprof ingest`; `None` when
    /// it is 0.
    #[serde(default)]
    pub source: Option<String>,
    /// Instances marked as warm-up in all, by either rule, nested ones included.
    #[serde(default)]
    pub marked: u64,
}

impl WarmupInstances {
    /// One sentence on how warm-up was told from measurement, for notes beside TTFT and TPOT.
    pub fn describe(&self) -> String {
        let leading = match (self.leading, &self.source) {
            (0, _) => String::new(),
            (1, src) => format!(", the first instance of each top-level stage{}", from(src)),
            (n, src) => format!(
                ", the first {n} instances of each top-level stage{}",
                from(src)
            ),
        };
        format!("warm-up: ranges named warmup_*{leading}, and the ranges inside them")
    }
}

fn from(src: &Option<String>) -> String {
    src.as_ref()
        .map_or(String::new(), |s| format!(" from the {s}"))
}

impl Stage {
    /// The instances that count as measurement, with their index in `instance_list` (per
    /// instance lists such as `workload.decode_steps` are indexed by it): every instance not
    /// marked as warm-up, none of a stage named as warm-up.
    pub fn measured_instances(&self) -> impl Iterator<Item = (usize, &StageInstance)> {
        let named = is_warmup(&self.name);
        self.instance_list
            .iter()
            .enumerate()
            .filter(move |(_, i)| !named && !i.warmup)
    }

    /// Whether the stage's instances sit in different places: inside different stages, or
    /// some at the top level and some inside a stage (see [`Stage::parents`]).
    pub fn has_mixed_parents(&self) -> bool {
        self.parents.len() > 1
    }
}

impl Bundle {
    /// Marks every stage instance as warm-up or measured (see the module docs): ranges named
    /// as warm-up, the first `leading` instances of each top-level workload stage, and the
    /// instances inside either on the same thread. Replaces earlier marks and records how in
    /// [`Bundle::warmup`].
    pub fn mark_warmup(&mut self, leading: u64, source: Option<String>) {
        let mut seeds: Vec<(u64, i64, i64)> = Vec::new();
        for s in &self.stages {
            let top = s.depth == 0 && s.parents.is_empty() && !self.is_library_range(s);
            let take = if is_warmup(&s.name) {
                usize::MAX
            } else if top {
                usize::try_from(leading).unwrap_or(usize::MAX)
            } else {
                0
            };
            let first = s.instance_list.iter().take(take);
            seeds.extend(first.map(|i| (i.tid, i.start_ns, i.end_ns)));
        }
        let spans = merged(seeds);
        let mut marked = 0u64;
        for inst in self.stages.iter_mut().flat_map(|s| &mut s.instance_list) {
            inst.warmup = inside(&spans, inst);
            marked += u64::from(inst.warmup);
        }
        self.warmup = Some(WarmupInstances {
            leading,
            source: source.filter(|_| leading > 0),
            marked,
        });
    }
}

/// The intervals per thread, sorted and merged where they overlap.
fn merged(mut spans: Vec<(u64, i64, i64)>) -> Vec<(u64, i64, i64)> {
    spans.sort_unstable();
    let mut out: Vec<(u64, i64, i64)> = Vec::with_capacity(spans.len());
    for (tid, start, end) in spans {
        match out.last_mut() {
            Some(last) if last.0 == tid && start <= last.2 => last.2 = last.2.max(end),
            _ => out.push((tid, start, end)),
        }
    }
    out
}

/// Whether `inst` lies inside one of `spans` (sorted, merged) on its own thread.
fn inside(spans: &[(u64, i64, i64)], inst: &StageInstance) -> bool {
    let p = spans.partition_point(|&(tid, start, _)| (tid, start) <= (inst.tid, inst.start_ns));
    p.checked_sub(1)
        .and_then(|i| spans.get(i))
        .is_some_and(|&(tid, _, end)| tid == inst.tid && inst.end_ns <= end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(tid: u64, start: i64, end: i64) -> StageInstance {
        StageInstance {
            start_ns: start,
            end_ns: end,
            wall_ns: (end - start) as u64,
            tid,
            gpu_ops: 0,
            kernel_ns: 0,
            gpu_start_ns: None,
            gpu_end_ns: None,
            gpu_busy_ns: 0,
            warmup: false,
        }
    }

    fn stage(id: u32, name: &str, depth: u32, instances: Vec<StageInstance>) -> Stage {
        Stage {
            id,
            name: name.into(),
            depth,
            instances: instances.len() as u64,
            instance_list: instances,
            ..Stage::default()
        }
    }

    /// Two iterations of prefill on thread 1, the first a warm-up under the same name, each
    /// with a `sam` inside; a `warmup_decode` with a nested range; a range on thread 2 that
    /// overlaps the warm-up prefill in time but not in thread.
    fn bundle() -> Bundle {
        let mut b = Bundle::new("t");
        b.stages = vec![
            stage(0, "prefill", 0, vec![inst(1, 0, 100), inst(1, 200, 300)]),
            stage(1, "sam", 1, vec![inst(1, 10, 20), inst(1, 210, 220)]),
            stage(2, "warmup_decode", 0, vec![inst(1, 120, 180)]),
            stage(3, "step", 1, vec![inst(1, 130, 140), inst(1, 310, 320)]),
            stage(4, "other", 0, vec![inst(2, 50, 60)]),
        ];
        b
    }

    fn marks(b: &Bundle) -> Vec<Vec<bool>> {
        let m = |s: &Stage| s.instance_list.iter().map(|i| i.warmup).collect();
        b.stages.iter().map(m).collect()
    }

    #[test]
    fn names_mark_their_instances_and_what_they_enclose() {
        let mut b = bundle();
        b.mark_warmup(0, Some("ignored".into()));
        let f = false;
        let want = [vec![f, f], vec![f, f], vec![true], vec![true, f], vec![f]];
        assert_eq!(marks(&b), want);
        let w = b.warmup.as_ref().unwrap();
        assert_eq!((w.leading, w.source.as_deref(), w.marked), (0, None, 2));
        let measured: Vec<usize> = b.stages[2].measured_instances().map(|(i, _)| i).collect();
        assert!(measured.is_empty());
    }

    #[test]
    fn leading_instances_of_top_level_stages_and_their_insides() {
        let mut b = bundle();
        b.mark_warmup(1, Some("--warmup-instances flag".into()));
        let (t, f) = (true, false);
        let want = [vec![t, f], vec![t, f], vec![t], vec![t, f], vec![t]];
        assert_eq!(marks(&b), want);
        assert_eq!(b.warmup.as_ref().unwrap().marked, 5);
        let measured: Vec<(usize, i64)> = b.stages[0]
            .measured_instances()
            .map(|(i, inst)| (i, inst.start_ns))
            .collect();
        assert_eq!(measured, [(1, 200)]);
        assert!(b.warmup.as_ref().unwrap().describe().contains(
            "the first instance of each top-level stage from the --warmup-instances flag"
        ));
        // Marking again replaces the marks.
        b.mark_warmup(0, None);
        assert_eq!(marks(&b)[0], [f, f]);
    }

    #[test]
    fn more_leading_instances_than_a_stage_has_mark_them_all() {
        let mut b = bundle();
        b.mark_warmup(u64::MAX, None);
        assert!(b.stages[0].measured_instances().next().is_none());
        assert_eq!(b.stages[1].measured_instances().count(), 0);
        // A range after every top-level instance stays measured.
        assert_eq!(b.stages[3].measured_instances().count(), 1);
    }
}
