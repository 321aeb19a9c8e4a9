//! Where the run's headline latency and throughput come from, as samples grouped by process.
//!
//! With a capture's unprofiled baseline pass (`capture.baseline.samples`) the headline is its
//! host-timed iterations: no profiler was attached, so TTFT, TPOT, stage wall and tokens/s are
//! what a user would see. Without one (an ingest-only run, a `--cmd` workload that reports no
//! stage timings, a bundle from before the samples were kept) the trace's measured stage
//! instances stand in, and the source says they were timed under a profiler. Each measure is a
//! median with a 95% interval that pools the spread between fresh processes
//! ([`crate::stats::pooled_median_ci`]). Analysis computes the run's headline from
//! these, and `llmprof diff` compares them.

use crate::stats::{pooled_median_ci, MedianCi};
use llmprof_bundle::{
    is_warmup, Bundle, HeadlineBasis, IterationSample, Measure, Stage, StageRole, StageTimings,
};

/// The per-iteration samples of each headline figure, one inner vector per process.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Samples {
    pub basis: HeadlineBasis,
    pub source: String,
    /// Prefill wall per iteration or instance, ns.
    pub prefill: Vec<Vec<f64>>,
    /// Decode wall per iteration or instance, ns.
    pub decode: Vec<Vec<f64>>,
    /// Decode steps of each decode sample (same shape as `decode`); empty when unknown.
    pub steps: Vec<Vec<u64>>,
    /// Sequences per step.
    pub batch: u64,
    /// What the trace's samples left out as warm-up, or that they count every instance.
    pub note: Option<String>,
    /// Vision sub-stages the baseline timed on the GPU (CUDA events at the modules' forward
    /// hooks): name and median GPU time of one instance, ns.
    pub sub_stages: Vec<(String, f64)>,
}

impl Samples {
    /// The baseline's samples when the run has them, else the trace's.
    pub fn of(bundle: &Bundle) -> Samples {
        let batch = bundle.workload.as_ref().map_or(1, |w| w.batch());
        let baseline = bundle.capture.as_ref().and_then(|c| c.baseline.as_ref());
        let mut s = match baseline.filter(|b| !b.samples.is_empty()) {
            Some(b) => {
                let cmd = bundle.capture.as_ref().is_some_and(|c| c.command.is_some());
                from_baseline(b, batch, cmd)
            }
            None => from_trace(bundle, batch),
        };
        s.sub_stages = baseline.map_or(Vec::new(), |b| {
            (b.sub_stages.iter())
                .filter(|t| t.instance.count > 0)
                .map(|t| (t.name.clone(), t.instance.median_ns))
                .collect()
        });
        s
    }

    /// The baseline's GPU time of one instance of a sub-stage, ns, when it timed it.
    pub fn sub_stage(&self, name: &str) -> Option<f64> {
        self.sub_stages.iter().find(|(n, _)| n == name).map(|s| s.1)
    }

    /// The trace's stage instances, whatever else the run has.
    pub fn trace(bundle: &Bundle) -> Samples {
        from_trace(bundle, bundle.workload.as_ref().map_or(1, |w| w.batch()))
    }

    /// TPOT per decode sample (wall / steps), ns; empty without steps.
    pub fn tpot(&self) -> Vec<Vec<f64>> {
        self.per_step(|wall, steps| wall / steps as f64)
    }

    /// Generated tokens per second of each decode sample.
    pub fn decode_tokens_per_s(&self) -> Vec<Vec<f64>> {
        let batch = self.batch as f64;
        self.per_step(|wall, steps| batch * steps as f64 / (wall * 1e-9))
    }

    fn per_step(&self, f: impl Fn(f64, u64) -> f64) -> Vec<Vec<f64>> {
        self.decode
            .iter()
            .zip(&self.steps)
            .map(|(walls, steps)| {
                walls
                    .iter()
                    .zip(steps)
                    .filter(|&(&w, &s)| s > 0 && w > 0.0)
                    .map(|(&w, &s)| f(w, s))
                    .collect()
            })
            .collect()
    }

    /// The samples of a top-level stage of this role, if the headline has them.
    pub fn wall_of(&self, role: StageRole) -> Option<&Vec<Vec<f64>>> {
        let w = match role {
            StageRole::Prefill => &self.prefill,
            StageRole::Decode => &self.decode,
            _ => return None,
        };
        w.iter().any(|g| !g.is_empty()).then_some(w)
    }
}

/// A measure of samples grouped by process; `None` when there are none.
pub fn measure(groups: &[Vec<f64>]) -> Option<Measure> {
    pooled_median_ci(groups).map(|m| to_measure(&m))
}

fn to_measure(m: &MedianCi) -> Measure {
    Measure {
        n: m.n as u64,
        processes: m.processes as u32,
        median: m.median,
        ci: m.ci.map(|(lo, hi, _)| [lo, hi]),
        cv_pct: m.cv_pct,
        between_cv_pct: m.between_cv_pct,
        method: m.method().to_string(),
    }
}

/// The baseline's timing file of process `p` (0 → `raw/baseline/baseline.json`).
fn baseline_file(p: u32) -> String {
    match p {
        0 => "raw/baseline/baseline.json".into(),
        p => format!("raw/baseline-{}/baseline.json", p + 1),
    }
}

/// The baseline samples, grouped by process; `cmd`: a `--cmd` workload's, from the stage
/// windows its runs wrote (each run a process) rather than the driver's timing files.
fn from_baseline(b: &StageTimings, batch: u64, cmd: bool) -> Samples {
    let processes = b.samples.iter().map(|s| s.process).max().unwrap_or(0) + 1;
    let group = |get: fn(&IterationSample) -> Option<f64>| -> Vec<Vec<f64>> {
        (0..processes)
            .map(|p| {
                let of_p = b.samples.iter().filter(|s| s.process == p);
                of_p.filter_map(get).collect()
            })
            .collect()
    };
    let files = match processes {
        _ if cmd => "the workload's stage windows, raw/baseline*/stages.jsonl".into(),
        1 => baseline_file(0),
        n => format!("{} … {}", baseline_file(0), baseline_file(n - 1)),
    };
    let steps = (0..processes)
        .map(|p| {
            let of_p = b.samples.iter().filter(|s| s.process == p);
            of_p.filter(|s| s.decode_ns.is_some())
                .map(|s| s.decode_steps)
                .collect()
        })
        .collect();
    Samples {
        basis: HeadlineBasis::Baseline,
        source: format!(
            "unprofiled baseline pass ({files}), {processes} process{} × {} iterations",
            if processes == 1 { "" } else { "es" },
            b.samples.len() / processes.max(1) as usize
        ),
        prefill: group(|s| s.prefill_ns.map(|v| v as f64)),
        decode: group(|s| s.decode_ns.map(|v| v as f64)),
        steps,
        batch,
        note: None,
        sub_stages: Vec::new(),
    }
}

/// The first top-level measured stage of a role (not warm-up, not a library range).
fn top_stage(bundle: &Bundle, role: StageRole) -> Option<&Stage> {
    bundle
        .workload_stages()
        .filter(|s| s.parent.is_none() && !is_warmup(&s.name))
        .find(|s| StageRole::of_name(&s.name) == role)
}

fn from_trace(bundle: &Bundle, batch: u64) -> Samples {
    let (prefill, decode) = (
        top_stage(bundle, StageRole::Prefill),
        top_stage(bundle, StageRole::Decode),
    );
    let walls = |s: Option<&Stage>| -> Vec<Vec<f64>> {
        s.map(|s| {
            vec![s
                .measured_instances()
                .map(|(_, i)| i.wall_ns as f64)
                .collect()]
        })
        .unwrap_or_default()
    };
    let w = bundle.workload.as_ref();
    // Steps are indexed by the instance's place in `instance_list`.
    let steps: Option<Vec<u64>> = decode.and_then(|d| {
        d.measured_instances()
            .map(|(i, _)| w.and_then(|w| w.steps_of_instance(i)))
            .collect()
    });
    let tool = bundle.timing_source.map_or("trace", |s| s.as_str());
    Samples {
        basis: HeadlineBasis::Trace,
        source: format!(
            "{tool} trace's stage instances, timed under the profiler{}",
            if bundle.capture.is_some() {
                " (this capture kept no unprofiled baseline samples)"
            } else {
                " (ingest-only run: no unprofiled baseline)"
            }
        ),
        prefill: walls(prefill),
        decode: walls(decode),
        steps: steps.map(|s| vec![s]).unwrap_or_default(),
        batch,
        note: warmup_note(bundle, [prefill, decode].into_iter().flatten()),
        sub_stages: Vec::new(),
    }
}

/// What the headline left out as warm-up, when it left out instances of a stage named as
/// measured (`--warmup-instances`); for a run without a capture whose headline stages hold
/// several instances and no leading warm-up was given, that every instance counts.
fn warmup_note<'a>(bundle: &Bundle, headline: impl Iterator<Item = &'a Stage>) -> Option<String> {
    let headline: Vec<&Stage> = headline.collect();
    let left_out = |s: &&Stage| s.measured_instances().count() < s.instance_list.len();
    if let (Some(w), true) = (bundle.warmup.as_ref(), headline.iter().any(left_out)) {
        let counts: Vec<String> = headline
            .iter()
            .map(|s| {
                let n = s.measured_instances().count();
                format!("{} {n} of {}", s.name, s.instances)
            })
            .collect();
        return Some(format!(
            "TTFT and TPOT over the measured instances: {} ({})",
            counts.join(", "),
            crate::paths::shown_in(&w.describe())
        ));
    }
    let several = headline.iter().any(|s| s.instances > 1);
    (bundle.capture.is_none() && several).then(|| {
        "ingest-only run: TTFT and TPOT count every instance as measured (ranges named \
         warmup_* excepted); if the first ones are warm-up, give --warmup-instances N"
            .to_string()
    })
}
